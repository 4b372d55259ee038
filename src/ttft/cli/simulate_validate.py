"""``ttft simulate run --validate``: one predicted point on the real engine, printed as
predicted against measured (and re-anchored to the engine's speed now when it drifted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from ttft.simulate.model import Calibration
from ttft.simulate.requests import SimRequest
from ttft.simulate.validate import Validation
from ttft.simulate.whatif import Prediction
from ttft.simulate.workloads import WorkloadSource


def _ms(value: float) -> str:
    return f"{value * 1e3:.0f}"


def validate_point(
    cal: Calibration,
    source: WorkloadSource,
    requests: list[SimRequest],
    prediction: Prediction,
    url: str | None,
    again: Callable[[Calibration], Prediction],
) -> dict[str, Any]:
    from ttft.engines.control import ServerTokenizer
    from ttft.simulate.targets import engine
    from ttft.simulate.validate import compare, measure, speed_now

    if prediction.config.replicas != 1:
        click.echo("  validate: only single-replica points are run for real; skipped")
        return {"skipped": "replicas > 1"}
    slots = prediction.config.slots or cal.engine.slots
    with engine(
        url,
        cal.engine.kind,
        slots=slots,
        batch_tokens=prediction.config.batch_tokens or cal.engine.batch_tokens,
    ) as live:
        tokenizer = ServerTokenizer(live.target)
        items, arrival = source.real(requests, tokenizer)
        speed = speed_now(live.target, tokenizer, cal.cost)
        click.echo(f"  validate: {len(items)} requests on {live.target.root}", err=True)
        records = measure(live.target, items, arrival)
    out: dict[str, Any] = {"speed_now": speed}
    result = compare(prediction.config.describe(), prediction, records)
    _print_comparison("as calibrated", result)
    out.update(result.to_dict())
    if speed is not None and abs(speed - 1.0) > DRIFT:
        # the machine computes at another speed than during the calibration: the same model
        # at today's speed separates the model's error from the machine's drift
        click.echo(f"  the engine runs x{speed:.2f} the calibration's prompt time now")
        moved = compare(
            "at today's speed", again(replace(cal, cost=cal.cost.scaled(speed))), records
        )
        _print_comparison(f"at today's speed (x{speed:.2f})", moved)
        out["at_speed_now"] = moved.to_dict()
    if result.measured_failed:
        click.echo(f"  {result.measured_failed} measured requests failed")
    return out


DRIFT = 0.1  # a speed change the validation reports and corrects for


def _print_comparison(label: str, result: Validation) -> None:
    click.echo(f"  {label}:")
    for c in result.comparisons:
        click.echo(
            f"    p{c.quantile:g}: predicted {_ms(c.predicted_s)} ms, measured "
            f"{_ms(c.measured_s)} ms [{_ms(c.measured_interval.low)}-"
            f"{_ms(c.measured_interval.high)}], error {c.error:+.1%}"
            + (
                ""
                if c.same_arrivals_s is None or c.same_arrivals_error is None
                else f"; same arrivals {_ms(c.same_arrivals_s)} ms ({c.same_arrivals_error:+.1%})"
            )
        )
