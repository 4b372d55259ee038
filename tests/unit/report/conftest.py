"""Synthetic bench summaries for the renderer tests (no server, no randomness beyond a seed)."""

from __future__ import annotations

import random

import pytest

from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.summary import BenchSummary, summarize_run

MS = 1_000_000


def make_run(median_ms: float, seed: int, label: str) -> BenchSummary:
    """Two cells (one with a pipe in its label), warm-up, cold and failed requests, two SLOs."""
    rng = random.Random(seed)
    records = []
    for cell in ("bucket=512 c=1", "bucket=2k|c=8"):
        for i in range(60):
            phase = "warmup" if i == 0 else "cold" if i < 3 else "warm"
            sent = i * 200 * MS
            ttft = int(rng.lognormvariate(0, 0.2) * median_ms * MS)
            chunks = [sent + ttft + k * 20 * MS for k in range(8)]
            failed = i % 29 == 5
            records.append(
                RequestRecord(
                    index=i,
                    cell=cell,
                    phase=phase,
                    scheduled_ns=sent,
                    sent_ns=sent,
                    headers_ns=sent + MS,
                    first_content_ns=None if failed else sent + ttft,
                    chunk_ns=chunks,
                    done_ns=chunks[-1] + MS,
                    prompt_tokens=512,
                    completion_tokens=8,
                    error=ErrorInfo("timeout", "read timeout") if failed else None,
                )
            )
    return summarize_run(
        records,
        slos=parse_slos("ttft:p99<350ms,tpot:p95<50ms"),
        meta={"label": label},
        resamples=300,
    )


@pytest.fixture(scope="module")
def summary() -> BenchSummary:
    return make_run(300, 1, "base")


@pytest.fixture(scope="module")
def faster() -> BenchSummary:
    return make_run(200, 2, "tuned")
