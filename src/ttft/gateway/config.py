"""The gateway's configuration: a TOML file (or CLI flags) checked once, before anything listens.

Every key is known: a typo is an error naming the key and the keys that exist, never a setting
silently ignored; read from a file, every error starts ``file:LINE:``. Upstreams come only
from here; the gateway never proxies to a URL a client names.

    listen = "127.0.0.1:8000"
    api_keys = ["sk-..."]            # or api_keys_env = "TTFT_GATEWAY_KEYS" (comma-separated)

    [admission]                      # per upstream replica
    max_in_flight = 4               # default: llama-server's slots (/props), 64 for vLLM/SGLang/TGI
    queue_size = 64
    long_prompt_tokens = 1024

    [[model]]
    name = "gemma-3-270m"
    upstreams = ["http://127.0.0.1:8080", { url = "http://127.0.0.1:8081", prerender = false }]
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ttft.core import toml_text
from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.adapter import EngineAdapter
from ttft.engines.registry import adapter_for, engine_kinds
from ttft.gateway.admission.partition import SOLE, Partition
from ttft.gateway.admission.slot_table import Layout, SlotShare, layout_of
from ttft.gateway.config_checks import Where, api_keys, fail, section, table
from ttft.gateway.config_checks import check_upstream_url as check_upstream_url  # public here
from ttft.gateway.config_checks import parse_listen as parse_listen
from ttft.gateway.metrics_files import MetricsShare

# An OpenAI-compatible upstream that ttft knows nothing more about (no control endpoints).
GENERIC_ENGINE = "openai"
# Spellings earlier gateway configurations used, read as the registry's kind.
ENGINE_ALIASES = {"llama.cpp": "llamacpp"}


def engine_choices() -> tuple[str, ...]:
    """The engine kinds of the registry, plus the generic OpenAI-compatible upstream."""
    return (*engine_kinds(), GENERIC_ENGINE)


def engine_adapter(kind: str) -> EngineAdapter | None:
    """The adapter of an upstream's engine; None for the generic OpenAI-compatible one."""
    return None if kind == GENERIC_ENGINE else adapter_for(kind)


@dataclass(frozen=True)
class UpstreamConfig:
    """One engine replica. ``url`` is the server root; ``/v1/...`` paths are appended."""

    url: str
    prerender: bool | None = None  # None: the model's setting
    max_in_flight: int | None = None  # None: [admission].max_in_flight
    api_key: str | None = None  # sent upstream as a bearer token (not the client's key)

    @cached_property
    def target(self) -> Target:
        """The replica as a Target: its auth headers are what every request to it carries."""
        return Target(self.url, api_key=self.api_key)

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def root(self) -> str:
        """The path prefix below which ``/v1/...`` lives (usually empty)."""
        return urlsplit(self.url).path.rstrip("/")


@dataclass(frozen=True)
class ModelConfig:
    name: str
    upstreams: tuple[UpstreamConfig, ...]
    engine: str = "llamacpp"  # a kind of ttft.engines.registry, or "openai" (generic)
    upstream_model: str | None = None  # the name the engines know; None: same as ``name``
    # Other names clients may send for this model; the names of the upstreams' /v1/models are
    # accepted too, so a client that sends the engine's real model name is served.
    aliases: tuple[str, ...] = ()
    prerender: bool = True  # render chat templates here and call the completions endpoint
    # "auto": llama.cpp's /props; other engines: the template of the model folder the engine
    # serves (its launch command, or vLLM's /v1/models root) when it is on this machine.
    # Or a .jinja / tokenizer_config.json.
    chat_template: str = "auto"
    tokenizer: str | None = None  # a tokenizer.json: prompts go upstream as token ids
    hygiene: bool = False  # move dynamic content out of the system prompt (changes the prompt)
    # llama.cpp: before pre-rendering, check that /v1/completions reuses a shared prefix (it does
    # not for sliding-window models without --swa-full; then chat requests go to /chat).
    check_prefix_reuse: bool = True
    # ``name`` is a placeholder (``ttft gateway --upstream`` without ``--model`` sets this):
    # /v1/models lists the engines' own names instead, once they answered.
    name_from_upstream: bool = False


