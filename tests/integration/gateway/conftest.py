"""Fixtures for gateway tests; the helpers themselves live in ``gateway_testkit``."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def chat_body() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
