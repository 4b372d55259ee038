"""Detectors for content that changes between requests: the things that break a prefix cache.

A prefix cache reuses the KV of identical leading tokens. A timestamp, an id or a user's name near
the start of the prompt makes every request's prefix different from the one before it, so the cache
never hits. The detectors here find such spans in rendered prompt text; they know nothing about
templates or tokens.

Each detector is a regular expression plus a ``volatility``: how often the value changes, which
sets how bad it is (``request``: every request, the prefix is never reused; ``session``/``user``:
reuse only within one conversation or user; ``daily``: one cold prefix a day).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Volatility = Literal["request", "session", "user", "daily"]

# Worse first: when two detectors cover the same text, the more volatile reading wins.
_VOLATILITY_RANK: dict[str, int] = {"request": 0, "session": 1, "user": 2, "daily": 3}


@dataclass(frozen=True)
class DynamicSpan:
    """One piece of dynamic content: ``text[start:end]`` of the scanned string."""

    start: int
    end: int
    kind: str
    text: str
    volatility: Volatility

    @property
    def label(self) -> str:
        return _LABELS.get(self.kind, self.kind)


_LABELS = {
    "timestamp": "a timestamp",
    "date": "a date",
    "epoch": "a Unix epoch time",
    "time-phrase": "the current date/time",
    "uuid": "a UUID",
    "request-id": "a request/session/trace id",
    "hex-token": "a long hex token",
    "base64-token": "a long random token",
    "counter": "a counter",
    "user-name": "a per-user name",
    "varying": "content that differs between requests",
}

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?"
_HMS = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?[AaPp]\.?[Mm]\.?)?"
_ZONE = r"(?:\s?(?:Z|[+-]\d{2}:?\d{2}|UTC|GMT|[A-Z]{3,4}T))?"


@dataclass(frozen=True)
class _Detector:
    kind: str
    pattern: re.Pattern[str]
    volatility: Volatility
    # Extra check on the match, for patterns that would otherwise catch ordinary words.
    accept: Callable[[str], bool] | None = None


def _has_time(text: str) -> bool:
    return re.search(r"\d{1,2}[:时]\d{2}", text) is not None


def _looks_random(text: str) -> bool:
    """A token mixing digits with both letter cases, with few repeats: not a word or identifier."""
    core = text.rstrip("=")
    classes = sum(
        1 for test in (str.isdigit, str.islower, str.isupper) if any(test(ch) for ch in core)
    )
    return classes == 3 and len(set(core)) >= min(16, len(core) // 2)


def _looks_hex_id(text: str) -> bool:
    # Needs digits and letters: only digits is a number, only a-f a word ("deadbeef").
    return any(ch.isdigit() for ch in text) and any(ch.isalpha() for ch in text)


def _plausible_epoch(text: str) -> bool:
    # 2001-09-09 .. 2033-05-18, in seconds (10 digits) or milliseconds (13 digits).
    value = int(text)
    return 1_000_000_000 <= value < 2_000_000_000 or 1_000_000_000_000 <= value < 2_000_000_000_000


_DETECTORS: tuple[_Detector, ...] = (
    # Labelled phrases first: they carry the value with them, whatever its format.
    _Detector(
        "time-phrase",
        re.compile(
            r"(?i)\b(?:today(?:'s date)? is|today date:|the (?:current )?date is|"
            r"current (?:date(?:\s*(?:and|&)\s*time)?|time|datetime|timestamp)\s*(?:is|:|=)|"
            r"(?:the )?(?:time|date) now is|it is now (?=\d))\s*"
            # The value runs to the end of the clause; a comma continues it only inside a date.
            rf"(?:[^\n.;,]|,(?=\s*(?:\d|{_MON}|{_DAY})))+"
        ),
        "daily",
    ),
    _Detector(
        "timestamp",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?" + _ZONE + r"(?![\w:])"
        ),
        "request",
    ),
    _Detector(
        "timestamp",  # RFC 2822 / HTTP dates: "Sun, 15 Mar 2026 14:22:31 +0000"
        re.compile(rf"\b{_DAY},?\s+\d{{1,2}}\s+{_MON}\s+\d{{4}}\s+{_HMS}{_ZONE}"),
        "request",
    ),
    _Detector(
        "date",
        re.compile(
            r"\d{4}\s?年\s?\d{1,2}\s?月\s?\d{1,2}\s?[日号]"
            r"(?:\s*\d{1,2}\s?[时點点:]\s?\d{1,2}\s?分?(?:\s?\d{1,2}\s?秒)?)?"
        ),
        "daily",
    ),
    _Detector(
        "date",
        re.compile(
            rf"\b(?:{_DAY},?\s+)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MON},?\s+\d{{4}}"
            rf"|{_MON}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}})(?:,?\s+(?:at\s+)?{_HMS}{_ZONE})?"
        ),
        "daily",
    ),
    _Detector("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "daily"),
    _Detector(
        "date",
        re.compile(rf"\b\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{4}}(?:,?\s+{_HMS}{_ZONE})?\b"),
        "daily",
    ),
    _Detector(
        "epoch",
        re.compile(r"(?<![\w.])\d{10}(?:\d{3})?(?![\w.])"),
        "request",
        accept=_plausible_epoch,
    ),
    _Detector(
        "uuid",
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "request",
    ),
    _Detector(
        "request-id",
        re.compile(
            r"\b(?:req|request|sess|session|trace|span|conv|conversation|chatcmpl|msg|run|call|"
            r"evt|corr|correlation)[_-][A-Za-z0-9]{6,}\b"
        ),
        "request",
    ),
    _Detector(
        "request-id",
        re.compile(
            r"(?i)\b(?:x-)?(?:request|req|session|sess|trace|span|conversation|conv|correlation|"
            r"client|device|user|customer|account)[ _-]?(?:id)?\s*[=:]\s*"
            r"[\"']?[A-Za-z0-9][\w.-]{3,}"
        ),
        "session",
        accept=lambda text: any(ch.isdigit() for ch in text.split("=", 1)[-1].split(":", 1)[-1]),
    ),
    _Detector("hex-token", re.compile(r"\b[0-9a-fA-F]{16,}\b"), "request", accept=_looks_hex_id),
    _Detector(
        "base64-token",
        re.compile(r"(?<![\w+/])[A-Za-z0-9+/_-]{24,}={0,2}(?![\w+/])"),
        "request",
        accept=_looks_random,
    ),
    _Detector(
        "counter",
        re.compile(
            r"(?i)\b(?:request|message|turn|call|attempt|query|conversation|visit|iteration|"
            # Possessive runs of spaces: three optional \s* in a row backtrack cubically
            # ("request" and 800 spaces took 3.5 s); each piece after a run starts with a
            # non-space, so giving spaces back could never help a match.
            r"retry|step|counter|count|seq(?:uence)?)\s*+(?:(?:#|no\.?|number|count|n)\s*+)?"
            r"(?:[:=#]\s*+)?#?\d+\b"
        ),
        "request",
        accept=lambda text: re.search(r"[#:=]|\b(?:no|number)\b", text, re.IGNORECASE) is not None,
    ),
    _Detector(
        "user-name",
        re.compile(
            r"(?i)(?:\b(?:the )?user'?s name is|\buser(?:[ _]?name)?\s*[:=]|\byou are (?:talking|"
            r"speaking|chatting) (?:to|with)|\bcustomer(?:[ _]?name)?\s*[:=]|\bname\s*[:=])"
            r"\s*[\"']?(?-i:[A-Z][\w'-]+)(?: (?-i:[A-Z][\w'-]+))?"
            # The name ends the phrase: "User: What is 2+2?" is a few-shot line, not a name.
            r"(?=[\"']?\s*(?:[.,;:!)\n]|$))"
        ),
        "user",
    ),
)


def find_dynamic(text: str) -> list[DynamicSpan]:
    """Dynamic spans in ``text``, in order, without overlaps.

    Overlapping matches merge into one span that keeps the most volatile kind, so
    "Current time: 2026-03-15 14:22:31" is one timestamp span, not a phrase and a timestamp.
    """
    found: list[DynamicSpan] = []
    for det in _DETECTORS:
        for m in det.pattern.finditer(text):
            value = m.group(0).rstrip()
            if not value or (det.accept is not None and not det.accept(value)):
                continue
            volatility = det.volatility
            if det.kind in ("time-phrase", "date") and _has_time(value):
                volatility = "request"
            found.append(
                DynamicSpan(m.start(), m.start() + len(value), det.kind, value, volatility)
            )
    return _merge(found, text)


def _merge(spans: list[DynamicSpan], text: str) -> list[DynamicSpan]:
    spans.sort(key=lambda s: (s.start, -s.end))
    merged: list[DynamicSpan] = []
    for span in spans:
        if merged and span.start < merged[-1].end:
            prev = merged[-1]
            end = max(prev.end, span.end)
            keep = min(prev, span, key=_rank)
            merged[-1] = DynamicSpan(
                prev.start, end, keep.kind, text[prev.start : end], keep.volatility
            )
        else:
            merged.append(span)
    return merged


def _rank(span: DynamicSpan) -> tuple[int, int]:
    # The most volatile reading wins; on a tie the specific kind beats the generic phrase.
    return _VOLATILITY_RANK[span.volatility], span.kind == "time-phrase"
