from __future__ import annotations

from pathlib import Path

from tune_testkit import FakeRunner

from ttft.core.changes import Change
from ttft.core.slo import parse_slos
from ttft.tune.ab import Arm, arms, order_changes, run_ab
from ttft.tune.attribution import KEPT, attribution, overlap_note, total_cut
from ttft.tune.experiment import ExperimentDir
from ttft.tune.space import Config
from ttft.tune.tables import AB_COLUMNS, ab_json, ab_rows, to_markdown
from ttft.tune.workload import TuneWorkload

BASELINE = Change("baseline", {"-np": "1"})
MOVE = Change("timestamp moved last", transforms=("move-dynamic",))
SLOTS = Change("-np 4", {"-np": "4"})
WORKLOAD = TuneWorkload(shape="timestamp-first", requests=8)


def service(config: Config, workload: TuneWorkload) -> float:
    # A prefix-cache hit turns a long prefill into a short one.
    return 100.0 if "move-dynamic" in workload.transforms else 1300.0


def test_changes_run_cheapest_first_unless_the_order_is_fixed() -> None:
    assert order_changes([SLOTS, MOVE], fixed=False) == [MOVE, SLOTS]
    assert order_changes([SLOTS, MOVE], fixed=True) == [SLOTS, MOVE]


def test_arms_are_the_steps_then_each_later_change_alone() -> None:
    plan = arms(BASELINE, [MOVE, SLOTS])
    assert [a.name for a in plan] == ["step 0", "step 1", "step 2", "alone 2"]
    assert plan[2].flags == {"-np": "4"} and plan[2].transforms == ("move-dynamic",)
    assert plan[3].flags == {"-np": "4"} and plan[3].transforms == ()


def test_repeats_interleave_and_the_table_attributes_each_gain(tmp_path: Path) -> None:
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=False)
    order: list[tuple[str, int]] = []

    def on_run(n: int, total: int, arm: Arm, repeat: int, result: object) -> None:
        if result is not None:
            order.append((arm.name, repeat))

    by_arm = run_ab(
        BASELINE,
        [MOVE, SLOTS],
        FakeRunner(service),
        exp,
        WORKLOAD,
        parse_slos("ttft:p99<600ms"),
        concurrency=4,
        repeats=2,
        on_run=on_run,
    )
    names = ["step 0", "step 1", "step 2", "alone 2"]
    assert order == [(n, 0) for n in names] + [(n, 1) for n in names]
    rows = attribution(arms(BASELINE, [MOVE, SLOTS]), by_arm)
    assert [r.name for r in rows] == ["step 0", "step 1", "step 2"]
    base, moved, slots = rows
    assert base.ttft is not None and moved.ttft is not None and slots.ttft is not None
    assert moved.vs_previous_ms is not None and moved.vs_previous_ms < 0
    assert slots.vs_previous_ms is not None and slots.vs_previous_ms < 0
    assert moved.significant and slots.significant
    assert [moved.verdict, slots.verdict] == [KEPT, KEPT]
    total = total_cut(rows)
    assert total is not None and total.final_step == "step 2" and total.p50_pct < -77
    assert slots.vs_baseline_ms == slots.ttft.p50 - base.ttft.p50
    # Alone, more slots gain much more on uncached prompts than after the move: overlap.
    assert slots.alone_vs_baseline_ms is not None
    assert slots.alone_vs_baseline_ms < slots.vs_previous_ms
    assert moved.alone_vs_baseline_ms == moved.vs_baseline_ms
    note = overlap_note(rows)
    assert note is not None and "overlapping" in note
    table = ab_rows(rows)
    assert table[1]["ci_apart"] == "yes" and table[2]["alone_vs_baseline_ms"].startswith("-")
    assert "| step | change |" in to_markdown("ab", AB_COLUMNS, table)
    assert ab_json(rows, note, by_arm)["schema"] == "ttft.tune.ab/1"


def test_ab_resumes_without_rerunning_finished_arms(tmp_path: Path) -> None:
    slos = parse_slos("ttft:p99<600ms")
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=False)
    run_ab(BASELINE, [MOVE, SLOTS], FakeRunner(service), exp, WORKLOAD, slos,
           concurrency=4, repeats=2)  # fmt: skip
    again = FakeRunner(service)
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=True)
    run_ab(BASELINE, [MOVE, SLOTS], again, exp, WORKLOAD, slos, concurrency=4, repeats=3)
    assert len(again.opened) == 4  # only the third repeat
