"""A real nginx run by an ordinary user from a configuration, inside a temporary prefix.

``rootless`` rewrites the parts of a production configuration that need root or fixed paths
(``user``, ``pid``, absolute log paths, the compiled-in temp directories) so that the same file can
be checked and run by an ordinary user in a temporary directory; ``nginx_test`` runs ``nginx -t``
on it; ``serve_config`` runs a user's configuration (includes copied beside it, with the edits of a
plan step applied) until the block ends. ``ttft.testing.nginx`` builds its templated test proxies
on the same pieces.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.engines.process import ServerProcess

_TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def nginx_binary() -> str | None:
    """The nginx executable on PATH or at Debian's /usr/sbin/nginx, or None."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def require_nginx(nginx: str | None) -> str:
    binary = nginx or nginx_binary()
    if binary is None:
        raise TtftError(
            "nginx is not installed", "apt-get install -y nginx-light (or your system's package)"
        )
    return binary


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
    binary = require_nginx(nginx)
    proc = subprocess.run(
        [binary, "-t", "-p", f"{prefix}/", "-c", str(main_conf), "-e", "stderr"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return NginxCheck(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


def wait_for_port(server: ServerProcess, port: int, timeout_s: float) -> None:
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
