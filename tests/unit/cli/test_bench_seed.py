"""`ttft bench` without --seed picks a new prompt seed per run: two runs against the same engine
must not send the same prompts, or the second times the prefix cache the first filled. A given
--seed sends the same prompts again."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

import ttft.cli.bench_run as bench_run
from ttft.cli.bench import bench
from ttft.load.bench_options import BenchOptions


@pytest.fixture
def seeds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    chosen: list[str] = []

    def execute(options: BenchOptions, *_: Any, **__: Any) -> None:
        chosen.append(options.seed)

    monkeypatch.setattr(bench_run, "execute", execute)
    return chosen


def test_each_run_gets_its_own_seed_unless_one_is_given(seeds: list[str]) -> None:
    runner = CliRunner()
    for args in ([], [], ["--seed", "mine"], ["--seed", "mine"]):
        result = runner.invoke(bench, ["--url", "http://127.0.0.1:9", *args])
        assert result.exit_code == 0, result.output
    first, second, given, again = seeds
    assert first != second and first.startswith("ttft-") and second.startswith("ttft-")
    assert given == again == "mine"
