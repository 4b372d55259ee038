"""``ttft gateway``'s flags as one typed object that turns into the gateway's configuration
(a TOML file with the flags laid over it, or the flags alone)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.gateway import config as gwconfig
from ttft.gateway.config import GatewayConfig, ModelConfig, UpstreamConfig
from ttft.gateway.workers import check_supported


@dataclass(frozen=True)
class GatewayCliOptions:
    """The flags of ``ttft gateway`` (logging aside); None keeps the file's or default value."""

    config_path: Path | None
    upstreams: tuple[str, ...]
    model: str | None  # None: the upstream's own names (its /v1/models)
    engine: str
    chat_template: str
    tokenizer: Path | None
    no_prerender: bool
    hygiene: bool
    listen: str | None
    api_keys: tuple[str, ...]
    api_key_env: str | None
    max_in_flight: int | None
    queue_size: int | None
    long_prompt_tokens: int | None
    no_lanes: bool
    queue_timeout: float | None
    long_reserve: int | None = None
    workers: str | None = None  # a number, or "auto" (one per core); None: the file's (auto)

    def config(self) -> GatewayConfig:
        """The configuration to run; a contradiction or a bad value is a TtftError with the fix."""
        if self.config_path is not None:
            if self.upstreams:
                raise TtftError(
                    "give either --config or --upstream, not both",
                    "list the upstreams in the config file's [[model]] table",
                )
            config = gwconfig.load(self.config_path)
        else:
            config = _from_flags(
                self.upstreams,
                self.model,
                self.engine,
                self.no_prerender,
                self.hygiene,
                self.tokenizer,
                self.chat_template,
            )
        if self.listen is not None:
            host, port = gwconfig.parse_listen(self.listen, "--listen")
            config = dataclasses.replace(config, host=host, port=port)
        keys = list(config.api_keys) + list(self.api_keys)
        if self.api_key_env is not None:
            value = os.environ.get(self.api_key_env)
            if value is None:
                raise TtftError(f"--api-key-env: {self.api_key_env} is not set")
            keys += [k.strip() for k in value.split(",") if k.strip()]
        admission = config.admission
        admission = dataclasses.replace(
            admission,
            max_in_flight=(
                self.max_in_flight if self.max_in_flight is not None else admission.max_in_flight
            ),
            queue_size=self.queue_size if self.queue_size is not None else admission.queue_size,
            long_prompt_tokens=self.long_prompt_tokens
            if self.long_prompt_tokens is not None
            else admission.long_prompt_tokens,
            split_lanes=admission.split_lanes and not self.no_lanes,
            long_reserve=(
                self.long_reserve if self.long_reserve is not None else admission.long_reserve
            ),
            queue_timeout_s=(
                self.queue_timeout if self.queue_timeout is not None else admission.queue_timeout_s
            ),
        )
        workers = config.workers if self.workers is None else _workers(self.workers)
        check_supported(workers)
        return dataclasses.replace(
            config, api_keys=tuple(keys), admission=admission, workers=workers
        )


def _workers(text: str) -> int:
    """``--workers``: a whole number from 1, or ``auto`` (the cores this process may use)."""
    digits = text.strip()
    workers = gwconfig.workers_setting(int(digits) if digits.isdigit() else text)
    if workers is None:
        raise TtftError(
            f"--workers: expected a number from 1 to {gwconfig.MAX_WORKERS} or auto, got {text!r}",
            "--workers 4, or --workers auto for one per core",
        )
    return workers


def _from_flags(
    upstreams: tuple[str, ...],
    model: str | None,
    engine: str,
    no_prerender: bool,
    hygiene: bool,
    tokenizer: Path | None,
    chat_template: str,
) -> GatewayConfig:
    if not upstreams:
        raise TtftError(
            "no upstream: give --config FILE or at least one --upstream URL",
            "ttft gateway --upstream http://127.0.0.1:8080 (repeat for replicas)",
        )
    ups = tuple(UpstreamConfig(url=gwconfig.check_upstream_url(u, "--upstream")) for u in upstreams)
    if len({u.url for u in ups}) != len(ups):
        raise TtftError("an --upstream URL is given twice")
    return GatewayConfig(
        models=(
            ModelConfig(
                name=model or "default",
                name_from_upstream=model is None,
                upstreams=ups,
                engine=engine,
                prerender=not no_prerender,
                hygiene=hygiene,
                tokenizer=str(tokenizer) if tokenizer else None,
                chat_template=chat_template,
            ),
        )
    )
