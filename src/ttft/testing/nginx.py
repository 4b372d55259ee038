"""A real nginx in front of a test upstream, run unprivileged inside a temporary prefix.

``run_nginx(template, upstream_url)`` writes the configuration into a fresh prefix directory,
picks a free loopback port, starts ``nginx -p PREFIX -c CONF -g 'daemon off;'`` in its own process
group, waits until the port accepts connections and always stops it again. ``nginx_test`` runs
``nginx -t`` the same way, to check that a configuration is one nginx accepts.

Templates are ordinary nginx text with a few placeholders replaced literally (nginx's own braces
and ``$variables`` are left alone): ``{listen}`` (``127.0.0.1:PORT``), ``{port}``, ``{upstream}``
(``host:port`` of the upstream URL), ``{upstream_url}`` and ``{prefix}``. A template without an
``http`` block is taken as the inside of one (``server``, ``upstream`` and ``map`` blocks).

``rootless`` rewrites the parts of a production configuration that need root or fixed paths
(``user``, ``pid``, absolute log paths, the compiled-in temp directories) so that the same file can
be checked and run by an ordinary user in a temporary directory.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ttft.core.errors import TtftError
from ttft.engines.process import ServerProcess, free_loopback_port

_PLACEHOLDER = re.compile(r"\{(listen|port|upstream|upstream_url|prefix)\}")
_TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def nginx_binary() -> str | None:
    """The nginx executable on PATH or at Debian's /usr/sbin/nginx, or None."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def _require_nginx(nginx: str | None) -> str:
    binary = nginx or nginx_binary()
    if binary is None:
        raise TtftError(
            "nginx is not installed", "apt-get install -y nginx-light (or your system's package)"
        )
    return binary


