"""What a scripted server answers, and when: a ``Script`` rendered into timed pieces of bytes.

Pure (no I/O): ``render`` turns a script and a request into ``Piece`` s, each with its offset from
the moment the request arrived, already framed (chunked / Content-Length / until close) and
optionally gzip-encoded. ``scripted_server`` writes them at those offsets and logs when it did.

Delays are in milliseconds and chain: head after ``headers_delay_ms``; the role-only chunk
``role_delay_ms`` after the head; the first token ``first_token_delay_ms`` after that; each next
token ``token_interval_ms`` later; the finish/usage chunks and ``[DONE]`` with the last token.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class Script:
    """One response's behaviour. JSON-friendly: a request may override fields by sending
    ``"ttft_script": {...}`` in its body (see ``Script.merged``)."""

    status: int = 200  # not 200: an error response with an OpenAI-style JSON error body
    error_message: str = "scripted error"
    headers_delay_ms: float = 0.0
    role_chunk: bool = True  # chat: a role-only first chunk; completions: an empty-text chunk
    role_content: Literal["null", "empty"] = "null"  # its content: null or ""
    role_delay_ms: float = 0.0
    first_token_delay_ms: float = 20.0
    token_interval_ms: float = 2.0
    n_tokens: int = 16
    tokens: tuple[str, ...] | None = None  # explicit token texts (else " t0", " t1", ...)
    reasoning_tokens: int = 0  # the first N tokens go out as reasoning text
    reasoning_field: str = "reasoning_content"  # or "reasoning"
    error_after: int | None = None  # after N tokens: an error inside the stream, then the end
    error_style: Literal["event", "data"] = "event"  # "event: error" or a data {"error": ...}
    close_after: int | None = None  # after N tokens: close the connection (no terminator)
    drop: bool = False  # close the connection on receipt, before any response byte
    done: bool = True  # end with "data: [DONE]"
    usage: Literal["final", "finish", "none"] = "final"  # where usage and timings go
    timings: bool = True  # llama-server's "timings" object beside usage
    framing: Literal["chunked", "length", "close"] = "chunked"
    gzip: bool = False  # gzip the body (each event sync-flushed, so it still streams)
    crlf: bool = False  # end SSE lines with CRLF
    keep_alive: bool = True
    silent_close: bool = False  # close after the answer without "Connection: close" (llama-server)
    ignore_stream: bool = False  # answer one JSON completion, as servers that ignore stream=true
    # Echo the request's X-Request-Id in the response head, as vLLM does ("same"), or a wrong
    # one ("other": what a confused proxy would send back).
    echo_request_id: Literal["none", "same", "other"] = "none"
    # Per token, its top alternatives as (text, logprob) pairs: each token chunk then carries
    # OpenAI logprobs (chat: logprobs.content; completions: tokens/token_logprobs/top_logprobs),
    # as vLLM and SGLang stream them. None (the default): no logprobs, as before.
    top_logprobs: tuple[tuple[tuple[str, float], ...], ...] | None = None

    def merged(self, overrides: dict[str, Any] | None) -> Script:
        """This script with the given fields replaced (unknown fields are an error)."""
        if not overrides:
            return self
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown script fields: {sorted(unknown)}")
        values = dict(overrides)
        if values.get("tokens") is not None:
            values["tokens"] = tuple(values["tokens"])
        if values.get("top_logprobs") is not None:
            values["top_logprobs"] = tuple(
                tuple((str(t), float(v)) for t, v in alts) for alts in values["top_logprobs"]
            )
        return replace(self, **values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def token_texts(self) -> list[str]:
        if self.tokens is not None:
            return list(self.tokens)
        return [f" t{i}" for i in range(self.n_tokens)]


@dataclass(slots=True)
class Piece:
    """Bytes to write at ``offset_ns`` after the request arrived. ``kind`` names it in the log;
    ``close`` means: close the connection after writing it."""

    offset_ns: int
    kind: str
    data: bytes
    close: bool = False


def _ms(value: float) -> int:
    return round(value * 1_000_000)


def _sse(obj: Any, crlf: bool, event: str | None = None) -> bytes:
    nl = "\r\n" if crlf else "\n"
    head = f"event: {event}{nl}" if event else ""
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"{head}data: {data}{nl}{nl}".encode()


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def render(script: Script, api: str, index: int, model: str) -> list[Piece]:
    """The timed pieces of one response to a ``chat`` or ``completions`` request."""
    if script.drop:
        return [Piece(_ms(script.headers_delay_ms), "drop", b"", close=True)]
    at = _ms(script.headers_delay_ms)
    if script.status != 200:
        body = json.dumps(
            {
                "error": {
                    "message": script.error_message,
                    "code": script.status,
                    "type": "scripted_error",
                }
            }
        ).encode()
        head = _head(
            script.status,
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            + ([] if script.keep_alive else [("Connection", "close")]),
        )
        return [Piece(at, "head", head + body, close=not script.keep_alive)]

    if script.ignore_stream:
        text = "".join(script.token_texts())
        choice = (
            {"index": 0, "message": {"role": "assistant", "content": text}}
            if api == "chat"
            else {"index": 0, "text": text}
        )
        body = json.dumps({"id": f"x-{index}", "model": model, "choices": [choice]}).encode()
        at += _ms(script.first_token_delay_ms)
        head = _head(
            200, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [Piece(at, "head", head + body)]
    events = _events(script, api, index, model, at)
    return _frame(script, at, events)


def _events(script: Script, api: str, index: int, model: str, at: int) -> list[Piece]:
    chat = api == "chat"
    ident = f"{'chatcmpl' if chat else 'cmpl'}-{index}"
    obj_name = "chat.completion.chunk" if chat else "text_completion"

    def chunk(choice: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": ident,
            "object": obj_name,
            "created": 0,
            "model": model,
            "choices": [choice] if choice is not None else [],
        }
        body.update(extra)
        return body

    def choice(
        text: str | None, field: str = "content", finish: str | None = None
    ) -> dict[str, Any]:
        if chat:
            delta: dict[str, Any] = {} if text is None else {field: text}
            return {"index": 0, "delta": delta, "finish_reason": finish}
        return {"index": 0, "text": text or "", "finish_reason": finish}

    crlf = script.crlf
    out: list[Piece] = []
    if script.role_chunk:
        at += _ms(script.role_delay_ms)
        content = None if script.role_content == "null" else ""
        first = (
            {"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}
            if chat
            else choice("")
        )
        out.append(Piece(at, "role", _sse(chunk(first), crlf)))
    texts = script.token_texts()
    at += _ms(script.first_token_delay_ms)
    offset = 0  # characters of text before this token (the legacy logprobs' text_offset)
    for i, text in enumerate(texts):
        if i:
            at += _ms(script.token_interval_ms)
        if script.error_after is not None and i == script.error_after:
            break
        if script.close_after is not None and i == script.close_after:
            out[-1].close = True
            return out
        reasoning = i < script.reasoning_tokens and chat
        field = script.reasoning_field if reasoning else "content"
        picked = choice(text, field)
        if script.top_logprobs is not None and i < len(script.top_logprobs):
            picked["logprobs"] = _logprobs(text, script.top_logprobs[i], chat, offset)
        offset += len(text)
        out.append(Piece(at, "reasoning" if reasoning else "token", _sse(chunk(picked), crlf)))
    if script.error_after is not None:
        error = {"error": {"message": script.error_message, "type": "scripted_error", "code": 500}}
        style = "error" if script.error_style == "event" else None
        out.append(Piece(at, "error", _sse(error, crlf, event=style)))
        return out
    if script.close_after is not None and script.close_after >= len(texts):
        out[-1].close = True
        return out
    n = len(texts)
    timings = {
        "cache_n": 0,
        "prompt_n": 8,
        "prompt_ms": 12.5,
        "prompt_per_second": 640.0,
        "predicted_n": n,
        "predicted_ms": script.token_interval_ms * max(n - 1, 0),
        "predicted_per_second": 500.0,
    }
    usage = {
        "prompt_tokens": 8,
        "completion_tokens": n,
        "total_tokens": 8 + n,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    extra: dict[str, Any] = {}
    if script.usage == "finish":
        extra["usage"] = usage
        if script.timings:
            extra["timings"] = timings
    out.append(Piece(at, "finish", _sse(chunk(choice(None, finish="stop"), **extra), crlf)))
    if script.usage == "final":
        final: dict[str, Any] = {"usage": usage}
        if script.timings:
            final["timings"] = timings
        out.append(Piece(at, "usage", _sse(chunk(None, **final), crlf)))
    if script.done:
        out.append(Piece(at, "done", _sse("[DONE]", crlf)))
    return out


def with_request_id(pieces: list[Piece], request_id: str) -> list[Piece]:
    """The pieces with ``X-Request-Id: request_id`` added to the head (a copy: pieces are
    cached per script and shared between requests)."""
    head = pieces[0]
    line = f"X-Request-Id: {request_id}\r\n".encode("latin-1")
    data = head.data.replace(b"\r\n", b"\r\n" + line, 1)
    return [Piece(head.offset_ns, head.kind, data, head.close), *pieces[1:]]


def _logprobs(
    text: str, alts: tuple[tuple[str, float], ...], chat: bool, offset: int
) -> dict[str, Any]:
    """One token's logprobs in the OpenAI shapes (the API reference's chat ``logprobs.content``
    and the legacy completions ``logprobs`` object)."""
    own = next((v for t, v in alts if t == text), max((v for _, v in alts), default=0.0))
    if chat:
        top = [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in alts]
        item = {"token": text, "logprob": own, "bytes": list(text.encode()), "top_logprobs": top}
        return {"content": [item]}
    return {
        "tokens": [text],
        "token_logprobs": [own],
        "top_logprobs": [dict(alts)],
        "text_offset": [offset],
    }


def _frame(script: Script, at: int, events: list[Piece]) -> list[Piece]:
    """Encode and frame the events; prepend the response head."""
    if script.gzip:
        gz = zlib.compressobj(wbits=31)
        for i, piece in enumerate(events):
            last = i == len(events) - 1 and not piece.close
            piece.data = gz.compress(piece.data) + gz.flush(
                zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH
            )
    ends_cleanly = bool(events) and not events[-1].close
    headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
    if script.gzip:
        headers.append(("Content-Encoding", "gzip"))
    if script.framing == "chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        for piece in events:
            piece.data = b"%x\r\n%s\r\n" % (len(piece.data), piece.data)
        if ends_cleanly:
            events[-1].data += b"0\r\n\r\n"
    elif script.framing == "length":
        length = sum(len(p.data) for p in events)
        # A scripted early close must look abrupt: promise more body than will come.
        headers.append(("Content-Length", str(length if ends_cleanly else length + 1)))
    if script.framing == "close" or not script.keep_alive:
        headers.append(("Connection", "close"))
        if events:
            events[-1].close = True
    elif script.silent_close and events:
        events[-1].close = True
    head = Piece(at, "head", _head(200, headers))
    if not events:
        head.close = True
    return [head, *events]
