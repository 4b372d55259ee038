"""``ttft serve``: the embedded llama-server in the foreground, for users who want an endpoint."""

from __future__ import annotations

import signal
from pathlib import Path

import click

from ttft.cli.serve_common import check_or_hold
from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.engines.serve import ServeOptions


@click.command()
@click.option(
    "--model",
    "model_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A .gguf model file. Default: the embedded Gemma 3 270M Q4_K_M.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=int, default=8080, show_default=True, help="Port (0 picks a free one)."
)
@click.option(
    "--ctx-size",
    type=int,
    default=4096,
    show_default=True,
    help="Context tokens, shared by all slots.",
)
@click.option(
    "--parallel",
    type=int,
    default=None,
    help="Slots (concurrent requests). Default: the build's (4).",
)
@click.option(
    "--ubatch", type=int, default=None, help="Physical batch size (-ub); 512+ speeds long prefills."
)
@click.option(
    "--flash-attn", type=click.Choice(["on", "off", "auto"]), default=None, help="Flash attention."
)
@click.option(
    "--load-mode",
    type=click.Choice(["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]),
    default=None,
    help="How weights are loaded; mlock avoids page-fault cold starts.",
)
@click.option(
    "--extra-arg", "extra_args", multiple=True, help="Any other llama-server flag (repeat)."
)
@click.option(
    "--check", is_flag=True, help="Start, send one chat request, print what happened, stop."
)
@click.option(
    "--engine",
    "engine_kind",
    type=click.Choice(["llamacpp", "vllm"]),
    default="llamacpp",
    show_default=True,
    help="llamacpp: the embedded llama-server. vllm: vLLM's CPU build (install it first with "
    "`python -m ttft.engines.vllm.install`) serving --model, or a small local Llama with random "
    "weights; --parallel sets --max-num-seqs and --ctx-size --max-model-len.",
)
def serve(
    model_path: Path | None,
    host: str,
    port: int,
    ctx_size: int,
    parallel: int | None,
    ubatch: int | None,
    flash_attn: str | None,
    load_mode: str | None,
    extra_args: tuple[str, ...],
    check: bool,
    engine_kind: str,
) -> None:
    """Run the embedded llama-server (Gemma 3 270M) in the foreground.

    Prints the OpenAI-compatible base URL and the metrics URL; Ctrl-C stops the server.
    Example: `ttft serve --port 8080 --parallel 1`, then point any client at
    http://127.0.0.1:8080/v1.
    """
    options = ServeOptions(
        model_path, host, port, ctx_size, parallel, ubatch, flash_attn, load_mode, extra_args
    )
    if engine_kind == "vllm":
        from ttft.cli.serve_vllm import serve_vllm

        serve_vllm(options, check)
        return
    click.echo("starting llama-server ...", err=True)
    # SIGTERM (e.g. from a service manager) stops as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with launch_embedded(**options.launch_settings()) as engine:
            _announce(engine)
            check_or_hold(engine, "llama-server", check)
    except KeyboardInterrupt:
        # The context manager has already stopped the server's whole process group.
        click.echo("\nllama-server stopped.", err=True)


def _announce(engine: RunningEngine) -> None:
    click.echo(f"llama-server ready in {engine.startup_s:.2f} s (model {engine.model_name})")
    click.echo(f"  OpenAI base URL: {engine.base_url}/v1")
    click.echo(f"  metrics:         {engine.metrics_url}")
