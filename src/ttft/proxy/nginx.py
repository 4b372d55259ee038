"""A real nginx run by an ordinary user from a configuration, inside a temporary prefix.

``rootless`` rewrites the parts of a production configuration that need root or fixed paths
(``user``, ``pid``, absolute log paths, the compiled-in temp directories) so that the same file can
be checked and run by an ordinary user in a temporary directory; ``nginx_test`` runs ``nginx -t``
on it; ``serve_config`` runs a user's configuration (includes copied beside it, with the edits of a
plan step applied) until the block ends. ``ttft.testing.nginx`` builds its templated test proxies
on the same pieces.
"""

from __future__ import annotations

import fnmatch
import glob
import os
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

from ttft.core.errors import TtftError
from ttft.engines.process import ServerProcess, free_loopback_port
from ttft.proxy.nginx_rewrite import ServerBlock, is_site_file, rewrite_file

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
    """For included files: absolute log files and cache directories move into the prefix
    (``proxy_cache_path`` often sits in a conf.d/ file, not in nginx.conf)."""
    prefix = prefix.resolve()
    text = re.sub(
        r"\b(error_log|access_log)\s+(/[^\s;]+)",
        lambda m: f"{m.group(1)} {prefix}/logs/{Path(m.group(2)).name}",
        text,
    )
    return re.sub(
        r"\b(proxy_cache_path|fastcgi_cache_path|uwsgi_cache_path|scgi_cache_path)\s+(/[^\s;]+)",
        lambda m: f"{m.group(1)} {prefix}/cache/{Path(m.group(2)).name}",
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


# --- serve_config: the user's own configuration, copied and run on loopback -------------------

# A site file in one of these folders is included from the nginx.conf one level up, whose folder
# is where nginx resolves the site's relative includes (``snippets/...``).
_SITE_FOLDERS = {"sites-enabled", "sites-available", "conf.d"}


@dataclass(frozen=True)
class RunningProxy:
    """A copy of the user's nginx, running: where to send requests and what the copy changed."""

    url: str  # http://127.0.0.1:PORT of the first server that proxies
    notes: tuple[str, ...]  # what differs from the user's configuration, and why
    prefix: Path
    config_files: dict[str, Path]  # original path -> its copy under prefix


class _Copier:
    """Follows includes from the main file, writing each rewritten file into the prefix."""

    def __init__(
        self,
        prefix: Path,
        conf_dir: Path,
        texts: Mapping[str, str],
        upstreams: Mapping[str, str],
        nginx_prefix: str | None,
    ) -> None:
        self.nginx_prefix = nginx_prefix
        self.prefix = prefix
        self.tree = prefix / "conf" / "files"
        self.conf_dir = conf_dir
        self.texts = {os.path.abspath(k): v for k, v in texts.items()}
        # sites-enabled/x is usually a link to sites-available/x: a patch may name either.
        self.real_texts = {os.path.realpath(k): k for k in self.texts}
        self.used: set[str] = set()
        self.upstreams = upstreams
        self.files: dict[str, Path] = {}
        self.notes: list[str] = []
        self.servers: list[ServerBlock] = []
        self.proxied: list[str] = []
        self.matched: set[str] = set()
        self._ports: set[int] = set()

    def copy_of(self, original: str) -> Path:
        # The copy mirrors the original's absolute path, so two files never collide.
        return self.tree / os.path.abspath(original).lstrip("/")

    def port(self) -> int:
        port = free_loopback_port()
        while port in self._ports:
            port = free_loopback_port()
        self._ports.add(port)
        return port

    def read(self, path: str) -> str | None:
        key = path if path in self.texts else self.real_texts.get(os.path.realpath(path))
        if key is not None:
            self.used.add(key)
            return self.texts[key]
        try:
            return Path(path).read_text()
        except (OSError, UnicodeDecodeError):
            return None

    def matches(self, pattern: str) -> list[str]:
        full = os.path.abspath(os.path.join(self.conf_dir, pattern))
        if not glob.has_magic(full):
            return [full] if full in self.texts or os.path.isfile(full) else []
        # nginx includes a glob's files in sorted order; patched files that match count too.
        found = {p for p in glob.glob(full) if os.path.isfile(p)}
        found |= {p for p in self.texts if fnmatch.fnmatch(p, full)}
        return sorted(found)

    def process(
        self, path: str, context: tuple[str, ...], stack: tuple[str, ...], *, main: bool = False
    ) -> None:
        if path in stack or path in self.files:
            return  # a cycle (nginx would fail on it) or a file already copied
        text = self.read(path)
        if text is None:  # only the main file gets here unread: includes are checked first
            raise TtftError(f"{path}: cannot read it", "run ttft as a user that can read it")
        resolved: list[list[str]] = []

        def include_target(pattern: str, _ctx: tuple[str, ...]) -> list[str]:
            found = [p for p in self.matches(pattern) if self.read(p) is not None]
            resolved.append(found)
            return [str(self.copy_of(p)) for p in found]

        result = rewrite_file(
            text,
            source=path,
            context=context,
            ports=self.port,
            upstreams=self.upstreams,
            include_target=include_target,
            nginx_prefix=self.nginx_prefix,
        )
        self.files[path] = self.copy_of(path)
        self.notes.extend(result.notes)
        self.proxied.extend(result.proxied)
        self.matched |= result.matched
        copy = self.copy_of(path)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(result.text if main else rootless_fragment(result.text, self.prefix))
        # Recurse in document order, so that servers are listed in the order nginx reads them.
        queue = iter(resolved)
        for item in result.order:
            if isinstance(item, ServerBlock):
                self.servers.append(item)
            else:
                found = next(queue)
                if not found and not glob.has_magic(item.pattern):
                    # certbot's options-ssl-nginx.conf on a machine without certbot, say.
                    self.notes.append(
                        f"{path}:{item.line}: include {item.pattern} dropped: not on this "
                        "machine (or not readable)"
                    )
                for included in found:
                    self.process(included, item.context, (*stack, path))


def compiled_prefix(binary: str) -> str | None:
    """nginx's compiled-in prefix (``nginx -V``: ``--prefix=``), where relative module paths
    point; None if nginx does not say."""
    proc = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=30, check=False)
    found = re.search(r"--prefix=(\S+)", proc.stdout + proc.stderr)
    return found.group(1) if found else None


