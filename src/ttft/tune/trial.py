"""What one trial measured: a configuration, each load level tried on it, and its outcome.

A ``LevelResult`` is one bench cell at one load reduced to what tuning compares: closed-loop
concurrency, or an open-loop arrival rate (``rate`` set); the full per-request records stay in the
trial's ``records.jsonl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ttft.core.metrics import get_metric
from ttft.core.records import RequestRecord
from ttft.core.slo import Slo
from ttft.core.stats import Interval
from ttft.core.summary import COLD, WARMUP, summarize
from ttft.core.units import NS_PER_MS

OK, FAILED = "ok", "failed"
MEASURED, PREDICTED = "measured", "predicted"


@dataclass(frozen=True)
class LevelResult:
    """One load level on one configuration.

    Closed loop: ``concurrency`` is the requests kept in flight and ``rate`` is None. Open loop:
    ``rate`` is the arrival rate asked for (requests/s), ``concurrency`` the most requests that
    were in flight at once, and ``client_lag_p50_ms`` / ``client_lag_p99_ms`` how late the client
    sent them against its schedule (scheduled -> sent). Fields added later default, so old
    trial.json files read.
    """

    concurrency: int
    n: int
    ok: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    ttft_p50_ci_ms: tuple[float, float] | None
    ttft_p95_ci_ms: tuple[float, float] | None
    goodput_per_s: float  # good requests per second (all requests when no SLO is set)
    good_fraction: float
    slo_passed: bool
    errors: dict[str, int] = field(default_factory=dict)
    # Every successful request's TTFT, so A/B steps can pool repeats and resume from disk.
    ttft_ms: tuple[float, ...] = ()
    warmup_s: float | None = None  # the warm-up round before the measured requests (overhead)
    rate: float | None = None  # open loop: requests/s asked for
    client_lag_p50_ms: float | None = None  # open loop: median of scheduled -> sent
    client_lag_p99_ms: float | None = None  # open loop: p99 of scheduled -> sent

    @property
    def load(self) -> float:
        """The load this level was measured at: its rate (open loop) or its concurrency."""
        return float(self.concurrency) if self.rate is None else self.rate

    def load_label(self) -> str:
        """``c=4`` (closed loop) or ``2.0/s`` (open loop)."""
        return f"c={self.concurrency}" if self.rate is None else rate_label(self.rate)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LevelResult:
        payload = dict(data)
        for key in ("ttft_p50_ci_ms", "ttft_p95_ci_ms", "ttft_ms"):
            if payload.get(key) is not None:
                payload[key] = tuple(payload[key])
        return cls(**payload)


def rate_label(rate: float) -> str:
    """``2.0/s``, ``0.75/s``, ``12.0/s``: two decimals at most, one at least."""
    text = f"{rate:.2f}"
    if text.endswith("0"):
        text = text[:-1]
    return f"{text}/s"


def _ttft_values(record: RequestRecord) -> list[float]:
    metric = get_metric("ttft")
    assert metric is not None, "ttft is a core metric"
    return list(metric.values(record))


def _ci_ms(interval: Interval) -> tuple[float, float]:
    return interval.low / NS_PER_MS, interval.high / NS_PER_MS


def level_from_records(
    concurrency: int,
    records: Sequence[RequestRecord],
    duration_ns: int,
    slos: Sequence[Slo],
    *,
    rate: float | None = None,
) -> LevelResult:
    """Reduce one cell's records (failed ones included: they are never good) to a level.
    With ``rate`` (an open-loop cell) the level also carries the client's lag behind its
    schedule."""
    cell = summarize(records, duration_ns=duration_ns, slos=slos)
    lag_p50: float | None = None
    lag_p99: float | None = None
    if rate is not None:
        wait = cell.metrics.get("client_wait")
        lag_p50 = 0.0 if wait is None else wait.stats.p50 / NS_PER_MS
        lag_p99 = 0.0 if wait is None else wait.stats.p99 / NS_PER_MS
    ttft = cell.metrics.get("ttft")
    stats = ttft.stats if ttft is not None else None
    if cell.goodput is not None:
        per_s = cell.goodput.per_s or 0.0
        fraction = cell.goodput.fraction or 0.0
    else:
        per_s = cell.request_throughput or 0.0
        fraction = cell.ok / cell.n if cell.n else 0.0
    return LevelResult(
        concurrency=concurrency,
        n=cell.n,
        ok=cell.ok,
        ttft_p50_ms=None if stats is None else stats.p50 / NS_PER_MS,
        ttft_p95_ms=None if stats is None else stats.p95 / NS_PER_MS,
        ttft_p99_ms=None if stats is None else stats.p99 / NS_PER_MS,
        ttft_p50_ci_ms=None if stats is None else _ci_ms(stats.p50_ci),
        ttft_p95_ci_ms=None if stats is None else _ci_ms(stats.p95_ci),
        goodput_per_s=per_s,
        good_fraction=fraction,
        slo_passed=cell.ok > 0 and cell.slos_passed,
        errors=dict(cell.errors),
        ttft_ms=tuple(
            value / NS_PER_MS
            for r in records
            if r.ok and r.phase not in (WARMUP, COLD)
            for value in _ttft_values(r)
        ),
        rate=rate,
        client_lag_p50_ms=lag_p50,
        client_lag_p99_ms=lag_p99,
    )


@dataclass
class TrialResult:
    """One configuration's trial. ``best`` is the highest load that held the SLOs (None: none)."""

    trial_id: str
    config: dict[str, str]
    status: str  # ok or failed
    reason: str = ""  # why it failed, in words
    levels: list[LevelResult] = field(default_factory=list)
    best: LevelResult | None = None
    saturated: bool = False  # the search stopped because more load gave no more goodput
    launch_command: list[str] = field(default_factory=list)
    startup_s: float | None = None  # the engine's start-up to healthy (a trial that starts one)
    # The whole trial on the wall clock: start-up, warm-up, load search, stop (its cost).
    trial_s: float | None = None
    # The quality gate's verdict against the sweep's baseline (pass / degraded / fail, from
    # ``ttft verify quality``); None: not checked. A "fail" is never chosen.
    quality: str | None = None
    # measured (a real trial) or predicted (``tune sweep --predict``: the simulator's answer
    # for a configuration not run); ``note`` says more (e.g. why it could not be predicted)
    source: str = MEASURED
    note: str = ""

    @property
    def quality_failed(self) -> bool:
        return self.quality == "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_id": self.trial_id,
            "config": dict(self.config),
            "status": self.status,
            "reason": self.reason,
            "levels": [level.to_dict() for level in self.levels],
            "best": None if self.best is None else self.best.to_dict(),
            "saturated": self.saturated,
            "launch_command": list(self.launch_command),
            "startup_s": self.startup_s,
            "trial_s": self.trial_s,
            "quality": self.quality,
            "source": self.source,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        best = data.get("best")
        return cls(
            trial_id=str(data["trial_id"]),
            config={str(k): str(v) for k, v in data["config"].items()},
            status=str(data["status"]),
            reason=str(data.get("reason", "")),
            levels=[LevelResult.from_dict(level) for level in data.get("levels", [])],
            best=None if best is None else LevelResult.from_dict(best),
            saturated=bool(data.get("saturated", False)),
            launch_command=[str(a) for a in data.get("launch_command", [])],
            startup_s=data.get("startup_s"),
            trial_s=data.get("trial_s"),
            quality=data.get("quality"),
            source=str(data.get("source", MEASURED)),
            note=str(data.get("note", "")),
        )
