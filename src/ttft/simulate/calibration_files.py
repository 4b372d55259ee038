"""``ttft simulate calibrate``'s flow around the measuring (``simulate/calibrate.py``): the
settings it accepts, the engine it measures (the user's or the embedded one), the raw records
kept beside a calibration and the refit from them, and the burst check (the burst phase, not
fitted, against the model).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.simulate.model import ENGINE_KINDS, Calibration


def check_settings(slots: int | None, batch_tokens: int | None) -> None:
    """``--slots`` and ``--batch-tokens``, when given, are at least 1."""
    for name, value in (("--slots", slots), ("--batch-tokens", batch_tokens)):
        if value is not None and value < 1:
            raise TtftError(f"{name} must be at least 1, not {value}")


def calibrate_engine(
    url: str | None,
    kind: str,
    *,
    slots: int | None,
    batch_tokens: int | None,
    kv_blocks: int | None,
    model: str | None,
    api_key: str | None,
    progress: Callable[[str], None],
    threads: int | None = None,
) -> tuple[Calibration, dict[str, list[RequestRecord]]]:
    """Calibrate the engine at ``url`` (the embedded one without), saying what runs."""
    from ttft.engines.control import ServerTokenizer
    from ttft.simulate.calibrate import run_calibration
    from ttft.simulate.targets import engine

    check_settings(slots, batch_tokens)
    if url and threads is not None:
        raise TtftError(
            "--threads sets the embedded engine's threads; an engine at --url keeps its own",
            "drop --threads, or drop --url to calibrate the embedded engine",
        )
    engine_kind = next(k for k in ENGINE_KINDS if k == kind)
    with engine(
        url,
        engine_kind,
        slots=slots,
        batch_tokens=batch_tokens,
        kv_blocks=kv_blocks,
        model=model,
        api_key=api_key,
        threads=threads,
    ) as live:
        where = live.target.root + (" (embedded)" if live.embedded else "")
        progress(
            f"calibrating {where}: {live.settings.slots} slots, batch "
            f"{live.settings.batch_tokens} tokens"
        )
        tokenizer = ServerTokenizer(live.target)
        calibration, phases = run_calibration(
            live.target,
            tokenizer,
            live.settings,
            progress=lambda msg: progress(f"  {msg}"),
        )
    calibration.source["url"] = None if live.embedded else live.target.root
    calibration.source["embedded"] = live.embedded
    if live.embedded and threads is not None:
        calibration.source["threads"] = threads  # a validation starts its engines alike
    if live.embedded and engine_kind == "vllm":
        calibration.source["local_model"] = live.target.model  # ... with the same model
    return calibration, phases


def save_records(phases: dict[str, list[RequestRecord]], path: Path) -> None:
    """Every record of the calibration as JSONL, each tagged with its phase."""
    with path.open("w", encoding="utf-8") as fh:
        for phase, recs in phases.items():
            for r in recs:
                fh.write(json.dumps({**r.to_dict(), "calibration_phase": phase}) + "\n")


def refit(path: Path, records: Path | None) -> Calibration:
    """The calibration ``path`` fitted again from the records it was saved with."""
    from ttft.simulate.calibrate import fit_phases

    if records is None:
        raise TtftError("--refit needs the --records file the calibration was saved with")
    old = Calibration.load(path)
    calibration = fit_phases(_read_phases(records), old.engine)
    calibration.source.update({k: v for k, v in old.source.items() if k not in calibration.source})
    return calibration


def _read_phases(records: Path) -> dict[str, list[RequestRecord]]:
    phases: dict[str, list[RequestRecord]] = {}
    n = 0
    try:
        for line in records.read_text(encoding="utf-8").splitlines():
            n += 1
            data = json.loads(line)
            phase = data.pop("calibration_phase")
            phases.setdefault(phase, []).append(RequestRecord.from_dict(data))
    except FileNotFoundError:
        raise TtftError(f"records not found: {records}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise TtftError(
            f"{records}:{n}: not a calibration record ({exc})",
            "give the file written by `ttft simulate calibrate --records`",
        ) from None
    return phases


def burst_check(cal: Calibration) -> list[tuple[float, float]] | None:
    """The burst phase (not fitted) against the model: (predicted, measured) TTFT pairs; None
    when the calibration kept no burst."""
    from ttft.simulate.calibrate import CalibrationPlan
    from ttft.simulate.fleet import simulate as run_sim
    from ttft.simulate.requests import synthetic

    measured = cal.source.get("burst_ttft_s")
    if not isinstance(measured, list) or not measured:
        return None
    prompt = min(CalibrationPlan().burst_prompt, (cal.engine.ctx_per_slot or 4096) - 112)
    reqs = synthetic(len(measured), prompt_tokens=prompt, output_tokens=1)
    result = run_sim(reqs, cal.cost, cal.engine)
    predicted = sorted(o.ttft_s or 0.0 for o in result.outcomes)
    return list(zip(predicted, measured, strict=False))
