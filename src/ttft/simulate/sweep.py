"""``ttft simulate run``'s question, answered point by point: a grid of what-if axes, each point
predicted (or searched for the fewest replicas that hold every SLO), and what the command prints
and writes about it.

The grid is the product replicas x policy x slots x batch tokens x KV blocks x gateway cap x
lanes x (SGLang) schedule policy x rate, in that order (the last axis turns fastest); the lanes
axis is itself the product long-prompt tokens x long reserve x short burst. Each point draws its
workload once per
replication seed; a trace replayed at its own times is the same for every seed, so it is drawn
with the sweep's seed. The CLI parses options, asks :func:`open_sweep`, and prints what
:meth:`Sweep.answer` returns.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.simulate.fleet import POLICIES, Policy
from ttft.simulate.gateway_sim import Lanes
from ttft.simulate.model import SGLANG_POLICIES, Calibration
from ttft.simulate.requests import SimRequest
from ttft.simulate.whatif import Config, Prediction, check_slos, fewest_replicas, predict
from ttft.simulate.workloads import WorkloadSource
from ttft.workload.tokenizer import Tokenizer
from ttft.workload.trace import TraceSpec


def schedule_axis(text: str | None, kind: str) -> list[str | None]:
    """SGLang's ``--schedule-policy`` values to compare (fcfs, lpm); ``[None]`` keeps the
    calibration's."""
    if not text:
        return [None]
    if kind != "sglang":
        raise TtftError(
            f"--schedule-policy is SGLang's; this calibration is for {kind}",
            "drop --schedule-policy, or calibrate an SGLang engine with --engine sglang",
        )
    out: list[str | None] = []
    for part in text.split(","):
        if part not in SGLANG_POLICIES:
            raise TtftError(
                f"--schedule-policy {part!r} is not modelled",
                f"the SGLang model knows {', '.join(SGLANG_POLICIES)}",
            )
        out.append(part)
    return out


def int_axis(text: str | None, name: str, minimum: int = 1) -> list[int | None]:
    """A comma-separated list of whole numbers of at least ``minimum``; ``[None]`` (the
    calibration's own setting) when not given."""
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
        if value < minimum:
            raise TtftError(f"{name} values must be at least {minimum}, not {value}")
        out.append(value)
    return out


def rate_axis(text: str | None, name: str = "--rate") -> list[float | None]:
    """A comma-separated list of numbers above 0; ``[None]`` when not given."""
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


def policy_axis(text: str) -> list[Policy]:
    """A comma-separated list of routing policies, each one of :data:`POLICIES`."""
    out: list[Policy] = []
    for part in text.split(","):
        if part not in POLICIES:
            raise TtftError(f"unknown --policy {part!r}", f"choose from {', '.join(POLICIES)}")
        out.append(part)
    return out


def lanes_axis(
    enabled: bool,
    long_prompt_tokens: str | None,
    long_reserve: str | None,
    short_burst: str | None,
    queue_size: int | None = None,
    queue_timeout_s: float | None = None,
) -> list[Lanes | None]:
    """The gateway's lanes at every combination of the three lists (each comma-separated,
    the gateway's default when not given); ``[None]`` (no lanes) unless ``enabled`` or one of
    the lists is given. ``queue_size`` and ``queue_timeout_s`` are single values."""
    given = (long_prompt_tokens, long_reserve, short_burst)
    if not enabled and not any(given):
        if queue_size is not None or queue_timeout_s is not None:
            raise TtftError(
                "--queue-size and --queue-timeout are the lanes' queue",
                "add --lanes (or --long-reserve, --long-prompt-tokens, --short-burst)",
            )
        return [None]
    base = Lanes()
    if queue_size is not None:
        base = replace(base, queue_size=queue_size)
    if queue_timeout_s is not None:
        base = replace(base, queue_timeout_s=queue_timeout_s)
    out: list[Lanes | None] = []
    for long_tokens, reserve, burst in itertools.product(
        int_axis(long_prompt_tokens, "--long-prompt-tokens"),
        int_axis(long_reserve, "--long-reserve", minimum=0),
        int_axis(short_burst, "--short-burst"),
    ):
        lanes = replace(
            base,
            long_prompt_tokens=base.long_prompt_tokens if long_tokens is None else long_tokens,
            long_reserve=reserve,
            short_burst=base.short_burst if burst is None else burst,
        )
        lanes.check()
        out.append(lanes)
    return out


@dataclass(frozen=True)
class Grid:
    """The what-if axes; None on an axis keeps the calibration's setting (one replica)."""

    replicas: list[int | None] = field(default_factory=lambda: [1])
    policies: list[Policy] = field(default_factory=lambda: ["least-loaded"])
    slots: list[int | None] = field(default_factory=lambda: [None])
    batch_tokens: list[int | None] = field(default_factory=lambda: [None])
    kv_blocks: list[int | None] = field(default_factory=lambda: [None])
    gateway_caps: list[int | None] = field(default_factory=lambda: [None])
    lanes: list[Lanes | None] = field(default_factory=lambda: [None])
    rates: list[float | None] = field(default_factory=lambda: [None])
    schedule_policies: list[str | None] = field(default_factory=lambda: [None])  # SGLang only

    def points(self) -> Iterator[tuple[Config, float | None]]:
        """Every point's configuration and arrival rate, the rate turning fastest."""
        axes = itertools.product(
            self.replicas,
            self.policies,
            self.slots,
            self.batch_tokens,
            self.kv_blocks,
            self.gateway_caps,
            self.lanes,
            self.schedule_policies,
            self.rates,
        )
        for n_rep, pol, n_slots, n_batch, n_kv, cap, lanes, order, rate in axes:
            config = Config(
                n_rep or 1, pol, n_slots, n_batch, n_kv, cap, lanes=lanes, schedule_policy=order
            )
            yield config, rate


