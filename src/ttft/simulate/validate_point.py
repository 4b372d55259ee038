"""``ttft simulate run --validate``: one predicted point run on the real engine, predicted
against measured, and re-anchored to the engine's speed now when it drifted since the
calibration.

The decisions (which points can run for real, when a drift is worth a second comparison) live
here; the lines go to the caller's ``say`` (results) and ``progress`` (what is happening).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ttft.simulate.model import Calibration
from ttft.simulate.requests import SimRequest
from ttft.simulate.text import comparison_lines
from ttft.simulate.whatif import Prediction
from ttft.simulate.workloads import WorkloadSource

DRIFT = 0.1  # a speed change the validation reports and corrects for

Say = Callable[[str], None]


def validate_point(
    cal: Calibration,
    source: WorkloadSource,
    requests: list[SimRequest],
    prediction: Prediction,
    url: str | None,
    again: Callable[[Calibration], Prediction],
    say: Say,
    progress: Say,
) -> dict[str, Any]:
    """Measure the point's requests on the engine (the embedded one without ``url``); the
    comparison as a JSON-ready dict."""
    from ttft.engines.control import ServerTokenizer
    from ttft.simulate.targets import engine
    from ttft.simulate.validate import compare, measure, speed_now

    if prediction.config.replicas != 1:
        say("  validate: only single-replica points are run for real; skipped")
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
        progress(f"  validate: {len(items)} requests on {live.target.root}")
        records = measure(live.target, items, arrival)
    out: dict[str, Any] = {"speed_now": speed}
    result = compare(prediction.config.describe(), prediction, records)
    _say_all(say, comparison_lines("as calibrated", result))
    out.update(result.to_dict())
    if speed is not None and abs(speed - 1.0) > DRIFT:
        # the machine computes at another speed than during the calibration: the same model
        # at today's speed separates the model's error from the machine's drift
        say(f"  the engine runs x{speed:.2f} the calibration's prompt time now")
        moved = compare(
            "at today's speed", again(replace(cal, cost=cal.cost.scaled(speed))), records
        )
        _say_all(say, comparison_lines(f"at today's speed (x{speed:.2f})", moved))
        out["at_speed_now"] = moved.to_dict()
    if result.measured_failed:
        say(f"  {result.measured_failed} measured requests failed")
    return out


def _say_all(say: Say, lines: list[str]) -> None:
    for line in lines:
        say(line)
