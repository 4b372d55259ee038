"""`ttft verify quality` through a real vLLM's OpenAI log-probabilities, end to end.

Both sides are the shared healthy vLLM (one CPU vLLM at a time is what two cores hold): the
regression set goes through its ``/v1/completions`` with ``logprobs``, the lengths are counted by
its ``/tokenize``, and its KV size comes from ``vllm:cache_config_info``. A side compared with
itself must agree token for token (KL 0, top-1 100%) and pass: anything else is a parsing or
alignment bug in the OpenAI path, which until now met only scripted servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ttft.engines.vllm.local import RunningVllm

pytestmark = pytest.mark.vllm

SRC = str(Path(__file__).parents[3] / "src")


def test_vllm_against_itself_passes_with_zero_divergence_from_its_logprobs(
    vllm_server: RunningVllm,
) -> None:
    url = vllm_server.base_url
    argv = [
        sys.executable, "-c", "from ttft.cli.main import main; main()",
        "verify", "quality", "--baseline", url, "--candidate", url,
        "--lengths", "256", "--samples", "2", "--tokens", "8", "--top-k", "5",
        "--format", "json",
    ]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": SRC}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "pass", report
    (row,) = report["lengths"]
    assert row["length"] == 256 and row["samples"] == 2
    # The same engine, greedy, the same prompts: the OpenAI top-k shapes were read and aligned.
    assert row["top1_agreement"] == 1.0, row
    assert row["mean_kl"] is not None and row["mean_kl"] < 1e-3, row
    assert row["identical_share"] == 1.0, row
    # vLLM reports its KV cache size in vllm:cache_config_info.
    assert report["kv_mib"]["baseline"] is not None and report["kv_mib"]["baseline"] > 0, report
