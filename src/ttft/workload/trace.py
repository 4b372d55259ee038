"""Timed request traces for replay: a JSONL of OpenAI bodies with arrival times, or a Mooncake
trace (``timestamp``, ``input_length``, ``output_length``, ``hash_ids``).

The rules, written down once (docs/bench.md repeats them):

- **Arrival time.** Mooncake lines and JSONL lines may give ``timestamp`` in *milliseconds*;
  JSONL lines may instead give ``arrival_s`` in *seconds*. One field for the whole file (a line
  with both, or a file that mixes them, is an error). Relative and absolute (epoch) times are
  the same thing here: offsets are taken from the earliest arrival, so the first request goes
  out at once. A ``timestamp`` that looks like epoch *seconds* (1e9..1e11) or an ``arrival_s``
  that looks like epoch *milliseconds* (above 1e11) is refused, since the unit would be off by
  a factor of 1000.
- **Order.** Lines out of time order are replayed in time order (a stable sort) and a note says
  how many were out of order: traces merged from several logs often are, and the arrival times,
  not the line order, are what a replay must keep.
- **Format detection** (``auto``): the first line decides: ``hash_ids`` or ``input_length``
  means Mooncake, ``messages`` or ``prompt`` means JSONL of bodies. Every later line must be of
  the same kind.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from ttft.core.errors import TtftError
from ttft.workload.request_log import parse_request
from ttft.workload.requests import ApiStyle

TraceFormat = Literal["auto", "jsonl", "mooncake"]
FORMATS: tuple[TraceFormat, ...] = ("auto", "jsonl", "mooncake")
MOONCAKE_BLOCK_SIZE = 512  # tokens per hash block in the published Mooncake traces
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

_MS_FIELD, _S_FIELD = "timestamp", "arrival_s"
_MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_FIX_JSONL = 'one request per line: {"timestamp": 0, "messages": [...]} or {"arrival_s": 0.5, ...}'
_FIX_MOONCAKE = (
    'one request per line: {"timestamp": 0, "input_length": 700, "output_length": 20, '
    '"hash_ids": [0, 1]}'
)


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace. ``offset_ns`` is its arrival after the trace's first one.

    JSONL requests carry their ``body`` (the timestamp field removed) and ``api``; Mooncake
    requests carry lengths and ``hash_ids`` instead, and a prompt is synthesised for them.
    """

    line: int
    offset_ns: int
    body: dict[str, Any] | None = None
    api: ApiStyle | None = None
    input_length: int | None = None
    output_length: int | None = None
    hash_ids: tuple[int, ...] = ()


@dataclass
class Trace:
    path: Path
    format: Literal["jsonl", "mooncake"]
    requests: list[TraceRequest]
    notes: list[str] = field(default_factory=list)

    @property
    def offsets_ns(self) -> tuple[int, ...]:
        return tuple(request.offset_ns for request in self.requests)

    @property
    def longest_prompt(self) -> int | None:
        """The longest input length (Mooncake); None for bodies, whose lengths are unknown."""
        lengths = [r.input_length for r in self.requests if r.input_length is not None]
        return max(lengths) if lengths else None

    @property
    def longest_output(self) -> int | None:
        lengths = [r.output_length for r in self.requests if r.output_length is not None]
        return max(lengths) if lengths else None