def _conf_dir(main: Path, site: bool) -> Path:
    folder = Path(os.path.abspath(main)).parent
    return folder.parent if site and folder.name in _SITE_FOLDERS else folder


def _check_texts(copier: _Copier) -> None:
    # A patch for a file the configuration never includes would run the A/B on the unpatched
    # configuration: a silent no-op, so it is an error.
    unused = sorted(set(copier.texts) - copier.used)
    if unused:
        raise TtftError(
            f"the nginx configuration does not include {', '.join(unused)}, which the edits "
            f"patch; it reads {', '.join(copier.files)}",
            "name the file by the path its include resolves to",
        )


def _check_upstreams(copier: _Copier, upstreams: Mapping[str, str]) -> None:
    missing = [key for key in upstreams if key not in copier.matched]
    if missing:
        seen = list(dict.fromkeys(copier.proxied)) or ["no engine address at all"]
        raise TtftError(
            f"the nginx configuration does not proxy to {', '.join(missing)}; "
            f"it proxies to {', '.join(seen)}",
            "give the engine address that the configuration's proxy_pass/upstream names",
        )


@contextmanager
def serve_config(
    main_file: Path,
    *,
    texts: Mapping[str, str] | None = None,
    upstreams: Mapping[str, str] | None = None,
    nginx: str | None = None,
    startup_timeout_s: float = 10.0,
) -> Iterator[RunningProxy]:
    """Run the user's nginx configuration (a full nginx.conf, or a site file with ``server`` and
    ``upstream`` blocks at the top) on loopback until the block ends.

    ``texts`` replaces the content of files (keyed by path: the main file as passed, included
    files as their include resolves); ``upstreams`` maps the engine address the config proxies to
    onto the one ttft runs. Files are copied into a temporary prefix with their line numbers kept;
    every server block gets a free loopback port of its own; TLS is dropped (see ``notes``).
    nginx is always stopped on exit.
    """
    binary = require_nginx(nginx)
    texts = dict(texts or {})
    upstreams = dict(upstreams or {})
    main_path = os.path.abspath(main_file)
    if str(main_file) in texts:
        texts[main_path] = texts.pop(str(main_file))
    if main_path not in texts and not os.path.isfile(main_path):
        raise TtftError(f"{main_file}: no such file", "pass the path of your nginx configuration")
    main_text = texts[main_path] if main_path in texts else Path(main_path).read_text()
    site = is_site_file(main_text)
    with tempfile.TemporaryDirectory(prefix="ttft-nginx-") as tmp:
        prefix = Path(tmp).resolve()
        # Started as root, nginx's workers run as an unprivileged user that must reach the
        # prefix's temp and cache directories (nginx chowns those, not their parent).
        prefix.chmod(0o755)
        for sub in ("conf", "logs", "temp", "cache"):
            (prefix / sub).mkdir()
        conf_dir = _conf_dir(main_file, site)
        copier = _Copier(prefix, conf_dir, texts, upstreams, compiled_prefix(binary))
        copier.process(main_path, ("http",) if site else (), (), main=not site)
        _check_texts(copier)
        _check_upstreams(copier, upstreams)
        main_copy = copier.files[main_path]
        if site:
            main_copy = prefix / "conf" / "nginx.conf"
            wrapper = f'events {{}}\nhttp {{\n    include "{copier.files[main_path]}";\n}}\n'
            main_copy.write_text(rootless(wrapper, prefix))
        else:
            main_copy.write_text(rootless(main_copy.read_text(), prefix))
        http = [s for s in copier.servers if s.http]
        front = next((s for s in http if s.proxies), http[0] if http else None)
        if front is None:
            raise TtftError(f"{main_file}: no server block to send requests to")
        check = nginx_test(main_copy, prefix, nginx=binary)
        if not check.ok:
            raise TtftError(
                f"nginx rejected the configuration:\n{_originals(check.output, copier.files)}"
            )
        with foreground_nginx(binary, prefix, main_copy, front.port, startup_timeout_s):
            yield RunningProxy(
                url=f"http://127.0.0.1:{front.port}",
                notes=tuple(copier.notes),
                prefix=prefix,
                config_files=dict(copier.files),
            )


@contextmanager
def foreground_nginx(
    binary: str, prefix: Path, main_conf: Path, port: int, startup_timeout_s: float
) -> Iterator[ServerProcess]:
    """nginx in the foreground from a prepared prefix, in its own process group, until the
    block ends (normally, on an error or on Ctrl-C alike); ready once ``port`` accepts."""
    server = ServerProcess(
        [binary, "-p", f"{prefix}/", "-c", str(main_conf), "-e", "stderr", "-g", "daemon off;"],
        health_url=f"http://127.0.0.1:{port}/",
        name="nginx",
        log_path=prefix / "nginx-stderr.log",
    )
    server.start()
    try:
        wait_for_port(server, port, startup_timeout_s)
        yield server
    finally:
        server.stop()


def _originals(output: str, files: Mapping[str, Path]) -> str:
    """nginx's messages with the copies' paths put back to the user's files (same lines)."""
    for original, copy in sorted(files.items(), key=lambda kv: -len(str(kv[1]))):
        output = output.replace(str(copy), original)
    return output
