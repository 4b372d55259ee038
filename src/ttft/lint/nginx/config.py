"""Load an nginx configuration (includes followed) and answer "what applies in this location?".

nginx inherits most directives down the block tree: ``http`` -> ``server`` -> ``location`` ->
nested ``location``. A block that sets a directive replaces the inherited value; for directives
that may appear several times (``proxy_set_header``, ``gzip_types``, ``proxy_ignore_headers``) all
occurrences at the innermost level that has any replace everything inherited, which is nginx's
rule and a classic surprise ("my proxy_set_header at server level stopped working").

An ``if`` (or ``limit_except``) block inside a location applies only when its condition holds, so
we treat what it sets as *possible*: the unconditional value and every conditional one are
returned, and rules flag a problem when any possible value is bad.

Parsing uses ``crossplane`` (NGINX Inc.'s parser) with errors caught, so a broken file or a
missing include becomes a ``ConfigProblem`` with file and line instead of an exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttft.core.errors import MissingExtraError, TtftError
from ttft.core.findings import Location

# Directives that pass a request on to another server, and whether we check them.
PASS_DIRECTIVES = {
    "proxy_pass": "http",
    "uwsgi_pass": "uwsgi",
    "grpc_pass": "grpc",
    "fastcgi_pass": "fastcgi",
    "scgi_pass": "scgi",
    "memcached_pass": "memcached",
}

# Blocks inside a location whose contents apply only under a condition.
CONDITIONAL_BLOCKS = ("if", "limit_except")


@dataclass(frozen=True)
class Directive:
    """One directive with its position; ``block`` is None for simple directives."""

    name: str
    args: tuple[str, ...]
    file: str
    line: int
    block: tuple[Directive, ...] | None = None

    @property
    def location(self) -> Location:
        return Location(self.file, self.line)

    def children(self, name: str) -> list[Directive]:
        return [d for d in self.block or () if d.name == name]

    def text(self) -> str:
        """The directive as written (arguments joined by spaces), for messages."""
        args = " ".join(_quote(a) for a in self.args)
        return f"{self.name} {args}".strip()


def _quote(arg: str) -> str:
    if arg == "" or any(c in arg for c in " \t;{}"):
        return '"' + arg.replace('"', '\\"') + '"'
    return arg


@dataclass(frozen=True)
class ConfigProblem:
    """A file that could not be read or parsed; ``line`` is None when the file itself is missing.

    ``missing_include``: an included file that is not on this machine (certbot's
    ``options-ssl-nginx.conf`` on a laptop): a note, not a broken configuration.
    """

    file: str
    line: int | None
    message: str
    missing_include: bool = False


@dataclass(frozen=True)
class NginxConfig:
    main_file: str
    root: tuple[Directive, ...]
    problems: tuple[ConfigProblem, ...]
    files: tuple[str, ...]
    # A site file (``sites-enabled/*``, ``conf.d/*.conf``): server blocks at its top level, read
    # as the contents of the ``http`` block that includes it.
    fragment: bool = False

    def http_blocks(self) -> list[Directive]:
        return [d for d in self.root if d.name == "http" and d.block is not None]

    def routes(self) -> list[Route]:
        """Every location (nested ones included) that passes requests to an upstream."""
        out: list[Route] = []
        for http in self.http_blocks():
            for server in http.children("server"):
                for chain in _location_chains((http, server), server):
                    route = _route_for(chain)
                    if route is not None:
                        out.append(route)
        return out

    def upstream(self, name: str) -> Directive | None:
        """The ``upstream NAME { ... }`` block of that name, if any."""
        for http in self.http_blocks():
            for block in http.children("upstream"):
                if block.args and block.args[0] == name:
                    return block
        return None

    def maps_defining(self, variable: str) -> list[Directive]:
        """``map SOURCE $variable { ... }`` blocks that define ``$variable``."""
        return [
            block
            for http in self.http_blocks()
            for block in http.children("map")
            if len(block.args) >= 2 and block.args[1] == variable
        ]


@dataclass(frozen=True)
class Setting:
    """What one directive is in a scope: the directives at the winning level (empty: the default).

    ``condition`` is the ``if``/``limit_except`` block that sets it, or None when it always holds.
    """

    name: str
    directives: tuple[Directive, ...]
    condition: Directive | None = None

    @property
    def is_default(self) -> bool:
        return not self.directives

    @property
    def last(self) -> Directive | None:
        return self.directives[-1] if self.directives else None

    @property
    def args(self) -> tuple[str, ...]:
        """Arguments of the effective (last) occurrence; () for the default."""
        return self.directives[-1].args if self.directives else ()

    @property
    def all_args(self) -> tuple[str, ...]:
        """Arguments of every occurrence at the winning level, for list-like directives."""
        return tuple(a for d in self.directives for a in d.args)


@dataclass(frozen=True)
class Route:
    """A location that passes requests on, with the chain of blocks it inherits from."""

    chain: tuple[Directive, ...]  # http, server, location, [nested location, ...]
    pass_directive: Directive
    kind: str  # "http" for proxy_pass, else "uwsgi", "grpc", ...
    conditional: tuple[Directive, ...] = field(default=())

    @property
    def http(self) -> Directive:
        return self.chain[0]

    @property
    def server(self) -> Directive:
        return self.chain[1]

    @property
    def location(self) -> Directive:
        return self.chain[-1]

    def name(self) -> str:
        """A human label: ``location /v1/ (server api.example.com)``."""
        loc = " ".join(self.location.args)
        server_names = [a for d in self.server.children("server_name") for a in d.args]
        listens = [d.args[0] for d in self.server.children("listen") if d.args]
        host = server_names[0] if server_names and server_names[0] != "_" else None
        server = host or (f"listen {listens[0]}" if listens else "server")
        return f"location {loc} ({server})"

    def settings(self, name: str) -> list[Setting]:
        """The unconditional setting first, then one per ``if``/``limit_except`` that sets it."""
        base = Setting(name, ())
        for block in self.chain:
            found = tuple(block.children(name))
            if found:
                base = Setting(name, found)
        out = [base]
        for cond in self.conditional:
            found = tuple(cond.children(name))
            if found:
                out.append(Setting(name, found, cond))
        return out

    def setting(self, name: str) -> Setting:
        """The unconditional setting only (for rules where a conditional value cannot apply)."""
        return self.settings(name)[0]

    @property
    def upstream_name(self) -> str | None:
        """The host part of ``proxy_pass http://NAME[:port]/...`` (None for variables)."""
        if not self.pass_directive.args:
            return None
        target = self.pass_directive.args[0]
        if "://" in target:
            target = target.split("://", 1)[1]
        if "$" in target or target.startswith("unix:"):
            return None
        return target.split("/", 1)[0]


