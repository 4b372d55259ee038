"""What-if answers: one configuration's predicted TTFT with intervals, and the fewest replicas
that hold an SLO.

A prediction is the mean over ``runs`` replications. Replication 0 is the fitted model; the
others draw a machine-speed factor from the calibration's scatter and, for a Poisson workload,
new arrival times. The interval of a statistic is the spread of its replications (a t-interval on
their mean, widened to include the fitted model's own value), so it says both how noisy the
workload is and how far the calibration can be off.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.core.stats import Interval, percentile
from ttft.simulate.engine import SimOutcome
from ttft.simulate.fleet import FleetResult, Policy, simulate, speed_factors
from ttft.simulate.gateway_sim import SHED_REASONS, Lanes, shed_counts
from ttft.simulate.model import Calibration
from ttft.simulate.requests import SimRequest

QUANTILES = (50.0, 95.0, 99.0)
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}

Workload = Callable[[int], Sequence[SimRequest]]  # replication seed -> requests


@dataclass(frozen=True)
class Config:
    """One point of the what-if space (None keeps the calibration's setting)."""

    replicas: int = 1
    policy: Policy = "least-loaded"
    slots: int | None = None
    batch_tokens: int | None = None
    kv_blocks: int | None = None
    max_in_flight: int | None = None  # behind ttft gateway: its per-replica cap
    label: str = ""
    # behind ttft gateway with its lanes: short and long lanes and a reserve per replica
    lanes: Lanes | None = None
    # the real gateway's upstream URLs, when a validation mirrors its affinity ring
    replica_names: tuple[str, ...] = ()
    schedule_policy: str | None = None  # SGLang's --schedule-policy

    def describe(self) -> str:
        parts = [f"replicas={self.replicas}", self.policy]
        if self.slots is not None:
            parts.append(f"slots={self.slots}")
        if self.batch_tokens is not None:
            parts.append(f"batch={self.batch_tokens}")
        if self.kv_blocks is not None:
            parts.append(f"kv_blocks={self.kv_blocks}")
        if self.max_in_flight is not None:
            parts.append(f"gateway cap={self.max_in_flight}")
        if self.lanes is not None:
            parts.append(self.lanes.describe(self.max_in_flight))
        if self.schedule_policy is not None:
            parts.append(f"schedule={self.schedule_policy}")
        return self.label or " ".join(parts)


@dataclass(frozen=True)
class Estimate:
    value: float
    interval: Interval

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "interval": self.interval.to_dict()}


@dataclass
class Prediction:
    config: Config
    requests: int
    ttft_s: dict[float, Estimate]
    queue_s: dict[float, Estimate]
    throughput_rps: Estimate
    goodput_rps: Estimate | None
    good_fraction: Estimate | None
    refused: int
    preemptions: float
    runs: int
    slo_met: bool | None = None
    notes: list[str] = field(default_factory=list)
    # replication 0 alone: the fitted model on the workload's first arrivals (the ones
    # --validate sends), without the other replications' arrivals and speed draws
    first_ttft_s: dict[float, float] = field(default_factory=dict)
    # requests the gateway's lanes refused in replication 0, by reason (queue_full: 429,
    # queue_timeout: 503); they are in ``requests`` and count as not good
    shed: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.describe(),
            "requests": self.requests,
            "ttft_s": {f"p{q:g}": e.to_dict() for q, e in self.ttft_s.items()},
            "queue_s": {f"p{q:g}": e.to_dict() for q, e in self.queue_s.items()},
            "throughput_rps": self.throughput_rps.to_dict(),
            "goodput_rps": None if self.goodput_rps is None else self.goodput_rps.to_dict(),
            "good_fraction": None if self.good_fraction is None else self.good_fraction.to_dict(),
            "refused": self.refused,
            "shed": self.shed,
            "preemptions": self.preemptions,
            "runs": self.runs,
            "first_ttft_s": {f"p{q:g}": v for q, v in self.first_ttft_s.items()},
            "slo_met": self.slo_met,
            "notes": self.notes,
        }


