"""``ttft doctor``: where the first-token time goes on a live service, and what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ttft.cli.html_output import html_option
from ttft.cli.target_options import target_options
from ttft.core.target_options import TargetOptions
from ttft.doctor.options import DoctorOptions


@click.command()
@target_options
@click.option(
    "--direct-url",
    default=None,
    help="The engine itself, behind the proxy at --url: compares the two.",
)
@click.option(
    "--requests-log",
    "--prompt-file",
    "requests_log",
    type=click.Path(path_type=Path),
    default=None,
    help="JSONL of your real chat requests (one OpenAI body per line).",
)
@click.option(
    "--nginx-conf",
    type=click.Path(path_type=Path),
    default=None,
    help="nginx configuration in front of the service: its findings join the report.",
)
@click.option(
    "--engine-cmd",
    default=None,
    help="The engine's launch command line, quoted: its flags are checked too.",
)
@click.option(
    "--gpu-metrics-url",
    default=None,
    help="GPU telemetry: a DCGM exporter's /metrics (or any Prometheus endpoint with "
    "DCGM_FI_DEV_GPU_UTIL). Default: nvidia-smi when the service runs on this machine.",
)
@click.option("--slo", "slo_texts", multiple=True, help="e.g. 'ttft:p99<600ms'.")
@click.option(
    "--concurrency",
    default=None,
    help="Load levels for the capacity step. Default: 1,8,32 (1,4 on the embedded engine).",
)
@click.option("--hol", is_flag=True, help="Check head-of-line blocking even without a mixed log.")
@click.option(
    "--budget",
    type=float,
    default=5.0,
    show_default=True,
    help="Minutes the whole run may take; steps that do not fit are skipped.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Write report.json and report.md here.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown", "sarif"]), default="text"
)
@click.option("--fail-on-findings", is_flag=True, help="Exit 1 when there is any finding (CI).")
@click.option(
    "--plan",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the findings' changes as an editable plan (TOML), cheapest first, with the "
    "service as measured; run it with `ttft tune ab --plan FILE`.",
)
@html_option
def doctor(target: TargetOptions, **opts: Any) -> None:
    """Find where time-to-first-token goes on a live service, cheapest fix first.

    Runs the article's troubleshooting order against the service: (1) client vs server timing
    and stream integrity, (2) the server's timeline, (3) capacity at rising load, (4) the prefix
    cache, (5) a minimal control prompt against your real ones; plus cold start and
    head-of-line blocking. Each finding carries its evidence, the exact change, the expected
    gain, a cost tier and a confidence. A healthy service gets a clean bill of health.

    \b
    Examples:
      ttft doctor                                     # the embedded engine
      ttft doctor --url http://gateway:8080 --direct-url http://engine:8000
      ttft doctor --url URL --requests-log requests.jsonl --nginx-conf /etc/nginx/nginx.conf
      ttft doctor --url URL --direct-url ENGINE --nginx-conf site.conf \\
          --engine-cmd 'llama-server -m model.gguf -np 1' --plan plan.toml
    """
    from ttft.cli.doctor_run import execute

    execute(DoctorOptions(target=target, **opts))