def _location_chains(
    prefix: tuple[Directive, ...], parent: Directive
) -> Iterator[tuple[Directive, ...]]:
    for loc in parent.children("location"):
        chain = (*prefix, loc)
        yield chain
        yield from _location_chains(chain, loc)


def _route_for(chain: tuple[Directive, ...]) -> Route | None:
    location = chain[-1]
    conditional = tuple(
        d for d in location.block or () if d.name in CONDITIONAL_BLOCKS and d.block is not None
    )
    candidates = [d for d in location.block or () if d.name in PASS_DIRECTIVES]
    for cond in conditional:
        candidates.extend(d for d in cond.block or () if d.name in PASS_DIRECTIVES)
    if not candidates:
        return None
    first = candidates[0]
    return Route(chain, first, PASS_DIRECTIVES[first.name], conditional)


# --- loading --------------------------------------------------------------------------------


def load(path: str | Path) -> NginxConfig:
    """Parse ``path`` and everything it includes; unreadable parts become ``problems``.

    Raises ``TtftError`` only when the main file itself does not exist or is not a file.
    """
    try:
        import crossplane
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("ttft lint nginx", "lint") from exc

    main = Path(path)
    if not main.exists():
        raise TtftError(f"{main}: no such file", "pass the path of your nginx.conf")
    if not main.is_file():
        raise TtftError(f"{main}: not a file", "pass the path of your nginx.conf, not a directory")
    try:
        fragment = _is_http_fragment(crossplane, main)
        payload: dict[str, Any] = crossplane.parse(
            str(main), catch_errors=True, comments=False, single=False, check_ctx=not fragment
        )
    except Exception as exc:  # crossplane raises plain exceptions for e.g. undecodable bytes
        return NginxConfig(str(main), (), (ConfigProblem(str(main), None, str(exc)),), (str(main),))

    configs: list[dict[str, Any]] = payload.get("config", [])
    problems: list[ConfigProblem] = []
    for cfg in configs:
        for err in cfg.get("errors", []):
            message = _clean(err["error"])
            missing = message.startswith(_MISSING_INCLUDE)
            problems.append(ConfigProblem(cfg["file"], err.get("line"), message, missing))
    root = _convert(configs, 0, stack=()) if configs else ()
    if fragment:
        root = (Directive("http", (), str(main), 1, root),)
    files = tuple(cfg["file"] for cfg in configs)
    return NginxConfig(str(main), root, tuple(problems), files, fragment)


# Directives that live in nginx's http context: a file that starts with them, and has no http
# block of its own, is a fragment included from nginx.conf's http block.
_HTTP_LEVEL = {"server", "upstream", "map", "proxy_cache_path", "log_format", "limit_req_zone"}
_MISSING_INCLUDE = "included file not found"


def _is_http_fragment(crossplane: Any, main: Path) -> bool:
    outline = crossplane.parse(
        str(main), catch_errors=True, comments=False, single=True, check_ctx=False
    )
    parsed = outline.get("config", [{}])[0].get("parsed", [])
    names = {item.get("directive") for item in parsed}
    return "http" not in names and bool(names & _HTTP_LEVEL)


def _clean(message: str) -> str:
    """crossplane's messages without the ``in FILE:LINE`` tail (we carry both apart)."""
    missing = re.match(r"\[Errno 2\] No such file or directory: '(.*)'$", message)
    if missing:
        return f"{_MISSING_INCLUDE}: {missing.group(1)}"
    head, sep, tail = message.rpartition(" in ")
    return head if sep and ":" in tail else message


def _convert(
    configs: Sequence[dict[str, Any]], index: int, stack: tuple[int, ...]
) -> tuple[Directive, ...]:
    if index in stack:  # an include cycle: nginx itself would recurse until it fails
        return ()
    cfg = configs[index]
    return _convert_block(configs, cfg["file"], cfg.get("parsed", []), (*stack, index))


def _convert_block(
    configs: Sequence[dict[str, Any]],
    file: str,
    items: Sequence[dict[str, Any]],
    stack: tuple[int, ...],
) -> tuple[Directive, ...]:
    out: list[Directive] = []
    for item in items:
        name = item["directive"]
        if name == "include" and "includes" in item:
            # Splice the included files in place, as nginx does.
            for inc in item["includes"]:
                out.extend(_convert(configs, inc, stack))
            continue
        block = None
        if "block" in item:
            block = _convert_block(configs, file, item["block"], stack)
        out.append(Directive(name, tuple(item.get("args", [])), file, int(item["line"]), block))
    return tuple(out)
