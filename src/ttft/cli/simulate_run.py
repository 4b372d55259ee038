"""``ttft simulate run``: predictions over a grid of what-if axes, the fewest replicas that hold
an SLO, and ``--validate`` against the real engine."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import click

from ttft.cli.simulate_validate import validate_point
from ttft.cli.trace_options import trace_options
from ttft.core.errors import TtftError
from ttft.core.slo import Slo, parse_slos
from ttft.simulate.fleet import POLICIES, Policy
from ttft.simulate.model import Calibration
from ttft.simulate.requests import SimRequest
from ttft.simulate.whatif import (
    Config,
    Prediction,
    Workload,
    check_slos,
    fewest_replicas,
    predict,
)
from ttft.simulate.workloads import WorkloadSource
from ttft.workload.trace import TraceSpec


def _ints(text: str | None, name: str) -> list[int | None]:
    if not text:
        return [None]
    out: list[int | None] = []
    for part in text.split(","):
        try:
            value = int(part)
        except ValueError:
            raise TtftError(
                f"{name} {text!r}: {part!r} is not a whole number", f"e.g. {name} 4,8,16"
            ) from None
        if value < 1:
            raise TtftError(f"{name} values must be at least 1, not {value}")
        out.append(value)
    return out


def _floats(text: str | None, name: str) -> list[float | None]:
    if not text:
        return [None]
    out: list[float | None] = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise TtftError(
                f"{name} {text!r}: {part!r} is not a number", f"e.g. {name} 1,2,4"
            ) from None
        if not value > 0:
            raise TtftError(f"{name} values must be above 0, not {value}")
        out.append(value)
    return out


def _policies(text: str) -> list[Policy]:
    out: list[Policy] = []
    for part in text.split(","):
        if part not in POLICIES:
            raise TtftError(f"unknown --policy {part!r}", f"choose from {', '.join(POLICIES)}")
        out.append(part)
    return out


def _ms(value: float) -> str:
    return f"{value * 1e3:.0f}"


def _row(p: Prediction, rate: float | None) -> str:
    t, q = p.ttft_s, p.queue_s
    cells = [
        p.config.describe() + (f" rate={rate:g}/s" if rate is not None else ""),
        *(
            f"{_ms(t[k].value)} [{_ms(t[k].interval.low)}-{_ms(t[k].interval.high)}]"
            for k in (50.0, 95.0, 99.0)
        ),
        f"{_ms(q[95.0].value)}",
        f"{p.throughput_rps.value:.2f}",
        "-" if p.goodput_rps is None else f"{p.goodput_rps.value:.2f}",
        "-" if p.slo_met is None else ("yes" if p.slo_met else "no"),
    ]
    return " | ".join(cells)


HEADER = (
    "config | TTFT p50 ms [95% interval] | p95 | p99 | queue p95 ms | req/s | goodput/s | SLO met"
)


@click.command("run")
@click.option(
    "-c",
    "--calibration",
    "cal_path",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="A file from `ttft simulate calibrate`.",
)
@trace_options
@click.option(
    "--rate",
    default=None,
    help="Poisson arrivals per second (a list sweeps: 1,2,4). "
    "With --trace it replaces the trace's times; without, it drives a synthetic mix.",
)
@click.option(
    "--requests",
    "count",
    type=int,
    default=300,
    show_default=True,
    help="Synthetic workload: how many requests.",
)
@click.option("--prompt-tokens", type=int, default=512, show_default=True)
@click.option("--output-tokens", type=int, default=32, show_default=True)
@click.option(
    "--shared-prefix",
    type=int,
    default=0,
    show_default=True,
    help="Synthetic: leading tokens shared within a prefix group (a system prompt).",
)
@click.option(
    "--prefix-groups",
    type=int,
    default=1,
    show_default=True,
    help="Synthetic: how many distinct shared prefixes.",
)
@click.option("--max-tokens", type=int, default=None, help="Cap every request's output.")
@click.option("--replicas", default="1", show_default=True, help="Replica counts (list sweeps).")
@click.option(
    "--policy",
    default="least-loaded",
    show_default=True,
    help=f"Routing, a list sweeps: {', '.join(POLICIES)}.",
)
@click.option("--slots", default=None, help="What if: slots / max-num-seqs (list sweeps).")
@click.option("--batch-tokens", default=None, help="What if: -b / max-num-batched-tokens.")
@click.option("--kv-blocks", default=None, help="What if (vLLM): KV blocks of 16 tokens.")
@click.option(
    "--gateway-cap",
    default=None,
    help="Behind `ttft gateway`: at most N requests in flight per replica, the rest wait in the "
    "gateway's queue and go to the first replica with room (its default N is the slots). "
    "A list sweeps.",
)
@click.option("--slo", "slo_texts", multiple=True, help="e.g. 'ttft:p99<600ms' (repeatable).")
@click.option(
    "--fewest-replicas",
    "find_fewest",
    is_flag=True,
    help="Find the fewest replicas that hold every --slo, per grid point.",
)
@click.option("--max-replicas", type=int, default=64, show_default=True)
@click.option(
    "--runs",
    type=int,
    default=5,
    show_default=True,
    help="Replications per point (the intervals come from them).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--validate",
    is_flag=True,
    help="Also run each point (one replica) on the real "
    "engine and print predicted against measured. Embedded engine unless --url.",
)
@click.option("--url", default=None, help="--validate against this engine instead.")
@click.option(
    "--html",
    "html_out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write an HTML page: the table and the predicted (and measured) TTFT per point.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write every prediction (and validation) as JSON.",
)
def run(
    cal_path: Path,
    trace_path: Path | None,
    trace_format: str,
    speed: float,
    block_size: int,
    trace_limit: int | None,
    rate: str | None,
    count: int,
    prompt_tokens: int,
    output_tokens: int,
    shared_prefix: int,
    prefix_groups: int,
    max_tokens: int | None,
    replicas: str,
    policy: str,
    slots: str | None,
    batch_tokens: str | None,
    kv_blocks: str | None,
    gateway_cap: str | None,
    slo_texts: tuple[str, ...],
    find_fewest: bool,
    max_replicas: int,
    runs: int,
    seed: int,
    validate: bool,
    url: str | None,
    json_out: Path | None,
    html_out: Path | None,
) -> None:
    """Predict TTFT p50/p95/p99 (with intervals), queue time and goodput for each point of the
    grid --replicas x --policy x --slots x --batch-tokens x --kv-blocks x --gateway-cap x --rate.

    \b
    Workload: --trace FILE (the formats `ttft bench --trace` reads: JSONL bodies with times, or
    Mooncake lines with hash_ids), optionally re-timed by --rate; or a synthetic Poisson mix
    (--rate, --prompt-tokens, --output-tokens, --shared-prefix, --prefix-groups).
    \b
    Examples:
      ttft simulate run -c cal.json --rate 2,4,8 --prompt-tokens 600 --slots 4,8,16
      ttft simulate run -c cal.json --trace mooncake.jsonl --replicas 4 \\
          --policy round-robin,least-loaded,prefix-affinity --slo 'ttft:p95<1s'
      ttft simulate run -c cal.json --rate 8 --slo 'ttft:p99<600ms' --fewest-replicas
    Exit code 1 when --slo is given and a predicted point misses it.
    """
    calibration = Calibration.load(cal_path)
    slos: tuple[Slo, ...] = parse_slos(list(slo_texts)) if slo_texts else ()
    check_slos(slos)
    if find_fewest and not slos:
        raise TtftError("--fewest-replicas needs an SLO", "add --slo 'ttft:p99<600ms'")
    for name, value in (
        ("--requests", count),
        ("--prompt-tokens", prompt_tokens),
        ("--output-tokens", output_tokens),
        ("--prefix-groups", prefix_groups),
    ):
        if value < 1:
            raise TtftError(f"{name} must be at least 1, not {value}")
    if not 0 <= shared_prefix <= prompt_tokens:
        raise TtftError("--shared-prefix must be between 0 and --prompt-tokens")
    trace = None
    if trace_path is not None:
        if not trace_path.is_file():
            raise TtftError(f"trace not found: {trace_path}", "check the path given to --trace")
        trace = TraceSpec(
            trace_path, cast(Any, trace_format), speed, block_size, trace_limit, max_tokens
        )
    rates = _floats(rate, "--rate")
    base = WorkloadSource(
        trace, None, count, prompt_tokens, output_tokens, shared_prefix, prefix_groups
    )
    grid = list(
        itertools.product(
            _ints(replicas, "--replicas"),
            _policies(policy),
            _ints(slots, "--slots"),
            _ints(batch_tokens, "--batch-tokens"),
            _ints(kv_blocks, "--kv-blocks"),
            _ints(gateway_cap, "--gateway-cap"),
            rates,
        )
    )
    tokenizer = _gguf_tokenizer(calibration) if trace is not None else None
    results: list[dict[str, Any]] = []
    missed = False
    click.echo(HEADER)
    for n_rep, pol, n_slots, n_batch, n_kv, cap, r in grid:
        source = replace(base, rate=r)
        source.check()
        cache: dict[int, list[SimRequest]] = {}

        def workload(
            s: int, source: WorkloadSource = source, cache: dict[int, list[SimRequest]] = cache
        ) -> list[SimRequest]:
            if s not in cache:
                cache[s] = source.requests(s if source.rate is not None else seed, tokenizer)
            return cache[s]

        config = Config(n_rep or 1, pol, n_slots, n_batch, n_kv, cap)
        if find_fewest:
            best, tried = fewest_replicas(
                calibration, workload, config, slos, max_replicas=max_replicas, runs=runs, seed=seed
            )
            for p in tried:
                click.echo(_row(p, r))
            click.echo(
                f"  -> fewest replicas holding {', '.join(s.text for s in slos)}: "
                + (str(best) if best is not None else f"none up to {max_replicas}")
            )
            results.append(
                {"rate": r, "fewest_replicas": best, "tried": [p.to_dict() for p in tried]}
            )
            missed = missed or best is None
            continue
        prediction = predict(calibration, workload, config, slos=slos, runs=runs, seed=seed)
        click.echo(_row(prediction, r))
        for note in prediction.notes:
            click.echo(f"  note: {note}")
        entry: dict[str, Any] = {"rate": r, **prediction.to_dict()}
        missed = missed or prediction.slo_met is False
        if validate:

            def again(cal: Calibration, w: Workload = workload, c: Config = config) -> Prediction:
                return predict(cal, w, c, slos=slos, runs=runs, seed=seed)

            entry["validation"] = validate_point(
                calibration, source, workload(seed), prediction, url, again
            )
        results.append(entry)
    if json_out is not None:
        json_out.write_text(
            json.dumps({"calibration": str(cal_path), "points": results}, indent=2) + "\n",
            encoding="utf-8",
        )
        click.echo(f"wrote {json_out}")
    if html_out is not None:
        import time

        from ttft.report.html_simulate import simulate_page

        doc = {"calibration": str(cal_path), "points": results}
        try:
            html_out.write_text(
                simulate_page(doc, generated=time.strftime("%Y-%m-%d %H:%M:%S")), encoding="utf-8"
            )
        except OSError as exc:
            raise TtftError(f"cannot write {html_out}: {exc.strerror}") from None
        click.echo(f"wrote {html_out}")
    if missed:
        raise click.exceptions.Exit(1)


def _gguf_tokenizer(calibration: Calibration) -> Any:
    """JSONL traces are counted with the embedded model's tokenizer when it is the one
    calibrated; otherwise ~4 characters a token."""
    if not calibration.source.get("embedded"):
        return None
    try:
        from ttft.engines.llamacpp.embedded import embedded_model_path
        from ttft.workload.gguf_tokenizer import GgufTokenizer

        return GgufTokenizer.from_gguf(embedded_model_path())
    except TtftError:
        return None
