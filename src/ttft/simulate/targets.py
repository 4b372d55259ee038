"""The engine a calibration or validation talks to: a live URL (settings read from its
``/props`` and ``/v1/models``, vLLM's metrics, SGLang's server info), or an engine ttft starts
with the settings asked for: the embedded llama-server, or for the vLLM kind ttft's own local
vLLM.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import Call, ControlClient, ControlError, complete_target
from ttft.simulate.cores import core_groups, pin
from ttft.simulate.model import SGLANG_POLICIES, EngineKind, EngineSettings

if TYPE_CHECKING:  # the engine's module loads only when one is started
    from ttft.engines.llamacpp.embedded import RunningEngine
    from ttft.engines.vllm.local import RunningVllm

EMBEDDED_CTX_PER_SLOT = 2048
# SGLang's --chunked-prefill-size is resolved from the GPU's memory (server_args.py: 2048 under
# 35 GB, 8192 up to 160 GB, 16384 above): 8192 when the server does not say. Its
# --max-running-requests is derived from the KV pool; 256 is ttft's guess when it does not say.
DEFAULT_BATCH = {"llamacpp": 2048, "vllm": 2048, "sglang": 8192}
DEFAULT_SLOTS = {"llamacpp": 4, "vllm": 256, "sglang": 256}
SGLANG_INFO_PATHS = ("/server_info", "/get_server_info")  # newer, older
# what ttft starts its own engines with: 4 slots for llama-server, --max-num-seqs 8 for its
# vLLM (a few CPU cores: a few sequences)
OWN_SLOTS = {"llamacpp": 4, "vllm": 8, "sglang": 0}


@dataclass(frozen=True)
class Live:
    target: Target
    settings: EngineSettings
    embedded: bool


def settings_of(
    target: Target,
    kind: EngineKind,
    *,
    slots: int | None = None,
    batch_tokens: int | None = None,
    kv_blocks: int | None = None,
) -> EngineSettings:
    """The scheduler settings of a live engine: given ones first, then what it reports."""
    control = ControlClient(target)
    props: dict[str, object] = {}
    if kind == "llamacpp":
        try:
            props = control.props()
        except ControlError:
            props = {}
    reported = props.get("total_slots")
    n_slots = slots or (reported if isinstance(reported, int) and reported > 0 else None)
    n_slots = n_slots or DEFAULT_SLOTS[kind]
    batch = batch_tokens
    if batch is None:
        found = props.get("n_batch")
        batch = found if isinstance(found, int) and found > 0 else DEFAULT_BATCH[kind]
    ctx = control.context_limit() if kind == "llamacpp" else None
    block_tokens = 16
    if kind == "vllm":
        found_blocks, found_size = vllm_cache(target)
        kv_blocks = kv_blocks or found_blocks
        block_tokens = found_size or block_tokens
    if kind == "sglang":
        return sglang_settings(
            sglang_info(control), slots=slots, batch_tokens=batch_tokens, kv_pages=kv_blocks
        )
    settings = EngineSettings(
        kind=kind,
        slots=n_slots,
        batch_tokens=batch,
        ctx_per_slot=ctx,
        kv_blocks=kv_blocks,
        block_tokens=block_tokens,
    )
    settings.check()
    return settings


def sglang_info(control: ControlClient) -> dict[str, object]:
    """SGLang's server info (its server arguments, resolved at start-up, and the scheduler's
    ``max_total_num_tokens``; ``internal_states`` per scheduler in recent versions); an empty
    dict when neither endpoint answers."""
    for path in SGLANG_INFO_PATHS:
        try:
            info = control.send(Call("GET", path), timeout_s=5)
        except ControlError as exc:
            if exc.status in (401, 403):
                raise
            continue
        states = info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            return {**states[0], **info}
        return info
    return {}


def sglang_settings(
    info: dict[str, object],
    *,
    slots: int | None = None,
    batch_tokens: int | None = None,
    kv_pages: int | None = None,
) -> EngineSettings:
    """The SGLang model's settings from its server info, each absent field at SGLang's default
    (server_args.py): --max-running-requests, --chunked-prefill-size (-1: chunking off),
    --max-prefill-tokens (SGLang uses at least the context length), --page-size (1), the KV
    pool (``max_total_num_tokens``), --schedule-policy (fcfs; a policy the model does not know
    runs as fcfs), --disable-radix-cache, --enable-mixed-chunk, --schedule-conservativeness."""
    chunk = info.get("chunked_prefill_size")
    chunked = not (isinstance(chunk, int) and chunk <= 0)
    page = _pos(info.get("page_size")) or 1
    total = _pos(info.get("max_total_num_tokens"))
    prefill = _pos(info.get("max_prefill_tokens")) or 16384
    context = _pos(info.get("context_length")) or _pos(info.get("max_req_input_len"))
    policy = info.get("schedule_policy")
    settings = EngineSettings(
        kind="sglang",
        slots=slots or _pos(info.get("max_running_requests")) or DEFAULT_SLOTS["sglang"],
        batch_tokens=batch_tokens or _pos(chunk) or DEFAULT_BATCH["sglang"],
        kv_blocks=kv_pages or (total // page if total else None),
        block_tokens=page,
        prefix_cache=info.get("disable_radix_cache") is not True,
        chunked_prefill=chunked,
        max_prefill_tokens=max(prefill, context or 0),
        schedule_policy=policy if policy in SGLANG_POLICIES else "fcfs",
        mixed_chunk=info.get("enable_mixed_chunk") is True,
        schedule_conservativeness=_positive_float(info.get("schedule_conservativeness")) or 1.0,
    )
    settings.check()
    return settings


def _positive_float(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None  # type: ignore[arg-type]


def _pos(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def vllm_cache(target: Target) -> tuple[int | None, int | None]:
    """vLLM's KV blocks and block size from its ``vllm:cache_config_info`` metric (labels
    ``num_gpu_blocks``, ``block_size``); (None, None) when it does not say."""
    from ttft.engines.prometheus import scrape_url

    try:
        scrape = scrape_url(
            target.metrics_url or target.root + "/metrics", headers=target.auth_headers()
        )
    except TtftError:
        return None, None
    for sample in scrape.samples:
        if sample.name == "vllm:cache_config_info":
            labels = dict(sample.labels)
            return _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
    return None, None


def _int(text: str | None) -> int | None:
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def launch_pinned(
    slots: int, batch_tokens: int | None, threads: int | None, cores: Sequence[int] | None
) -> RunningEngine:
    """The embedded llama-server as the simulator runs it (a calibration, or one replica of a
    validation): ``slots`` slots, ``threads`` threads pinned to ``cores`` when given."""
    from ttft.engines.llamacpp.embedded import launch_embedded

    # Gemma 3 slides its attention window: without --swa-full llama-server reuses a prefix only
    # from a checkpoint near the end of the previous prompt (see cli/trace_options.py)
    running = launch_embedded(
        ctx_size=EMBEDDED_CTX_PER_SLOT * slots,
        parallel=slots,
        batch_size=batch_tokens,
        threads=threads,
        extra_args=("--swa-full",),
    )
    if cores is not None and running.process.pid is not None:
        pin(running.process.pid, cores)
    return running


@contextmanager
def engine(
    url: str | None,
    kind: EngineKind = "llamacpp",
    *,
    slots: int | None = None,
    batch_tokens: int | None = None,
    kv_blocks: int | None = None,
    model: str | None = None,
    api_key: str | None = None,
    threads: int | None = None,
) -> Iterator[Live]:
    """A live engine for the duration of the block: the user's, or an embedded one we stop.

    ``threads``: the embedded engine's ``-t``, and it is pinned to the first ``threads`` cores
    (a multi-replica validation puts its replicas on the next ones: see ``live_fleet``)."""
    if url:
        target = complete_target(Target(url, model, None, kind, api_key))
        yield Live(
            target,
            settings_of(target, kind, slots=slots, batch_tokens=batch_tokens, kv_blocks=kv_blocks),
            False,
        )
        return
    n = slots or OWN_SLOTS[kind]
    groups = core_groups(1, threads)
    running = launch_own(kind, n, batch_tokens, threads, groups[0] if groups else None, model)
    try:
        target = Target(running.base_url, running.model_name, running.metrics_url, kind)
        batch = batch_tokens or (DEFAULT_BATCH["vllm"] if kind == "vllm" else None)
        yield Live(target, settings_of(target, kind, slots=n, batch_tokens=batch), True)
    finally:
        running.stop()


def launch_local_vllm(
    slots: int, batch_tokens: int, cores: Sequence[int] | None, model: str | None
) -> RunningVllm:
    """ttft's own vLLM (its CPU build, ``python -m ttft.engines.vllm.install``) serving the
    local model ``model`` (default ``ttft-small-llama``: its compute outweighs vLLM's front
    end, as a real model's does), with ``slots`` as ``--max-num-seqs``, on ``cores``."""
    from ttft.engines.vllm.local import VllmConfig, launch_vllm
    from ttft.engines.vllm.make_model import SMALL_MODEL_NAME

    config = VllmConfig(
        local_model=model or SMALL_MODEL_NAME,
        max_num_seqs=slots,
        max_num_batched_tokens=batch_tokens,
        cpu_cores=tuple(cores) if cores is not None else None,
    )
    return launch_vllm(config)


def launch_own(
    kind: str,
    slots: int,
    batch_tokens: int | None,
    threads: int | None,
    cores: Sequence[int] | None,
    model: str | None,
) -> RunningEngine | RunningVllm:
    """An engine ttft starts itself, of ``kind``: the embedded llama-server, or ttft's own
    local vLLM (local ``model``); the calibration's engine and each replica of a validation."""
    if kind == "vllm":
        return launch_local_vllm(slots, batch_tokens or DEFAULT_BATCH["vllm"], cores, model)
    if kind != "llamacpp":
        name = {"sglang": "SGLang"}.get(kind, kind)
        raise TtftError(
            f"ttft starts no {kind} replicas (it has no CPU build): an {name} calibration needs "
            "--url, and so does validating one",
            f"start {name} (behind a router, for several replicas) and give its URL with --url, "
            "or use --engine llamacpp or vllm",
        )
    return launch_pinned(slots, batch_tokens, threads, cores)
