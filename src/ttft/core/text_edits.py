"""Edits of a configuration file, anchored at a line and checked against the text expected there.

An edit says where (``file``, 1-based ``line``), what it does (``replace`` the directive that
starts on that line, ``delete`` it, or ``insert`` a new line after it) and what it expects to find
(``old``: the directive as written, or the opening line of the block an insert goes into). Edits
written against the original files can be combined freely, so the steps of a plan apply
cumulatively; an edit whose ``old`` text is no longer there is an error naming the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ttft.core.errors import TtftError

Action = Literal["replace", "delete", "insert"]
ACTIONS: tuple[Action, ...] = ("replace", "delete", "insert")


@dataclass(frozen=True)
class TextEdit:
    file: str
    line: int
    action: Action
    old: str
    new: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "line": self.line,
            "action": self.action,
            "old": self.old,
        }
        if self.new:
            out["new"] = self.new
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TextEdit:
        action = data.get("action")
        if action not in ACTIONS:
            raise TtftError(f"edit action {action!r} is not one of {', '.join(ACTIONS)}")
        try:
            return cls(
                file=str(data["file"]),
                line=int(data["line"]),
                action=action,
                old=str(data["old"]),
                new=str(data.get("new", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TtftError(f"not an edit: {exc}") from None
