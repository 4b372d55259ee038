"""Typed options of the commands that measure a live service, built once from click's values.

The flows in ``bench_run`` and ``doctor_run`` read attributes, never strings: a misspelled option
is a type error, not a KeyError at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttft.cli.target_options import TargetOptions


@dataclass(frozen=True)
class BenchOptions:
    target: TargetOptions
    api: str
    profile: str | None
    buckets: str | None
    n_requests: int | None
    concurrency: str | None
    rates: tuple[str, ...]
    burstiness: float
    max_in_flight: int | None
    max_tokens: int
    warmup: int
    shared_prefix: str | None
    prompt_file: Path | None
    sharegpt: Path | None
    tokenizer_path: Path | None
    slo_texts: tuple[str, ...]
    timeout_s: float
    out_dir: Path | None
    cold_samples: int | None
    seed: str
    html_path: str | None = None  # --html: "" for the default place, else a file
    trace_path: Path | None = None  # --trace and its settings (cli/trace_options.py)
    trace_format: str = "auto"
    speed: float = 1.0
    block_size: int = 512
    trace_limit: int | None = None
    max_tokens_given: bool = True  # False: --max-tokens is its default (a trace keeps its own)
    duration: str | None = None
    ramp: str | None = None
    repeat: int = 1
    stop_on_saturation: bool = False
    sessions: int | None = None
    turns: int = 4
    think_time: str = "1"
    turn_tokens: str = "256:32"
    conversations: Path | None = None
    workers: int | None = None  # --workers: client processes (or Ray actors with --ray)
    ray_address: str | None = None  # --ray auto|ADDRESS
    fail_on_client_suspect: bool = False

    @property
    def profile_name(self) -> str:
        """The article's profile against a service, the quick one on the embedded engine."""
        return self.profile or ("article" if self.target.url else "quick")


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
