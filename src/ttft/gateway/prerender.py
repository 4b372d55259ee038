"""Chat templates rendered in the gateway, cached by the hash of the conversation's static part.

Rendering a Jinja chat template (system prompt, tool schemas through ``tojson``, few-shot turns)
and tokenizing the result cost the engine tens of milliseconds per long prompt, every request,
for a prefix that is the same each time. Here the work is done once per static part:

- The *static part* is every message before the last one (the last must be the user's): system
  prompt, few-shot turns, conversation history, plus ``chat_template_kwargs``. Its hash keys an
  LRU cache of *frames*.
- A frame is learned by rendering the static part followed by a user message holding a sentinel,
  twice with different sentinels: the text before the sentinel (``prefix``) and after it
  (``suffix``, the generation prompt) must be the same both times, and the sentinel must appear
  exactly once. A third render with whitespace around the sentinel tells whether the template
  keeps the content verbatim or trims it. Then each request's prompt is
  ``prefix + content + suffix``: a string join, not a template render.
- The fast path is refused (a full render is done instead, and counted) when the template reads
  the clock, when the frame could not be learned, or when the content holds one of the template's
  own markup literals (``<|im_start|>``, ``</think>``): a template may branch on those.
- With a ``tokenizer.json`` (Rust ``tokenizers``), the prefix up to a line break is tokenized once
  per frame and only the rest per request; the first request of each frame is also tokenized
  whole and compared, and a frame whose split tokenization differs is never split again.

Nothing here sends anything; ``ttft.gateway.app`` decides when a request may be pre-rendered.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ttft.prompts.chat_template import ChatTemplate, TemplateRenderer
from ttft.workload.tokenizer import VocabTokenizer

_clock = time.perf_counter_ns
_SENTINEL_A = "\ue000ttft-a\ue000"
_SENTINEL_B = "\ue001ttft-bb\ue001"
_PAD_BEFORE, _PAD_AFTER = " \n", "\n "
_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\'": "'", '\\"': '"', "\\\\": "\\"}


@dataclass(slots=True)
class Frame:
    """What one static part renders to around the last user message's content."""

    prefix: str
    suffix: str
    whitespace: str  # "exact": content verbatim; "strip": the template trims it; "other"
    static_tokens: int | None = None  # exact count of the prefix, once known
    cut: int = 0  # tokenization restarts at prefix[cut:]
    head_ids: list[int] | None = None  # ids of prefix[:cut] (with BOS when we add it)
    ids_state: str = "unchecked"  # "unchecked" | "safe" | "unsafe"


@dataclass(slots=True)
class Rendered:
    text: str  # the prompt text (without a BOS the engine adds itself)
    ids: list[int] | None  # token ids, when a tokenizer is configured
    static_text: str  # the cacheable prefix of ``text`` ("" when unknown)
    n_tokens: int
    exact_tokens: bool
    cache: str  # "hit" | "miss" | "full" (rendered whole, see ``reason``)
    reason: str  # why a full render: "clock", "no_frame", "literal", "whitespace", ""
    template_ns: int
    tokenize_ns: int
    frame: Frame | None


# An OrderedDict slot, its 16-byte key object and a Frame's own fields, measured on CPython
# 3.11 and rounded up: a cache of failed learns (``None`` frames) is bounded too.
_ENTRY_BYTES = 400
# One token id in a list: the list's pointer and the int object (ids above 256 are not shared).
_ID_BYTES = 8 + 28


def frame_bytes(frame: Frame | None) -> int:
    """The memory one cache entry holds, an upper estimate: the prefix and suffix strings as
    CPython stores them (1, 2 or 4 bytes per character) and the head's token ids."""
    if frame is None:
        return _ENTRY_BYTES
    size = _ENTRY_BYTES + sys.getsizeof(frame.prefix) + sys.getsizeof(frame.suffix)
    if frame.head_ids is not None:
        size += _ID_BYTES * len(frame.head_ids)
    return size


def template_literals(source: str) -> tuple[str, ...]:
    """The template's string literals that look like markup (``<|im_start|>``, ``</think>``)."""
    found: set[str] = set()
    for m in _LITERAL.finditer(source):
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        text = re.sub(r"\\.", lambda e: _ESCAPES.get(e.group(0), e.group(0)), raw).strip()
        if len(text) >= 3 and any(not (ch.isalnum() or ch.isspace()) for ch in text):
            found.add(text)
    return tuple(sorted(found, key=len, reverse=True))


