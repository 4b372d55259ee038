"""``ttft simulate run``: predictions over a grid of what-if axes, the fewest replicas that hold
an SLO, and ``--validate`` against the real engine.

The options are parsed here and the question asked of ``simulate/sweep``; this module prints a
row per point as it is answered and writes the JSON and HTML documents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ttft.cli.trace_options import trace_options
from ttft.simulate.fleet import POLICIES
from ttft.simulate.run_options import RunOptions, sweep_for
from ttft.simulate.sweep import PointResult, Sweep
from ttft.simulate.text import HEADER, point_lines


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
@click.option(
    "--slots",
    default=None,
    help="What if: slots (llama.cpp -np, vLLM --max-num-seqs, SGLang --max-running-requests). "
    "A list sweeps.",
)
@click.option(
    "--batch-tokens",
    default=None,
    help="What if: tokens per step (llama.cpp -b, vLLM --max-num-batched-tokens, SGLang "
    "--chunked-prefill-size: the most prompt tokens one extend step computes). A list sweeps.",
)
@click.option(
    "--kv-blocks",
    default=None,
    help="What if: the KV pool (vLLM: blocks of 16 tokens; SGLang: pages of --page-size "
    "tokens, 1 by default). A list sweeps.",
)
@click.option(
    "--schedule-policy",
    default=None,
    help="What if (SGLang): the waiting queue's order, fcfs (SGLang's default: arrival order) "
    "or lpm (longest cached prefix first, fcfs again when over 128 wait). 'fcfs,lpm' compares.",
)
@click.option(
    "--gateway-cap",
    default=None,
    help="Behind `ttft gateway`: at most N requests in flight per replica, the rest wait in the "
    "gateway's queue and go to the first replica with room (its default N is the slots). "
    "With --lanes: the cap per replica the lanes fill. A list sweeps.",
)
@click.option(
    "--lanes",
    is_flag=True,
    help="Behind `ttft gateway` with its lanes, as it runs by default: per replica, prompts "
    "over --long-prompt-tokens wait in a long lane and short ones in a short lane that goes "
    "first, and long requests may hold all slots but --long-reserve. Each request is routed on "
    "arrival and waits at its replica, as the gateway does; requests the gateway sheds (429 "
    "queue full, 503 queue timeout) are counted. Implied by the three options below.",
)
@click.option(
    "--long-prompt-tokens",
    default=None,
    help="With lanes: prompts above this many tokens go to the long lane [the gateway's 1024]. "
    "A list sweeps.",
)
@click.option(
    "--long-reserve",
    default=None,
    help="With lanes: slots per replica that long prompts may not take, so a short request "
    "arriving while long ones hold every other slot starts at once (or within one short "
    "request) instead of waiting for a whole long prefill [the gateway's: 1 with 2+ slots; "
    "0: off]. Long requests still get at least one slot. A list sweeps: 0,1,2.",
)
@click.option(
    "--short-burst",
    default=None,
    help="With lanes: short requests started in a row before a waiting long one gets its turn "
    "[the gateway's 4]; long requests are delayed, never starved. A list sweeps.",
)
@click.option(
    "--queue-size",
    type=click.IntRange(min=1),
    default=None,
    help="With lanes: waiting requests per replica, both lanes; one more is shed (429) [64].",
)
@click.option(
    "--queue-timeout",
    type=click.FloatRange(min=0.001),
    default=None,
    help="With lanes: seconds a request may wait for a slot before it is shed (503) [30].",
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
    help="Also run each point on the real engine and print predicted against measured: the "
    "embedded engine unless --url; a point with several replicas starts that many embedded "
    "engines behind a real ttft gateway routing by its --policy (least-loaded or "
    "prefix-affinity); a lanes point runs behind a real ttft gateway with the point's lanes.",
)
@click.option(
    "--url",
    default=None,
    help="--validate against this engine instead (several replicas: your router in front of them).",
)
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
    grid --replicas x --policy x --slots x --batch-tokens x --kv-blocks x --gateway-cap x
    lanes (--long-prompt-tokens x --long-reserve x --short-burst) x --schedule-policy (SGLang) x
    --rate.

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
      ttft simulate run -c cal.json --trace mixed.jsonl --long-prompt-tokens 400 \\
          --long-reserve 0,1 --slo 'ttft:p95<1s'
      ttft simulate run -c sglang-cal.json --rate 4 --shared-prefix 400 --prefix-groups 8 \\
          --schedule-policy fcfs,lpm --batch-tokens 2048,8192
    Exit code 1 when --slo is given and a predicted point misses it.
    """
    execute(RunOptions(**opts))


def execute(o: RunOptions) -> None:
    """Answer every point, printing its row as it comes; exit 1 when a point misses an SLO."""
    sweep = sweep_for(o)
    results: list[PointResult] = []
    click.echo(HEADER)
    for point in sweep.points():
        result = sweep.answer(point)
        for line in point_lines(result, sweep):
            click.echo(line)
        if o.validate and result.prediction is not None:
            from ttft.simulate.validate_point import validate_point

            result.validation = validate_point(
                sweep.calibration,
                point.source,
                point.requests(sweep.seed),
                result.prediction,
                o.url,
                sweep.again(point),
                say=click.echo,
                progress=lambda line: click.echo(line, err=True),
            )
        results.append(result)
    _write(sweep, results, o)
    if any(r.missed for r in results):
        raise click.exceptions.Exit(1)


def _write(sweep: Sweep, results: list[PointResult], o: RunOptions) -> None:
    """--json and --html: every point's answer (and validation)."""
    doc = sweep.document(str(o.cal_path), results)
    json_out, html_out = o.json_out, o.html_out
    if json_out is not None:
        json_out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote {json_out}")
    if html_out is not None:
        from ttft.report.html_simulate import write_simulate_page

        write_simulate_page(doc, html_out)
        click.echo(f"wrote {html_out}")
