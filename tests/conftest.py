"""Shared fixtures: one real embedded llama-server per test session, started once.

The e2e tests must run, not skip: if the embedded extra is missing, the fixture fails loudly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded


@pytest.fixture(scope="session")
def embedded_server() -> Iterator[RunningEngine]:
    """The real llama-server with Gemma 3 270M, 4 slots, metrics on, shared by the session.

    Tests that need their own engine settings (one slot, another context size) launch their own
    with ``launch_embedded(...)`` instead of changing this one.
    """
    engine = launch_embedded(ctx_size=8192, parallel=4)
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def engine_threads() -> int:
    """Threads to give an extra engine a test starts, so two engines don't fight for 2 cores."""
    return max(1, (os.cpu_count() or 2) // 2)
