"""Trial runners: how a configuration gets a server to measure, and how one load level is sent.

``TrialRunner.open`` yields a ``TrialSession`` for one configuration; leaving the ``with`` block
stops whatever was started, on success, on error and on Ctrl-C alike (the engine also runs in its
own process group with a parent-death signal: ``engines/process.py``). ``LlamaCppRunner``
starts the real llama-server per trial; ``ClientOnlyRunner`` measures a service someone else runs,
where only request-side changes (transforms) can differ between trials.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.core.target import Target
from ttft.load.bench import run_cells
from ttft.load.results import CellResult
from ttft.load.runner import CellPlan, max_overlap
from ttft.load.sink import RESULTS_SCHEMA, JsonlSink
from ttft.tune.space import Config
from ttft.tune.trial import LevelResult, level_from_records
from ttft.tune.workload import TuneWorkload
from ttft.workload.arrival import ClosedLoop, OpenLoop

WARMUP_MAX_SLOTS = 16  # an open-loop level warms at most this many slots first


def rate_requests(rate: float, *, requests: int, seconds: float) -> int:
    """Requests in one open-loop level: at least ``requests``, and enough for about ``seconds``
    of arrivals at ``rate``, so a queue that grows at that rate has the time to show."""
    return max(requests, math.ceil(rate * seconds))


class TrialSession(Protocol):
    launch_command: list[str]
    startup_s: float | None

    def measure(self, concurrency: int) -> LevelResult: ...

    def measure_rate(
        self, rate: float, *, seconds: float = 10.0, burstiness: float = 1.0
    ) -> LevelResult: ...


class TrialRunner(Protocol):
    def open(
        self, config: Config, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> contextlib.AbstractContextManager[TrialSession]: ...


def refuse_target_change(config: Config) -> None:
    """A trial ttft starts measures that engine: a step that points elsewhere cannot run on it."""
    if "url" in config:
        raise TtftError(
            "a step with another target URL measures services ttft does not start",
            "run tune ab with --url for chains that change the target",
        )


@dataclass
class HttpTrialSession:
    """Sends levels to a live target: a warm-up round at the level's concurrency (so every
    slot holds the shared prefix, as it would in service), then the measured requests, closed
    loop (``measure``) or open loop (``measure_rate``)."""

    target: Target
    workload: TuneWorkload
    sink: JsonlSink
    slos: Sequence[Slo]
    extra_body: dict[str, Any] = field(default_factory=dict)
    launch_command: list[str] = field(default_factory=list)
    startup_s: float | None = None
    timeout_s: float = 300.0
    # This trial's mark on its prompts (``TuneWorkload.items``): a repeat of the same trial on
    # a service that keeps its prefix cache must not find its own prompts already computed.
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def measure(self, concurrency: int) -> LevelResult:
        count = max(self.workload.requests, 2 * concurrency)
        label = f"c={concurrency}"
        # Warm-up fills every slot's cache with the shared prefix; one token of answer is enough.
        warm = [
            replace(item, body={**item.body, "max_tokens": 1})
            for item in self.workload.items(concurrency, f"warmup/{label}", run=self.run)
        ]
        items = self.workload.items(count, label, run=self.run)
        warmup = CellPlan(label, warm, ClosedLoop(concurrency), phase="warmup")
        cell, warmup_s = self._run(warmup, CellPlan(label, items, ClosedLoop(concurrency)))
        level = level_from_records(concurrency, cell.records, cell.duration_ns, self.slos)
        return replace(level, warmup_s=warmup_s)

    def _run(self, warmup: CellPlan, measured: CellPlan) -> tuple[CellResult, float]:
        """The warm-up cell, then the measured one; the measured cell and the warm-up's seconds."""
        result = asyncio.run(
            run_cells(
                self.target,
                [warmup, measured],
                self.sink,
                extra_body=self.extra_body,
                timeout_s=self.timeout_s,
            )
        )
        return result.cells[-1], result.cells[0].duration_ns / 1e9

    def measure_rate(
        self, rate: float, *, seconds: float = 10.0, burstiness: float = 1.0
    ) -> LevelResult:
        """One open-loop level: ``rate_requests`` requests on a Poisson (``burstiness`` 1) or
        gamma schedule computed before the first is sent, so a slow server cannot slow the
        arrivals. The warm-up first fills ceil(rate) slots (at most 16) with the shared prefix,
        closed loop."""
        count = rate_requests(rate, requests=self.workload.requests, seconds=seconds)
        label = f"rate={rate:g}/s"
        slots = max(1, min(WARMUP_MAX_SLOTS, math.ceil(rate)))
        warm = [
            replace(item, body={**item.body, "max_tokens": 1})
            for item in self.workload.items(slots, f"warmup/{label}", run=self.run)
        ]
        arrival = OpenLoop(
            rate,
            burstiness=burstiness,
            distribution="poisson" if burstiness == 1.0 else "gamma",
        )
        cell, warmup_s = self._run(
            CellPlan(label, warm, ClosedLoop(slots), phase="warmup"),
            CellPlan(label, self.workload.items(count, label, run=self.run), arrival),
        )
        level = level_from_records(
            max_overlap(cell.records), cell.records, cell.duration_ns, self.slos, rate=rate
        )
        return replace(level, warmup_s=warmup_s)


