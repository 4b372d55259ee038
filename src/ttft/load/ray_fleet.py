"""``--ray auto|ADDRESS``: client workers as Ray actors, spread over a Ray cluster's nodes.

Ray is optional (``pip install 'ttft[distributed]'``) and imported only here, only when asked.
Each actor is a ``WorkerCore`` on the actor's own event loop, holding one CPU. The driver starts
a share with one call and collects finished records with ``drain`` calls every poll, so records
reach the results file within a poll of finishing; an actor that dies (its process killed, its
node lost) makes those calls fail, and the rest of its part is written as ``worker_lost``.

Monotonic clocks differ between machines: each actor's offset against the driver is measured
by round trips (min-trip sample, ``clock_sync``). An actor on the driver's own host and boot
shares its clock and gets offset 0 (the measurement is kept as a check); any other actor is
given the run anchor moved by its measured offset, so its records land on the driver's clock
within the reported bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from pathlib import Path
from typing import Any

import ttft
from ttft.core.client_verdict import HealthSample
from ttft.core.errors import MissingExtraError, TtftError
from ttft.core.records import RequestRecord
from ttft.load.clock_sync import measure_offset
from ttft.load.fleet_bench import Event, WorkerInfo
from ttft.load.worker_core import Placement, WorkerConfig, WorkerCore
from ttft.load.worker_shares import Share

START_TIMEOUT_S = 120.0  # actors start worker processes that import ttft (and Ray) first
CALL_TIMEOUT_S = 30.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingExtraError("--ray (client workers on a Ray cluster)", "distributed") from None
    return ray


class RayWorker:
    """The actor's body (made a Ray actor class at run time, so Ray stays optional)."""

    def __init__(self, name: str, config: WorkerConfig) -> None:
        self.core = WorkerCore(name, config)
        self.finished: list[RequestRecord] = []
        self.task: asyncio.Task[HealthSample | None] | None = None

    async def hello(self) -> Placement:
        node = import_ray().get_runtime_context().get_node_id()
        return Placement.here(str(node))

    async def clock(self) -> int:
        return self.core.clock()

    async def start(self, share: Share, anchor_ns: int) -> None:
        self.finished = []
        self.task = asyncio.get_running_loop().create_task(self._run(share, anchor_ns))

    async def _run(self, share: Share, anchor_ns: int) -> HealthSample | None:
        try:
            return await self.core.run(share, anchor_ns, self._emit)
        except asyncio.CancelledError:
            return None

    def _emit(self, record: RequestRecord) -> None:
        self.finished.append(record)  # whichever list drain() left in place

    async def drain(self) -> tuple[list[RequestRecord], bool, HealthSample | None]:
        """Records finished since the last call; whether the share is over, and its sample."""
        done = self.task is not None and self.task.done()
        out, self.finished = self.finished, []
        sample = self.task.result() if done and self.task is not None else None
        if done:
            self.task = None
        return out, done, sample

    async def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def close(self) -> None:
        await self.core.aclose()


def connect(address: str) -> tuple[Any, str]:
    """``ray.init`` for ``auto`` (the running cluster, else a local Ray started for this run) or
    an address (``HOST:PORT`` of a head node, or ``ray://HOST:10001``); and a note saying which."""
    ray = import_ray()
    if ray.is_initialized():
        return ray, "using the Ray connection this process already has"
    # The workers run this very ttft: Ray ships the package to the cluster (cached by content),
    # so a node needs Ray and ttft's dependencies, and never runs an older ttft by mistake.
    quiet: dict[str, Any] = {
        "log_to_driver": False,
        "configure_logging": False,
        "runtime_env": {"py_modules": [str(Path(ttft.__file__).parent)]},
    }
    if address == "auto":
        try:
            ray.init(address="auto", **quiet)
            return ray, "connected to the running Ray cluster"
        except ConnectionError:
            ray.init(include_dashboard=False, **quiet)
            return ray, "no Ray cluster was running: started a local one for this run"
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise TtftError(
            f"cannot connect to the Ray cluster at {address}: {exc}",
            "start one with `ray start --head --port 6379` and pass --ray HOST:6379 (or --ray "
            "auto on a machine of the cluster); if Ray logged 'Authentication token is missing', "
            "the cluster uses token auth: export RAY_AUTH_MODE=token here too",
        ) from None
    return ray, f"connected to the Ray cluster at {address}"


