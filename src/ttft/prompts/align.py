"""Align versions of one text and find the spans that vary between them, without knowing formats.

The same field of many requests (a system prompt, a few-shot turn, a tool description) is mostly
identical text with a few values that change: an id, a date in whatever format, a name, a counter.
Aligning the versions word by word shows those values wherever they sit, on the first line or in
the middle of a sentence. Versions too unlike each other (two different prompts, two different
conversations) are not compared: their difference is content, not a value.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
# Two versions are one text with values in it when at least this share of their tokens align.
MIN_SIMILARITY = 0.5
_MAX_WORD = 64  # a "word" (run without spaces) longer than this is widened to \w boundaries only
_TRIM = ".,;:!?)]}>\"'"
_TRIM_START = "([{<\"'"


@dataclass(frozen=True)
class Tokens:
    text: str
    starts: tuple[int, ...]  # character offset of each token, plus len(text) at the end
    words: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Tokens:
        found = list(_TOKEN.finditer(text))
        starts = (*(m.start() for m in found), len(text))
        return cls(text, starts, tuple(m.group() for m in found))

    def chars(self, first: int, last: int) -> tuple[int, int]:
        """Character range of tokens ``first`` to ``last`` (exclusive)."""
        return self.starts[first], self.starts[last]


def _opcodes(a: Tokens, b: Tokens) -> list[tuple[str, int, int, int, int]] | None:
    """Word-level edit script from ``a`` to ``b``; None when they are not one text with values."""
    n, m = len(a.words), len(b.words)
    head = 0
    while head < min(n, m) and a.words[head] == b.words[head]:
        head += 1
    tail = 0
    while tail < min(n, m) - head and a.words[n - 1 - tail] == b.words[m - 1 - tail]:
        tail += 1
    middle = difflib.SequenceMatcher(
        None, a.words[head : n - tail], b.words[head : m - tail], autojunk=False
    )
    # An upper bound in linear time: texts that cannot align are not aligned word by word.
    rest = n + m - 2 * (head + tail)
    if head + tail + 0.5 * middle.quick_ratio() * rest < MIN_SIMILARITY * max(n, m, 1):
        return None
    ops: list[tuple[str, int, int, int, int]] = []
    if head:
        ops.append(("equal", 0, head, 0, head))
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        ops.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        ops.append(("equal", n - tail, n, m - tail, m))
    same = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")
    if same < MIN_SIMILARITY * max(n, m, 1):
        return None
    return ops


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """``text[start:end]`` widened to whole words, without the punctuation that closes them."""
    s, e = start, end
    while s > 0 and not text[s - 1].isspace():
        s -= 1
    while e < len(text) and not text[e].isspace():
        e += 1
    if e - s > _MAX_WORD:  # no spaces to stop at (CJK, a long path): word characters only
        s, e = start, end
        while s > 0 and (text[s - 1].isalnum() or text[s - 1] in "-_"):
            s -= 1
        while e < len(text) and (text[e].isalnum() or text[e] in "-_"):
            e += 1
    while e > max(s, end) and text[e - 1] in _TRIM:
        e -= 1
    while s < min(e, start) and text[s] in _TRIM_START:
        s += 1
    return s, e


def _merge(ranges: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """Sorted ranges joined when only a few spaces or one separator lie between them."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out:
            gap = text[out[-1][1] : start]
            if start <= out[-1][1] or (len(gap) <= 2 and gap.strip(" :/-.,T") == "" and gap):
                out[-1] = (out[-1][0], max(end, out[-1][1]))
                continue
        out.append((start, end))
    return out


def _touching_index(tok: Tokens, gap: int) -> tuple[int, int]:
    if gap > 0 and tok.words[gap - 1].strip():
        return gap - 1, gap
    if gap < len(tok.words) and tok.words[gap].strip():
        return gap, gap + 1
    return gap, gap


def _touching(tok: Tokens, gap: int) -> tuple[int, int]:
    return tok.chars(*_touching_index(tok, gap))


def varying_spans(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """For each text, the character ranges that vary between the versions given.

    Versions are grouped with the first earlier version they align with; within a group, a
    position varies when any version differs there from the group's first, and every version
    gets the ranges at those positions (so a value that two versions happen to share is still
    marked in both). A text alone in its group has no varying spans.
    """
    tokens = [Tokens.of(t) for t in texts]
    leaders: list[int] = []
    group_of: list[int] = []
    ops_of: list[list[tuple[str, int, int, int, int]] | None] = []
    unique: dict[str, int] = {}
    for index, tok in enumerate(tokens):
        if tok.text in unique:  # an identical version: same group, same alignment
            first = unique[tok.text]
            group_of.append(group_of[first])
            ops_of.append(ops_of[first])
            continue
        unique[tok.text] = index
        placed = False
        for leader in leaders:
            ops = _opcodes(tokens[leader], tok)
            if ops is not None:
                group_of.append(leader)
                ops_of.append(ops)
                placed = True
                break
        if not placed:
            leaders.append(index)
            group_of.append(index)
            ops_of.append(None)
    # Positions of each leader that vary in its group, as leader token flags.
    varies: dict[int, list[bool]] = {lead: [False] * len(tokens[lead].words) for lead in leaders}
    for index, ops in enumerate(ops_of):
        if ops is None:
            continue
        flags = varies[group_of[index]]
        for tag, i1, i2, _, _ in ops:
            if tag == "equal":
                continue
            if i1 == i2:  # inserted there: the leader's word that touches the gap
                i1, i2 = _touching_index(tokens[group_of[index]], i1)
            for i in range(i1, min(i2, len(flags))):
                flags[i] = True
    out: list[list[tuple[int, int]]] = []
    for index, tok in enumerate(tokens):
        lead = group_of[index]
        flags = varies[lead]
        ops = ops_of[index]
        raw: list[tuple[int, int]] = []
        if ops is None:  # a leader: its own flags
            raw = [tok.chars(i, i + 1) for i, flag in enumerate(flags) if flag]
        else:
            for tag, i1, i2, j1, j2 in ops:
                if tag != "equal":
                    if j2 > j1:
                        raw.append(tok.chars(j1, j2))
                    else:  # deleted here: the word that touches the gap
                        raw.append(_touching(tok, j1))
                    continue
                raw += [tok.chars(j1 + k, j1 + k + 1) for k in range(i2 - i1) if flags[i1 + k]]
        widened = [_widen(tok.text, s, e) for s, e in raw if tok.text[s:e].strip()]
        out.append([r for r in _merge(widened, tok.text) if r[1] > r[0]])
    return out
