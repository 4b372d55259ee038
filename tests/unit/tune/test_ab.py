from __future__ import annotations

from pathlib import Path

import pytest
from tune_testkit import FakeRunner, ManualRunner

from ttft.core.changes import Change
from ttft.core.slo import parse_slos
from ttft.core.text_edits import TextEdit
from ttft.tune.ab import Arm, Paused, arms, confirm_applied, order_changes, paused_at, run_ab
from ttft.tune.attribution import (
    KEPT,
    NO_EFFECT,
    REGRESSED,
    attribution,
    overlap_note,
    total_cut,
)
from ttft.tune.chain import run_chain
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


PROXY = Change(
    "proxy unbuffered",
    edits=(TextEdit("site.conf", 7, "insert", "location / {", "proxy_buffering off;"),),
)


def test_a_change_ttft_cannot_apply_pauses_and_resume_measures_only_what_is_missing(
    tmp_path: Path,
) -> None:
    """The baseline and the request-side step are measured, then the run waits for the person;
    resuming after they applied the change measures the rest and nothing twice."""
    slos = parse_slos("ttft:p99<600ms")
    runner = ManualRunner(FakeRunner(service))
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=False)
    with pytest.raises(Paused) as paused:
        run_chain(Change("baseline"), [MOVE, SLOTS], runner, exp, WORKLOAD, slos,
                  concurrency=4, repeats=2)  # fmt: skip
    assert paused.value.step == 2 and paused.value.change is SLOTS
    assert "not ttft's" in paused.value.reason
    assert len(runner.inner.opened) == 4  # step 0 and step 1, two repeats each
    assert paused_at(exp) == 2
    # The person restarts the engine with -np 4, then resumes.
    runner.applied_by_hand = {"-np": "4"}
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=True)
    assert confirm_applied(exp) == 2 and paused_at(exp) is None
    chain = run_chain(Change("baseline"), [MOVE, SLOTS], runner, exp, WORKLOAD, slos,
                      concurrency=4, repeats=2)  # fmt: skip
    assert len(runner.inner.opened) == 6  # only step 2, twice
    rows = chain.rows
    assert [r.applied_by for r in rows[1:]] == ["ttft", "you"]
    assert rows[2].alone_vs_baseline_ms is None  # a hand-applied change is never measured alone
    assert rows[2].verdict == KEPT


def test_the_proxy_step_of_a_service_ttft_does_not_run_pauses_before_it(tmp_path: Path) -> None:
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=False)
    with pytest.raises(Paused) as paused:
        run_chain(Change("baseline"), [PROXY, MOVE], ManualRunner(FakeRunner(service)), exp,
                  WORKLOAD, (), concurrency=4, repeats=1)  # fmt: skip
    assert paused.value.step == 1 and paused.value.change.edits == PROXY.edits
    assert list(paused.value.measured) and paused.value.measured["step 0"]


def test_a_regressed_step_is_undone_in_the_steps_after_it(tmp_path: Path) -> None:
    """-np 1 -> -ub 8 (slower) -> move-dynamic: the last step builds on the baseline's flags."""
    slow = Change("tiny batches", {"-ub": "8"})

    def timing(config: Config, workload: TuneWorkload) -> float:
        ms = 100.0 if "move-dynamic" in workload.transforms else 1300.0
        return ms * (3 if config.get("-ub") == "8" else 1)

    runner = FakeRunner(timing)
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=False)
    chain = run_chain(BASELINE, [slow, MOVE], runner, exp, WORKLOAD, (),
                      concurrency=4, repeats=2)  # fmt: skip
    assert chain.undone == [1]
    rows = chain.rows
    assert [r.verdict for r in rows[1:]] == [REGRESSED, KEPT]
    assert "undone" in rows[1].label
    # Step 2 without -ub 8: the same arm as move-dynamic alone, so found on disk, not rerun.
    assert all("-ub" not in r.config for r in chain.by_arm["step 2"])
    assert len(runner.opened) == 2 * 4
    # Step 2 is judged against the baseline, the last step that was kept.
    assert rows[2].vs_previous_ms == rows[2].vs_baseline_ms
    total = total_cut(rows)
    assert total is not None and total.final_step == "step 2"


def test_a_step_within_noise_has_no_effect(tmp_path: Path) -> None:
    same = Change("a no-op flag", {"--log-disable": ""})
    exp = ExperimentDir.open(tmp_path / "ab", {"kind": "ab"}, resume=False)
    chain = run_chain(BASELINE, [same], FakeRunner(lambda c, w: 500.0), exp, WORKLOAD, (),
                      concurrency=4, repeats=2)  # fmt: skip
    assert chain.rows[1].verdict == NO_EFFECT and chain.undone == []
