"""Errors a user can act on: every one names the problem and the fix.

The CLI prints these as one or two lines and exits non-zero; anything else is a bug and is
reported with a traceback.
"""

from __future__ import annotations


class TtftError(Exception):
    """A problem with the user's input or environment, with the change that fixes it."""

    def __init__(self, problem: str, fix: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        return self.problem if not self.fix else f"{self.problem}\n  fix: {self.fix}"


class MissingExtraError(TtftError):
    """An optional dependency is not installed."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(
            f"{what} needs the optional '{extra}' extra, which is not installed.",
            f"pip install 'ttft[{extra}]'",
        )
        self.extra = extra
