"""Frontend cost: what rendering and tokenizing the user's own prompts costs before prefill.

``measure_frontend`` times, for every request of a log, on the monotonic clock
(``time.perf_counter_ns``), one cold call and then ``repeats`` warm calls of each stage:

- ``render_full``: the whole Jinja chat template rendered for the request (what an engine's chat
  endpoint does for every request).
- ``render_prerendered``: the pre-render cache's path. Warm calls are cache *hits*: hash the
  static part (every message with the last user message's content blanked, plus tools and
  template kwargs, through blake2b), look the frame up in a dict, join ``prefix + content
  + suffix``. The cold call is the *miss*: the same hash, one Jinja render of the conversation
  with a sentinel in place of the content, the split around it, the store, and the join. Not
  included: the check that the join equals the full render (done once, untimed, per request),
  tokenization, BOS handling, HTTP. A request whose join differs from its full render (the
  template does more with the content than place it once) is not pre-renderable: a cache falls
  back to a full render for it, and so does this stage.
- ``tokenize_python`` and ``tokenize_rust``: the full render's text through the same
  :class:`GgufTokenizer` (same vocabulary, merges, special-token splitting) with a pure-Python
  merge loop or the Rust ``tokenizers`` backend. Their ids are compared on every request and
  every difference reported.
- ``tokenize_server``: the server's ``POST /tokenize`` round trip, when a server is given (its ids
  are compared with the Rust ones too).

Rounds are interleaved (every request and stage once per round) so that a slow spell of a shared
machine spreads over all stages instead of landing on one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ttft.core.errors import TtftError
from ttft.prompts.chat_template import ChatTemplate, TemplateRenderer
from ttft.prompts.static_prefix import SENTINEL, last_user_index, render
from ttft.prompts.transform import move_dynamic
from ttft.tune.frontend_report import (
    FrontendReport,
    Mismatch,
    RequestTimings,
    build_report,
)
from ttft.workload.request_log import ChatRequest
from ttft.workload.tokenizer import Tokenizer

Clock = Callable[[], int]
_PLAIN = frozenset({"role", "content"})

STAGES = (
    "render_full",
    "render_prerendered",
    "tokenize_python",
    "tokenize_rust",
    "tokenize_server",
)


@dataclass(frozen=True)
class Frame:
    """What one static part renders to around the last user message's content."""

    prefix: str
    suffix: str


def _marked(request: ChatRequest) -> ChatRequest:
    messages = [dict(m) for m in request.messages]
    messages[last_user_index(messages)]["content"] = SENTINEL
    return replace(request, messages=messages)


def _feed(h: Any, data: bytes) -> None:
    # Length-prefixed, so that no two different sequences of fields feed the same bytes.
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)


def static_key(request: ChatRequest) -> bytes:
    """Hash of everything but the last user message's content: what a pre-render cache keys on.

    Plain ``{role, content}`` messages are hashed field by field (no JSON dump: it is the larger
    part of a cache hit's cost); any other message, and tools and template kwargs, as canonical
    JSON. Computing it is part of every hit's timed cost.
    """
    h = hashlib.blake2b(digest_size=16)
    last = last_user_index(request.messages)
    for i, message in enumerate(request.messages):
        content = "" if i == last else message.get("content")
        role = message.get("role")
        if isinstance(content, str) and isinstance(role, str) and set(message) <= _PLAIN:
            _feed(h, b"m" + role.encode())
            _feed(h, content.encode("utf-8", "surrogatepass"))
        else:
            _feed(h, b"j" + _canonical({**message, "content": content}))
    if request.tools or request.template_kwargs:
        _feed(h, b"t" + _canonical([request.tools, request.template_kwargs]))
    return h.digest()


