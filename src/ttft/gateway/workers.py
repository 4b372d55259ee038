"""``ttft gateway --workers N``: N processes serving one port, started, watched and stopped here.

One Python event loop runs a burst of requests in series and uses one core. With N workers each
process runs the whole gateway and listens on the same address with SO_REUSEPORT, and the kernel
spreads new connections over their listening sockets (by a hash of the connection's addresses;
a keep-alive connection stays with the worker that accepted it).

Admission stays exact across them: a replica's in-flight requests are counted in a table that
every worker maps (``admission/slot_table.py``, one row per worker process, kept here by a
``SlotHost``), and what belongs to one process (its queue, per-key shares, the body budget) is
split into parts that add up to the configured totals (``admission/partition.py``).

This process (the supervisor) serves nothing. It
- holds the port: a socket bound with SO_REUSEPORT that never listens, so the port (also one
  the kernel chose, ``listen = "127.0.0.1:0"``) stays the gateway's while a worker restarts;
- starts the workers (forked after the gateway's modules are imported here, once);
- restarts a worker that exits without being asked, after 1 s, doubling up to 30 s while it
  keeps dying young (a crash loop must not spin a core);
- makes the kernel send each worker SIGTERM if the supervisor dies (even by SIGKILL);
- on SIGHUP, reads the configuration again and replaces the workers one at a time;
- keeps the directory through which the workers merge their metrics (``metrics_files.py``)
  and share their slot counts: created before the first worker starts, removed at the end;
  when a worker exits, its last snapshot's counters are folded into the retired totals, so
  ``/metrics`` never goes back, and its row of slot counts is cleared;
- on SIGTERM or SIGINT, forwards SIGTERM to every worker, each of which stops accepting and
  lets its running answers finish for up to ``limits.drain_timeout_s``; a worker still alive
  a few seconds after that is killed.

Linux only: elsewhere SO_REUSEPORT does not balance connections (macOS gives them all to the
last listener), so ``--workers`` above 1 is refused there.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import TYPE_CHECKING

from ttft.core.errors import TtftError
from ttft.gateway.admission.partition import Partition
from ttft.gateway.admission.slot_host import SlotHost
from ttft.gateway.admission.slot_table import SlotShare
from ttft.gateway.config import GatewayConfig
from ttft.gateway.metrics_files import (
    MetricsShare,
    create_share_dir,
    fold_retired,
    remove_share_dir,
)

if TYPE_CHECKING:  # the app is imported by the workers only, not by ``ttft --help``
    from ttft.gateway.app import Gateway

log = logging.getLogger("ttft.gateway")

_KILL_AFTER_DRAIN_S = 5.0  # beyond drain_timeout_s, before a worker that has not exited is killed
_YOUNG_S = 10.0  # a worker that dies sooner than this after its start is in a crash loop
_MAX_BACKOFF_S = 30.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def check_supported(workers: int) -> None:
    """Refuse several workers where the kernel would not spread connections over them."""
    linux = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
    if workers > 1 and not linux:
        raise TtftError(
            f"--workers {workers} needs Linux (SO_REUSEPORT spreading connections over "
            f"processes); this is {sys.platform}",
            "run one worker, or several gateways behind a load balancer",
        )


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to the address with SO_REUSEPORT and never listening: it keeps the port
    (and resolves port 0) for the workers, and receives no connection itself."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


@dataclass
class _Slot:
    """One worker's place: its process, and when it may be (re)started."""

    index: int
    process: BaseProcess | None = None
    started_at: float = 0.0
    backoff_s: float = 1.0
    restart_at: float = 0.0
    share_name: str | None = None  # the name of its metrics snapshot (unique to this start)
    slot_share: SlotShare | None = None  # its row in the shared slot table (several workers)


