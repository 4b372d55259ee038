"""Run-to-run spread of repeats, and per-turn medians of multi-turn runs, from records."""

from __future__ import annotations

from ttft.core.records import RequestRecord
from ttft.core.repeats import run_spread
from ttft.core.summary import BenchSummary, summarize_run
from ttft.core.turns import turn_rows

MS = 1_000_000


def _record(i: int, ttft_ms: float, **fields: object) -> RequestRecord:
    r = RequestRecord(
        i, cell="c", sent_ns=0, first_content_ns=int(ttft_ms * MS), done_ns=int(ttft_ms * MS)
    )
    for name, value in fields.items():
        setattr(r, name, value)
    return r


def test_the_spread_is_over_per_run_p50s_with_each_runs_own_interval() -> None:
    records: list[RequestRecord] = []
    for repeat, base in enumerate((100.0, 130.0, 110.0)):
        records += [_record(len(records), base + k, repeat=repeat) for k in range(9)]
    spread = run_spread(records)
    assert spread is not None
    assert [run.p50 / MS for run in spread.runs] == [104.0, 134.0, 114.0]
    assert spread.median_p50 / MS == 114.0
    assert (spread.min_p50 / MS, spread.max_p50 / MS) == (104.0, 134.0)
    assert spread.ci.low <= spread.median_p50 <= spread.ci.high
    assert spread.runs[0].p50_ci.high / MS <= 108.0  # the within-run CI is the run's own


def test_no_spread_without_repeats_and_the_summary_round_trips_it() -> None:
    assert run_spread([_record(i, 100.0 + i) for i in range(5)]) is None
    records = [_record(i, 100.0 + i % 3 + 20 * (i // 5), repeat=i // 5) for i in range(15)]
    summary = summarize_run(records)
    assert summary.cells[0].repeats is not None
    again = BenchSummary.from_dict(summary.to_dict())
    assert again.cells[0].repeats == summary.cells[0].repeats
    assert again.cells[0].saturation == summary.cells[0].saturation


def test_turn_rows_show_the_cache_and_the_cost_per_new_token() -> None:
    records = [
        _record(0, 700.0, turn=1, session=0, prompt_tokens=280, cached_tokens=0),
        _record(1, 710.0, turn=1, session=1, prompt_tokens=280, cached_tokens=0),
        _record(2, 200.0, turn=2, session=0, prompt_tokens=360, cached_tokens=275),
        _record(3, 210.0, turn=2, session=1, prompt_tokens=360, cached_tokens=275,
                server_timings={"prompt_n": 85.0, "cache_n": 275.0}),
    ]  # fmt: skip
    rows = turn_rows(records)
    assert [row.turn for row in rows] == [1, 2]
    first, second = rows
    assert first.cached_tokens_p50 == 0 and first.new_tokens_p50 == 280
    assert second.cached_tokens_p50 == 275 and second.new_tokens_p50 == 85
    assert second.ns_per_prompt_token_p50 is not None and first.ns_per_prompt_token_p50 is not None
    assert second.ns_per_prompt_token_p50 < first.ns_per_prompt_token_p50
    assert second.ns_per_new_token_p50 == (200 * MS / 85 + 210 * MS / 85) / 2
