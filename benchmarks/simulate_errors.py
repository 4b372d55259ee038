"""The error tally both accuracy benchmarks print (``simulate_accuracy*.py``): per quantile,
predicted against measured and the same-arrivals error, over every validated point."""

from __future__ import annotations

import statistics
from typing import Any

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
