"""``ttft simulate run``: predictions over a grid of what-if axes, the fewest replicas that hold
an SLO, and ``--validate`` against the real engine.

The options are parsed here and the question asked of ``simulate/sweep``; this module prints a
row per point as it is answered and writes the JSON and HTML documents.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import click

from ttft.cli.simulate_validate import validate_point
from ttft.cli.trace_options import trace_options
from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.simulate.fleet import POLICIES
from ttft.simulate.model import Calibration
from ttft.simulate.sweep import (
    Grid,
    PointResult,
    Sweep,
    base_workload,
    check_question,
    int_axis,
    policy_axis,
    rate_axis,
    trace_tokenizer,
)
from ttft.simulate.whatif import Prediction
from ttft.workload.trace import TraceSpec


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


@dataclass(frozen=True)
class RunOptions:
    """``ttft simulate run``'s options, as click parsed them."""

    cal_path: Path
    trace_path: Path | None
    trace_format: str
    speed: float
    block_size: int
    trace_limit: int | None
    rate: str | None
    count: int
    prompt_tokens: int
    output_tokens: int
    shared_prefix: int
    prefix_groups: int
    max_tokens: int | None
    replicas: str
    policy: str
    slots: str | None
    batch_tokens: str | None
    kv_blocks: str | None
    gateway_cap: str | None
    slo_texts: tuple[str, ...]
    find_fewest: bool
    max_replicas: int
    runs: int
    seed: int
    validate: bool
    url: str | None
    json_out: Path | None
    html_out: Path | None


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
def run(**opts: Any) -> None:
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
    execute(RunOptions(**opts))


def _sweep(o: RunOptions) -> Sweep:
    """The question the options ask, every value checked before the first point."""
    calibration = Calibration.load(o.cal_path)
    slos = parse_slos(list(o.slo_texts)) if o.slo_texts else ()
    check_question(slos, o.find_fewest)
    trace = None
    if o.trace_path is not None:
        fmt = cast(Any, o.trace_format)
        trace = TraceSpec(o.trace_path, fmt, o.speed, o.block_size, o.trace_limit, o.max_tokens)
    rates = rate_axis(o.rate)
    base = base_workload(
        trace, o.count, o.prompt_tokens, o.output_tokens, o.shared_prefix, o.prefix_groups
    )
    grid = Grid(
        int_axis(o.replicas, "--replicas"),
        policy_axis(o.policy),
        int_axis(o.slots, "--slots"),
        int_axis(o.batch_tokens, "--batch-tokens"),
        int_axis(o.kv_blocks, "--kv-blocks"),
        int_axis(o.gateway_cap, "--gateway-cap"),
        rates,
    )
    tokenizer = trace_tokenizer(calibration, base)
    return Sweep(
        calibration, base, grid, slos, o.find_fewest, o.max_replicas, o.runs, o.seed, tokenizer
    )


def execute(o: RunOptions) -> None:
    """Answer every point, printing its row as it comes; exit 1 when a point misses an SLO."""
    sweep = _sweep(o)
    results: list[PointResult] = []
    click.echo(HEADER)
    for point in sweep.points():
        result = sweep.answer(point)
        _print(result, sweep)
        if o.validate and result.prediction is not None:
            result.validation = validate_point(
                sweep.calibration,
                point.source,
                point.requests(sweep.seed),
                result.prediction,
                o.url,
                sweep.again(point),
            )
        results.append(result)
    _write(sweep, results, o)
    if any(r.missed for r in results):
        raise click.exceptions.Exit(1)


def _print(result: PointResult, sweep: Sweep) -> None:
    rate = result.point.rate
    if result.prediction is None:
        for p in result.tried:
            click.echo(_row(p, rate))
        best = result.fewest
        found = str(best) if best is not None else f"none up to {sweep.max_replicas}"
        slos = ", ".join(s.text for s in sweep.slos)
        click.echo(f"  -> fewest replicas holding {slos}: {found}")
        return
    click.echo(_row(result.prediction, rate))
    for note in result.prediction.notes:
        click.echo(f"  note: {note}")


def _write(sweep: Sweep, results: list[PointResult], o: RunOptions) -> None:
    """--json and --html: every point's answer (and validation)."""
    doc = sweep.document(str(o.cal_path), results)
    json_out, html_out = o.json_out, o.html_out
    if json_out is not None:
        json_out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")
    if html_out is not None:
        from ttft.report.html_simulate import simulate_page

        try:
            html_out.write_text(
                simulate_page(doc, generated=time.strftime("%Y-%m-%d %H:%M:%S")), encoding="utf-8"
            )
        except OSError as exc:
            raise TtftError(f"cannot write {html_out}: {exc.strerror}") from None
        click.echo(f"wrote {html_out}")
