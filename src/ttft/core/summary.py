"""Statistics over a run's records, per cell, and the versioned summary JSON.

A cell is one combination of workload settings (``"bucket=512 c=8"``). Inside a cell, warm-up
requests are counted but excluded, cold requests are summarized apart (``CellSummary.cold``), and
failed requests are counted by kind and never dropped. Statistics are over the requests that
succeeded; every value stays in its metric's unit (ns for durations) until a renderer shows it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ttft.core.client_verdict import ClientVerdict
from ttft.core.errors import TtftError
from ttft.core.identity import mismatch_notice
from ttft.core.metrics import HEADLINE, METRICS, output_tokens
from ttft.core.records import RequestRecord
from ttft.core.repeats import RunSpread, run_spread
from ttft.core.saturation import Saturation, assess_records
from ttft.core.slo import Slo, SloVerdict, count_good, evaluate
from ttft.core.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    REPORTED_PERCENTILES,
    Notice,
    Stats,
    describe,
    few_samples_notice,
    outlier_notice,
    spread_notice,
)
from ttft.core.turns import TurnRow, turn_rows
from ttft.core.units import NS_PER_S, display_unit, format_value

SCHEMA = "ttft.bench.summary/1"

WARMUP, WARM, COLD = "warmup", "warm", "cold"
NO_CONTENT = "no_content"  # ended without error but without a single content token


@dataclass(frozen=True, slots=True)
class MetricStats:
    """One metric's statistics in one cell, with the unit its values are in."""

    unit: str
    stats: Stats

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, **self.stats.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricStats:
        payload = dict(data)
        unit = str(payload.pop("unit"))
        return cls(unit, Stats.from_dict(payload))


@dataclass(frozen=True, slots=True)
class Goodput:
    """Requests that met every SLO and did not fail: per second and as a fraction of all."""

    good: int
    per_s: float | None
    fraction: float | None


