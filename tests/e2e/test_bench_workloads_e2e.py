"""Workloads beyond a fixed count, on the real embedded llama-server: multi-turn sessions, timed
cells and ramps, repeats, saturation. Each is bounded to well under a minute on 2 cores."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.load.bench import run_cells
from ttft.load.cells import expand_cells
from ttft.load.runner import max_overlap
from ttft.load.session import run_session
from ttft.load.sink import JsonlSink, read_results
from ttft.workload.arrival import ClosedLoop
from ttft.workload.conversations import SessionsSpec
from ttft.workload.spec import WorkloadSpec

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def engine(engine_threads: int) -> Iterator[RunningEngine]:
    """An engine of our own with a thread count that leaves the other core free: llama.cpp's
    threads spin at their barriers, so an engine that competes for every core with the test's
    own client (and anything else on the machine) slows down many times, not by half."""
    running = launch_embedded(ctx_size=8192, parallel=4, threads=engine_threads)
    try:
        yield running
    finally:
        running.stop()


def _target(engine: RunningEngine) -> Target:
    return Target(engine.base_url, engine.model_name, engine.metrics_url, "llamacpp")


def _ttft(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ttft.cli.main import main; main()", *args]


def test_multi_turn_sessions_send_the_real_answers_and_the_cache_carries_the_history(
    engine: RunningEngine, tmp_path: Path
) -> None:
    """Two sessions of three turns: each turn resends the history with the model's real
    answer; from turn 2 the server reuses it (cached tokens cover the previous turn's prompt,
    less a few), so it computes only the new tokens."""
    target = _target(engine)
    sessions = SessionsSpec(sessions=2, turns=3, think_s=(0.1, 0.3), first_tokens=240)
    spec = WorkloadSpec(buckets=(240,), max_tokens=12, warmup=0, sessions=sessions)
    result = run_session(target, spec, ServerTokenizer(target), tmp_path / "records.jsonl")
    records = result.records
    assert len(records) == 6 and all(r.ok for r in records)
    assert [c.cell for c in result.summary.cells] == [f"sessions=2 turn {t}" for t in (1, 2, 3)]
    by_key = {(r.session, r.turn): r for r in records}
    for (session, turn), record in by_key.items():
        # A real answer: at most max_tokens, fewer when the model ends its turn (7 once in CI).
        answer = record.completion_tokens
        assert record.prompt_tokens is not None and answer is not None and 1 <= answer <= 12
        if turn == 1:
            assert 240 < record.prompt_tokens <= 240 + 32  # content + the chat template's tokens
            continue
        before = by_key[(session, turn - 1)]
        assert before.prompt_tokens is not None and before.completion_tokens is not None
        # The history grew by the real answer and the new 32-token user turn (the template's
        # tokens around both leave room for the answer's text to count a token less re-read)...
        assert record.prompt_tokens > before.prompt_tokens + before.completion_tokens + 32
        # ...and the server found all of it but the last few tokens in its cache.
        cached = record.cached_tokens or 0
        assert cached >= before.prompt_tokens - 16, (turn, cached, before.prompt_tokens)
    rows = {row.turn: row for row in result.summary.turns}
    assert rows[1].cached_tokens_p50 == 0
    for row in (rows[2], rows[3]):
        assert row.new_tokens_p50 is not None and row.prompt_tokens_p50 is not None
        assert row.new_tokens_p50 < 0.5 * row.prompt_tokens_p50
    saved = json.loads(json.dumps(result.summary.to_dict()))
    assert [row["turn"] for row in saved["turns"]] == [1, 2, 3]


def _later_turn_ttfts(records: list[RequestRecord]) -> list[float]:
    return [
        float((r.first_content_ns or 0) - (r.sent_ns or 0)) for r in records if (r.turn or 0) >= 2
    ]


def test_later_turns_are_fast_because_of_the_cache_not_because_they_are_short(
    engine: RunningEngine, tmp_path: Path
) -> None:
    """The same sessions twice, the second with llama-server's prompt cache off for every
    request (``cache_prompt: false``): turns 2+ resend a history of ~300-400 tokens, which the
    cache turns into ~80 new ones. With the cache they take well under 60% of the time they
    take without it; pooled over the later turns so that one slow request (a busy machine, a
    graph rebuild in the engine) does not decide."""
    target = _target(engine)
    sessions = SessionsSpec(sessions=2, turns=4, think_s=(0.1, 0.2), first_tokens=240)
    spec = WorkloadSpec(buckets=(240,), max_tokens=8, sessions=sessions, seed="cache-ab")
    cells, _ = expand_cells(spec, ServerTokenizer(target))
    runs = []
    for extra in ({}, {"cache_prompt": False}):
        with JsonlSink(tmp_path / f"records-{len(runs)}.jsonl") as sink:
            bench = asyncio.run(run_cells(target, cells, sink, extra_body=extra))
        records = [r for cell in bench.cells for r in cell.records]
        assert len(records) == 8 and all(r.ok for r in records)
        runs.append(records)
    cached, uncached = runs
    assert all((r.cached_tokens or 0) > 100 for r in cached if (r.turn or 0) >= 2)
    assert all((r.cached_tokens or 0) < 16 for r in uncached)
    with_cache = statistics.median(_later_turn_ttfts(cached))
    without = statistics.median(_later_turn_ttfts(uncached))
    assert with_cache < 0.6 * without, (with_cache / 1e6, without / 1e6)


def test_a_conversations_file_replays_its_user_turns_with_the_models_answers(
    engine: RunningEngine, tmp_path: Path
) -> None:
    path = tmp_path / "conversations.jsonl"
    lines = [
        {
            "messages": [
                {"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "Name a river in France."},
                {"role": "assistant", "content": "(replaced by the model's answer)"},
                {"role": "user", "content": "And one in Spain?"},
            ]
        }
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    target = _target(engine)
    sessions = SessionsSpec(think_s=(0.0, 0.0), conversations_file=path)
    spec = WorkloadSpec(buckets=(16,), max_tokens=8, sessions=sessions)
    result = run_session(target, spec, ServerTokenizer(target), tmp_path / "records.jsonl")
    assert [r.turn for r in result.records] == [1, 2] and all(r.ok for r in result.records)
    assert (result.records[1].cached_tokens or 0) > 0


def test_a_concurrency_ramp_runs_one_timed_cell_per_stage(
    engine: RunningEngine, tmp_path: Path
) -> None:
    """--ramp concurrency=1..2 with 4 s stages: two cells, each sending until its 4 s are up
    (the requests in flight then finish and count), at its own concurrency."""
    out = tmp_path / "ramp"
    done = subprocess.run(
        _ttft(
            "bench", "--url", engine.base_url, "--buckets", "48", "--max-tokens", "1",
            "--ramp", "concurrency=1..2:step=1,stage=4s", "--warmup", "0", "--out", str(out),
        ),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert [c["cell"] for c in summary["cells"]] == ["48 tok c=1", "48 tok c=2"]
    assert summary["meta"]["duration_s"] == 4.0
    records = read_results(out / "records.jsonl").records
    for level, cell in enumerate(("48 tok c=1", "48 tok c=2"), start=1):
        mine = [r for r in records if r.cell == cell]
        starts = [r.scheduled_ns or 0 for r in mine]
        assert len(mine) >= 2 and all(r.ok for r in mine)
        assert max(starts) - min(starts) < 4e9  # nothing started after the stage's end
        assert max_overlap(mine) == level


def test_repeats_report_the_run_to_run_spread_with_its_interval(
    engine: RunningEngine, tmp_path: Path
) -> None:
    """Three interleaved runs of one cell, each with its own prompts (no repeat is served from
    the previous one's cache): per-run p50s differ, their spread and CI are reported."""
    target = _target(engine)
    spec = WorkloadSpec(
        buckets=(96,), requests=5, max_tokens=1, repeat=3, arrivals=[ClosedLoop(1), ClosedLoop(2)]
    )
    result = run_session(target, spec, ServerTokenizer(target), tmp_path / "records.jsonl")
    order = [(r.cell, r.repeat) for r in sorted(result.records, key=lambda r: r.index)]
    firsts = [key for i, key in enumerate(order) if i == 0 or order[i - 1] != key]
    assert firsts == [(c, n) for n in range(3) for c in ("96 tok c=1", "96 tok c=2")]
    assert all((r.cached_tokens or 0) <= 2 for r in result.records)  # no cross-repeat cache hit
    for cell in result.summary.cells:
        spread = cell.repeats
        assert spread is not None and len(spread.runs) == 3
        assert spread.max_p50 > spread.min_p50  # real runs differ
        assert spread.ci.low <= spread.median_p50 <= spread.ci.high
        assert all(run.p50_ci.low <= run.p50 <= run.p50_ci.high for run in spread.runs)
    assert result.summary.meta["repeat_seeds"] == ["ttft", "ttft/repeat2", "ttft/repeat3"]


def test_a_load_beyond_capacity_is_marked_saturated_and_a_light_one_is_not(
    engine: RunningEngine, tmp_path: Path
) -> None:
    """64-token prompts on one engine thread: 1 request/s holds; 20/s is several times what
    the engine serves. With --stop-on-saturation the 20/s cell stops early (in-flight requests
    recorded as cancelled), the 40/s level is skipped, and the report names the last load that
    held. The light cell runs 18 s, with nearly regular arrivals (gamma shape 20), so that its
    verdict rests on enough requests."""
    out = tmp_path / "sat"
    done = subprocess.run(
        _ttft(
            "bench", "--url", engine.base_url, "--buckets", "64", "--max-tokens", "1",
            "--rate", "1", "--rate", "20", "--rate", "40", "--burstiness", "20",
            "--duration", "18s", "--stop-on-saturation", "--warmup", "1", "--out", str(out),
        ),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    cells = {c["cell"]: c for c in summary["cells"]}
    assert set(cells) == {"64 tok rate=1/s", "64 tok rate=20/s"}
    light, heavy = (
        cells["64 tok rate=1/s"]["saturation"],
        cells["64 tok rate=20/s"]["saturation"],
    )
    assert not light["saturated"] and "too few" not in light["reason"]
    assert heavy["saturated"] and heavy["slope"] > 0.2
    assert heavy["completions_per_s"] < heavy["arrivals_per_s"]
    records = read_results(out / "records.jsonl").records
    sent = [r for r in records if r.cell == "64 tok rate=20/s"]
    assert len(sent) < 20 * 18 * 0.9  # stopped before the schedule's end
    assert any(r.error is not None and r.error.kind == "cancelled" for r in sent)
    assert cells["64 tok rate=20/s"]["n"] == len(sent)  # cancelled ones counted, not lost
    (overview,) = summary["meta"]["saturation"]
    assert overview["last_held"] == "64 tok rate=1/s"
    assert overview["saturated_at"] == "64 tok rate=20/s"
    assert overview["skipped"] == ["64 tok rate=40/s"]
    assert "SATURATED at this load" in done.stdout and "last load that held" in done.stdout
