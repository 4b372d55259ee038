"""simulate/sweep: the grid's order, each point's answer and the JSON it makes, without the CLI."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.simulate.model import Calibration, CostModel, EngineSettings, FitReport
from ttft.simulate.sweep import (
    Grid,
    Sweep,
    base_workload,
    check_question,
    int_axis,
    policy_axis,
    rate_axis,
)

CAL = Calibration(
    CostModel(step_base_s=0.01, prefill_token_s=1 / 440, decode_seq_s=0.02, overhead_s=0.02),
    EngineSettings(slots=4, ctx_per_slot=2048),
    FitReport(10, 0.99, 0.05, 0.1),
    {"embedded": False},
)


def test_axes_parse_lists_and_keep_the_calibrations_setting_when_absent() -> None:
    assert int_axis(None, "--slots") == [None] and int_axis("2,4", "--slots") == [2, 4]
    assert rate_axis("0.5,1") == [0.5, 1.0]
    assert policy_axis("round-robin,least-loaded") == ["round-robin", "least-loaded"]
    for bad in (lambda: int_axis("0", "--slots"), lambda: rate_axis("x"), lambda: policy_axis("x")):
        with pytest.raises(TtftError):
            bad()


def test_the_rate_turns_fastest_and_no_replica_count_means_one() -> None:
    grid = Grid(replicas=[None], slots=[2, 4], rates=[0.5, 1.0])
    shown = [(c.replicas, c.slots, r) for c, r in grid.points()]
    assert shown == [(1, 2, 0.5), (1, 2, 1.0), (1, 4, 0.5), (1, 4, 1.0)]


def test_a_point_is_predicted_once_per_seed_and_judged_against_the_slo() -> None:
    slos = parse_slos(["ttft:p99<1ms"])
    base = base_workload(None, 30, 200, 8, 0, 1)
    sweep = Sweep(CAL, base, Grid(rates=[0.5]), slos, runs=2)
    (point,) = sweep.points()
    assert point.requests(0) is point.requests(0)  # drawn once
    result = sweep.answer(point)
    assert result.prediction is not None and result.missed  # nothing answers in 1 ms
    doc = sweep.document("cal.json", [result])
    assert doc["points"][0]["rate"] == 0.5 and "validation" not in doc["points"][0]


def test_the_fewest_replicas_search_reports_every_count_tried() -> None:
    slos = parse_slos(["ttft:p95<60s"])
    sweep = Sweep(CAL, base_workload(None, 30, 200, 8, 0, 1), Grid(rates=[0.5]), slos, True, runs=2)
    (result,) = [sweep.answer(p) for p in sweep.points()]
    assert result.fewest == 1 and not result.missed
    assert result.to_dict()["fewest_replicas"] == 1 and len(result.to_dict()["tried"]) == 1


def test_bad_questions_are_refused_before_any_point() -> None:
    with pytest.raises(TtftError, match="needs an SLO"):
        check_question((), True)
    with pytest.raises(TtftError, match="--shared-prefix"):
        base_workload(None, 30, 200, 8, 300, 1)
    with pytest.raises(TtftError, match="no workload"):
        next(Sweep(CAL, base_workload(None, 30, 200, 8, 0, 1), Grid()).points())