def open_sink(records: Path, config: Mapping[str, Any], target: Target) -> JsonlSink:
    """The trial's records file, opened with a header line saying what was measured."""
    sink = JsonlSink(records).open()
    sink.write(
        {
            "type": "run",
            "schema": RESULTS_SCHEMA,
            "target": {"url": target.root, "model": target.model},
            "tune_config": dict(config),
        }
    )
    return sink


# llama-server flag -> (LlamaServerConfig field, type); anything else goes through as given.
_LLAMA_FIELDS: Mapping[str, tuple[str, type]] = {
    "-c": ("ctx_size", int),
    "--ctx-size": ("ctx_size", int),
    "-np": ("parallel", int),
    "--parallel": ("parallel", int),
    "-b": ("batch_size", int),
    "--batch-size": ("batch_size", int),
    "-ub": ("ubatch_size", int),
    "--ubatch-size": ("ubatch_size", int),
    "-fa": ("flash_attn", str),
    "--flash-attn": ("flash_attn", str),
    "-ctk": ("cache_type_k", str),
    "--cache-type-k": ("cache_type_k", str),
    "-ctv": ("cache_type_v", str),
    "--cache-type-v": ("cache_type_v", str),
    "--cache-reuse": ("cache_reuse", int),
    "-t": ("threads", int),
    "--threads": ("threads", int),
    "-lm": ("load_mode", str),
    "--load-mode": ("load_mode", str),
}


def llama_settings(config: Config, *, per_slot_ctx: int, threads: int | None) -> dict[str, Any]:
    """``LlamaServerConfig`` fields for a configuration. The context grows with ``-np`` (each
    slot gets ``-c / -np`` tokens), so a sweep over slots never starves a slot of context."""
    settings: dict[str, Any] = {"threads": threads}
    extra: list[str] = []
    for flag, value in config.items():
        known = _LLAMA_FIELDS.get(flag)
        if known is None:
            extra.extend([flag] if value == "" else [flag, value])  # "" : a bare switch
            continue
        name, kind = known
        try:
            settings[name] = kind(value)
        except ValueError:
            raise TtftError(f"{flag} takes a number, not {value!r}") from None
    settings.setdefault("parallel", 1)
    settings.setdefault("ctx_size", per_slot_ctx * settings["parallel"])
    settings["extra_args"] = tuple(extra)
    return settings


@dataclass
class LlamaCppRunner:
    """Each trial starts the real llama-server with its configuration (the embedded model unless
    ``model_path`` is given) and stops it when the trial ends."""

    per_slot_ctx: int = 2048
    threads: int | None = None
    model_path: Path | None = None
    startup_timeout_s: float = 120.0
    request_timeout_s: float = 300.0

    @contextlib.contextmanager
    def open(
        self, config: Config, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[TrialSession]:
        from ttft.engines.llamacpp.embedded import launch_embedded, llama_server_binary
        from ttft.engines.llamacpp.launch import build_argv

        refuse_target_change(config)
        settings = llama_settings(config, per_slot_ctx=self.per_slot_ctx, threads=self.threads)
        if self.model_path is not None:
            settings["model_path"] = self.model_path
        with launch_embedded(startup_timeout_s=self.startup_timeout_s, **settings) as engine:
            target = Target(
                engine.base_url, engine.model_name, engine.metrics_url, "llamacpp", None, {}
            )
            with open_sink(records, config, target) as sink:
                yield HttpTrialSession(
                    target,
                    workload,
                    sink,
                    slos,
                    # Fixed answer lengths: a trial must not get faster by stopping early.
                    extra_body={"ignore_eos": True},
                    launch_command=build_argv(engine.config, llama_server_binary()),
                    startup_s=engine.startup_s,
                    timeout_s=self.request_timeout_s,
                )


@dataclass
class ClientOnlyRunner:
    """A service ttft does not start: every trial measures the same target, so only request-side
    changes (and, in A/B chains, another target URL per step) can differ between trials, unless
    ``restart`` says how to restart the engine with a trial's flags (``tune/restart.py``)."""

    target: Target
    request_timeout_s: float = 300.0
    targets: dict[str, Target] = field(default_factory=dict)  # "--url" value -> target
    restart: str | None = None  # the user's restart command template
    launch: tuple[str, ...] = ()  # the engine's launch command, for {launch}
    startup_timeout_s: float = 300.0

    @contextlib.contextmanager
    def open(
        self, config: Config, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[TrialSession]:
        from ttft.tune.restart import restart_command, run_restart, wait_until_serving

        engine_flags = {k: v for k, v in config.items() if k != "url"}
        if engine_flags and self.restart is None:
            raise TtftError(
                f"cannot change {next(iter(engine_flags))} on a service ttft does not start",
                "give --restart 'COMMAND {args}' to restart it with each trial's flags, drop "
                "--url to tune the embedded llama-server, or measure request-side changes",
            )
        target = self.target
        if "url" in config:
            target = self.targets.get(config["url"]) or Target(config["url"], self.target.model)
        launch: list[str] = []
        startup: float | None = None
        if self.restart is not None:
            command = restart_command(
                self.restart, self.launch, engine_flags, kind=target.engine_kind
            )
            started = time.monotonic()
            run_restart(command, timeout_s=self.startup_timeout_s)
            wait_until_serving(target.root, self.startup_timeout_s, target.auth_headers())
            launch, startup = ["sh", "-c", command], time.monotonic() - started
        with open_sink(records, config, target) as sink:
            yield HttpTrialSession(
                target,
                workload,
                sink,
                slos,
                launch_command=launch,
                startup_s=startup,
                timeout_s=self.request_timeout_s,
            )
