"""``ttft serve --engine vllm``: vLLM's CPU build in the foreground."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import click

from ttft.cli.serve_common import check_or_hold
from ttft.core.errors import TtftError
from ttft.engines.vllm.local import RunningVllm, VllmConfig, launch_vllm

if TYPE_CHECKING:
    from ttft.engines.serve import ServeOptions


def serve_vllm(options: ServeOptions, check: bool) -> None:
    llama_only = {
        "--ubatch": options.ubatch,
        "--flash-attn": options.flash_attn,
        "--load-mode": options.load_mode,
    }
    given = [name for name, value in llama_only.items() if value is not None]
    if given:
        raise click.UsageError(
            f"{', '.join(given)} belong to llama-server; pass vLLM flags with --extra-arg"
        )
    config = VllmConfig(
        model=None if options.model_path is None else str(options.model_path),
        host=options.host,
        port=options.port,
        max_model_len=options.ctx_size,
        max_num_seqs=options.parallel,
        extra_args=options.extra_args,
    )
    click.echo("starting vLLM (CPU build; about a minute on two cores) ...", err=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with launch_vllm(config) as engine:
            _announce(engine)
            check_or_hold(engine, "vLLM", check)
    except TtftError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("\nvLLM stopped.", err=True)


def _announce(engine: RunningVllm) -> None:
    click.echo(f"vLLM ready in {engine.startup_s:.1f} s (model {engine.model_name})")
    click.echo(f"  OpenAI base URL: {engine.base_url}/v1")
    click.echo(f"  metrics:         {engine.metrics_url}")
    click.echo(f"  log:             {engine.process.log_path}")