@dataclass(frozen=True)
class AdmissionConfig:
    # Per replica: about the engine's slots / max-num-seqs. None: from the engine (llama-server's
    # /props total_slots, else default_max_in_flight(engine)).
    max_in_flight: int | None = None
    queue_size: int = 64  # per replica, both lanes together
    split_lanes: bool = True  # short requests do not queue behind long ones
    long_prompt_tokens: int = 1024  # a prompt above this goes to the long lane
    short_burst: int = 4  # short dispatches in a row before a waiting long one gets its turn
    # Slots of each replica that long requests may not take, kept for the short lane; None: 1 when
    # max_in_flight >= 2, else 0 (admission.lanes.resolve_long_reserve). 0 turns the reserve off.
    long_reserve: int | None = None
    queue_timeout_s: float = 30.0
    # How far below 0 a request's ``priority`` may go (lower goes first): 0 means nobody jumps
    # the queue; a key of ``api_keys`` may be given more ({ key = ..., max_priority_boost = N }).
    max_priority_boost: int = 0
    # llama-server only, with a reserve and the slot count read from /props: send each request
    # to a chosen slot (``id_slot``), short ones to the lowest, whose tokens each batch takes
    # first (gateway/admission/slot_pins.py). Off: the engine picks slots itself.
    pin_slots: bool = True
    # Per client (key, else address) and model, queued + in flight; None: half (admission/shares)
    max_requests_per_client: int | None = None
    # Per client and replica, in flight; None: half the slots with keys, no limit without.
    max_slots_per_client: int | None = None


@dataclass(frozen=True)
class RoutingConfig:
    affinity: bool = True
    block_tokens: int = 64  # the prefix is hashed in blocks of this many tokens
    max_blocks: int = 8  # at most this many leading blocks form the key
    load_factor: float = 1.25  # bounded-load consistent hashing: at most 1.25 x the mean load
    virtual_nodes: int = 64
    health_interval_s: float = 2.0
    health_timeout_s: float = 2.0
    retries: int = 1  # another replica, only when the first failed before answering


@dataclass(frozen=True)
class LimitsConfig:
    max_body_bytes: int = 4 * 1024 * 1024
    max_header_bytes: int = 32 * 1024
    max_connections: int = 4096  # lowered to what the file limit allows
    # Per client address; behind a proxy every client has the proxy's address: raise it or 0.
    max_connections_per_client: int = 256
    max_bodies_in_flight_bytes: int = 64 * 1024 * 1024  # all request bodies being received
    # One client's part of it (its key, else its address); unset: a quarter, 0: no share.
    max_bodies_in_flight_bytes_per_client: int | None = None
    body_timeout_s: float = 10.0  # the most time between two reads of a request body
    first_request_timeout_s: float = 10.0  # a new connection must send its first request
    read_timeout_s: float = 30.0  # to receive a whole request once it started
    idle_timeout_s: float = 75.0  # a keep-alive client connection with nothing to do
    write_timeout_s: float = 60.0  # a client that reads nothing of its answer for this long
    # A stream holding an engine slot whose client stops taking it (its socket stays full)
    stream_stall_timeout_s: float = 10.0
    max_tokens: int = 1024 * 1024  # the most max_tokens / max_completion_tokens a request asks
    max_n: int = 16  # the most choices (``n``) a request asks
    max_messages: int = 4096  # per chat request: each costs Python work on the event loop
    # A body's parsing cost, counted before parsing it (units of ~50 ns here; body_cost.py).
    max_body_cost: int = 500_000
    connect_timeout_s: float = 5.0
    upstream_idle_timeout_s: float = 600.0  # silence from an upstream in the middle of an answer
    max_response_bytes: int = 16 * 1024 * 1024  # a non-streamed answer we must translate
    chars_per_token: float = 4.0  # estimate when no tokenizer is at hand
    prerender_cache_entries: int = 1024
    # The frame cache's memory (prefix texts and token ids), per model: long system prompts or
    # many distinct histories evict old frames instead of growing the process.
    prerender_cache_bytes: int = 64 * 1024 * 1024
    drain_timeout_s: float = 10.0  # on SIGTERM: running answers may finish for this long


