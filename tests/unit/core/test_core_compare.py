"""Comparing two bench summaries: deltas, ratios and whether the CIs say the change is real."""

from __future__ import annotations

import json
import random

import pytest

from ttft.core.compare import (
    LIKELY_REAL,
    WITHIN_NOISE,
    Comparison,
    StatComparison,
    compare,
    compare_json,
)
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.summary import BenchSummary, summarize_run

MS = 1_000_000


def _run(median_ms: float, seed: int, cells: tuple[str, ...] = ("c=1",)) -> BenchSummary:
    rng = random.Random(seed)
    records = []
    for cell in cells:
        for i in range(200):
            ttft = int(rng.lognormvariate(0, 0.2) * median_ms * MS)
            records.append(
                RequestRecord(
                    index=i,
                    cell=cell,
                    sent_ns=i * 100 * MS,
                    first_content_ns=i * 100 * MS + ttft,
                    chunk_ns=[i * 100 * MS + ttft],
                    done_ns=i * 100 * MS + ttft + MS,
                    prompt_tokens=512,
                )
            )
    return summarize_run(records, resamples=500)


def _row(comparison: Comparison, metric: str, stat: str) -> StatComparison:
    rows = [r for r in comparison.rows if (r.metric, r.stat) == (metric, stat)]
    assert len(rows) == 1
    return rows[0]


def test_a_large_shift_is_likely_real_with_delta_and_ratio() -> None:
    result = compare(_run(300, 1), _run(200, 2))
    row = _row(result, "ttft", "p50")
    assert row.verdict == LIKELY_REAL
    assert row.delta == pytest.approx(row.b - row.a)
    assert row.delta < -80 * MS
    assert row.ratio == pytest.approx(2 / 3, rel=0.1)
    assert row.improved is True
    assert {r.stat for r in result.rows} == {"p50", "p95"}


def test_the_same_distribution_twice_is_within_noise() -> None:
    result = compare(_run(300, 1), _run(300, 2))
    for stat in ("p50", "p95"):
        row = _row(result, "ttft", stat)
        assert row.verdict == WITHIN_NOISE
        assert row.improved is None


def test_token_metrics_are_compared_without_a_better_direction() -> None:
    row = _row(compare(_run(300, 1), _run(200, 2)), "prompt_tokens", "p50")
    assert row.ratio == 1.0 and row.improved is None


def test_cells_only_on_one_side_are_listed_not_compared() -> None:
    result = compare(_run(300, 1, ("c=1", "c=4")), _run(300, 2, ("c=1", "c=8")))
    assert {r.cell for r in result.rows} == {"c=1"}
    assert result.only_in_a == [("c=4", "warm")]
    assert result.only_in_b == [("c=8", "warm")]


def test_metrics_option_limits_and_orders_rows() -> None:
    result = compare(_run(300, 1), _run(200, 2), metrics=["e2e", "ttft", "absent"])
    assert [r.metric for r in result.rows] == ["e2e", "e2e", "ttft", "ttft"]


def test_compare_json_reads_summary_documents_and_labels() -> None:
    a = json.loads(json.dumps(_run(300, 1).to_dict()))
    b = json.loads(json.dumps(_run(200, 2).to_dict()))
    result = compare_json(a, b, a_label="before", b_label="after")
    assert (result.a_label, result.b_label) == ("before", "after")
    assert _row(result, "ttft", "p50").verdict == LIKELY_REAL
    with pytest.raises(TtftError):
        compare_json({"schema": "x"}, b)
