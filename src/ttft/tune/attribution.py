"""The attribution table of an A/B chain: what each step gained, its verdict, and the total cut.

Per step: TTFT p50 and p95 pooled over the repeats, with bootstrap confidence intervals; the change
against the previous step and against the baseline; the change alone against the baseline. The
verdict of a step compares its p50 interval with the previous step's:

- ``kept``: faster, and the intervals do not overlap (a real gain);
- ``no effect``: the intervals overlap (within noise);
- ``regressed``: slower, intervals apart. A regressed step is undone in the steps after it, so
  the chain's later steps measure what is left without it.

The total cut is the last kept step's p50 and p95 against the baseline, in per cent, next to the
article's figure (1830 -> 420 ms p50: -77%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttft.core.stats import Stats, describe
from ttft.tune.ab import Arm
from ttft.tune.trial import TrialResult

KEPT, NO_EFFECT, REGRESSED, NOT_MEASURED = "kept", "no effect", "regressed", "not measured"
ARTICLE_P50_CUT_PCT = -77.0  # the seed article: 1830 -> 420 ms p50 TTFT


@dataclass
class AttributionRow:
    name: str
    label: str
    ttft: Stats | None  # pooled over repeats, in ms
    failed: int
    vs_previous_ms: float | None  # p50 change against the previous step (negative: faster)
    vs_baseline_ms: float | None
    alone_vs_baseline_ms: float | None  # the change alone on the baseline (steps 1..)
    significant: bool | None  # p50 CI apart from the previous step's
    verdict: str = ""  # kept, no effect, regressed, not measured ("" for the baseline)
    applied_by: str = "ttft"  # "ttft", or "you" for a change a person applied
    failures: tuple[str, ...] = ()  # why runs of this step failed, once per distinct reason


@dataclass(frozen=True)
class TotalCut:
    baseline_p50_ms: float
    final_p50_ms: float
    baseline_p95_ms: float
    final_p95_ms: float
    final_step: str

    @property
    def p50_pct(self) -> float:
        return 100.0 * (self.final_p50_ms - self.baseline_p50_ms) / self.baseline_p50_ms

    @property
    def p95_pct(self) -> float:
        return 100.0 * (self.final_p95_ms - self.baseline_p95_ms) / self.baseline_p95_ms

    def text(self) -> str:
        return (
            f"total: p50 {self.baseline_p50_ms:.0f} -> {self.final_p50_ms:.0f} ms "
            f"({self.p50_pct:+.0f}%), p95 {self.baseline_p95_ms:.0f} -> "
            f"{self.final_p95_ms:.0f} ms ({self.p95_pct:+.0f}%) at {self.final_step}; "
            f"the article: 1830 -> 420 ms p50 ({ARTICLE_P50_CUT_PCT:+.0f}%)"
        )

    def to_dict(self) -> dict[str, float | str]:
        return {
            "baseline_p50_ms": self.baseline_p50_ms,
            "final_p50_ms": self.final_p50_ms,
            "p50_pct": self.p50_pct,
            "baseline_p95_ms": self.baseline_p95_ms,
            "final_p95_ms": self.final_p95_ms,
            "p95_pct": self.p95_pct,
            "final_step": self.final_step,
            "article_p50_pct": ARTICLE_P50_CUT_PCT,
        }


def _stats(results: Sequence[TrialResult]) -> tuple[Stats | None, int]:
    samples = [v for r in results for level in r.levels for v in level.ttft_ms]
    failed = sum(level.n - level.ok for r in results for level in r.levels)
    return describe(samples), failed


def verdict(current: Stats | None, previous: Stats | None) -> str:
    if current is None or previous is None:
        return NOT_MEASURED
    if current.p50_ci.overlaps(previous.p50_ci):
        return NO_EFFECT
    return KEPT if current.p50 < previous.p50 else REGRESSED


def attribution(
    plan: Sequence[Arm],
    by_arm: dict[str, list[TrialResult]],
    manual: Sequence[int] = (),
) -> list[AttributionRow]:
    """One row per step of the chain (``plan`` from ``ab.arms``); ``manual``: the steps a
    person applied (their alone-arms do not exist)."""
    stats = {arm.name: _stats(by_arm.get(arm.name, [])) for arm in plan}
    base = stats["step 0"][0]
    rows: list[AttributionRow] = []
    previous: Stats | None = None
    for arm in plan:
        if not arm.name.startswith("step"):
            continue
        k = int(arm.name.split()[1])
        current, failed = stats[arm.name]
        alone_name = "step 1" if k == 1 else f"alone {k}"
        alone = stats.get(alone_name, (None, 0))[0] if k >= 1 else None
        rows.append(
            AttributionRow(
                name=arm.name,
                label=arm.label,
                ttft=current,
                failed=failed,
                vs_previous_ms=_delta(current, previous),
                vs_baseline_ms=_delta(current, base) if k else None,
                alone_vs_baseline_ms=_delta(alone, base) if k else None,
                significant=(
                    None
                    if current is None or previous is None
                    else not current.p50_ci.overlaps(previous.p50_ci)
                ),
                verdict=verdict(current, previous) if k else "",
                applied_by="you" if k in manual else "ttft",
                failures=tuple(
                    dict.fromkeys(r.reason for r in by_arm.get(arm.name, []) if r.reason)
                ),
            )
        )
        # A regressed step is undone: the next step builds on the one before it.
        if current is not None and rows[-1].verdict != REGRESSED:
            previous = current
    return rows


def _delta(current: Stats | None, reference: Stats | None) -> float | None:
    if current is None or reference is None:
        return None
    return current.p50 - reference.p50


def overlap_note(rows: Sequence[AttributionRow]) -> str | None:
    """How far the gains alone differ from the chain's total (they do not add up)."""
    steps = [r for r in rows if r.name != "step 0"]
    if len(steps) < 2 or any(r.alone_vs_baseline_ms is None for r in steps):
        return None
    total = steps[-1].vs_baseline_ms
    if total is None:
        return None
    alone_sum = sum(r.alone_vs_baseline_ms or 0.0 for r in steps)
    return (
        f"changes alone sum to {alone_sum:+.0f} ms of p50; together they give {total:+.0f} ms: "
        f"{'overlapping' if abs(alone_sum) > abs(total) else 'compounding'} by "
        f"{abs(alone_sum - total):.0f} ms"
    )


def total_cut(rows: Sequence[AttributionRow]) -> TotalCut | None:
    """The chain's result: the last measured step against the baseline."""
    base = rows[0].ttft if rows else None
    measured = [r for r in rows[1:] if r.ttft is not None and r.verdict != REGRESSED]
    if base is None or not measured or base.p50 <= 0 or base.p95 <= 0:
        return None
    final = measured[-1]
    assert final.ttft is not None
    return TotalCut(base.p50, final.ttft.p50, base.p95, final.ttft.p95, final.name)