def static_key(messages: list[dict[str, Any]], kwargs: dict[str, Any] | None) -> bytes:
    """Hash of the static part: every message before the last, and the template kwargs."""
    blob = json.dumps(
        [messages[:-1], kwargs or {}], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Prerenderer:
    """Renders chat prompts for one model, with a frame cache bounded by entries and bytes.

    ``strip_bos``: remove a leading BOS text from the render, because the engine adds BOS itself
    when it tokenizes a text prompt (llama-server). In token-id mode that BOS id is prepended
    instead (``add_bos_id``).
    """

    def __init__(
        self,
        template: ChatTemplate,
        *,
        tokenizer: VocabTokenizer | None = None,
        strip_bos: bool = True,
        chars_per_token: float = 4.0,
        max_entries: int = 1024,
        max_bytes: int = 64 * 1024 * 1024,
        on_new_frame: Callable[[Frame], None] | None = None,
    ) -> None:
        self.template = template
        self.renderer = TemplateRenderer(template)
        self.tokenizer = tokenizer
        self.bos = template.special_tokens.get("bos_token", "") if strip_bos else ""
        self.bos_ids: list[int] = []
        if tokenizer is not None and self.bos:
            bos_id = tokenizer.token_id(self.bos)
            self.bos_ids = [bos_id] if bos_id is not None else []
        self.chars_per_token = chars_per_token
        self.literals = template_literals(template.source)
        self.uses_clock = self.renderer.uses_clock
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.on_new_frame = on_new_frame  # e.g. count the prefix's tokens in the background
        self._frames: OrderedDict[bytes, Frame | None] = OrderedDict()
        self._bytes = 0

    # -- public ----------------------------------------------------------------------------

    def render(
        self, messages: list[dict[str, Any]], kwargs: dict[str, Any] | None = None
    ) -> Rendered:
        """The prompt for ``messages`` (already checked: string contents, last one the user's).

        Raises the renderer's ``TemplateRuntimeError`` when the template refuses the request.
        """
        t0 = _clock()
        content = messages[-1]["content"]
        reason = ""
        frame: Frame | None = None
        cache = "full"
        if self.uses_clock:
            reason = "clock"
        else:
            key = static_key(messages, kwargs)
            known = key in self._frames
            if known:
                self._frames.move_to_end(key)
                frame = self._frames[key]
            else:
                frame = self._learn(messages[:-1], kwargs)
                self._remember(key, frame)
            if frame is None:
                reason = "no_frame"
            elif any(lit in content for lit in self.literals):
                reason = "literal"
            elif frame.whitespace == "other" and content != content.strip():
                reason = "whitespace"
            else:
                cache = "hit" if known else "miss"
        if cache != "full" and frame is not None:
            body = content.strip() if frame.whitespace == "strip" else content
            text = frame.prefix + body + frame.suffix
            static_text = frame.prefix
        else:
            text = self._strip_bos(
                self.renderer.render(messages, add_generation_prompt=True, extra=kwargs)
            )
            static_text = (
                frame.prefix if frame is not None and text.startswith(frame.prefix) else ""
            )
        t1 = _clock()
        ids = self._tokenize(text, frame if cache != "full" else None)
        t2 = _clock()
        if ids is not None:
            n_tokens, exact = len(ids), True
        elif frame is not None and frame.static_tokens is not None and static_text:
            rest = len(text) - len(static_text)
            n_tokens, exact = frame.static_tokens + round(rest / self.chars_per_token), False
        else:
            n_tokens, exact = round(len(text) / self.chars_per_token), False
        return Rendered(
            text, ids, static_text, n_tokens, exact, cache, reason, t1 - t0, t2 - t1, frame
        )

    def render_full(
        self, messages: list[dict[str, Any]], kwargs: dict[str, Any] | None = None
    ) -> str:
        """The reference: one whole render, as the engine's chat endpoint would do it."""
        return self._strip_bos(
            self.renderer.render(messages, add_generation_prompt=True, extra=kwargs)
        )

    @property
    def cached_frames(self) -> int:
        return len(self._frames)

    # -- internals -------------------------------------------------------------------------

    def _strip_bos(self, text: str) -> str:
        return text[len(self.bos) :] if self.bos and text.startswith(self.bos) else text

    def _learn(self, static: list[dict[str, Any]], kwargs: dict[str, Any] | None) -> Frame | None:
        def render(content: str) -> str:
            convo = [*static, {"role": "user", "content": content}]
            return self._strip_bos(
                self.renderer.render(convo, add_generation_prompt=True, extra=kwargs)
            )

        try:
            a = render(_SENTINEL_A)
            b = render(_SENTINEL_B)
            padded = _PAD_BEFORE + _SENTINEL_A + _PAD_AFTER
            c = render(padded)
        except Exception:  # the template refused the probe: no frame, render each request whole
            return None
        at = a.find(_SENTINEL_A)
        if at < 0 or a.count(_SENTINEL_A) != 1:
            return None
        prefix, suffix = a[:at], a[at + len(_SENTINEL_A) :]
        if b != prefix + _SENTINEL_B + suffix:
            return None  # the template does more with the content than place it once
        if c == prefix + padded + suffix:
            whitespace = "exact"
        elif c == a:
            whitespace = "strip"
        else:
            whitespace = "other"
        frame = Frame(prefix, suffix, whitespace)
        if self.tokenizer is not None:
            # Restart tokenization at a line break well before the content, so that the tokens
            # around the split are the same text in every request of this frame.
            frame.cut = prefix.rfind("\n", 0, max(0, len(prefix) - 32)) + 1
            frame.head_ids = self.bos_ids + self.tokenizer.encode(prefix[: frame.cut])
        if self.on_new_frame is not None:
            self.on_new_frame(frame)
        return frame

    def _remember(self, key: bytes, frame: Frame | None) -> None:
        self._frames[key] = frame
        self._bytes += frame_bytes(frame)
        while self._frames and (
            len(self._frames) > self.max_entries or self._bytes > self.max_bytes
        ):
            _, old = self._frames.popitem(last=False)
            self._bytes -= frame_bytes(old)

    @property
    def cached_bytes(self) -> int:
        """What the frame cache holds, by ``frame_bytes``'s reckoning."""
        return self._bytes

    def _tokenize(self, text: str, frame: Frame | None) -> list[int] | None:
        tok = self.tokenizer
        if tok is None:
            return None
        if frame is None or frame.head_ids is None or frame.ids_state == "unsafe":
            return self.bos_ids + tok.encode(text)
        ids = frame.head_ids + tok.encode(text[frame.cut :])
        if frame.ids_state == "unchecked":
            whole = self.bos_ids + tok.encode(text)
            frame.ids_state = "safe" if whole == ids else "unsafe"
            frame.static_tokens = len(self.bos_ids + tok.encode(frame.prefix))
            return whole
        return ids
