"""The suite's three folders and what they may use, and one real embedded llama-server.

- ``tests/unit``: pure (no sockets, no subprocesses; ``tests/unit/conftest.py`` enforces it),
- ``tests/integration``: sockets, subprocesses, a real nginx (marker ``integration``),
- ``tests/e2e``: the real engine (marker ``e2e``).
Tests that start nginx carry the ``nginx`` marker; nginx missing is one clear message before any
test runs, not a column of errors. The e2e tests must run, not skip: if the embedded extra is
missing, the engine fixture fails loudly.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_testkit import chromium_binary

from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.testing.nginx import nginx_binary

INTEGRATION = Path(__file__).parent / "integration"


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests start as it would from a terminal.

    A harness that runs the suite in the background (``nohup``, ``cmd &`` in a script) starts
    it with SIGINT ignored, and an ignored signal survives fork and exec: Python then installs
    no KeyboardInterrupt handler in ``ttft bench`` or ``ttft serve``, and a test's SIGINT does
    nothing (a bench with workers ran to its end and exited 0). A handler of our own is reset to
    the default in every child, as a terminal's foreground job has it.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs_nginx = needs_browser = False
    for item in items:
        if INTEGRATION in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
        needs_nginx = needs_nginx or item.get_closest_marker("nginx") is not None
        needs_browser = needs_browser or item.get_closest_marker("browser") is not None
    if needs_nginx and nginx_binary() is None:
        raise pytest.UsageError(
            "the selected tests need nginx, which is not installed: run `apt-get install -y "
            "nginx-light` (scripts/test.sh does), or leave them out with -m 'not nginx'"
        )
    if needs_browser and chromium_binary() is None:
        raise pytest.UsageError(
            "the selected tests need headless Chromium, which is not installed: run `apt-get "
            "install -y chromium` (scripts/test.sh does), or leave them out with -m 'not browser'"
        )


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
