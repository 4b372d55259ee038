"""A real vLLM (its CPU build, from ``scripts/install_vllm.sh``) for the tests in this folder.

Every test here carries the ``vllm`` marker (``pytestmark`` in each file). vLLM takes about a
minute to start on two cores, so the healthy server is shared by the whole session and each
planted fault gets one server per module. The tests must run, not skip: without the install,
the fixture fails with the command that installs it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from vllm_testkit import start

from ttft.engines.vllm.local import RunningVllm, VllmConfig


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningVllm]:
    """A healthy vLLM: the build's own defaults (prefix caching on, its own max-num-seqs)."""
    engine = start(VllmConfig(), tmp_path_factory.mktemp("vllm-healthy"))
    try:
        yield engine
    finally:
        engine.stop()
