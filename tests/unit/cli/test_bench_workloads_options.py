"""`ttft bench` options for durations, ramps, repeats, saturation stops and sessions: what they
turn into, and a clear error (never a traceback) for combinations that cannot work."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli
from ttft.core.errors import TtftError
from ttft.core.target_options import TargetOptions
from ttft.load.bench_options import BenchOptions
from ttft.load.bench_workload import workload_spec as _spec
from ttft.workload.arrival import ClosedLoop, OpenLoop

BASE = BenchOptions(
    target=TargetOptions(None, None, None, None, None),
    api="chat", profile=None, buckets="64", n_requests=4, concurrency=None, rates=(),
    burstiness=1.0, max_in_flight=None, max_tokens=1, warmup=0, shared_prefix=None,
    prompt_file=None, sharegpt=None, tokenizer_path=None, slo_texts=(), timeout_s=60.0,
    out_dir=None, cold_samples=None, seed="ttft",
)  # fmt: skip


def _with(**changes: object) -> BenchOptions:
    return dataclasses.replace(BASE, **changes)  # type: ignore[arg-type]


def test_a_rate_ramp_becomes_one_timed_open_loop_cell_per_stage() -> None:
    spec = _spec(_with(ramp="rate=1..4:stages=4,stage=10s"), "quick")
    assert [a.rate for a in spec.arrivals if isinstance(a, OpenLoop)] == [1, 2, 3, 4]
    assert spec.duration_s == 10.0


def test_a_concurrency_ramp_takes_its_stage_length_from_duration() -> None:
    spec = _spec(_with(ramp="concurrency=1..3", duration="5s"), "quick")
    assert spec.arrivals == [ClosedLoop(1), ClosedLoop(2), ClosedLoop(3)]
    assert spec.duration_s == 5.0


def test_repeats_and_the_saturation_stop_reach_the_spec() -> None:
    spec = _spec(_with(repeat=3, stop_on_saturation=True, rates=("2",)), "quick")
    assert spec.repeat == 3 and spec.stop_on_saturation


def test_sessions_become_a_sessions_spec_with_their_load() -> None:
    spec = _spec(_with(sessions=4, turns=3, think_time="1-2", turn_tokens="100:20"), "quick")
    assert spec.sessions is not None
    assert (spec.sessions.sessions, spec.sessions.turns) == (4, 3)
    assert spec.sessions.think_s == (1.0, 2.0)
    assert (spec.sessions.first_tokens, spec.sessions.next_tokens) == (100, 20)
    assert spec.arrivals == [ClosedLoop(4)] and spec.buckets == [100]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"ramp": "rate=1..4:step=1", "rates": ("2",)}, "sets the load levels itself"),
        ({"ramp": "rate=1..4:step=1"}, "stages need a length"),
        ({"ramp": "rate=1..4:step=1,stage=5s", "duration": "9s"}, "disagree"),
        ({"duration": "soon"}, "not a duration"),
        ({"repeat": 0}, "--repeat must be at least 1"),
        ({"sessions": 0}, "--sessions must be at least 1"),
        ({"sessions": 2, "api": "completions"}, "chat history"),
        ({"sessions": 2, "rates": ("2",)}, "load is its sessions"),
        ({"sessions": 2, "turns": 0}, "--turns"),
        ({"sessions": 2, "turn_tokens": "64"}, "FIRST:NEXT"),
        ({"conversations": Path("/nonexistent.jsonl")}, "file not found"),
    ],
)
def test_combinations_that_cannot_work_are_clear_errors(
    changes: dict[str, object], words: str
) -> None:
    with pytest.raises(TtftError) as info:
        _spec(_with(**changes), "quick")
    assert words in str(info.value)


def test_the_command_line_stops_on_a_bad_ramp_with_the_users_error_before_any_request() -> None:
    """A TtftError (which ``ttft``'s entry point prints as one line, exit code 2), raised before
    the target is touched (the URL here leads nowhere)."""
    result = CliRunner().invoke(cli, ["bench", "--ramp", "rate=8..1:step=1", "--url", "http://x"])
    assert isinstance(result.exception, TtftError)
    assert "goes up" in str(result.exception)
