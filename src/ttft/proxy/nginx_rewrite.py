"""Rewrite one file of a user's nginx configuration so that a copy of it runs on loopback.

Pure text work (no files, no sockets): ``parse`` reads the directives with their offsets, and
``rewrite_file`` edits the text in place, never adding or removing a line, so that nginx's error
messages about the copy point at the lines of the user's file. It

- gives every ``server`` block one ``listen 127.0.0.1:PORT`` (a port from ``ports``), dropping the
  parameters that only make sense on the public address (``ssl``, ``http2``, ``default_server``);
- drops the directives that name TLS key material (the copy speaks plain HTTP on loopback);
- points ``proxy_pass http://HOST:PORT`` and ``upstream`` ``server HOST:PORT`` lines at the engine
  ttft runs, per ``upstreams`` (``localhost`` and ``127.0.0.1`` are the same host);
- rewrites each ``include`` to what ``include_target`` says (the copies), or drops it.

The caller (``ttft.proxy.nginx.serve_config``) follows the includes and starts nginx.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "Directive",
    "FileRewrite",
    "Include",
    "ServerBlock",
    "is_site_file",
    "normalize_address",
    "parse",
    "rewrite_file",
]

# Top-level directives of a site file (sites-enabled/, conf.d/): they belong in an http block.
_HTTP_LEVEL = {"server", "upstream", "map", "proxy_cache_path", "log_format", "limit_req_zone"}
# listen parameters that still mean something on a loopback port of its own; others are dropped.
_KEPT_LISTEN = re.compile(r"^(backlog|rcvbuf|sndbuf|fastopen|so_keepalive|accept_filter|setfib)=")
_KEPT_LISTEN_FLAGS = {"deferred", "reuseport", "bind"}
# Dropped listen parameters worth telling the user about (the rest carry no meaning here).
_NOTED_LISTEN = {"ssl", "http2", "quic", "http3", "spdy", "proxy_protocol"}
# Directives that need certificates/keys on disk or TLS on the listener: gone in the copy.
_TLS_DIRECTIVES = {
    "ssl",
    "http2",
    "http3",
    "ssl_certificate",
    "ssl_certificate_key",
    "ssl_dhparam",
    "ssl_trusted_certificate",
    "ssl_client_certificate",
    "ssl_crl",
    "ssl_password_file",
    "ssl_stapling_file",
    "ssl_session_ticket_key",
}
_URL = re.compile(r"^(https?)://([^/$]+)(.*)$", re.DOTALL)


@dataclass(frozen=True)
class Token:
    value: str  # unquoted
    start: int
    end: int


@dataclass
class Directive:
    name: Token
    args: list[Token]
    start: int
    end: int  # just past its ';' or, for a block, past its closing '}'
    block: list[Directive] | None = None
    block_open: int = -1  # just past the '{'


def _tokens(text: str) -> list[Token]:
    """nginx's lexer, enough for rewriting: words, quoted strings, ``{ } ;``; comments skipped."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif c in "{};":
            out.append(Token(c, i, i + 1))
            i += 1
        elif c in "\"'":
            j, chars = i + 1, []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                chars.append(text[j])
                j += 1
            out.append(Token("".join(chars), i, min(j + 1, n)))
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in ";{}":
                # "${name}" is a variable inside a word, not a block.
                if text[j] == "$" and j + 1 < n and text[j + 1] == "{":
                    close = text.find("}", j)
                    j = n if close < 0 else close + 1
                else:
                    j += 1
            out.append(Token(text[i:j], i, j))
            i = j
    return out


def parse(text: str) -> list[Directive]:
    """The directives of ``text`` as a tree, with offsets. Malformed input is read as far as it
    goes (nginx -t reports the error itself, with the user's line numbers)."""
    tokens = _tokens(text)
    root: list[Directive] = []
    stack: list[list[Directive]] = [root]
    current: list[Token] = []
    opened: list[Directive] = []
    for tok in tokens:
        # A quoted ";" is a word; only the bare characters end or open anything.
        if tok.value == ";" and text[tok.start] == ";":
            if current:
                stack[-1].append(Directive(current[0], current[1:], current[0].start, tok.end))
            current = []
        elif tok.value == "{" and text[tok.start] == "{":
            if not current:
                current = [Token("", tok.start, tok.start)]
            block = Directive(current[0], current[1:], current[0].start, len(text), [], tok.end)
            stack[-1].append(block)
            assert block.block is not None
            stack.append(block.block)
            opened.append(block)
            current = []
        elif tok.value == "}" and text[tok.start] == "}":
            if len(stack) > 1:
                stack.pop()
                opened.pop().end = tok.end
            current = []
        else:
            current.append(tok)
    return root


