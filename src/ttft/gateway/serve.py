"""Running a gateway: in the foreground until a signal (the CLI), or on a background thread.

The thread form gives synchronous callers (tests, notebooks) a live gateway on a private event
loop: ``with GatewayThread(config) as gw: httpx.post(gw.url + "/v1/chat/completions", ...)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ttft.gateway.app import Gateway
from ttft.gateway.config import GatewayConfig


async def serve(config: GatewayConfig, on_ready: Callable[[Gateway], None] | None = None) -> None:
    """Run until SIGINT/SIGTERM; then stop accepting and let running answers finish (for up to
    ``limits.drain_timeout_s``) before closing, so a rolling restart cuts no stream."""
    gateway = Gateway(config)
    await gateway.start()
    # What start-up built (modules, configuration, templates) lives as long as the process:
    # frozen out of the collector's sight, the collections that requests trigger no longer walk
    # it (they were ~4% of the gateway's CPU under load).
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    if on_ready is not None:
        on_ready(gateway)
    try:
        await stop.wait()
    finally:
        await gateway.stop(drain_s=config.limits.drain_timeout_s)


def run(config: GatewayConfig, on_ready: Callable[[Gateway], None] | None = None) -> None:
    """Blocking: serve until interrupted. A faster event loop (uvloop) is used when installed,
    unless ``TTFT_GATEWAY_LOOP=asyncio`` asks for the standard one (to compare, or to rule the
    loop out when debugging)."""
    runner: Any = asyncio.run
    if os.environ.get("TTFT_GATEWAY_LOOP", "auto") != "asyncio":
        with contextlib.suppress(ImportError):
            import uvloop  # type: ignore[import-not-found,unused-ignore]

            runner = uvloop.run
    runner(serve(config, on_ready))


class GatewayThread:
    """A gateway on its own event loop in a daemon thread; a context manager."""

    def __init__(self, config: GatewayConfig, *, wait_prerender_s: float = 10.0) -> None:
        self.config = config
        self.wait_prerender_s = wait_prerender_s
        self.gateway: Gateway | None = None
        self.loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self.gateway is not None
        return self.gateway.url

    def call(self, fn: Callable[[Gateway], Any]) -> Any:
        """Run ``fn(gateway)`` on the gateway's loop (to read or change its state safely)."""
        assert self.gateway is not None
        gateway = self.gateway

        async def do() -> Any:
            return fn(gateway)

        return asyncio.run_coroutine_threadsafe(do(), self.loop).result(30)

    def __enter__(self) -> GatewayThread:
        ready = threading.Event()
        error: list[BaseException] = []

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.gateway = Gateway(self.config)
                self.loop.run_until_complete(
                    self.gateway.start(wait_prerender_s=self.wait_prerender_s)
                )
            except BaseException as exc:
                error.append(exc)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=main, name="ttft-gateway", daemon=True)
        self._thread.start()
        ready.wait(60)
        if error:
            self._thread.join(5)
            self.loop.close()
            raise error[0]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.gateway is not None:
            asyncio.run_coroutine_threadsafe(self.gateway.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        with contextlib.suppress(RuntimeError):
            self.loop.close()
