"""``ttft simulate run --validate``: one predicted point run on the real engine (several
replicas: that many embedded engines behind a real ``ttft gateway``), predicted against
measured, and re-anchored to the engine's speed now when it drifted since the calibration.

The decisions (which points can run for real, when a drift is worth a second comparison) live
here; the lines go to the caller's ``say`` (results) and ``progress`` (what is happening).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ttft.core.target import Target
from ttft.simulate.model import Calibration
from ttft.simulate.requests import SimRequest
from ttft.simulate.text import comparison_lines
from ttft.simulate.whatif import Config, Prediction, predict
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
    """Measure the point's requests on the engine (the embedded one without ``url``; for
    several replicas, that many embedded engines behind ``ttft gateway``, or ``url`` as the
    user's own front door); the comparison as a JSON-ready dict."""
    from ttft.engines.control import ServerTokenizer
    from ttft.simulate.validate import compare, measure, speed_now

    config = prediction.config
    out: dict[str, Any] = {}
    with _live(cal, config, url, out, say) as (target, probe, names):
        tokenizer = ServerTokenizer(probe)
        # Texts of this validation's own (a fresh seed): an engine that is not restarted (a
        # --url target, the next point, the next run) would otherwise serve the same prompts
        # from its prefix cache, which the simulation of a cold start does not have.
        items, arrival = source.real(requests, tokenizer, seed=f"sim-{secrets.token_hex(4)}")
        if names:
            # The gateway hashes each prompt's text onto its ring of upstream URLs: the
            # simulation is given the same keys and names, so both send a request alike.
            from ttft.simulate.live_fleet import lane_tokens, route_keys

            mirrored = [
                replace(r, route_key=k, lane_tokens=n if config.lanes is not None else None)
                for r, k, n in zip(requests, route_keys(items), lane_tokens(items), strict=True)
            ]
            prediction = replace(prediction, first_ttft_s=_mirror(cal, mirrored, config, names))
        batch = config.batch_tokens or cal.engine.batch_tokens
        speed = speed_now(probe, tokenizer, cal.cost, batch_tokens=batch)
        progress(f"  validate: {len(items)} requests on {target.root}")
        records = measure(target, items, arrival)
    out["speed_now"] = speed
    result = compare(config.describe(), prediction, records)
    _say_all(say, comparison_lines("as calibrated", result))
    out.update(result.to_dict())
    if speed is not None and abs(speed - 1.0) > DRIFT:
        # the machine computes at another speed than during the calibration: the same model
        # at today's speed separates the model's error from the machine's drift
        say(f"  the engine runs x{speed:.2f} the calibration's prompt time now")
        moved_cal = replace(cal, cost=cal.cost.scaled(speed))
        moved = again(moved_cal)
        if names:
            moved = replace(moved, first_ttft_s=_mirror(moved_cal, mirrored, config, names))
        result_now = compare("at today's speed", moved, records)
        _say_all(say, comparison_lines(f"at today's speed (x{speed:.2f})", result_now))
        out["at_speed_now"] = result_now.to_dict()
    if result.measured_failed:
        say(f"  {result.measured_failed} measured requests failed")
    return out


def predict_and_validate(
    cal: Calibration,
    source: WorkloadSource,
    config: Config,
    url: str | None,
    runs: int,
    say: Say,
) -> dict[str, Any]:
    """One point as ``simulate run --validate`` answers it: predicted over ``runs`` replications
    of ``source``, then measured with replication 0's arrivals (``validate_point``)."""

    def workload(seed: int) -> list[SimRequest]:
        return source.requests(seed)  # a trace keeps its own times whatever the seed

    prediction = predict(cal, workload, config, runs=runs)
    return validate_point(
        cal,
        source,
        workload(0),
        prediction,
        url,
        lambda moved: predict(moved, workload, config, runs=runs),
        say=say,
        progress=lambda _line: None,
    )


def _mirror(
    cal: Calibration, requests: list[SimRequest], config: Config, names: tuple[str, ...]
) -> dict[float, float]:
    """The simulation of exactly ``requests`` on the gateway's own ring (``names``)."""
    mirror = predict(cal, lambda _seed: requests, replace(config, replica_names=names), runs=1)
    return mirror.first_ttft_s


@contextmanager
def _live(
    cal: Calibration, config: Config, url: str | None, out: dict[str, Any], say: Say
) -> Iterator[tuple[Target, Target, tuple[str, ...]]]:
    """(where to send, the engine to probe, the gateway's ring names or ()) for the point."""
    from ttft.simulate.cores import replica_cores
    from ttft.simulate.live_fleet import embedded_fleet
    from ttft.simulate.targets import engine

    slots = config.slots or cal.engine.slots
    batch = config.batch_tokens or cal.engine.batch_tokens
    threads = cal.source.get("threads") if url is None else None
    threads = threads if isinstance(threads, int) and threads > 0 else None
    local = cal.source.get("local_model") if url is None else None
    local_model = local if isinstance(local, str) else None
    if (config.replicas == 1 and config.lanes is None) or url is not None:
        if config.replicas > 1:
            say(f"  validate: {url} is taken as the front door of {config.replicas} replicas")
        if config.lanes is not None:
            say(f"  validate: {url or 'the engine'} is taken to run the point's lanes")
        with engine(
            url,
            cal.engine.kind,
            slots=slots,
            batch_tokens=batch,
            threads=threads,
            model=local_model,
        ) as live:
            yield live.target, live.target, ()
        return
    groups, own = replica_cores(config.replicas, threads)
    if config.replicas > 1 and not own:
        each = len(groups[0])
        ran = f"{threads} threads" if threads else "a thread per core"
        note = (
            f"the {config.replicas} replicas share this machine's cores: each runs {each} "
            f"thread(s) on cores of its own, where the calibration's engine ran {ran}, so "
            f"measured TTFT runs slower than predicted (calibrate with --threads {each} for a "
            "like-for-like validation)"
        )
        say(f"  validate: {note}")
        out["note"] = note
    with embedded_fleet(
        config.replicas,
        slots=slots,
        policy=config.policy,
        max_in_flight=config.max_in_flight,
        batch_tokens=batch,
        threads=threads,
        lanes=config.lanes,
        kind=cal.engine.kind,
        model=local_model,
    ) as fleet:
        yield fleet.gateway, fleet.replica, fleet.names


def _say_all(say: Say, lines: list[str]) -> None:
    for line in lines:
        say(line)
