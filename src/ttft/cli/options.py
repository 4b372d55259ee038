"""Typed options of ``ttft doctor``, built once from click's values (bench's are the library's
``ttft.load.bench_options.BenchOptions``).

The flow in ``doctor_run`` reads attributes, never strings: a misspelled option is a type
error, not a KeyError at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttft.core.target_options import TargetOptions


@dataclass(frozen=True)
class DoctorOptions:
    target: TargetOptions
    direct_url: str | None
    requests_log: Path | None
    nginx_conf: Path | None
    engine_cmd: str | None
    slo_texts: tuple[str, ...]
    concurrency: str | None
    hol: bool
    budget: float
    out_dir: Path | None
    fmt: str
    fail_on_findings: bool
    plan: Path | None = None
    html_path: str | None = None
    gpu_metrics_url: str | None = None
