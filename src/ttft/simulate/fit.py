"""Fit the step cost model to measured timings (pure: no I/O).

Each sample is a stretch of engine work whose composition is known: ``steps`` steps that
together computed ``prefill`` prompt tokens, ``decode`` sequence-tokens, an attention load
(``attention_k``: context tokens attended to, in thousands, summed over the tokens computed) and
``cached`` prompt tokens restored from the prefix cache, and took ``seconds``; a TTFT measured
at the client also holds one request's front-end overhead (``requests``). The model is linear
in those six, so a least-squares fit on relative error (every sample weighted by
1/seconds, so a 30 ms decode step counts as much as a 3 s prefill) gives the coefficients. A
coefficient that comes out negative is dropped (set to 0) and the rest refitted: a cost is never
negative.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ttft.core.errors import TtftError
from ttft.core.stats import percentile
from ttft.simulate.model import CostModel, FitReport

FEATURES = (
    "step_base_s",
    "prefill_token_s",
    "decode_seq_s",
    "attention_s",
    "cached_token_s",
    "request_s",
)


@dataclass(frozen=True, slots=True)
class StepSample:
    kind: str  # "prefill", "decode", "cached": what was measured
    steps: float
    prefill: float
    decode: float
    attention_k: float
    cached: float
    seconds: float
    # Requests whose front-end cost (HTTP, tokenizing, scheduling) is inside ``seconds``: 1
    # for a TTFT measured at the client (engines without server timings), 0 for an engine's
    # own prompt time. Its coefficient is the per-request overhead (fitted apart from a step).
    requests: float = 0.0

    def row(self) -> tuple[float, ...]:
        return (self.steps, self.prefill, self.decode, self.attention_k, self.cached, self.requests)


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when the system is singular."""
    n = len(rhs)
    a = [[*row[:], rhs[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-18:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                for c in range(col, n + 1):
                    a[r][c] -= f * a[col][c]
    return [a[i][n] / a[i][i] for i in range(n)]


def _least_squares(samples: Sequence[StepSample], active: list[int]) -> list[float] | None:
    k = len(active)
    ata = [[0.0] * k for _ in range(k)]
    atb = [0.0] * k
    for s in samples:
        w = 1.0 / s.seconds
        row = s.row()
        x = [row[j] * w for j in active]
        y = s.seconds * w
        for i in range(k):
            atb[i] += x[i] * y
            for j in range(k):
                ata[i][j] += x[i] * x[j]
    # a whisper of ridge keeps a barely-excited feature from taking absurd values
    for i in range(k):
        ata[i][i] *= 1.0 + 1e-9
    return _solve(ata, atb)


OUTLIER_FACTOR = 3.0  # a sample this many median residuals off the fit is set aside
OUTLIER_FLOOR = 0.25  # ... and at least this far off (relative)


def fit_cost(samples: Sequence[StepSample], overhead_s: float) -> tuple[CostModel, FitReport]:
    """The non-negative least-squares cost model, refitted once without the outliers (a
    neighbour's burst on a shared machine), and how well it fits its own samples."""
    usable = [s for s in samples if s.seconds > 0 and s.steps > 0]
    first, _ = _fit(usable, overhead_s)
    rel = [abs(s.seconds - _predict(first, s)) / s.seconds for s in usable]
    cut = max(OUTLIER_FACTOR * statistics.median(rel), OUTLIER_FLOOR) if rel else 0.0
    kept = [s for s, r in zip(usable, rel, strict=True) if r <= cut]
    if len(kept) == len(usable) or len(kept) < max(3, len(usable) // 2):
        return _fit(usable, overhead_s)
    cost, report = _fit(kept, overhead_s)
    note = f"{len(usable) - len(kept)} of {len(usable)} samples set aside as outliers (> {cut:.0%})"
    return cost, replace(report, notes=(*report.notes, note))


def _fit(usable: Sequence[StepSample], overhead_s: float) -> tuple[CostModel, FitReport]:
    if len(usable) < 3:
        raise TtftError(
            f"only {len(usable)} usable timing samples: a cost model needs at least 3",
            "the engine must report per-request timings (llama-server does); let the "
            "calibration run finish",
        )
    # features nobody excited (e.g. no cached sample) stay out of the fit
    active = [j for j in range(len(FEATURES)) if any(s.row()[j] > 0 for s in usable)]
    notes: list[str] = []
    coef: list[float] | None = None
    while active:
        coef = _least_squares(usable, active)
        if coef is None:
            # collinear: drop the last optional feature and try again
            notes.append(f"{FEATURES[active[-1]]} could not be separated from the others")
            active = active[:-1]
            continue
        negative = [active[i] for i, c in enumerate(coef) if c < 0]
        if not negative:
            break
        drop = min(negative, key=lambda j: coef[active.index(j)] if coef else 0.0)
        notes.append(f"{FEATURES[drop]} fitted below zero: set to 0")
        active = [j for j in active if j != drop]
    if not active or coef is None:
        raise TtftError("the timing samples do not determine a cost model")
    values = dict.fromkeys(FEATURES, 0.0)
    for j, c in zip(active, coef, strict=True):
        values[FEATURES[j]] = c
    overhead_s += values.pop("request_s")
    cost = CostModel(overhead_s=overhead_s, **values)
    points: list[dict[str, float | str]] = []
    rel: list[float] = []
    mean = statistics.fmean(s.seconds for s in usable)
    ss_res = ss_tot = 0.0
    for s in usable:
        fitted = _predict(cost, s)
        rel.append(abs(s.seconds - fitted) / s.seconds)
        ss_res += (s.seconds - fitted) ** 2
        ss_tot += (s.seconds - mean) ** 2
        points.append(
            {
                "kind": s.kind,
                "steps": s.steps,
                "prefill": s.prefill,
                "decode": s.decode,
                "cached": s.cached,
                "measured_s": s.seconds,
                "fitted_s": fitted,
            }
        )
    rel.sort()
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    # the scatter of single measurements around the model: what a replication may draw
    cv = math.sqrt(statistics.fmean(r * r for r in rel))
    cost = CostModel(overhead_s=overhead_s, noise_cv=cv, **values)
    report = FitReport(
        samples=len(usable),
        r2=r2,
        rel_residual_p50=percentile(rel, 50),
        rel_residual_p95=percentile(rel, 95),
        notes=tuple(notes),
        points=tuple(points),
    )
    return cost, report


def _predict(cost: CostModel, s: StepSample) -> float:
    return (
        cost.step_base_s * s.steps
        + cost.prefill_token_s * s.prefill
        + cost.decode_seq_s * s.decode
        + cost.attention_s * s.attention_k
        + cost.cached_token_s * s.cached
        + cost.overhead_s * s.requests
    )
