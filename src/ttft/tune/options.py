"""What a tune run is asked to do, typed: the options ``tune sweep`` and ``tune ab`` share, and
each one's own.

The CLI fills these from its flags (the field names are the flags' parameter names) and the
flows in ``sweep_flow.py`` and ``ab_flow.py`` read them, so a misspelt option is a type error,
not a ``KeyError`` in the middle of an experiment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttft.tune.workload import Shape


@dataclass(frozen=True, kw_only=True)
class TuneOptions:
    """The workload, where results go, and which service: the same for a sweep and a chain."""

    shape: Shape = "shared-prefix"
    request_log: Path | None = None
    prefix_words: int = 120
    suffix_words: int = 12
    max_tokens: int = 8
    requests: int = 8
    slo_texts: tuple[str, ...] = ()
    out_dir: Path | None = None  # None: results/tune-<kind>-<time>
    resume: bool = False
    url: str | None = None  # a service ttft does not start
    model_path: Path | None = None
    per_slot_ctx: int = 2048
    threads: int | None = None
    restart: str | None = None  # with url: the command that restarts it with a trial's flags
    launch: str | None = None  # the engine's launch command without the tuned flags
    html_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class SweepOptions(TuneOptions):
    """``tune sweep``: the space, the load search, and the optional second axis."""

    params: tuple[str, ...] = ()  # FLAG=V1,V2; empty: the engine's tunables
    engine_kind: str = "llamacpp"
    dry_run: bool = False
    max_configs: int = 64
    buckets: str | None = None  # prompt lengths in words for the prompt-length axis
    load_mode: str = "concurrency"  # or "rate"
    start_load: int = 1
    max_load: int = 16
    start_rate: float = 0.5
    max_rate: float = 16.0
    rate_tolerance: float = 0.1
    level_seconds: float = 10.0
    max_client_lag_ms: float = 10.0
    burstiness: float = 1.0
    quality_gate: bool = False
    predict_path: Path | None = None  # a simulate calibration: measure only the predicted best
    measure_top: int | None = None  # with predict_path (None: half the grid, rounded up)


@dataclass(frozen=True, kw_only=True)
class AbOptions(TuneOptions):
    """``tune ab``: a baseline and changes given as text, or a plan file."""

    baseline: str = "baseline"
    changes: tuple[str, ...] = ()
    plan: Path | None = None
    fixed_order: bool = False
    concurrency: int = 4
    repeats: int = 2
