"""Set and remove flags on an engine's launch command, whatever spelling the command used.

A plan step says ``-np 4``; the user's command may spell it ``--parallel 1`` or ``--parallel=1``.
The engine's flag table (``engines/<kind>/flags.py``) knows every spelling of a flag, so the old
occurrences are found and removed before the new value is appended: the engine then sees the flag
once, and the command stays readable. Flags the table does not know are matched as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ttft.engines.flags import FlagSpec
from ttft.engines.registry import adapter_for


def _spec(flag: str, table: Mapping[str, FlagSpec]) -> FlagSpec | None:
    spec = table.get(flag)
    if spec is None and flag.startswith("--"):
        spec = table.get(flag.replace("_", "-"))  # vLLM's argparse takes --max_num_seqs too
    return spec


def _spelling_key(flag: str, table: Mapping[str, FlagSpec]) -> str:
    spec = _spec(flag, table)
    return spec.canonical if spec is not None else flag


def _takes_value(flag: str, table: Mapping[str, FlagSpec], following: str | None) -> bool:
    """Whether the token after ``flag`` is its value (and goes with it when it is removed)."""
    spec = _spec(flag, table)
    if spec is not None and flag in spec.negative:
        return False
    if spec is not None and spec.kind in ("f", "b"):
        return False
    if following is None:
        return False
    looks_like_value = not following.startswith("-") or _is_number(following)
    if spec is not None and spec.kind in ("v", "n"):
        return True
    return looks_like_value  # optional value (``-fa on``) or a flag the table does not know


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def remove_flags(argv: Sequence[str], flags: Sequence[str], kind: str | None) -> list[str]:
    """``argv`` without every occurrence of ``flags`` (any spelling) and their values."""
    table = adapter_for(kind).flags if kind else {}
    wanted = {_spelling_key(f, table) for f in flags}
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        name, eq, _ = token.partition("=")
        if token.startswith("-") and _spelling_key(name, table) in wanted:
            following = argv[i + 1] if i + 1 < len(argv) else None
            i += 1 if eq or not _takes_value(name, table, following) else 2
            continue
        out.append(token)
        i += 1
    return out


def set_flags(
    argv: Sequence[str],
    flags: Mapping[str, str],
    unset: Sequence[str] = (),
    *,
    kind: str | None,
) -> list[str]:
    """``argv`` with ``unset`` removed and each of ``flags`` set (``""``: a bare switch)."""
    out = remove_flags(argv, [*unset, *flags], kind)
    for flag, value in flags.items():
        out.extend([flag] if value == "" else [flag, value])
    return out


def flag_value(argv: Sequence[str], flag: str, kind: str | None) -> str | None:
    """The value of the last occurrence of ``flag`` (any spelling); ``""`` for a bare switch."""
    table = adapter_for(kind).flags if kind else {}
    key = _spelling_key(flag, table)
    found: str | None = None
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if not token.startswith("-") or _spelling_key(name, table) != key:
            continue
        following = argv[i + 1] if i + 1 < len(argv) else None
        if eq:
            found = value
        elif _takes_value(name, table, following):
            found = following
        else:
            found = ""
    return found