def render(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders that appear in ``values``; leave everything else as is."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def rootless(config_text: str, prefix: Path) -> str:
    """The same configuration, runnable by an unprivileged user with everything under ``prefix``.

    - ``user`` is dropped (it needs root), ``daemon`` too (the runner passes ``daemon off``);
    - ``pid`` goes to ``PREFIX/nginx.pid``;
    - absolute ``error_log``/``access_log`` files go to ``PREFIX/logs/`` (same base name);
    - absolute ``*_cache_path`` directories go to ``PREFIX/cache/`` (same base name);
    - the five ``*_temp_path`` directories are set inside the prefix unless the config sets them.
    """
    prefix = prefix.resolve()
    logs = prefix / "logs"
    # Every edit keeps line numbers, so nginx's messages point at the lines of the original file.
    text = re.sub(r"(?m)^[ \t]*(user|daemon)[ \t]+[^;\n]*;", "", config_text)
    text, n_pid = re.subn(r"(?m)^([ \t]*)pid[ \t]+[^;\n]*;", rf"\1pid {prefix}/nginx.pid;", text)
    if not n_pid:
        text = f"pid {prefix}/nginx.pid; " + text

    def relog(match: re.Match[str]) -> str:
        return f"{match.group(1)} {logs}/{Path(match.group(2)).name}"

    text = re.sub(r"\b(error_log|access_log)\s+(/[^\s;]+)", relog, text)
    text = re.sub(
        r"\b(proxy_cache_path|fastcgi_cache_path|uwsgi_cache_path|scgi_cache_path)\s+(/[^\s;]+)",
        lambda m: f"{m.group(1)} {prefix}/cache/{Path(m.group(2)).name}",
        text,
    )
    temp_lines = "".join(
        f" {kind}_temp_path {prefix}/temp/{kind};"
        for kind in _TEMP_PATHS
        if not re.search(rf"\b{kind}_temp_path\b", text)
    )
    text, n_http = re.subn(
        r"(?m)^([ \t]*http[ \t]*\{)", lambda m: m.group(1) + temp_lines, text, count=1
    )
    if not n_http:
        raise TtftError("the configuration has no http block", "wrap server blocks in http { }")
    return text


def _full_config(template: str) -> str:
    if re.search(r"(?m)^[ \t]*http[ \t]*\{", template):
        return template
    return "events {}\n\nhttp {\n" + template + "\n}\n"


@dataclass(frozen=True)
class NginxCheck:
    ok: bool
    output: str


def prepare_prefix(prefix: Path, main_text: str, files: Mapping[str, str] | None = None) -> Path:
    """Write ``conf/nginx.conf`` (made rootless) and ``files`` (relative to ``conf/``)."""
    conf_dir = prefix / "conf"
    for sub in ("conf", "logs", "temp", "cache"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    for rel, content in (files or {}).items():
        target = conf_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rootless_fragment(content, prefix))
    main = conf_dir / "nginx.conf"
    main.write_text(rootless(main_text, prefix))
    return main


def rootless_fragment(text: str, prefix: Path) -> str:
    """For included files: only absolute log paths need moving."""
    logs = prefix.resolve() / "logs"
    return re.sub(
        r"\b(error_log|access_log)\s+(/[^\s;]+)",
        lambda m: f"{m.group(1)} {logs}/{Path(m.group(2)).name}",
        text,
    )


def nginx_test(main_conf: Path, prefix: Path, *, nginx: str | None = None) -> NginxCheck:
    """``nginx -t`` on a prepared prefix: does nginx accept this configuration?"""
    binary = _require_nginx(nginx)
    proc = subprocess.run(
        [binary, "-t", "-p", f"{prefix}/", "-c", str(main_conf), "-e", "stderr"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return NginxCheck(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


@contextmanager
def run_nginx(
    config_text_template: str,
    upstream_url: str,
    *,
    files: Mapping[str, str] | None = None,
    nginx: str | None = None,
    startup_timeout_s: float = 10.0,
) -> Iterator[str]:
    """Run nginx with the rendered template in front of ``upstream_url``; yield its base URL.

    ``files`` are extra templated files written next to ``nginx.conf`` (for ``include``). The
    process runs in its own process group and is stopped (whole group) on exit, also on errors.
    """
    binary = _require_nginx(nginx)
    parts = urlsplit(upstream_url)
    if not parts.hostname or not parts.port:
        raise TtftError(f"upstream URL needs a host and a port: {upstream_url!r}")
    with tempfile.TemporaryDirectory(prefix="ttft-nginx-") as tmp:
        prefix = Path(tmp)
        # Started as root, nginx's workers run as an unprivileged user that must reach the
        # prefix's temp and cache directories (nginx chowns those, not their parent).
        prefix.chmod(0o755)
        port = free_loopback_port()
        values = {
            "listen": f"127.0.0.1:{port}",
            "port": str(port),
            "upstream": f"{parts.hostname}:{parts.port}",
            "upstream_url": upstream_url.rstrip("/"),
            "prefix": str(prefix.resolve()),
        }
        rendered_files = {rel: render(text, values) for rel, text in (files or {}).items()}
        main = prepare_prefix(
            prefix, render(_full_config(config_text_template), values), rendered_files
        )
        check = nginx_test(main, prefix, nginx=binary)
        if not check.ok:
            raise TtftError(f"nginx rejected the test configuration:\n{check.output}")
        server = ServerProcess(
            [binary, "-p", f"{prefix}/", "-c", str(main), "-e", "stderr", "-g", "daemon off;"],
            health_url=f"http://127.0.0.1:{port}/",
            name="nginx",
            log_path=prefix / "nginx-stderr.log",
        )
        server.start()
        try:
            _wait_for_port(server, port, startup_timeout_s)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.stop()


def _wait_for_port(server: ServerProcess, port: int, timeout_s: float) -> None:
    assert server.proc is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = server.proc.poll()
        if code is not None:
            raise TtftError(f"nginx exited with code {code}:\n{server.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise TtftError(f"nginx did not accept connections on port {port} within {timeout_s:.0f} s")