def is_site_file(text: str) -> bool:
    """A site file: ``server``/``upstream``-level directives at the top, no ``http`` block."""
    names = {d.name.value for d in parse(text)}
    return "http" not in names and "events" not in names and bool(names & _HTTP_LEVEL)


def normalize_address(address: str, default_port: int = 80) -> str:
    """``host:port`` with ``localhost`` read as ``127.0.0.1`` and the port made explicit."""
    address = re.sub(r"^[a-z]+://", "", address.strip()).rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or "]" in port:
        host, port = address, str(default_port)
    if host.lower() == "localhost":
        host = "127.0.0.1"
    return f"{host.lower()}:{port}"


@dataclass(frozen=True)
class ServerBlock:
    """A server block as rewritten: the loopback port it got, where it is, whether it proxies."""

    port: int
    source: str
    line: int
    http: bool  # in an http context (not stream or mail)
    proxies: bool  # a location in it has proxy_pass (in this file)


@dataclass(frozen=True)
class Include:
    pattern: str
    line: int
    context: tuple[str, ...]  # the enclosing blocks at the include, outermost first


@dataclass
class FileRewrite:
    text: str
    order: list[ServerBlock | Include] = field(default_factory=list)  # in document order
    proxied: list[str] = field(default_factory=list)  # every engine address the file points at
    matched: set[str] = field(default_factory=set)  # the keys of ``upstreams`` found here
    notes: list[str] = field(default_factory=list)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _keep_lines(original: str, replacement: str = "") -> str:
    """``replacement`` followed by as many newlines as ``original`` had (line numbers stay)."""
    return replacement + "\n" * original.count("\n")


