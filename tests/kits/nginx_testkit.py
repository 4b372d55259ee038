"""Helpers for the nginx lint tests: the fixture configs and small configs written on the fly."""

from __future__ import annotations

from pathlib import Path

from ttft.core.findings import Finding
from ttft.lint.nginx.config import NginxConfig, load
from ttft.lint.nginx.rules import NginxLintOptions, lint_config

NGINX_DATA = Path(__file__).resolve().parents[1] / "data" / "nginx"
FIXTURES = ("bad", "clean", "inheritance", "mixed")  # configs real nginx accepts
BROKEN = ("broken", "missing-include")  # configs real nginx rejects


def write_config(tmp_path: Path, http_body: str, files: dict[str, str] | None = None) -> Path:
    """An nginx.conf whose http block is ``http_body``, plus extra files next to it."""
    for rel, text in (files or {}).items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    main = tmp_path / "nginx.conf"
    main.write_text("events {}\n\nhttp {\n" + http_body + "\n}\n")
    return main


# A location body that every nginx rule accepts, to add one fault at a time to.
CLEAN = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 600s;
"""

UPSTREAM = "    upstream llm { server 127.0.0.1:8000; keepalive 8; }\n"


def route_config(
    tmp_path: Path,
    location_body: str,
    *,
    server: str = "",
    http: str = "",
    target: str = "http://llm",
) -> Path:
    """One server with one ``location /v1/`` that proxies to ``target`` (upstream ``llm``)."""
    body = (
        f"{UPSTREAM}{http}\n"
        "    server {\n"
        "        listen 8080;\n"
        f"        {server}\n"
        "        location /v1/ {\n"
        f"            proxy_pass {target};\n"
        f"            {location_body}\n"
        "        }\n"
        "    }\n"
    )
    return write_config(tmp_path, body)


def lint_file(path: Path, **options: object) -> list[Finding]:
    return lint_config(load(path), NginxLintOptions(**options))  # type: ignore[arg-type]


def lint_route(
    tmp_path: Path, location_body: str, *, engine: str | None = None, **kw: str
) -> list[Finding]:
    return lint_file(route_config(tmp_path, location_body, **kw), upstream_engine=engine)


def by_rule(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule]


def rules(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings}


def fixture(name: str) -> NginxConfig:
    return load(NGINX_DATA / name / "nginx.conf")


def line_of(path: Path, needle: str) -> int:
    """1-based number of the first line containing ``needle`` (``path``: file or config dir)."""
    file = path / "nginx.conf" if path.is_dir() else path
    for number, line in enumerate(file.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {file}")
