"""What a parsed engine launch command is: its tokens, its flag occurrences, its environment.

The types the engines' lint rules read (``EngineCommand``, ``Arg``, ``Token``), apart from the
parser that builds them (``engines/cmdline.py``): the parser needs the registry of engines to
know each one's flag table, and the registry imports the engines' rules, so a rule that imported
the parser's module would close an import circle.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ttft.core.findings import Location
from ttft.engines.flags import FlagSpec

COMMAND_LINE = "<command line>"


@dataclass(frozen=True)
class Token:
    text: str
    index: int  # position in the whole command line, 0-based
    line: int | None = None  # line in the source file, when read from one


@dataclass(frozen=True)
class Arg:
    """One flag occurrence; ``spec`` is None for a flag the tables do not know."""

    flag: str  # as written, before any ``=value``
    spec: FlagSpec | None
    value: str | None  # "true"/"false" for switches, the value otherwise
    token: Token

    @property
    def canonical(self) -> str:
        return self.spec.canonical if self.spec else self.flag.lstrip("-")


@dataclass(frozen=True)
class EngineCommand:
    engine: str  # "vllm", "sglang" or "llamacpp"
    tokens: tuple[Token, ...]
    args: tuple[Arg, ...]
    positionals: tuple[Token, ...]
    env: tuple[tuple[str, str], ...]
    source: str = COMMAND_LINE

    def get(self, canonical: str) -> Arg | None:
        """The last occurrence of a flag (argparse and llama.cpp both let the last one win)."""
        found = [a for a in self.args if a.canonical == canonical]
        return found[-1] if found else None

    def value(self, canonical: str) -> str | None:
        arg = self.get(canonical)
        return arg.value if arg else None

    def env_value(self, name: str) -> str | None:
        for key, value in self.env:
            if key == name:
                return value
        return None

    def location(self, token: Token | None = None) -> Location:
        """Where a token is: its line in a file, or its index on a command line."""
        if token is None:
            token = self.tokens[0] if self.tokens else Token("", 0)
        if token.line is not None:
            return Location(self.source, token.line)
        return Location(self.source, offset=token.index, offset_unit="token")

    def text(self) -> str:
        return " ".join(shlex.quote(t.text) for t in self.tokens)
