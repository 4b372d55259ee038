"""What both accuracy benchmarks (``simulate_accuracy*.py``) do per point: predict it, run it
through ``ttft simulate run --validate``'s own code, and tally per quantile the error of the
prediction and of the same-arrivals simulation against measured."""

from __future__ import annotations

import statistics
import sys
from typing import Any

from ttft.simulate.model import Calibration
from ttft.simulate.validate_point import predict_and_validate
from ttft.simulate.whatif import Config
from ttft.simulate.workloads import WorkloadSource

Errors = dict[str, list[float]]


def tally(errors: Errors, validation: dict[str, Any]) -> None:
    """Add one point's p50 and p95 errors (``validate_point``'s dict), as calibrated and, when
    the engine's speed drifted, at today's speed."""
    for label, doc in (
        ("as calibrated", validation),
        ("at today's speed", validation.get("at_speed_now")),
    ):
        for cmp in (doc or {}).get("comparisons", []):
            if cmp["quantile"] not in (50.0, 95.0):
                continue
            key = f"{label} p{cmp['quantile']:g}"
            errors.setdefault(key, []).append(abs(cmp["error"]))
            same = cmp.get("same_arrivals_error")
            if same is not None:
                errors.setdefault(key + " (same arrivals)", []).append(abs(same))


def print_tally(errors: Errors) -> None:
    for key, errs in sorted(errors.items()):
        print(
            f"mean |error| {key}: {statistics.fmean(errs):.1%} over {len(errs)} points "
            f"(max {max(errs):.1%})"
        )


def run_point(
    cal: Calibration,
    source: WorkloadSource,
    config: Config,
    url: str | None,
    runs: int,
    errors: Errors,
) -> None:
    """Predict ``config`` on ``source``, measure it on the engine (the embedded one without
    ``url``), print both and add the point's errors to ``errors``."""
    print(config.label)
    out = predict_and_validate(cal, source, config, url, runs, say=print)
    tally(errors, out)
    sys.stdout.flush()
