"""How an engine's flag table is written: one line per flag, parsed into ``FlagSpec`` lookups.

Each engine keeps its own table in ``engines/<kind>/flags.py``, with where it came from.

One line per flag: its spellings (the first long one is the canonical name the rules use; names
after ``!`` are the negative forms of a boolean), then its kind:

- ``v`` takes one value, ``n`` one or more values (argparse ``nargs="+"``),
- ``f`` a switch without value, ``b`` a switch with a generated ``--no-`` form (argparse
  ``BooleanOptionalAction``), ``o`` an optional value (llama.cpp ``-fa [on|off|auto]``),

optionally followed by ``removed:REPLACEMENT`` or ``deprecated:REPLACEMENT``.
The tables list the flags people put on serving command lines, not every flag; anything else is
reported as unknown (severity info), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FlagSpec:
    canonical: str  # e.g. "max-num-seqs"
    names: tuple[str, ...]  # positive spellings, with dashes
    negative: tuple[str, ...]  # spellings that set the flag to false
    kind: str  # v, n, f, b, o
    status: str = "current"  # current, deprecated, removed
    replacement: str = ""

    @property
    def takes_value(self) -> bool:
        return self.kind in ("v", "n")


def parse_flag_table(text: str) -> dict[str, FlagSpec]:
    """Parse the one-line-per-flag tables below into a lookup by every spelling."""
    by_name: dict[str, FlagSpec] = {}
    for raw in text.strip().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        status, replacement = "current", ""
        if ":" in words[-1] and words[-1].split(":", 1)[0] in ("removed", "deprecated"):
            status, replacement = words.pop().split(":", 1)
        kind = words.pop()
        pos_part, _, neg_part = " ".join(words).partition("!")
        names = tuple(pos_part.split())
        negative = tuple(neg_part.split())
        if kind == "b" and not negative:
            negative = tuple("--no-" + n[2:] for n in names if n.startswith("--"))
        long_names = [n for n in names if n.startswith("--")]
        canonical = (long_names[0] if long_names else names[0]).lstrip("-")
        spec = FlagSpec(canonical, names, negative, kind, status, replacement.replace("_", " "))
        for name in (*names, *negative):
            by_name[name] = spec
    return by_name
