"""A real nginx in front of a test upstream, run unprivileged inside a temporary prefix.

``run_nginx(template, upstream_url)`` writes the configuration into a fresh prefix directory,
picks a free loopback port, starts ``nginx -p PREFIX -c CONF -g 'daemon off;'`` in its own process
group, waits until the port accepts connections and always stops it again. ``nginx_test`` runs
``nginx -t`` the same way, to check that a configuration is one nginx accepts.

Templates are ordinary nginx text with a few placeholders replaced literally (nginx's own braces
and ``$variables`` are left alone): ``{listen}`` (``127.0.0.1:PORT``), ``{port}``, ``{upstream}``
(``host:port`` of the upstream URL), ``{upstream_url}`` and ``{prefix}``. A template without an
``http`` block is taken as the inside of one (``server``, ``upstream`` and ``map`` blocks).

The pieces that run nginx unprivileged (``rootless``, ``prepare_prefix``, ``nginx_test``) live in
``ttft.proxy.nginx`` and are re-exported here for the tests.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from ttft.core.errors import TtftError
from ttft.engines.process import free_loopback_port
from ttft.proxy.nginx import (
    NginxCheck,
    foreground_nginx,
    nginx_binary,
    nginx_test,
    prepare_prefix,
    require_nginx,
    rootless,
    rootless_fragment,
)

__all__ = [
    "NginxCheck",
    "nginx_binary",
    "nginx_test",
    "prepare_prefix",
    "render",
    "rootless",
    "rootless_fragment",
    "run_nginx",
]

_PLACEHOLDER = re.compile(r"\{(listen|port|upstream|upstream_url|prefix)\}")


def render(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders that appear in ``values``; leave everything else as is."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _full_config(template: str) -> str:
    if re.search(r"(?m)^[ \t]*http[ \t]*\{", template):
        return template
    return "events {}\n\nhttp {\n" + template + "\n}\n"


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
    binary = require_nginx(nginx)
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
        with foreground_nginx(binary, prefix, main, port, startup_timeout_s):
            yield f"http://127.0.0.1:{port}"
