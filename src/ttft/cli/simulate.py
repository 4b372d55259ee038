"""``ttft simulate``: what-if answers (replicas, routing, slots, batch, rate) from a model of the
engine's scheduler, calibrated on your own engine and checked against it.

``calibrate`` measures (a minute or two), ``run`` predicts (seconds) and, with ``--validate``,
measures a few of its points for real.
"""

from __future__ import annotations

from pathlib import Path

import click

from ttft.cli.simulate_run import run
from ttft.simulate import calibration_files
from ttft.simulate.model import ENGINE_KINDS, Calibration
from ttft.simulate.text import burst_line, calibration_lines


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
@click.option(
    "--url",
    default=None,
    help="The engine to calibrate. Default: one ttft starts: the embedded llama-server, or with "
    "--engine vllm ttft's own vLLM CPU build (python -m ttft.engines.vllm.install).",
)
@click.option(
    "--model",
    default=None,
    help="Model name. Default: the first of /v1/models. For ttft's own vLLM, its local model: "
    "ttft-small-llama (default: about 1 ms of compute per prompt token on a CPU, so prefill "
    "outweighs the front end) or ttft-tiny-llama.",
)
@click.option("--api-key", envvar="TTFT_API_KEY", default=None, help="Bearer key.")
@click.option(
    "--engine",
    "kind",
    type=click.Choice(ENGINE_KINDS),
    default="llamacpp",
    show_default=True,
    help="Which scheduler model the calibration is for (sglang: read from the server's "
    "/server_info; the model is built from SGLang's source, not yet checked against a running "
    "SGLang).",
)
@click.option(
    "--slots",
    type=int,
    default=None,
    help="Slots (-np / max-num-seqs / max-running-requests). Default: read from /props "
    "(llama.cpp) or the server info (SGLang); 4 for the embedded engine, 8 for ttft's own vLLM.",
)
@click.option(
    "--batch-tokens",
    type=int,
    default=None,
    help="Batch tokens (-b / max-num-batched-tokens / chunked-prefill-size). Default: read "
    "from /props or the server info, else 2048 (SGLang: 8192).",
)
@click.option(
    "--kv-blocks",
    type=int,
    default=None,
    help="vLLM: KV blocks (default: read from its vllm:cache_config_info metric, with their "
    "size: 16 tokens on a GPU, 128 on the CPU build); SGLang: KV pages of --page-size tokens "
    "(default: from its server info).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="The embedded engine's threads (-t; for ttft's own vLLM, the cores its OpenMP threads "
    "bind to), pinned to the first N cores; a multi-replica --validate then gives each replica "
    "N cores of its own, so replicas on one machine run at the calibrated speed. Default: the "
    "engine's own (not pinned).",
)
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
    threads: int | None,
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
    if refit is not None:
        refitted = calibration_files.refit(refit, records)
        refitted.save(out)
        _report(refitted, out)
        return
    calibration, phases = calibration_files.calibrate_engine(
        url,
        kind,
        slots=slots,
        batch_tokens=batch_tokens,
        kv_blocks=kv_blocks,
        model=model,
        api_key=api_key,
        threads=threads,
        progress=lambda line: click.echo(line, err=True),
    )
    calibration.save(out)
    if records is not None:
        calibration_files.save_records(phases, records)
    _report(calibration, out)


def _report(calibration: Calibration, out: Path) -> None:
    """The fit, the burst check (not fitted) against the model, and where the file went."""
    for line in calibration_lines(calibration):
        click.echo(line)
    pairs = calibration_files.burst_check(calibration)
    if pairs is not None:
        click.echo(burst_line(pairs))
    click.echo(f"wrote {out}")


simulate.add_command(run)