@dataclass(slots=True)
class CellSummary:
    """Everything reported for one cell and phase."""

    cell: str
    phase: str
    n: int  # requests counted (warm-up excluded)
    ok: int
    errors: dict[str, int]
    warmup: int
    duration_ns: int | None
    metrics: dict[str, MetricStats]
    request_throughput: float | None  # successful requests per second
    output_token_throughput: float | None  # output tokens of successful requests per second
    goodput: Goodput | None  # None when no SLO was given
    slos: list[SloVerdict]
    warnings: list[Notice]
    cold: CellSummary | None = None
    saturation: Saturation | None = None  # warm phase: is the queue growing without bound?
    repeats: RunSpread | None = None  # --repeat: the spread of the per-run p50s
    client_health: ClientVerdict | None = None  # was the client itself the bottleneck?

    @property
    def failed(self) -> int:
        return self.n - self.ok

    @property
    def slos_passed(self) -> bool:
        # The cold request is reported apart and does not gate: an SLO speaks of the warm
        # service, and one first request after a start would fail any percentile on its own.
        return all(verdict.passed for verdict in self.slos)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "phase": self.phase,
            "n": self.n,
            "ok": self.ok,
            "errors": dict(self.errors),
            "warmup": self.warmup,
            "duration_ns": self.duration_ns,
            "metrics": {name: value.to_dict() for name, value in self.metrics.items()},
            "request_throughput": self.request_throughput,
            "output_token_throughput": self.output_token_throughput,
            "goodput": None if self.goodput is None else asdict(self.goodput),
            "slos": [verdict.to_dict() for verdict in self.slos],
            "warnings": [asdict(notice) for notice in self.warnings],
            "cold": None if self.cold is None else self.cold.to_dict(),
            "saturation": None if self.saturation is None else self.saturation.to_dict(),
            "repeats": None if self.repeats is None else self.repeats.to_dict(),
            "client_health": None if self.client_health is None else self.client_health.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellSummary:
        goodput = data.get("goodput")
        cold = data.get("cold")
        health = data.get("client_health")
        return cls(
            cell=str(data["cell"]),
            phase=str(data["phase"]),
            n=int(data["n"]),
            ok=int(data["ok"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
            warmup=int(data["warmup"]),
            duration_ns=data["duration_ns"],
            metrics={k: MetricStats.from_dict(v) for k, v in data["metrics"].items()},
            request_throughput=data["request_throughput"],
            output_token_throughput=data["output_token_throughput"],
            goodput=None if goodput is None else Goodput(**goodput),
            slos=[SloVerdict.from_dict(v) for v in data["slos"]],
            warnings=[Notice(**v) for v in data["warnings"]],
            cold=None if cold is None else cls.from_dict(cold),
            saturation=Saturation.from_dict(data["saturation"]) if data.get("saturation") else None,
            repeats=RunSpread.from_dict(data["repeats"]) if data.get("repeats") else None,
            client_health=None if health is None else ClientVerdict.from_dict(health),
        )


@dataclass(slots=True)
class BenchSummary:
    """A whole ``ttft bench`` run: its cells in run order, the SLOs asked, free-form labels."""

    cells: list[CellSummary]
    slos: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    schema: str = SCHEMA
    turns: list[TurnRow] = field(default_factory=list)  # multi-turn runs: medians per turn
    client_health: ClientVerdict | None = None  # the run's: its worst cell's

    @property
    def slos_passed(self) -> bool:
        """Whether every SLO held in every cell (the exit status a CI gate wants)."""
        return all(cell.slos_passed for cell in self.cells)

    def find(self, cell: str, phase: str = WARM) -> CellSummary | None:
        for summary in self.cells:
            for candidate in (summary, summary.cold):
                if candidate is not None and (candidate.cell, candidate.phase) == (cell, phase):
                    return candidate
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "slos": list(self.slos),
            "meta": dict(self.meta),
            "cells": [cell.to_dict() for cell in self.cells],
            "turns": [row.to_dict() for row in self.turns],
            "client_health": None if self.client_health is None else self.client_health.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchSummary:
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if schema != SCHEMA:
            raise TtftError(
                f"not a ttft bench summary this version reads (schema {schema!r}, "
                f"expected {SCHEMA!r})",
                "pass the JSON summary that `ttft bench` wrote, or rerun the bench "
                "with this version of ttft",
            )
        health = data.get("client_health")
        return cls(
            cells=[CellSummary.from_dict(cell) for cell in data["cells"]],
            slos=[str(text) for text in data.get("slos", [])],
            meta=dict(data.get("meta", {})),
            schema=SCHEMA,
            turns=[TurnRow.from_dict(row) for row in data.get("turns", [])],
            client_health=None if health is None else ClientVerdict.from_dict(health),
        )


def observed_duration_ns(records: Iterable[RequestRecord]) -> int | None:
    """From the first request's schedule (or send) to the last rung any request reached."""
    starts: list[int] = []
    ends: list[int] = []
    for record in records:
        start = record.scheduled_ns if record.scheduled_ns is not None else record.sent_ns
        rungs = [
            rung
            for rung in (
                record.done_ns,
                record.chunk_ns[-1] if record.chunk_ns else None,
                record.first_content_ns,
                record.first_event_ns,
                record.first_byte_ns,
                record.headers_ns,
                record.sent_ns,
            )
            if rung is not None
        ]
        if start is not None:
            starts.append(start)
        if rungs:
            ends.append(max(rungs))
    if not starts or not ends:
        return None
    return max(ends) - min(starts)


def error_kind(record: RequestRecord) -> str | None:
    """The failure class of a request, ``None`` for a success."""
    if record.error is not None:
        return record.error.kind
    return None if record.ok else NO_CONTENT


def _per_second(count: float, duration_ns: int | None) -> float | None:
    if duration_ns is None or duration_ns <= 0:
        return None
    return count * NS_PER_S / duration_ns


def _summarize_phase(
    records: Sequence[RequestRecord],
    *,
    cell: str,
    phase: str,
    warmup: int,
    duration_ns: int | None,
    slos: Sequence[Slo],
    resamples: int,
    seed: int,
    level: float,
    client_lag_ns: float,
) -> CellSummary:
    ok_records = [record for record in records if record.ok]
    errors = Counter(kind for record in records if (kind := error_kind(record)) is not None)
    samples: dict[str, list[float]] = {}
    metrics: dict[str, MetricStats] = {}
    for metric in METRICS:
        values = sorted(v for record in ok_records for v in metric.values(record))
        samples[metric.name] = values
        stats = describe(values, resamples=resamples, seed=seed, level=level)
        if stats is not None:
            metrics[metric.name] = MetricStats(metric.unit, stats)
    if duration_ns is None:
        duration_ns = observed_duration_ns(records)
    tokens = sum(output_tokens(record) or 0 for record in ok_records)
    goodput = None
    if slos:
        good = count_good(records, slos)
        goodput = Goodput(
            good=good,
            per_s=_per_second(good, duration_ns),
            fraction=good / len(records) if records else None,
        )
    summary = CellSummary(
        cell=cell,
        phase=phase,
        n=len(records),
        ok=len(ok_records),
        errors=dict(sorted(errors.items())),
        warmup=warmup,
        duration_ns=duration_ns,
        metrics=metrics,
        request_throughput=_per_second(len(ok_records), duration_ns),
        output_token_throughput=_per_second(tokens, duration_ns),
        goodput=goodput,
        slos=[evaluate(slo, samples[slo.metric]) for slo in slos],
        warnings=[],
    )
    summary.warnings = _notices(summary, slos, client_lag_ns)
    identity = mismatch_notice(records)
    if identity is not None:
        summary.warnings.insert(0, identity)
    return summary


DEFAULT_CLIENT_LAG_NS = 10_000_000  # 10 ms of client_wait at p99 means the client fell behind


def _formatter(unit: str) -> Callable[[float], str]:
    return lambda value: f"{format_value(value, unit)} {display_unit(unit)}"


def _notices(summary: CellSummary, slos: Sequence[Slo], client_lag_ns: float) -> list[Notice]:
    """The warnings of one cell, most serious first."""
    found: list[Notice | None] = []
    if summary.failed:
        kinds = ", ".join(f"{kind} {count}" for kind, count in summary.errors.items())
        found.append(
            Notice(
                "errors",
                f"{summary.failed} of {summary.n} requests failed ({kinds}); "
                "they count as not good in goodput",
            )
        )
    wait = summary.metrics.get("client_wait")
    if wait is not None and wait.stats.p99 > client_lag_ns:
        lag = _formatter(wait.unit)(wait.stats.p99)
        found.append(
            Notice(
                "client_lag",
                f"the client fell behind its schedule by {lag} at p99; results overstate the "
                "server's latency; lower the rate or use fewer concurrent streams per process",
                "client_wait",
            )
        )
    asked: dict[str, set[float]] = {HEADLINE: set(REPORTED_PERCENTILES)}
    for slo in slos:
        asked.setdefault(slo.metric, set()).add(slo.percentile)
    for name, percentiles in asked.items():
        entry = summary.metrics.get(name)
        if entry is not None:
            found.append(few_samples_notice(name, entry.stats.n, percentiles))
    headline = summary.metrics.get(HEADLINE)
    if headline is not None:
        found.append(spread_notice(HEADLINE, headline.stats, _formatter(headline.unit)))
        found.append(outlier_notice(HEADLINE, headline.stats, _formatter(headline.unit)))
    return [notice for notice in found if notice is not None]


def summarize(
    records: Iterable[RequestRecord],
    *,
    duration_ns: int | None = None,
    slos: Sequence[Slo] = (),
    cell: str | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    client_lag_ns: float = DEFAULT_CLIENT_LAG_NS,
) -> CellSummary:
    """Summarize one cell's records: warm requests, with cold ones apart in ``.cold``.

    ``duration_ns`` is the wall time the warm requests ran over (for throughput and goodput per
    second); without it the span of the records is used. A cell with only cold requests is
    summarized as the cold phase itself.
    """
    everything = list(records)
    labels = {record.cell for record in everything}
    if cell is None:
        cell = labels.pop() if len(labels) == 1 else "all"
    warmup = sum(1 for record in everything if record.phase == WARMUP)
    warm = [record for record in everything if record.phase not in (WARMUP, COLD)]
    cold = [record for record in everything if record.phase == COLD]
    options: dict[str, Any] = {
        "slos": slos,
        "resamples": resamples,
        "seed": seed,
        "level": level,
        "client_lag_ns": client_lag_ns,
    }
    if cold and not warm:
        return _summarize_phase(
            cold, cell=cell, phase=COLD, warmup=warmup, duration_ns=duration_ns, **options
        )
    summary = _summarize_phase(
        warm, cell=cell, phase=WARM, warmup=warmup, duration_ns=duration_ns, **options
    )
    if cold:
        summary.cold = _summarize_phase(
            cold, cell=cell, phase=COLD, warmup=0, duration_ns=None, **options
        )
    summary.saturation = assess_records(warm)
    summary.repeats = run_spread(warm, resamples=resamples, level=level, seed=seed)
    return summary


def summarize_run(
    records: Iterable[RequestRecord],
    *,
    duration_ns: int | Mapping[str, int] | None = None,
    slos: Sequence[Slo] = (),
    meta: Mapping[str, Any] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = DEFAULT_LEVEL,
    client_lag_ns: float = DEFAULT_CLIENT_LAG_NS,
) -> BenchSummary:
    """Summarize every cell of a run, in the order cells first appear in the records.

    ``duration_ns`` may be one figure for every cell, or one per cell label; a cell without one
    uses the span of its records.
    """
    by_cell: dict[str, list[RequestRecord]] = {}
    for record in records:
        by_cell.setdefault(record.cell, []).append(record)
    cells = []
    for label, cell_records in by_cell.items():
        span = duration_ns.get(label) if isinstance(duration_ns, Mapping) else duration_ns
        cells.append(
            summarize(
                cell_records,
                duration_ns=span,
                slos=slos,
                cell=label,
                resamples=resamples,
                seed=seed,
                level=level,
                client_lag_ns=client_lag_ns,
            )
        )
    info = {"bootstrap_resamples": resamples, "ci_level": level, "seed": seed, **(meta or {})}
    turns = turn_rows(r for group in by_cell.values() for r in group)
    return BenchSummary(cells=cells, slos=[slo.text for slo in slos], meta=info, turns=turns)
