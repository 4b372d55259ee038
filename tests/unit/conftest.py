"""Unit tests are pure: no network connections, no listening sockets, no subprocesses.

A test that needs one belongs in ``tests/integration`` (or ``tests/e2e`` for the engine); this
guard makes that a clear failure instead of a habit that creeps back.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

_WHY = "unit tests are pure: move this test to tests/integration (it uses {what})"


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(_WHY.format(what=what))

    return refuse


@pytest.fixture(autouse=True)
def _pure(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, _refuse(f"socket.{name}"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("a subprocess"))
    yield
