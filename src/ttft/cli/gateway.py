"""``ttft gateway``: the OpenAI-compatible front door, from a TOML file or from flags."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from ttft.cli.engine_choice import EngineKind
from ttft.cli.gateway_options import GatewayCliOptions
from ttft.core.errors import TtftError
from ttft.gateway import config as gwconfig


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="A gateway TOML file (see docs/gateway.md). Flags below override it.",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    help="An engine URL (repeat for replicas of one model). Without --config.",
)
@click.option(
    "--model",
    default=None,
    help="The model name clients send (with --upstream) [the upstream's own names, from its "
    "/v1/models].",
)
@click.option(
    "--engine",
    type=EngineKind(extra=(gwconfig.GENERIC_ENGINE,), aliases=gwconfig.ENGINE_ALIASES),
    default="llamacpp",
    show_default=True,
    help="Engine kind of the upstreams (with --upstream).",
)
@click.option(
    "--chat-template",
    default="auto",
    show_default=True,
    help='"auto" (llama.cpp: /props; vLLM: the served model folder, checked with its '
    "/tokenize), or a .jinja / tokenizer_config.json (with --upstream).",
)
@click.option(
    "--tokenizer",
    type=click.Path(path_type=Path),
    default=None,
    help="A tokenizer.json: send token ids upstream (with --upstream).",
)
@click.option(
    "--no-prerender",
    is_flag=True,
    help="Send chat requests to the engine's chat endpoint unchanged.",
)
@click.option(
    "--hygiene", is_flag=True, help="Move dynamic content (timestamps, ids) out of system prompts."
)
@click.option("--listen", default=None, help="host:port to listen on [127.0.0.1:8000].")
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    help="A client API key (repeat). Prefer --api-key-env: flags show in ps.",
)
@click.option(
    "--api-key-env",
    default=None,
    help="An environment variable holding comma-separated client API keys.",
)
@click.option(
    "--max-in-flight",
    type=click.IntRange(min=1),
    default=None,
    help="Requests at each upstream at once [llama-server: its slots; vLLM/SGLang: 64; else 4].",
)
@click.option(
    "--queue-size",
    type=click.IntRange(min=0),
    default=None,
    help="Waiting requests per upstream, both lanes [64].",
)
@click.option(
    "--long-prompt-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Prompts above this go to the long lane [1024].",
)
@click.option("--no-lanes", is_flag=True, help="One first-come-first-served queue.")
@click.option(
    "--long-reserve",
    type=click.IntRange(min=0),
    default=None,
    help="Slots per upstream long prompts may not take [1 with 2+ slots; 0: off].",
)
@click.option(
    "--queue-timeout",
    type=click.FloatRange(min=0.001),
    default=None,
    help="Seconds a request may wait for a slot [30].",
)
@click.option(
    "--workers",
    default=None,
    metavar="N|auto",
    help="Processes serving the port (Linux, SO_REUSEPORT). They share each upstream's slots "
    "(a table in shared memory), so the limits hold across them; auto: one per core this "
    "process may use [auto].",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every upstream state change.")
def gateway(
    config_path: Path | None,
    upstreams: tuple[str, ...],
    model: str | None,
    engine: str,
    chat_template: str,
    tokenizer: Path | None,
    no_prerender: bool,
    hygiene: bool,
    listen: str | None,
    api_keys: tuple[str, ...],
    api_key_env: str | None,
    max_in_flight: int | None,
    queue_size: int | None,
    long_prompt_tokens: int | None,
    no_lanes: bool,
    long_reserve: int | None,
    queue_timeout: float | None,
    workers: str | None,
    verbose: bool,
) -> None:
    """An OpenAI-compatible front door for llama-server, vLLM or SGLang replicas.

    Streams pass through unbuffered and uncompressed; chat templates are pre-rendered and
    cached; short prompts get their own lane; repeated prefixes go to the same replica.

    \b
      ttft gateway --upstream http://127.0.0.1:8080 --upstream http://127.0.0.1:8081
      ttft gateway --config gateway.toml
      ttft gateway --config gateway.toml --workers 1

    By default one worker process per core serves the port; they share every upstream's
    slots. SIGTERM stops accepting and lets running answers finish (limits.drain_timeout_s).
    With several workers, SIGHUP reads the configuration again and replaces the workers one
    at a time.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    options = GatewayCliOptions(
        config_path=config_path,
        upstreams=upstreams,
        model=model,
        engine=engine,
        chat_template=chat_template,
        tokenizer=tokenizer,
        no_prerender=no_prerender,
        hygiene=hygiene,
        listen=listen,
        api_keys=api_keys,
        api_key_env=api_key_env,
        max_in_flight=max_in_flight,
        queue_size=queue_size,
        long_prompt_tokens=long_prompt_tokens,
        no_lanes=no_lanes,
        queue_timeout=queue_timeout,
        long_reserve=long_reserve,
        workers=workers,
    )
    config = options.config()
    from ttft.gateway.app import Gateway
    from ttft.gateway.serve import run

    def ready(gw: Gateway) -> None:
        for runtime in gw.models.values():
            healthy = runtime.healthy_count()
            click.echo(
                f"  model {', '.join(runtime.listed_names())}: {healthy}/{len(runtime.replicas)}"
                f" upstreams healthy, pre-render {runtime.prerender_state}",
                err=True,
            )
            for r in runtime.replicas:
                click.echo(
                    f"    {r.name}: at most {r.admission.max_in_flight} in flight, from "
                    f"{r.limit_source}",
                    err=True,
                )
        if not config.api_keys:
            click.echo(
                "warning: no API keys configured: anyone who can reach this address can "
                "use the upstreams (--api-key-env NAME to require keys)",
                err=True,
            )
        if config.workers == 1:
            click.echo(f"ttft gateway listening on {gw.url}", err=True)

    try:
        if config.workers > 1:
            from ttft.gateway.workers import Supervisor

            def all_ready(url: str, pids: list[int]) -> None:
                pid_list = " ".join(map(str, pids))
                click.echo(
                    f"ttft gateway listening on {url} with {len(pids)} workers (pids {pid_list})",
                    err=True,
                )

            Supervisor(config, on_ready=ready, on_all_ready=all_ready, reload=options.config).run()
        else:
            run(config, ready)
    except OSError as exc:
        raise TtftError(
            f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}",
            "choose another --listen address",
        ) from None
