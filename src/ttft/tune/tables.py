"""Tables of a tune run as plain rows, and their Markdown, CSV and JSON (versioned) forms.

The terminal rendering (rich) is the CLI's; everything here is text, so reports can be rebuilt
from an experiment directory without a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.tables import csv_records, markdown_records
from ttft.tune.attribution import AttributionRow, TotalCut
from ttft.tune.space import config_label
from ttft.tune.sweep import pareto_ids, rank
from ttft.tune.trial import MEASURED, TrialResult

SWEEP_SCHEMA = "ttft.tune.sweep/1"
AB_SCHEMA = "ttft.tune.ab/1"

SWEEP_COLUMNS = (
    "rank",
    "config",
    "status",
    "startup_s",
    "best_load",
    "goodput_per_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "pareto",
    "saturated",
    "note",
    "source",  # last, so the CSV's earlier columns stay where they were
)
AB_COLUMNS = (
    "step",
    "change",
    "ttft_p50_ms",
    "p50_ci_ms",
    "ttft_p95_ms",
    "p95_ci_ms",
    "vs_previous_ms",
    "vs_baseline_ms",
    "alone_vs_baseline_ms",
    "ci_apart",
    "verdict",
    "applied_by",
    "failed",
)


def _num(value: float | None, digits: int = 0) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def sweep_rows(results: Sequence[TrialResult]) -> list[dict[str, str]]:
    front = pareto_ids(results)
    rows = []
    for n, r in enumerate(rank(results), start=1):
        best = r.best
        note = r.reason or ("" if best is not None else "no load held the SLOs")
        if r.quality is not None:
            gate = "never chosen" if r.quality_failed else "against the baseline"
            note = "; ".join(filter(None, [f"quality {r.quality} ({gate})", note]))
        note = "; ".join(filter(None, [note, r.note]))
        rows.append(
            {
                "rank": str(n),
                "config": config_label(r.config),
                "source": r.source,  # measured, or predicted by the simulator (--predict)
                "status": "quality fail" if r.quality_failed else r.status,
                "startup_s": _num(r.startup_s, 1),  # engine start-up to healthy, this trial
                "best_load": "" if best is None else best.load_label(),  # c=4 or 2.0/s
                "goodput_per_s": "" if best is None else _num(best.goodput_per_s, 2),
                "ttft_p50_ms": "" if best is None else _num(best.ttft_p50_ms),
                "ttft_p99_ms": "" if best is None else _num(best.ttft_p99_ms),
                "pareto": "yes" if r.trial_id in front else "",
                "saturated": "yes" if r.saturated else "",
                "note": note,
            }
        )
    return rows


@dataclass(frozen=True)
class SweepCost:
    """What a sweep cost on the wall clock; engine start-ups are part of it."""

    trials: int
    seconds: float  # every trial, start-up included (a trial without trial_s: its start-up)
    startup_seconds: float  # the engines' start-ups alone
    started: int  # trials that recorded a start-up

    @property
    def startup_share(self) -> float:
        return self.startup_seconds / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "seconds": round(self.seconds, 3),
            "startup_seconds": round(self.startup_seconds, 3),
            "startup_share": round(self.startup_share, 4),
        }

    def text(self) -> str:
        line = f"cost: {self.trials} trials, {self.seconds:.0f} s"
        if self.started:
            line += (
                f", of which {self.startup_seconds:.0f} s ({100 * self.startup_share:.0f}%) "
                f"engine start-up ({self.started} start-ups)"
            )
        return line


def sweep_cost(results: Sequence[TrialResult]) -> SweepCost:
    """The sweep's cost: each trial's wall time (resumed trials count what they cost when
    they ran), and how much of it went to starting engines. Predicted rows cost no trial."""
    results = [r for r in results if r.source == MEASURED]
    startups = [r.startup_s for r in results if r.startup_s is not None]
    seconds = sum(r.trial_s if r.trial_s is not None else (r.startup_s or 0.0) for r in results)
    return SweepCost(len(results), seconds, sum(startups), len(startups))


def bucket_rows(
    by_bucket: Mapping[int, Sequence[TrialResult]],
) -> tuple[list[str], list[dict[str, str]]]:
    """The prompt-length axis: per configuration, TTFT p50 at the lowest load and the best
    goodput, one column pair per prompt length."""
    columns = ["config"]
    for words in by_bucket:
        columns += [f"{words}w_p50_ms", f"{words}w_goodput_per_s"]
    rows: dict[str, dict[str, str]] = {}
    for words, results in by_bucket.items():
        for r in results:
            row = rows.setdefault(config_label(r.config), {"config": config_label(r.config)})
            first = r.levels[0] if r.levels else None
            row[f"{words}w_p50_ms"] = "" if first is None else _num(first.ttft_p50_ms)
            row[f"{words}w_goodput_per_s"] = "" if r.best is None else _num(r.best.goodput_per_s, 2)
    return columns, [{c: row.get(c, "") for c in columns} for row in rows.values()]


def ab_rows(rows: Sequence[AttributionRow]) -> list[dict[str, str]]:
    out = []
    for row in rows:
        s = row.ttft
        out.append(
            {
                "step": row.name,
                "change": row.label,
                "ttft_p50_ms": "" if s is None else _num(s.p50),
                "p50_ci_ms": "" if s is None else f"{s.p50_ci.low:.0f}-{s.p50_ci.high:.0f}",
                "ttft_p95_ms": "" if s is None else _num(s.p95),
                "p95_ci_ms": "" if s is None else f"{s.p95_ci.low:.0f}-{s.p95_ci.high:.0f}",
                "vs_previous_ms": _signed(row.vs_previous_ms),
                "vs_baseline_ms": _signed(row.vs_baseline_ms),
                "alone_vs_baseline_ms": _signed(row.alone_vs_baseline_ms),
                "ci_apart": "" if row.significant is None else ("yes" if row.significant else "no"),
                "verdict": row.verdict,
                "applied_by": row.applied_by if row.name != "step 0" else "",
                "failed": str(row.failed),
            }
        )
    return out


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.0f}"


def to_markdown(title: str, columns: Sequence[str], rows: Sequence[dict[str, str]]) -> str:
    """A titled section with the rows as one table."""
    return "\n".join([f"## {title}", "", *markdown_records(columns, rows)]) + "\n"


def to_csv(columns: Sequence[str], rows: Sequence[dict[str, str]]) -> str:
    return csv_records(columns, rows)


def sweep_json(
    results: Sequence[TrialResult],
    slos: Sequence[str],
    choice: TrialResult | None,
    load: str = "concurrency",
    predict: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data = {
        "schema": SWEEP_SCHEMA,
        "load": load,  # concurrency (closed loop) or rate (open loop, requests/s)
        "slos": list(slos),
        "table": sweep_rows(results),
        "cost": sweep_cost(results).to_dict(),
        "chosen": None if choice is None else choice.to_dict(),
        "trials": [r.to_dict() for r in results],  # each with its source: measured|predicted
    }
    if predict is not None:
        data["predict"] = predict  # --predict: the calibration, top K, the predicted order
    return data


def ab_json(
    rows: Sequence[AttributionRow],
    note: str | None,
    trials: dict[str, list[TrialResult]],
    total: TotalCut | None = None,
    undone: Sequence[int] = (),
) -> dict[str, Any]:
    return {
        "schema": AB_SCHEMA,
        "table": ab_rows(rows),
        "overlap_note": note,
        "total": None if total is None else total.to_dict(),
        "undone_steps": list(undone),
        "trials": {arm: [r.to_dict() for r in runs] for arm, runs in trials.items()},
    }