def _canonical(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


def learn_frame(renderer: TemplateRenderer, request: ChatRequest) -> Frame | None:
    """The prefix and suffix around the content, or None when the sentinel is not placed once."""
    text = render(renderer, _marked(request))
    if text.count(SENTINEL) != 1:
        return None
    at = text.index(SENTINEL)
    return Frame(text[:at], text[at + len(SENTINEL) :])


def _content(request: ChatRequest) -> str | None:
    content = request.messages[last_user_index(request.messages)].get("content")
    return content if isinstance(content, str) else None


class _PrerenderCache:
    """The cached path under measurement: a dict of frames by static-part hash."""

    def __init__(self, renderer: TemplateRenderer) -> None:
        self.renderer = renderer
        self.frames: dict[bytes, Frame | None] = {}

    def miss(self, request: ChatRequest, content: str) -> str | None:
        key = static_key(request)
        frame = learn_frame(self.renderer, request)
        self.frames[key] = frame
        return None if frame is None else frame.prefix + content + frame.suffix

    def hit(self, request: ChatRequest, content: str) -> str | None:
        frame = self.frames.get(static_key(request))
        return None if frame is None else frame.prefix + content + frame.suffix


def _timed(clock: Clock, call: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    start = clock()
    value = call(*args)
    return clock() - start, value


def clock_overhead_ns(clock: Clock = time.perf_counter_ns, samples: int = 1000) -> int:
    """The median cost of reading the clock twice: the floor under every timing reported."""
    deltas = []
    for _ in range(samples):
        start = clock()
        deltas.append(clock() - start)
    deltas.sort()
    return deltas[len(deltas) // 2]


def distinct_static_parts(requests: Sequence[ChatRequest], moved: bool = False) -> int:
    """How many different static parts the log holds (so how many cache misses in one pass);
    ``moved``: after dynamic content (dates, ids) is moved to the end of the last user message."""
    keys = set()
    for request in requests:
        if moved:
            request = replace(request, messages=move_dynamic(request.messages)[0])
        keys.add(static_key(request))
    return len(keys)


def measure_frontend(
    requests: Sequence[ChatRequest],
    template: ChatTemplate,
    *,
    python_tokenizer: Tokenizer,
    rust_tokenizer: Tokenizer,
    server_tokenizer: Tokenizer | None = None,
    repeats: int = 10,
    clock: Clock = time.perf_counter_ns,
    sources: dict[str, str] | None = None,
) -> FrontendReport:
    """Time every stage on every request: one cold call, then ``repeats`` warm calls each.

    ``sources`` names where the template, tokenizers and server came from, for the report.
    """
    if repeats < 1:
        raise TtftError("--repeats must be at least 1", "use --repeats 10 or more")
    if not requests:
        raise TtftError("the request log holds no request", "give a log with at least one line")
    renderer = TemplateRenderer(template)
    cache = _PrerenderCache(renderer)
    rows = [RequestTimings(r.where) for r in requests]
    texts: list[str] = []
    for request in requests:
        texts.append(render(renderer, request))  # template errors surface here, before timing
    stages = [s for s in STAGES if s != "tokenize_server" or server_tokenizer is not None]
    ids: dict[str, list[list[int]]] = {s: [[] for _ in requests] for s in stages}
    for rnd in range(repeats + 1):
        cold = rnd == 0
        for i, request in enumerate(requests):
            row = rows[i]
            content = _content(request)
            ns, _ = _timed(clock, render, renderer, request)
            row.add("render_full", ns, cold)
            if content is None or (not cold and row.prerenderable is False):
                # Not pre-renderable: the cache falls back to the full render.
                ns, _ = _timed(clock, render, renderer, request)
                row.prerenderable = False
            else:
                step = cache.miss if cold else cache.hit
                ns, joined = _timed(clock, step, request, content)
                if cold:
                    row.prerenderable = joined == texts[i]
            row.add("render_prerendered", ns, cold)
            for stage, tok in (
                ("tokenize_python", python_tokenizer),
                ("tokenize_rust", rust_tokenizer),
                ("tokenize_server", server_tokenizer),
            ):
                if tok is None:
                    continue
                ns, got = _timed(clock, tok.encode, texts[i])
                row.add(stage, ns, cold)
                if cold:
                    ids[stage][i] = got
    for i, row in enumerate(rows):
        row.chars = len(texts[i])
        row.tokens = len(ids["tokenize_rust"][i])
    mismatches = [
        m
        for stage in stages
        if stage.startswith("tokenize_") and stage != "tokenize_rust"
        for i, row in enumerate(rows)
        if (m := compare_ids(row.where, stage, ids[stage][i], ids["tokenize_rust"][i])) is not None
    ]
    return build_report(
        rows,
        repeats=repeats,
        mismatches=mismatches,
        static_parts=distinct_static_parts(requests),
        static_parts_moved=distinct_static_parts(requests, moved=True),
        clock_overhead_ns=clock_overhead_ns(clock),
        sources=sources or {},
    )


def compare_ids(where: str, stage: str, got: list[int], rust: list[int]) -> Mismatch | None:
    """Where ``got`` first differs from the Rust backend's ids, or None when they agree."""
    if got == rust:
        return None
    first = next((k for k, (a, b) in enumerate(zip(got, rust, strict=False)) if a != b), None)
    at = first if first is not None else min(len(got), len(rust))
    return Mismatch(where, stage.removeprefix("tokenize_"), len(got), len(rust), at)