def _remote_clock(ray: Any, actor: Any) -> int:
    return int(ray.get(actor.clock.remote(), timeout=CALL_TIMEOUT_S))


class RayFleet:
    """``count`` actors (one CPU each; ``None``: one per cluster CPU) spread over the cluster;
    a context manager."""

    backend = "ray"

    def __init__(
        self, count: int | None, config: WorkerConfig, anchor_ns: int, address: str
    ) -> None:
        self.count, self.config, self.anchor_ns, self.address = count, config, anchor_ns, address
        self.note = ""
        self._ray: Any = None
        self._actors: dict[str, Any] = {}
        self._infos: list[WorkerInfo] = []
        self._busy: set[str] = set()
        self._dead: set[str] = set()

    def __enter__(self) -> RayFleet:
        self._ray, self.note = connect(self.address)
        ray = self._ray
        try:
            cpus = float(ray.cluster_resources().get("CPU", 0))
            if self.count is None:
                self.count = max(1, int(cpus))
            if cpus < self.count:
                raise TtftError(
                    f"the Ray cluster has {cpus:g} CPUs, fewer than the {self.count} client "
                    "workers asked (each holds one CPU)",
                    f"use --workers {int(cpus) or 1}, or add nodes (`ray start --address ...`)",
                )
            actor_class = ray.remote(num_cpus=1, max_restarts=0)(RayWorker)
            for n in range(self.count):
                name = f"r{n}"
                self._actors[name] = actor_class.options(
                    name=None, scheduling_strategy="SPREAD"
                ).remote(name, self.config)
            here = Placement.here()
            hellos = {name: actor.hello.remote() for name, actor in self._actors.items()}
            for name, ref in hellos.items():
                placement = ray.get(ref, timeout=START_TIMEOUT_S)
                actor = self._actors[name]
                offset = measure_offset(functools.partial(_remote_clock, ray, actor))
                same = placement.shares_clock_with(here)
                self._infos.append(WorkerInfo(name, placement, offset, same))
        except BaseException as exc:
            self.close()
            if isinstance(exc, ray.exceptions.GetTimeoutError):
                raise TtftError(
                    f"Ray client workers did not start within {START_TIMEOUT_S:.0f} s",
                    "check `ray status` (free CPUs) and that ttft is installed on every node",
                ) from None
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def workers(self) -> list[WorkerInfo]:
        return list(self._infos)

    def dispatch(self, worker: str, share: Share) -> None:
        info = next(i for i in self._infos if i.name == worker)
        self._actors[worker].start.remote(share, self.anchor_ns + info.applied_offset_ns)
        self._busy.add(worker)

    def poll(self, timeout_s: float) -> list[Event]:
        ray = self._ray
        refs = {name: self._actors[name].drain.remote() for name in self._busy}
        events: list[Event] = []
        for name, ref in refs.items():
            try:
                records, done, sample = ray.get(ref, timeout=CALL_TIMEOUT_S)
            except ray.exceptions.RayError as exc:
                self._busy.discard(name)
                self._dead.add(name)
                why = type(exc).__name__
                events.append(Event(name, "lost", why=f"its Ray actor failed ({why})"))
                continue
            if records:
                events.append(Event(name, "records", records=records))
            if done:
                self._busy.discard(name)
                events.append(Event(name, "done", sample=sample))
        return events

    def cancel(self) -> None:
        for name in self._busy:
            self._actors[name].cancel.remote()

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for name, actor in self._actors.items():
            if name not in self._dead:
                with contextlib.suppress(Exception):
                    ray.get(actor.close.remote(), timeout=5)
            with contextlib.suppress(Exception):
                ray.kill(actor)
        self._actors.clear()
        with contextlib.suppress(Exception):
            ray.shutdown()
        self._ray = None
