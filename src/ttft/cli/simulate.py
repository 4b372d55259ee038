"""``ttft simulate``: what-if answers (replicas, routing, slots, batch, rate) from a model of the
engine's scheduler, calibrated on your own engine and checked against it.

``calibrate`` measures (a minute or two), ``run`` predicts (seconds) and, with ``--validate``,
measures a few of its points for real.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ttft.cli.simulate_run import run
from ttft.core.errors import TtftError
from ttft.simulate.model import ENGINE_KINDS, Calibration


@click.group("simulate")
def simulate() -> None:
    """What-if answers for capacity and routing, calibrated on your own engine.

    \b
    1. Calibrate once (a minute or two of short requests; the embedded engine without --url):
         ttft simulate calibrate --out cal.json
         ttft simulate calibrate --url http://HOST:PORT --out cal.json
    2. Ask: how many replicas hold p99 TTFT under 600 ms at 8 requests/s?
         ttft simulate run -c cal.json --rate 8 --prompt-tokens 600 \\
             --slo 'ttft:p99<600ms' --fewest-replicas
       Would prefix-affinity beat least-loaded on my trace? What do 8 slots do?
         ttft simulate run -c cal.json --trace trace.jsonl --replicas 2 \\
             --policy least-loaded,prefix-affinity --slots 4,8
    3. Check the model on the real engine before acting on it:
         ttft simulate run -c cal.json --rate 1 --prompt-tokens 400 --validate

    Predictions are means over --runs replications with 95% intervals that include the
    calibration's own scatter. The model covers the engine's scheduler (queueing, batching,
    chunked prefill, prefix cache, KV blocks); transport and proxies are one fixed overhead.
    """


@simulate.command("calibrate")
@click.option("--url", default=None, help="The engine to calibrate. Default: the embedded one.")
@click.option("--model", default=None, help="Model name. Default: the first of /v1/models.")
@click.option("--api-key", envvar="TTFT_API_KEY", default=None, help="Bearer key.")
@click.option(
    "--engine",
    "kind",
    type=click.Choice(ENGINE_KINDS),
    default="llamacpp",
    show_default=True,
    help="Which scheduler model the calibration is for.",
)
@click.option(
    "--slots",
    type=int,
    default=None,
    help="Slots (-np / max-num-seqs). Default: "
    "read from /props (llama.cpp); 4 for the embedded engine.",
)
@click.option(
    "--batch-tokens",
    type=int,
    default=None,
    help="Batch tokens (-b / max-num-batched-tokens). Default: read from /props, else 2048.",
)
@click.option("--kv-blocks", type=int, default=None, help="vLLM: KV blocks (16 tokens each).")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("ttft-calibration.json"),
    show_default=True,
    help="Where to write the calibration (JSON, with the fit's residuals).",
)
@click.option(
    "--records",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also keep the calibration's raw request records (JSONL).",
)
@click.option(
    "--refit",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Measure nothing: refit the calibration FILE from the --records it was saved with.",
)
def calibrate(
    url: str | None,
    model: str | None,
    api_key: str | None,
    kind: str,
    slots: int | None,
    batch_tokens: int | None,
    kv_blocks: int | None,
    out: Path,
    records: Path | None,
    refit: Path | None,
) -> None:
    """Fit the engine's cost model from a short run of exact-length requests.

    \b
    Measures, one phase at a time:
      prefill   prompts of 64..1536 tokens one at a time: seconds per prompt token
      decode    1, half and all slots streaming at once: seconds per step and sequence
      cached    a prompt twice with a new ending: the cost of a prefix-cache hit
      burst     every slot at once: a check of the scheduler model (not fitted)
    and reads the slot count and context per slot from the engine. The file records the fitted
    coefficients, the engine settings, and the residuals (how far single measurements scatter
    around the model: the width of later intervals).
    """
    from ttft.engines.control import ServerTokenizer
    from ttft.simulate.calibrate import run_calibration
    from ttft.simulate.targets import engine

    if refit is not None:
        _refit(refit, records, out)
        return
    for name, value in (("--slots", slots), ("--batch-tokens", batch_tokens)):
        if value is not None and value < 1:
            raise TtftError(f"{name} must be at least 1, not {value}")
    engine_kind = next(k for k in ENGINE_KINDS if k == kind)
    with engine(
        url,
        engine_kind,
        slots=slots,
        batch_tokens=batch_tokens,
        kv_blocks=kv_blocks,
        model=model,
        api_key=api_key,
    ) as live:
        where = live.target.root + (" (embedded)" if live.embedded else "")
        click.echo(
            f"calibrating {where}: {live.settings.slots} slots, batch "
            f"{live.settings.batch_tokens} tokens",
            err=True,
        )
        tokenizer = ServerTokenizer(live.target)
        calibration, phases = run_calibration(
            live.target,
            tokenizer,
            live.settings,
            progress=lambda msg: click.echo(f"  {msg}", err=True),
        )
    calibration.source["url"] = None if live.embedded else live.target.root
    calibration.source["embedded"] = live.embedded
    calibration.save(out)
    if records is not None:
        with records.open("w", encoding="utf-8") as fh:
            for phase, recs in phases.items():
                for r in recs:
                    fh.write(json.dumps({**r.to_dict(), "calibration_phase": phase}) + "\n")
    _print_calibration(calibration)
    _print_burst_check(calibration)
    click.echo(f"wrote {out}")


def _refit(path: Path, records: Path | None, out: Path) -> None:
    from ttft.core.records import RequestRecord
    from ttft.simulate.calibrate import fit_phases

    if records is None:
        raise TtftError("--refit needs the --records file the calibration was saved with")
    old = Calibration.load(path)
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
    calibration = fit_phases(phases, old.engine)
    calibration.source.update({k: v for k, v in old.source.items() if k not in calibration.source})
    calibration.save(out)
    _print_calibration(calibration)
    _print_burst_check(calibration)
    click.echo(f"wrote {out}")


def _print_calibration(cal: Calibration) -> None:
    c, f = cal.cost, cal.fit
    click.echo(
        f"step = {c.step_base_s * 1e3:.2f} ms + {c.prefill_token_s * 1e3:.3f} ms/prompt token "
        f"+ {c.decode_seq_s * 1e3:.2f} ms/decoding sequence + {c.attention_s * 1e3:.3f} ms per "
        f"1k context tokens attended + {c.cached_token_s * 1e3:.4f} ms/cached token"
    )
    click.echo(f"per-request overhead {c.overhead_s * 1e3:.1f} ms")
    click.echo(
        f"fit: {f.samples} samples, R^2 {f.r2:.3f}, |residual| p50 {f.rel_residual_p50:.1%} "
        f"p95 {f.rel_residual_p95:.1%}"
    )
    for note in f.notes:
        click.echo(f"  note: {note}")


def _print_burst_check(cal: Calibration) -> None:
    """The burst phase (not fitted) against the model: a first check of the scheduler."""
    from ttft.simulate.fleet import simulate as run_sim
    from ttft.simulate.requests import synthetic

    measured = cal.source.get("burst_ttft_s")
    if not isinstance(measured, list) or not measured:
        return
    from ttft.simulate.calibrate import CalibrationPlan

    prompt = min(CalibrationPlan().burst_prompt, (cal.engine.ctx_per_slot or 4096) - 112)
    reqs = synthetic(len(measured), prompt_tokens=prompt, output_tokens=1)
    result = run_sim(reqs, cal.cost, cal.engine)
    predicted = sorted(o.ttft_s or 0.0 for o in result.outcomes)
    pairs = ", ".join(
        f"{p * 1e3:.0f}/{m * 1e3:.0f}" for p, m in zip(predicted, measured, strict=False)
    )
    click.echo(f"burst check (not fitted), predicted/measured TTFT ms: {pairs}")


simulate.add_command(run)