@dataclass(frozen=True)
class GatewayConfig:
    models: tuple[ModelConfig, ...]
    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[str, ...] = ()
    # Keys allowed a priority below 0 other than admission.max_priority_boost: (key, boost).
    key_priority_boosts: tuple[tuple[str, int], ...] = ()
    # /metrics and /health without a key even when keys are set (they name upstream URLs).
    public_metrics: bool = False
    # With no keys, Host headers accepted besides loopback names (DNS rebinding defence).
    allowed_hosts: tuple[str, ...] = ()
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    # Processes accepting on the port (SO_REUSEPORT), sharing the replicas' slots
    # (admission/slot_table.py) and holding their part of the other limits
    # (admission/partition.py); ``partition`` is which part this process is (set per worker).
    # A file or the command line defaults to one per core (``auto_workers``); built in Python,
    # a configuration is one process unless it says otherwise.
    workers: int = 1
    partition: Partition = SOLE
    # With several workers, where this one shares its metrics with the others (set per worker
    # by the supervisor; None: /metrics is this process's alone).
    metrics_share: MetricsShare | None = None
    # With several workers, where the replicas' in-flight counts are shared (set per worker by
    # the supervisor: admission/slot_table.py; None: this process counts alone).
    slot_share: SlotShare | None = None

    def model(self, name: str) -> ModelConfig | None:
        return next((m for m in self.models if m.name == name), None)

    def slot_layout(self) -> Layout:
        """Every replica as (model, upstream URL), in order: its row in the shared slot table."""
        return layout_of([(m.name, [u.url for u in m.upstreams]) for m in self.models])