@dataclass(frozen=True)
class TraceSpec:
    """What the user asked: which file, how to read it, how fast to replay it.

    ``max_tokens`` caps every request's output (None: the trace's own lengths).
    """

    path: Path
    format: TraceFormat = "auto"
    speed: float = 1.0
    block_size: int = MOONCAKE_BLOCK_SIZE
    limit: int | None = None
    max_tokens: int | None = None


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TtftError(f"trace not found: {path}", "check the path given to --trace") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read trace {path}: {exc}", "give a UTF-8 JSONL file") from None
    out: list[tuple[int, dict[str, Any]]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TtftError(
                f"{path}:{line_no}: not valid JSON (column {exc.colno}): {exc.msg}",
                "each line of a trace is one JSON object",
            ) from None
        if not isinstance(value, dict):
            raise TtftError(
                f"{path}:{line_no}: expected a JSON object, got {type(value).__name__}",
                "each line of a trace is one JSON object",
            )
        out.append((line_no, value))
    if not out:
        raise TtftError(f"trace {path} holds no requests", _FIX_JSONL)
    return out


def detect_format(first: dict[str, Any], where: str) -> Literal["jsonl", "mooncake"]:
    if "hash_ids" in first or "input_length" in first:
        return "mooncake"
    if "messages" in first or "prompt" in first:
        return "jsonl"
    raise TtftError(
        f"{where}: cannot tell the trace format: the line has neither hash_ids/input_length "
        "(Mooncake) nor messages/prompt (a request body)",
        "give --trace-format mooncake or jsonl, and lines like " + _FIX_JSONL,
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _arrival_field(obj: dict[str, Any], fmt: str, where: str) -> str:
    has_ms, has_s = _MS_FIELD in obj, _S_FIELD in obj
    if fmt == "mooncake" and has_s and not has_ms:
        raise TtftError(f"{where}: a Mooncake line gives 'timestamp' in ms", _FIX_MOONCAKE)
    if has_ms and has_s:
        raise TtftError(
            f"{where}: both 'timestamp' (ms) and 'arrival_s' (s): which one is the arrival?",
            "keep one of them",
        )
    if not has_ms and not has_s:
        raise TtftError(
            f"{where}: no arrival time",
            "add 'timestamp' (milliseconds) or 'arrival_s' (seconds) to every line",
        )
    return _MS_FIELD if has_ms else _S_FIELD


def _arrival_ns(value: Any, name: str, where: str) -> int:
    number = _number(value)
    if number is None or number < 0:
        raise TtftError(f"{where}: '{name}' must be a number of at least 0, not {value!r}")
    if name == _MS_FIELD and 1e9 <= number < 1e11:
        raise TtftError(
            f"{where}: 'timestamp' {value} looks like epoch seconds, but 'timestamp' is in "
            "milliseconds (a replay would run 1000 times too fast)",
            "give 'arrival_s' for seconds, or multiply by 1000",
        )
    if name == _S_FIELD and number >= 1e11:
        raise TtftError(
            f"{where}: 'arrival_s' {value} looks like epoch milliseconds",
            "give 'timestamp' for milliseconds, or divide by 1000",
        )
    scale = NS_PER_MS if name == _MS_FIELD else NS_PER_S
    return round(Fraction(number) * scale)  # exact: epoch ms times 1e6 overflows a float's digits


def _count(obj: dict[str, Any], name: str, minimum: int, where: str) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TtftError(
            f"{where}: '{name}' must be a whole number of at least {minimum}, not {value!r}",
            _FIX_MOONCAKE,
        )
    return value


def _mooncake(obj: dict[str, Any], line: int, t_ns: int, block: int, where: str) -> TraceRequest:
    missing = [name for name in _MOONCAKE_FIELDS if name not in obj]
    if missing:
        raise TtftError(f"{where}: missing {', '.join(missing)}", _FIX_MOONCAKE)
    length = _count(obj, "input_length", 1, where)
    output = _count(obj, "output_length", 0, where)
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in ids
    ):
        raise TtftError(f"{where}: 'hash_ids' must be a list of whole numbers", _FIX_MOONCAKE)
    blocks = -(-length // block)
    if len(ids) != blocks:
        raise TtftError(
            f"{where}: input_length {length} is {blocks} blocks of {block} tokens, but hash_ids "
            f"has {len(ids)}",
            "give the trace's own block size with --block-size (the Mooncake traces use 512)",
        )
    return TraceRequest(line, t_ns, input_length=length, output_length=output, hash_ids=tuple(ids))


def _body(obj: dict[str, Any], line: int, t_ns: int, path: Path, where: str) -> TraceRequest:
    body = {k: v for k, v in obj.items() if k not in (_MS_FIELD, _S_FIELD)}
    if isinstance(body.get("prompt"), str) and "messages" not in body:
        api: ApiStyle = "completions"
    elif "messages" in body:
        parse_request(body, str(path), line)  # the checks every request log gets
        api = "chat"
    else:
        raise TtftError(f"{where}: a request needs a 'messages' list or a 'prompt'", _FIX_JSONL)
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "model")}
    output = body.get("max_tokens", body.get("max_completion_tokens"))
    own = output if isinstance(output, int) and not isinstance(output, bool) else None
    return TraceRequest(line, t_ns, body=body, api=api, output_length=own)


def read_trace(
    path: Path,
    fmt: TraceFormat = "auto",
    *,
    block_size: int = MOONCAKE_BLOCK_SIZE,
    limit: int | None = None,
) -> Trace:
    """Every request of a trace, in arrival order, offsets from the earliest arrival.

    ``limit`` keeps the first N requests of that order. Errors name ``file:line``.
    """
    if fmt not in FORMATS:
        raise TtftError(f"unknown trace format {fmt!r}", f"choose one of {', '.join(FORMATS)}")
    if block_size < 1:
        raise TtftError(f"--block-size must be at least 1 token, not {block_size}")
    if limit is not None and limit < 1:
        raise TtftError(f"--trace-limit must be at least 1, not {limit}")
    lines = _lines(path)
    first_line, first = lines[0]
    kind = detect_format(first, f"{path}:{first_line}") if fmt == "auto" else fmt
    arrival = _arrival_field(first, kind, f"{path}:{first_line}")
    parsed: list[TraceRequest] = []
    for line, obj in lines:
        where = f"{path}:{line}"
        if _arrival_field(obj, kind, where) != arrival:
            raise TtftError(
                f"{where}: gives '{_S_FIELD if arrival == _MS_FIELD else _MS_FIELD}' but line "
                f"{first_line} gives '{arrival}': one arrival field for the whole trace",
                "convert the trace to one unit",
            )
        t_ns = _arrival_ns(obj[arrival], arrival, where)
        if kind == "mooncake":
            parsed.append(_mooncake(obj, line, t_ns, block_size, where))
        else:
            parsed.append(_body(obj, line, t_ns, path, where))
    notes: list[str] = []
    latest, out_of_order = 0, 0
    for request in parsed:
        out_of_order += request.offset_ns < latest
        latest = max(latest, request.offset_ns)
    if out_of_order:
        parsed.sort(key=lambda r: r.offset_ns)  # stable: equal times keep their line order
        notes.append(
            f"{out_of_order} of {len(parsed)} lines of {path} arrive before an earlier line; "
            "the trace is replayed in arrival-time order"
        )
    if limit is not None:
        parsed = parsed[:limit]
    start = parsed[0].offset_ns
    requests = [replace(r, offset_ns=r.offset_ns - start) for r in parsed]
    return Trace(path, kind, requests, notes)
