"""What ``ttft bench`` is asked to do, typed, and the checks on it that need no server.

``BenchOptions`` holds every bench option (the CLI fills it from its flags); the profiles give
the defaults an option leaves open; ``worker_setup`` decides whether the run goes over client
worker processes or Ray actors, and refuses the workloads those cannot run yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.target_options import TargetOptions
from ttft.load.fleet_setup import WorkerSetup


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
class Profile:
    buckets: tuple[int, ...]
    concurrency: tuple[int, ...]
    requests: int
    note: str


PROFILES = {
    # The article's measurement setup (seed section 3.1).
    "article": Profile((512, 2400, 8000), (1, 8, 32), 200, "512/2400/8000 tokens x c=1/8/32"),
    # Small enough for the embedded 270M model on 2 CPU cores in about a minute.
    "quick": Profile((128, 512), (1, 4), 8, "128/512 tokens x c=1/4, 8 requests"),
}


def parse_int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise TtftError(
            f"{option} {text!r} is not a comma-separated list of whole numbers",
            f"e.g. {option} 512,2400,8000",
        ) from None
    if not values or any(v < 1 for v in values):
        raise TtftError(f"{option} needs numbers of at least 1, not {text!r}")
    return values


def parse_shared_prefix(text: str) -> tuple[int, int]:
    prefix, sep, suffix = text.partition(":")
    try:
        if not sep:
            raise ValueError
        values = (int(prefix), int(suffix))
    except ValueError:
        raise TtftError(
            f"--shared-prefix {text!r} is not P:S",
            "e.g. --shared-prefix 1200:64 (a 1200-token system prompt, 64-token questions)",
        ) from None
    if min(values) < 1:
        raise TtftError("--shared-prefix needs P and S of at least 1 token")
    return values


def worker_setup(options: BenchOptions) -> WorkerSetup | None:
    """None for the plain in-process client (no --workers above 1, no --ray)."""
    many = options.workers is not None and options.workers > 1
    if options.ray_address is None and not many:
        return None
    if options.cold_samples is not None:
        raise TtftError(
            "--cold sends one request per engine start: --workers and --ray do not apply",
            "drop --workers/--ray, or drop --cold",
        )
    unsupported = [
        flag
        for flag, given in (
            ("--trace", options.trace_path is not None),
            ("--sessions/--conversations", options.sessions is not None or options.conversations),
            ("--duration", options.duration is not None),
            ("--ramp", options.ramp is not None),
            ("--repeat", options.repeat > 1),
            ("--stop-on-saturation", options.stop_on_saturation),
        )
        if given
    ]
    if unsupported:
        # The fleet deals fixed-count closed- and open-loop cells; these workloads decide live
        # (timed cells, saturation stops, conversations, replayed schedules) in one process.
        raise TtftError(
            f"--workers/--ray do not run {', '.join(unsupported)} yet",
            "drop --workers/--ray (one client process runs them), or run fixed-count cells",
        )
    if options.ray_address is not None:
        from ttft.load.ray_fleet import import_ray

        import_ray()  # says which extra to install before any engine starts
        address = options.ray_address.strip()
        if not address:
            raise TtftError("--ray needs 'auto' or a head node's HOST:PORT")
        return WorkerSetup(options.workers, address)
    return WorkerSetup(options.workers)