MAX_WORKERS = 256


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def workers_setting(value: object) -> int | None:
    """``workers`` from a file or ``--workers``: "auto" (one per core, ``auto_workers``) or a
    whole number from 1 to ``MAX_WORKERS``; None for anything else."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return auto_workers()
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= MAX_WORKERS else None


def auto_workers() -> int:
    """``workers = "auto"``, the default: one per core this process may use, on Linux (where
    SO_REUSEPORT spreads connections over processes); one elsewhere."""
    if not (sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")):
        return 1
    return min(MAX_WORKERS, available_cores())


# The keys a file may have at its top level (tables included).
TOP_KEYS = (
    "listen",
    "api_keys",
    "api_keys_env",
    "public_metrics",
    "allowed_hosts",
    "model",
    "admission",
    "routing",
    "limits",
    "workers",
)


def _upstream(raw: Any, where: Where) -> UpstreamConfig:
    if isinstance(raw, str):
        return UpstreamConfig(url=check_upstream_url(raw, where))
    if not isinstance(raw, dict):
        raise fail(where, "expected a URL string or a table with url = ...")
    values = section((raw, where), UpstreamConfig)
    if "url" not in values:
        raise fail(where, "missing url", 'write { url = "http://127.0.0.1:8080" }')
    values["url"] = check_upstream_url(values["url"], where.at("url"))
    if values.get("max_in_flight") == 0:
        raise fail(where.at("max_in_flight"), "must be at least 1")
    return UpstreamConfig(**values)


def _model(raw: Any, where: Where) -> ModelConfig:
    if not isinstance(raw, dict):
        raise fail(where, "expected a table")
    upstreams_raw = raw.get("upstreams")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise fail(where.at("aliases"), "expected a list of model names")
    rest = {k: v for k, v in raw.items() if k not in ("upstreams", "aliases")}
    values = section((rest, where), ModelConfig, skip=("upstreams", "aliases"))
    if not values.get("name"):
        raise fail(where, "missing name", 'every [[model]] needs name = "..." (what clients send)')
    if not isinstance(upstreams_raw, list) or not upstreams_raw:
        raise fail(where, "missing upstreams", 'upstreams = ["http://127.0.0.1:8080"]')
    ups = tuple(_upstream(u, where.sub("upstreams", i)) for i, u in enumerate(upstreams_raw))
    urls = [u.url for u in ups]
    if len(set(urls)) != len(urls):
        raise fail(where.at("upstreams"), "an upstream URL is listed twice")
    engine = values.get("engine", "llamacpp")
    engine = values["engine"] = ENGINE_ALIASES.get(engine, engine)
    if engine not in engine_choices():
        raise fail(
            where.at("engine"),
            f"unknown engine {engine!r}",
            f"one of {', '.join(engine_choices())}",
        )
    return ModelConfig(upstreams=ups, aliases=tuple(aliases), **values)


def from_mapping(
    raw: Mapping[str, Any], origin: str = "config", *, text: str | None = None
) -> GatewayConfig:
    """Build and check a configuration from decoded TOML (or an equivalent dict).

    With ``text`` (the TOML it was decoded from), every error starts ``origin:LINE:``."""
    top = Where(origin, toml_text.TomlLines(text) if text is not None else None)
    top_known = set(TOP_KEYS)
    unknown = sorted(set(raw) - top_known)
    if unknown:
        raise fail(
            dataclasses.replace(top, key=unknown[0]),
            f"unknown key(s) {', '.join(unknown)}",
            f"known keys: {', '.join(sorted(top_known))}",
        )
    host, port = parse_listen(str(raw.get("listen", "127.0.0.1:8000")), top.at("listen"))
    models_raw = raw.get("model")
    if not isinstance(models_raw, list) or not models_raw:
        raise fail(top, "no [[model]] table", "add [[model]] with name and upstreams")
    models = tuple(_model(m, top.sub("model", i)) for i, m in enumerate(models_raw))
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        second = next(i for i, n in enumerate(names) if n in names[:i])
        raise fail(top.sub("model", second).at("name"), "two [[model]] tables have the same name")
    keys, boosts = api_keys(raw, top)
    hosts = raw.get("allowed_hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise fail(top.at("allowed_hosts"), "expected a list of host names")
    admission = AdmissionConfig(**section(table(raw, "admission", top), AdmissionConfig))
    routing = RoutingConfig(**section(table(raw, "routing", top), RoutingConfig))
    limits = LimitsConfig(**section(table(raw, "limits", top), LimitsConfig))
    _check_ranges(admission, routing, top)
    given = raw.get("workers", "auto")
    workers = workers_setting(given)
    if workers is None:
        raise fail(
            top.at("workers"),
            f'expected "auto" or a whole number from 1 to {MAX_WORKERS}, got {given!r}',
            'workers = "auto" (the default) runs one per core the gateway may use',
        )
    public = raw.get("public_metrics", False)
    if not isinstance(public, bool):
        raise fail(top.at("public_metrics"), "expected true or false")
    return GatewayConfig(
        models=models,
        host=host,
        port=port,
        api_keys=keys,
        key_priority_boosts=boosts,
        public_metrics=public,
        allowed_hosts=tuple(h.lower() for h in hosts),
        admission=admission,
        routing=routing,
        limits=limits,
        workers=workers,
    )


def _check_ranges(admission: AdmissionConfig, routing: RoutingConfig, top: Where) -> None:
    """The bounds the types alone do not say."""
    if admission.max_in_flight is not None and admission.max_in_flight < 1:
        raise fail(top.sub("admission").at("max_in_flight"), "must be at least 1")
    if routing.block_tokens < 1 or routing.virtual_nodes < 1:
        raise fail(top.sub("routing"), "block_tokens and virtual_nodes must be at least 1")
    if routing.load_factor < 1.0:
        raise fail(top.sub("routing").at("load_factor"), "must be at least 1.0")


def load(path: Path) -> GatewayConfig:
    """Read and check a gateway TOML file; every error names ``path:LINE:`` and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TtftError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = toml_text.decode_error(exc, text)
        raise TtftError(
            f"{path}:{line}: not valid TOML: {message}",
            "fix the syntax on that line (strings in double quotes; see examples/gateway.toml)",
        ) from None
    return from_mapping(raw, str(path), text=text)
