"""The client-health verdict of each measured cell of a run, attached to its summary.

The samples come from ``HealthProbe`` (one per client process and cell), the records from the
cell itself; the judgement is ``ttft.core.client_health.assess``. Warm-up and cold requests are
not judged: one request at a time says nothing about a client's capacity.
"""

from __future__ import annotations

from ttft.core.client_health import assess, overall
from ttft.core.client_verdict import ClientVerdict, HealthSample
from ttft.core.records import RequestRecord
from ttft.core.summary import WARM, BenchSummary
from ttft.load.results import BenchResult
from ttft.workload.arrival import OpenLoop


def judge_cells(bench: BenchResult) -> dict[str, ClientVerdict]:
    """One verdict per warm cell label (a label run more than once is judged over all runs)."""
    samples: dict[str, list[HealthSample]] = {}
    records: dict[str, list[RequestRecord]] = {}
    rates: dict[str, float | None] = {}
    capped: dict[str, bool] = {}
    for cell in bench.cells:
        if cell.plan.phase != WARM:
            continue
        label = cell.plan.cell
        samples.setdefault(label, []).extend(cell.health)
        records.setdefault(label, []).extend(cell.records)
        arrival = cell.plan.arrival
        rates[label] = arrival.rate if isinstance(arrival, OpenLoop) else None
        capped[label] = cell.plan.max_in_flight is not None
    return {
        label: assess(
            samples[label], records[label], open_loop_rate=rates[label], capped=capped[label]
        )
        for label in samples
    }


def attach_health(summary: BenchSummary, bench: BenchResult) -> ClientVerdict:
    """Set each summarized cell's verdict and the run's (the worst cell's); return the run's."""
    verdicts = judge_cells(bench)
    for cell in summary.cells:
        if cell.phase == WARM:
            cell.client_health = verdicts.get(cell.cell)
    summary.client_health = overall(verdicts)
    return summary.client_health