class _Rewriter:
    def __init__(
        self,
        text: str,
        source: str,
        ports: Callable[[], int],
        upstreams: Mapping[str, str],
        include_target: Callable[[str, tuple[str, ...]], list[str]],
        nginx_prefix: str | None,
    ) -> None:
        self.nginx_prefix = nginx_prefix
        self.text = text
        self.source = source
        self.ports = ports
        self.upstreams = {normalize_address(k): (k, v) for k, v in upstreams.items()}
        self.include_target = include_target
        self.edits: list[tuple[int, int, str]] = []
        self.out = FileRewrite(text)
        self.dropped_tls: list[tuple[str, int]] = []
        self.top: list[Directive] = []

    def where(self, offset: int) -> str:
        return f"{self.source}:{_line(self.text, offset)}"

    def replace(self, start: int, end: int, new: str) -> None:
        self.edits.append((start, end, _keep_lines(self.text[start:end], new)))

    def walk(self, items: list[Directive], context: tuple[str, ...]) -> None:
        for d in items:
            name = d.name.value
            if name == "include" and d.block is None:
                self.include(d, context)
            elif name == "server" and d.block is not None:
                self.server(d, context)
            elif name == "listen" and items is self.top and context[-1:] == ("server",):
                # A listen in a file included into a server: the server gets its own below.
                self.replace(d.start, d.end, "")
                self.out.notes.append(f"{self.where(d.start)}: included listen dropped")
            elif name in _TLS_DIRECTIVES and d.block is None:
                self.dropped_tls.append((name, _line(self.text, d.start)))
                self.replace(d.start, d.end, "")
            elif name == "load_module" and d.args and self.nginx_prefix:
                self.load_module(d.args[0])
            elif name == "proxy_pass" and d.args:
                self.proxy_pass(d.args[0])
            elif name == "server" and context[-1:] == ("upstream",) and d.args:
                self.upstream_server(d.args[0])
            if d.block is not None and name != "server":
                self.walk(d.block, (*context, name))

    def include(self, d: Directive, context: tuple[str, ...]) -> None:
        if not d.args:
            return
        pattern = d.args[0].value
        self.out.order.append(Include(pattern, _line(self.text, d.start), context))
        targets = self.include_target(pattern, context)
        # Several targets (or none) on the one line of the original include: lines stay put.
        self.replace(d.start, d.end, " ".join(f'include "{t}";' for t in targets))

    def server(self, d: Directive, context: tuple[str, ...]) -> None:
        assert d.block is not None
        port = self.ports()
        listens = [x for x in d.block if x.name.value == "listen" and x.block is None]
        new = f"listen 127.0.0.1:{port}"
        if listens:
            first = listens[0]
            kept = [
                a.value
                for a in first.args[1:]
                if _KEPT_LISTEN.match(a.value) or a.value in _KEPT_LISTEN_FLAGS
            ]
            self.replace(first.start, first.end, " ".join([new, *kept]) + ";")
            for extra in listens[1:]:
                self.replace(extra.start, extra.end, "")
            noted = sorted({a.value for x in listens for a in x.args[1:]} & _NOTED_LISTEN)
            if noted:
                self.out.notes.append(
                    f"{self.where(first.start)}: listen {', '.join(noted)} dropped: the copy "
                    f"serves plain HTTP/1.1 on 127.0.0.1:{port}"
                )
        else:
            # No listen (nginx's default: port 80): one after the brace, on the same line.
            self.edits.append((d.block_open, d.block_open, f" {new};"))
        self.out.order.append(
            ServerBlock(
                port=port,
                source=self.source,
                line=_line(self.text, d.start),
                http="http" in context,
                proxies=_has_proxy_pass(d.block),
            )
        )
        self.walk(d.block, (*context, "server"))

    def _target(self, address: str, default_port: int) -> str | None:
        key = normalize_address(address, default_port)
        self.out.proxied.append(key)
        hit = self.upstreams.get(key)
        if hit is None:
            return None
        self.out.matched.add(hit[0])
        return re.sub(r"^[a-z]+://", "", hit[1]).rstrip("/")

    def proxy_pass(self, tok: Token) -> None:
        m = _URL.match(tok.value)
        if not m or "$" in m.group(2):
            return
        scheme, address, rest = m.groups()
        explicit = ":" in address.rsplit("]", 1)[-1]
        if not explicit and not _looks_like_host(address):
            return  # an upstream block's name: its server lines are rewritten instead
        new = self._target(address, 443 if scheme == "https" else 80)
        if new is not None:
            # The engine ttft runs speaks plain HTTP.
            self.replace(tok.start, tok.end, f"http://{new}{rest}")

    def load_module(self, tok: Token) -> None:
        # nginx reads a relative module path against its own prefix, which -p moves.
        if self.nginx_prefix and not tok.value.startswith("/"):
            self.replace(tok.start, tok.end, f'"{self.nginx_prefix.rstrip("/")}/{tok.value}"')

    def upstream_server(self, tok: Token) -> None:
        if tok.value.startswith("unix:"):
            return
        new = self._target(tok.value, 80)
        if new is not None:
            self.replace(tok.start, tok.end, new)

    def finish(self) -> FileRewrite:
        if self.dropped_tls:
            names = sorted({n for n, _ in self.dropped_tls})
            lines = ", ".join(str(line) for _, line in self.dropped_tls)
            self.out.notes.append(
                f"{self.source}: {', '.join(names)} dropped (lines {lines}): the copy serves "
                "plain HTTP on loopback"
            )
        text = self.text
        for start, end, new in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = text[:start] + new + text[end:]
        self.out.text = text
        return self.out


def _looks_like_host(address: str) -> bool:
    return address.lower() == "localhost" or bool(re.match(r"^(\d+\.){3}\d+$|^\[", address))


def _has_proxy_pass(items: list[Directive]) -> bool:
    for d in items:
        if d.name.value == "proxy_pass" or (d.block is not None and _has_proxy_pass(d.block)):
            return True
    return False


def rewrite_file(
    text: str,
    *,
    source: str,
    context: tuple[str, ...],
    ports: Callable[[], int],
    upstreams: Mapping[str, str] | None = None,
    include_target: Callable[[str, tuple[str, ...]], list[str]] = lambda p, c: [p],
    nginx_prefix: str | None = None,
) -> FileRewrite:
    """``text`` (the file ``source``, included at ``context``) rewritten to run on loopback.

    ``ports()`` hands out one free loopback port per server block; ``upstreams`` maps engine
    addresses in the config to the engine ttft runs; ``include_target(pattern, context)`` returns
    the paths to include instead (an empty list drops the include); ``nginx_prefix`` (nginx's
    compiled-in prefix) makes relative ``load_module`` paths absolute. Lines never move.
    """
    rewriter = _Rewriter(text, source, ports, upstreams or {}, include_target, nginx_prefix)
    rewriter.top = parse(text)
    rewriter.walk(rewriter.top, context)
    return rewriter.finish()