def base_workload(
    trace: TraceSpec | None,
    count: int,
    prompt_tokens: int,
    output_tokens: int,
    shared_prefix: int,
    prefix_groups: int,
) -> WorkloadSource:
    """The workload every point runs (its rate set per point): the trace, else the synthetic
    mix; every size checked, a missing trace file named."""
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
    if trace is not None and not trace.path.is_file():
        raise TtftError(f"trace not found: {trace.path}", "check the path given to --trace")
    return WorkloadSource(
        trace, None, count, prompt_tokens, output_tokens, shared_prefix, prefix_groups
    )


@dataclass
class SweepPoint:
    """One point of the grid: its configuration, rate, workload source and requests (drawn
    once per replication seed)."""

    config: Config
    rate: float | None
    source: WorkloadSource
    requests: Callable[[int], list[SimRequest]]


@dataclass
class PointResult:
    """What one point answered: a prediction, or (``--fewest-replicas``) the fewest replicas
    that hold the SLOs (None: none up to the limit) and every count tried on the way."""

    point: SweepPoint
    prediction: Prediction | None = None
    fewest: int | None = None
    tried: list[Prediction] = field(default_factory=list)
    validation: dict[str, Any] | None = None  # --validate: measured against predicted

    @property
    def missed(self) -> bool:
        """The point misses an SLO (no replica count up to the limit holds them all)."""
        if self.prediction is None:
            return self.fewest is None
        return self.prediction.slo_met is False

    def to_dict(self) -> dict[str, Any]:
        rate = self.point.rate
        if self.prediction is None:
            tried = [p.to_dict() for p in self.tried]
            return {"rate": rate, "fewest_replicas": self.fewest, "tried": tried}
        out: dict[str, Any] = {"rate": rate, **self.prediction.to_dict()}
        if self.validation is not None:
            out["validation"] = self.validation
        return out


@dataclass(frozen=True)
class Sweep:
    """A calibrated model asked the same question at every point of a grid."""

    calibration: Calibration
    base: WorkloadSource
    grid: Grid
    slos: tuple[Slo, ...] = ()
    find_fewest: bool = False
    max_replicas: int = 64
    runs: int = 5
    seed: int = 0
    tokenizer: Tokenizer | None = None  # counts a JSONL trace's prompts

    def points(self) -> Iterator[SweepPoint]:
        for config, rate in self.grid.points():
            source = replace(self.base, rate=rate)
            source.check()
            yield SweepPoint(config, rate, source, self._drawn(source))

    def _drawn(self, source: WorkloadSource) -> Callable[[int], list[SimRequest]]:
        cache: dict[int, list[SimRequest]] = {}

        def requests(seed: int) -> list[SimRequest]:
            if seed not in cache:
                draw = seed if source.rate is not None else self.seed
                cache[seed] = source.requests(draw, self.tokenizer)
            return cache[seed]

        return requests

    def answer(self, point: SweepPoint) -> PointResult:
        """The point's prediction, or its fewest replicas with ``find_fewest``."""
        if self.find_fewest:
            best, tried = fewest_replicas(
                self.calibration,
                point.requests,
                point.config,
                self.slos,
                max_replicas=self.max_replicas,
                runs=self.runs,
                seed=self.seed,
            )
            return PointResult(point, fewest=best, tried=tried)
        return PointResult(point, prediction=self.again(point)(self.calibration))

    def again(self, point: SweepPoint) -> Callable[[Calibration], Prediction]:
        """The point predicted with another calibration (``--validate`` re-anchors the model to
        the engine's speed today)."""

        def predicted(calibration: Calibration) -> Prediction:
            return predict(
                calibration,
                point.requests,
                point.config,
                slos=self.slos,
                runs=self.runs,
                seed=self.seed,
            )

        return predicted

    def document(self, calibration_path: str, results: list[PointResult]) -> dict[str, Any]:
        """The JSON document of a sweep (``--json``, and what the HTML page draws)."""
        return {"calibration": calibration_path, "points": [r.to_dict() for r in results]}


def check_question(slos: tuple[Slo, ...], find_fewest: bool) -> None:
    """SLOs the model can predict, and one at least when the fewest replicas are asked for."""
    check_slos(slos)
    if find_fewest and not slos:
        raise TtftError("--fewest-replicas needs an SLO", "add --slo 'ttft:p99<600ms'")


def trace_tokenizer(calibration: Calibration, base: WorkloadSource) -> Tokenizer | None:
    """JSONL traces are counted with the embedded model's tokenizer when it is the one
    calibrated; otherwise (None) at ~4 characters a token. None for a synthetic mix, whose
    prompts are token counts already."""
    if base.trace is None or not calibration.source.get("embedded"):
        return None
    try:
        from ttft.engines.llamacpp.embedded import embedded_model_path
        from ttft.workload.gguf_tokenizer import GgufTokenizer

        return GgufTokenizer.from_gguf(embedded_model_path())
    except TtftError:
        return None
