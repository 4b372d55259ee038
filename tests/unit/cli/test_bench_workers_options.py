"""--workers/--ray as typed settings: in-process by default, the install command when Ray is
missing, and refused with --cold (one request per engine start has nothing to spread)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from ttft.core.errors import MissingExtraError, TtftError
from ttft.core.target_options import TargetOptions
from ttft.load.bench_options import BenchOptions, worker_setup
from ttft.load.fleet_setup import WorkerSetup


def _options(**changes: Any) -> BenchOptions:
    fields: dict[str, Any] = {
        "target": TargetOptions("http://127.0.0.1:9", None, None, None, None),
        "api": "chat", "profile": None, "buckets": None, "n_requests": None,
        "concurrency": None, "rates": (), "burstiness": 1.0, "max_in_flight": None,
        "max_tokens": 1, "warmup": 1, "shared_prefix": None, "prompt_file": None,
        "sharegpt": None, "tokenizer_path": None, "slo_texts": (), "timeout_s": 60.0,
        "out_dir": None, "cold_samples": None, "seed": "ttft",
    }  # fmt: skip
    fields.update(changes)
    return BenchOptions(**fields)


def test_no_workers_or_one_worker_runs_in_this_process() -> None:
    assert worker_setup(_options()) is None
    assert worker_setup(_options(workers=1)) is None


def test_several_workers_are_child_processes() -> None:
    assert worker_setup(_options(workers=3)) == WorkerSetup(3, None)


def test_ray_without_the_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what a missing package looks like to import
    with pytest.raises(MissingExtraError) as caught:
        worker_setup(_options(ray_address="auto"))
    assert caught.value.fix == "pip install 'ttft[distributed]'"
    assert "--ray" in caught.value.problem


def test_workers_with_cold_mode_are_refused() -> None:
    with pytest.raises(TtftError, match="--cold sends one request per engine start"):
        worker_setup(_options(workers=2, cold_samples=3))


def test_zero_workers_is_an_error_not_a_silent_default() -> None:
    with pytest.raises(TtftError, match="at least 1"):
        WorkerSetup(0)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"duration": "30s"}, "--duration"),
        ({"ramp": "concurrency=1..4:step=1,stage=5s"}, "--ramp"),
        ({"repeat": 3}, "--repeat"),
        ({"stop_on_saturation": True}, "--stop-on-saturation"),
        ({"sessions": 4}, "--sessions"),
    ],
)
def test_workloads_that_decide_live_are_refused_with_workers(
    changes: dict[str, Any], named: str
) -> None:
    """Timed cells, saturation stops, repeats and conversations run in one client process: with
    --workers they are refused by name, never run silently as something else."""
    with pytest.raises(TtftError, match=named):
        worker_setup(_options(workers=2, **changes))