class Supervisor:
    """Starts ``config.workers`` workers on one port, restarts them, stops them on a signal."""

    def __init__(
        self,
        config: GatewayConfig,
        on_ready: Callable[[Gateway], None] | None = None,
        on_all_ready: Callable[[str, list[int]], None] | None = None,
        reload: Callable[[], GatewayConfig] | None = None,
    ) -> None:
        check_supported(config.workers)
        self.config = config
        self.on_ready = on_ready  # run in worker 0 once it listens (the CLI's model summary)
        self.on_all_ready = on_all_ready  # run here with the URL and the workers' pids
        self._context = multiprocessing.get_context("fork")
        self._slots = [_Slot(i) for i in range(config.workers)]
        self._signal: int | None = None
        self._ready_recv: Connection | None = None
        self._ready_send: Connection | None = None
        self._port_socket: socket.socket | None = None
        self._parent_pid = os.getpid()
        self.reload = reload  # SIGHUP: the configuration to replace the workers with
        self._reload_asked = False
        # Replaced workers finishing their answers, with their metrics snapshots' names and
        # their rows in the slot table.
        self._draining: list[tuple[BaseProcess, str | None, SlotShare | None]] = []
        self._slot_host: SlotHost | None = None  # with several workers: the shared slots
        self._share_dir: str | None = None  # with several workers: their metrics' directory
        self._starts = 0

    def run(self) -> int:
        """Blocking: serve until SIGTERM/SIGINT; 0 after a graceful stop."""
        # Imported once here, before forking: the workers start without importing it again.
        from ttft.gateway import serve  # noqa: F401

        config = self.config
        self._port_socket = reserve_port(config.host, config.port)
        port = int(self._port_socket.getsockname()[1])
        self.config = dataclasses.replace(config, port=port)
        self._ready_recv, self._ready_send = self._context.Pipe(duplex=False)
        if config.workers > 1:
            self._share_dir = create_share_dir()
            self._slot_host = SlotHost(self._share_dir, config.workers)
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        try:
            for slot in self._slots:
                self._start(slot)
            self._wait_ready()
            if self._signal is not None:
                return 0  # asked to stop while starting
            host = config.host if ":" not in config.host else f"[{config.host}]"
            if self.on_all_ready is not None:
                self.on_all_ready(f"http://{host}:{port}", self.pids())
            self._watch()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._port_socket.close()
            if self._slot_host is not None:
                self._slot_host.close()
            if self._share_dir is not None:
                remove_share_dir(self._share_dir)
        return 0

    def pids(self) -> list[int]:
        return [s.process.pid for s in self._slots if s.process is not None and s.process.pid]

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signal = signum

    def _on_hangup(self, _signum: int, _frame: FrameType | None) -> None:
        self._reload_asked = True

    def _start(self, slot: _Slot) -> None:
        self._starts += 1
        share = None
        if self._share_dir is not None:
            share = MetricsShare(self._share_dir, f"w{slot.index}g{self._starts}")
        slot_share = None
        if self._slot_host is not None:
            slot_share = self._slot_host.claim(self.config.slot_layout())
        config = dataclasses.replace(
            self.config,
            partition=Partition(slot.index, self.config.workers),
            metrics_share=share,
            slot_share=slot_share,
        )
        process = self._context.Process(
            target=self._worker_main,
            args=(config,),
            name=f"ttft-gateway-worker-{slot.index}",
            daemon=False,
        )
        process.start()
        slot.process, slot.started_at = process, time.monotonic()
        slot.share_name = share.name if share is not None else None
        slot.slot_share = slot_share

    def _retire(self, share_name: str | None, slot_share: SlotShare | None) -> None:
        """An exited worker's counters join the retired totals (its gauges end with it), and
        whatever it held in the slot table is free again."""
        if self._share_dir is not None and share_name is not None:
            fold_retired(self._share_dir, share_name)
        if self._slot_host is not None and slot_share is not None:
            self._slot_host.release(slot_share)

    def _worker_main(self, config: GatewayConfig) -> None:
        """In the worker: forget the supervisor's signal handlers and port, then serve."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        _term_with_parent(self._parent_pid)
        if self._port_socket is not None:
            self._port_socket.close()
        if self._slot_host is not None and config.slot_share is not None:
            self._slot_host.keep_only(config.slot_share)
        from ttft.gateway.serve import run

        sender = self._ready_send
        index = config.partition.index

        def ready(gateway: Gateway) -> None:
            if index == 0 and self.on_ready is not None:
                self.on_ready(gateway)
            if sender is not None:
                sender.send((index, os.getpid()))

        try:
            run(config, ready)
        except OSError as exc:
            log.error("gateway worker %d cannot listen: %s", index, exc.strerror or exc)
            raise SystemExit(3) from None

    def _wait_ready(self) -> None:
        """Until every worker listens. A worker that exits by itself first is an error (it
        printed why: the port is taken, the configuration is wrong; a bad upstream template is
        not one, workers start serving before templates are known). A worker killed by a
        signal (the OOM killer, an operator's ``kill``) is restarted as it would be later:
        it may have been listening already, its ready message still in the pipe."""
        assert self._ready_recv is not None
        waiting = {s.index for s in self._slots}
        while waiting:
            if self._signal is not None:
                return
            now = time.monotonic()
            for slot in self._slots:
                process = slot.process
                if process is None:
                    if now >= slot.restart_at:
                        self._start(slot)
                    continue
                if slot.index not in waiting or process.is_alive():
                    continue
                code = process.exitcode
                if code is not None and code < 0:
                    self._buried(slot, process, now)
                    continue
                raise TtftError(
                    f"gateway worker {slot.index} exited with {code} before it listened",
                    "see the error it printed above",
                )
            if self._ready_recv.poll(0.1):
                index, pid = self._ready_recv.recv()
                slot = self._slots[index]
                if slot.process is not None and slot.process.pid == pid:
                    waiting.discard(index)

    def _watch(self) -> None:
        """Restart workers that exit unasked, until a signal asks everyone to stop."""
        assert self._ready_recv is not None
        while self._signal is None:
            if self._reload_asked:
                self._reload_asked = False
                self._replace_all()
            draining, self._draining = self._draining, []
            for old, old_name, old_slots in draining:
                if old.is_alive():
                    self._draining.append((old, old_name, old_slots))
                else:
                    self._retire(old_name, old_slots)
            now = time.monotonic()
            sentinels: list[Connection | int] = [self._ready_recv]
            for slot in self._slots:
                process = slot.process
                if process is not None and not process.is_alive():
                    self._buried(slot, process, now)
                elif process is None and now >= slot.restart_at:
                    self._start(slot)
                elif process is not None:
                    sentinels.append(process.sentinel)
            multiprocessing.connection.wait(sentinels, timeout=0.5)
            while self._ready_recv.poll():
                self._ready_recv.recv()  # a restarted worker listens again

    def _replace_all(self) -> None:
        """SIGHUP: read the configuration again and replace the workers one at a time. A new
        worker listens before the old one is told to stop (SIGTERM: it stops accepting and
        finishes its answers), so the port never goes unserved; while an old worker drains,
        its running answers count beside the new worker's part (the limits may be exceeded
        by those, for up to ``drain_timeout_s``)."""
        if self.reload is None:
            log.warning("SIGHUP: no configuration to reload (started without one)")
            return
        try:
            fresh = self.reload()
        except TtftError as exc:
            log.error("SIGHUP: configuration refused, the workers keep the old one: %s", exc)
            return
        old = self.config
        if (fresh.host, fresh.workers) != (old.host, old.workers) or fresh.port not in (
            0,
            old.port,
        ):
            log.error(
                "SIGHUP: listen and workers cannot change on reload (restart the gateway); "
                "the workers keep the old configuration"
            )
            return
        host = self._slot_host
        if host is not None and host.free_rows < len(self._slots):
            log.error(
                "SIGHUP: workers replaced earlier are still finishing their answers; the "
                "workers keep the old configuration (send SIGHUP again within %g s)",
                old.limits.drain_timeout_s,
            )
            return
        self.config = dataclasses.replace(fresh, port=old.port)
        assert self._ready_recv is not None
        for slot in self._slots:
            previous, previous_name = slot.process, slot.share_name
            previous_slots = slot.slot_share
            self._start(slot)
            new_pid = slot.process.pid if slot.process is not None else None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self._signal is None:
                if slot.process is None or not slot.process.is_alive():
                    break  # it died starting: _watch restarts it with the new configuration
                if self._ready_recv.poll(0.1) and self._ready_recv.recv()[1] == new_pid:
                    break
            if previous is not None and previous.is_alive() and previous.pid:
                os.kill(previous.pid, signal.SIGTERM)
                self._draining.append((previous, previous_name, previous_slots))
            elif previous is not None:
                self._retire(previous_name, previous_slots)
        log.warning(
            "SIGHUP: %d workers replaced with the configuration read again", len(self._slots)
        )

    def _buried(self, slot: _Slot, process: BaseProcess, now: float) -> None:
        young = now - slot.started_at < _YOUNG_S
        slot.backoff_s = min(_MAX_BACKOFF_S, slot.backoff_s * 2) if young else 1.0
        slot.restart_at = now + slot.backoff_s
        slot.process = None
        self._retire(slot.share_name, slot.slot_share)
        slot.slot_share = None
        log.error(
            "gateway worker %d (pid %s) exited with %s; restarting it in %.0f s",
            slot.index,
            process.pid,
            process.exitcode,
            slot.backoff_s,
        )

    def _stop_all(self) -> None:
        """SIGTERM to every worker (each drains its answers), then wait; kill the late ones."""
        alive = [s.process for s in self._slots if s.process is not None and s.process.is_alive()]
        alive += [p for p, _, _ in self._draining if p.is_alive()]
        for process in alive:
            if process.pid:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.config.limits.drain_timeout_s + _KILL_AFTER_DRAIN_S
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.error("gateway worker %s did not stop in time: killed", process.pid)
                process.kill()
                process.join(5)


def _term_with_parent(parent: int) -> None:
    """Ask the kernel for SIGTERM (a graceful stop) when the supervisor dies, even by SIGKILL:
    orphaned workers would keep the port and serve with their parts of the limits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
