"""`ttft bench --trace`: options that mean another workload are refused before anything starts,
and --max-tokens caps the trace's own output lengths only when given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.bench import bench
from ttft.core.errors import TtftError
from ttft.core.target_options import TargetOptions
from ttft.load.bench_options import BenchOptions
from ttft.load.bench_trace import trace_spec


def options(trace: Path | None, **changes: object) -> BenchOptions:
    fields: dict[str, object] = dict(
        target=TargetOptions(None, None, None, None, None), api="chat", profile=None,
        buckets=None, n_requests=None, concurrency=None, rates=(), burstiness=1.0,
        max_in_flight=None, max_tokens=1, warmup=1, shared_prefix=None, prompt_file=None,
        sharegpt=None, tokenizer_path=None, slo_texts=(), timeout_s=600.0, out_dir=None,
        cold_samples=None, seed="ttft", trace_path=trace, max_tokens_given=False,
    )  # fmt: skip
    fields.update(changes)
    return BenchOptions(**fields)  # type: ignore[arg-type]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "prompt": "x"}) + "\n")
    return path


def test_no_trace_means_no_replay() -> None:
    assert trace_spec(options(None)) is None


def test_the_trace_keeps_its_own_output_lengths_unless_max_tokens_is_given(trace: Path) -> None:
    spec = trace_spec(options(trace, speed=3.0, block_size=64, trace_limit=5))
    assert spec is not None
    assert (spec.speed, spec.block_size, spec.limit, spec.max_tokens) == (3.0, 64, 5, None)
    capped = trace_spec(options(trace, max_tokens=8, max_tokens_given=True))
    assert capped is not None and capped.max_tokens == 8


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"rates": ("2",)}, "--rate"),
        ({"concurrency": "1,2"}, "--concurrency"),
        ({"n_requests": 10}, "--requests"),
        ({"shared_prefix": "10:2"}, "--shared-prefix"),
        ({"buckets": "128"}, "--buckets"),
    ],
)
def test_options_of_another_workload_are_refused(
    trace: Path, change: dict[str, object], named: str
) -> None:
    with pytest.raises(TtftError, match=named):
        trace_spec(options(trace, **change))


@pytest.mark.parametrize("speed", [0.0, -2.0])
def test_a_speed_of_zero_or_less_is_refused(trace: Path, speed: float) -> None:
    with pytest.raises(TtftError, match="--speed"):
        trace_spec(options(trace, speed=speed))


def test_a_missing_trace_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="trace not found"):
        trace_spec(options(tmp_path / "nope.jsonl"))


def test_the_options_are_on_the_bench_command_with_help() -> None:
    result = CliRunner().invoke(bench, ["--help"])
    assert result.exit_code == 0
    for name in ("--trace", "--trace-format", "--speed", "--block-size", "--trace-limit"):
        assert name in result.output


@pytest.mark.parametrize(("args", "given"), [([], False), (["--max-tokens", "1"], True)])
def test_the_command_tells_a_given_max_tokens_from_its_default(
    trace: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], given: bool
) -> None:
    import ttft.cli.bench_run

    seen: list[BenchOptions] = []
    monkeypatch.setattr(ttft.cli.bench_run, "execute", seen.append)
    result = CliRunner().invoke(bench, ["--trace", str(trace), "--speed", "2", *args])
    assert result.exit_code == 0, result.output
    (opts,) = seen
    assert opts.max_tokens_given is given and opts.speed == 2.0 and opts.trace_path == trace
    spec = trace_spec(opts)
    assert spec is not None and spec.max_tokens == (1 if given else None)