def estimate(values: Sequence[float]) -> Estimate:
    """Mean of the replications with a 95% t-interval, widened to include replication 0."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Estimate(mean, Interval(mean, mean))
    half = T95.get(len(values) - 1, 2.0) * statistics.stdev(values) / math.sqrt(len(values))
    low, high = min(mean - half, values[0]), max(mean + half, values[0])
    return Estimate(mean, Interval(max(0.0, low), high))


SLO_METRICS = {"ttft": "ttft", "ttft_from_scheduled": "ttft", "e2e": "e2e"}


def _metric(slo: Slo) -> str:
    return SLO_METRICS.get(slo.metric, slo.metric)


def _e2e(o: SimOutcome) -> float | None:
    return None if o.done_s is None or not o.ok else o.done_s - o.request.arrival_s + o.overhead_s


def _good(o: SimOutcome, slos: Sequence[Slo]) -> bool:
    """Goodput counts a request whose TTFT (and end-to-end time) is under every bound."""
    if not o.ok:
        return False
    for slo in slos:
        value = o.ttft_s if _metric(slo) == "ttft" else _e2e(o)
        if value is None or not slo.meets(value * 1e9):
            return False
    return True


def check_slos(slos: Sequence[Slo]) -> None:
    for slo in slos:
        if slo.metric not in SLO_METRICS:
            raise TtftError(
                f"SLO '{slo.text}': the simulator predicts {', '.join(SLO_METRICS)}, "
                f"not {slo.metric}",
                "write SLOs like ttft:p99<600ms or e2e:p95<5s",
            )


def _one_run(result: FleetResult, slos: Sequence[Slo]) -> dict[str, float]:
    done = [o for o in result.outcomes if o.ok]
    if not done:
        raise TtftError("no simulated request produced a first token (all refused)")
    ttft = sorted(o.ttft_s or 0.0 for o in done)
    queue = sorted(o.queue_s or 0.0 for o in done)
    out: dict[str, float] = {}
    for q in QUANTILES:
        out[f"ttft{q}"] = percentile(ttft, q)
        out[f"queue{q}"] = percentile(queue, q)
    span = max(result.duration_s, 1e-9)
    out["throughput"] = len(done) / span
    good = sum(_good(o, slos) for o in result.outcomes)
    e2e = sorted(v for v in (_e2e(o) for o in done) if v is not None)
    out["good"] = good / len(result.outcomes)
    out["goodput"] = good / span
    out["preemptions"] = result.preemptions
    for slo in slos:
        values = ttft if _metric(slo) == "ttft" else e2e
        out[f"slo:{slo.text}"] = float(slo.meets(percentile(values, slo.percentile) * 1e9))
    return out


def predict(
    calibration: Calibration,
    workload: Workload,
    config: Config,
    *,
    slos: Sequence[Slo] = (),
    runs: int = 5,
    seed: int = 0,
) -> Prediction:
    """Simulate ``config`` ``runs`` times and summarize with intervals."""
    if runs < 1:
        raise TtftError(f"--runs must be at least 1, not {runs}")
    settings = calibration.engine
    changes: dict[str, Any] = {}
    for name in ("slots", "batch_tokens", "kv_blocks", "schedule_policy"):
        value = getattr(config, name)
        if value is not None:
            changes[name] = value
    if changes:
        settings = replace(settings, **changes)
        if "slots" in changes and calibration.engine.ctx_per_slot is not None:
            total = calibration.engine.ctx_per_slot * calibration.engine.slots
            settings = replace(settings, ctx_per_slot=total // settings.slots)
    factors = speed_factors(calibration.cost.noise_cv, runs, seed)
    rows: list[dict[str, float]] = []
    refused = 0
    n = 0
    shed: dict[str, int] = {}
    for run, factor in enumerate(factors):
        requests = workload(seed + run)
        n = len(requests)
        result = simulate(
            requests,
            calibration.cost,
            settings,
            replicas=config.replicas,
            policy=config.policy,
            speed_factor=factor,
            max_in_flight=config.max_in_flight,
            names=config.replica_names,
            lanes=config.lanes,
        )
        refused = sum(
            o.refused is not None and o.refused not in SHED_REASONS for o in result.outcomes
        )
        if run == 0:
            shed = shed_counts(result.outcomes)
        rows.append(_one_run(result, slos))

    def est(key: str) -> Estimate:
        return estimate([row[key] for row in rows])

    notes = []
    if refused:
        notes.append(f"{refused} of {n} requests do not fit the engine (refused, counted not good)")
    if shed:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(shed.items()))
        notes.append(
            f"the gateway shed {sum(shed.values())} of {n} requests ({reasons}; queue_full is "
            "a 429, queue_timeout a 503): counted not good, and left out of the TTFT percentiles"
        )
    met = None
    if slos:
        # held when the fitted model and most replications meet every SLO
        met = all(statistics.fmean(r[f"slo:{s.text}"] for r in rows) >= 0.5 for s in slos) and all(
            rows[0][f"slo:{s.text}"] == 1.0 for s in slos
        )
    return Prediction(
        config=config,
        requests=n,
        ttft_s={q: est(f"ttft{q}") for q in QUANTILES},
        queue_s={q: est(f"queue{q}") for q in QUANTILES},
        throughput_rps=est("throughput"),
        goodput_rps=est("goodput") if slos else None,
        good_fraction=est("good") if slos else None,
        refused=refused,
        shed=shed,
        preemptions=statistics.fmean(r["preemptions"] for r in rows),
        runs=len(rows),
        first_ttft_s={q: rows[0][f"ttft{q}"] for q in QUANTILES},
        slo_met=met,
        notes=notes,
    )


def fewest_replicas(
    calibration: Calibration,
    workload: Workload,
    config: Config,
    slos: Sequence[Slo],
    *,
    max_replicas: int = 64,
    runs: int = 5,
    seed: int = 0,
) -> tuple[int | None, list[Prediction]]:
    """The smallest replica count (doubling, then bisecting) whose prediction holds ``slos``."""
    if not slos:
        raise TtftError(
            "the fewest replicas that hold an SLO needs an SLO", "add --slo ttft:p99<600ms"
        )
    tried: dict[int, Prediction] = {}

    def holds(n: int) -> bool:
        if n not in tried:
            tried[n] = predict(
                calibration, workload, replace(config, replicas=n), slos=slos, runs=runs, seed=seed
            )
        return bool(tried[n].slo_met)

    low, high = 0, 1
    while not holds(high):
        low = high
        if high >= max_replicas:
            return None, [tried[k] for k in sorted(tried)]
        high = min(max_replicas, high * 2)
    while high - low > 1:
        mid = (low + high) // 2
        if holds(mid):
            high = mid
        else:
            low = mid
    return high, [tried[k] for k in sorted(tried)]
