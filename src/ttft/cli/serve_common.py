"""What ``ttft serve`` shares between its engines: the one-request check, or holding the engine
until Ctrl-C (the options and the request are ``ttft.engines.serve``'s)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from ttft.engines.serve import smoke_request

if TYPE_CHECKING:
    from ttft.engines.llamacpp.embedded import RunningEngine
    from ttft.engines.vllm.local import RunningVllm


def check_or_hold(engine: RunningEngine | RunningVllm, name: str, check: bool) -> None:
    """``--check``: one chat request, then return; else serve until Ctrl-C or the engine exits."""
    if check:
        reply = smoke_request(engine)
        text = reply["choices"][0]["message"]["content"]
        click.echo(f"  chat check: {reply['_elapsed_ms']:.0f} ms, reply {text!r}")
        return
    click.echo("Ctrl-C stops it.")
    while engine.process.proc is not None and engine.process.proc.poll() is None:
        time.sleep(0.5)
    raise click.ClickException(
        f"{name} exited on its own. Last log lines:\n" + engine.process.log_tail()
    )
