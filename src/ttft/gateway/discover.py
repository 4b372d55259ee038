"""What the engines say about themselves: their model names and their concurrency cap.

A gateway configured with a name of its own (``default``) must still answer a client that sends
the engine's real model name, and a cap of 4 in flight throttles a vLLM replica built for 256
sequences while overloading a llama-server started with ``-np 2``. So, per replica, once it
answers:

- ``GET /v1/models``: every listed id is accepted as an alias of the configured model and listed
  by the gateway's own ``/v1/models`` (with vLLM's ``root`` and ``max_model_len``);
- the in-flight cap, only when the user gave no ``max_in_flight`` (a configured value wins: it
  may be a deliberate choice below the engine's): llama-server's ``total_slots`` of ``GET
  /props``; for other engines, which expose no such number over HTTP (vLLM 0.32 does not), the
  concurrency flag of the engine's launch command when it listens on loopback here
  (``engine_facts``); else the gateway's default for the engine. The short-lane reserve is
  recomputed for the new cap unless configured, and the source is logged and shown in
  ``/health``.

Engine answers are outside input: names are bounded in count and length, slot counts in range.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ttft.client.errors import RequestFailed
from ttft.engines import control
from ttft.engines.local_process import launch_command
from ttft.gateway.admission.lanes import resolve_long_reserve
from ttft.gateway.admission.partition import SOLE, Partition
from ttft.gateway.admission.shared_slots import SharedSlots
from ttft.gateway.admission.slot_pins import SlotPins
from ttft.gateway.admission.slot_table import PIN_SLOTS
from ttft.gateway.config import GatewayConfig, engine_adapter
from ttft.gateway.engine_facts import (
    EngineCommandLine,
    concurrency_cap,
    no_cap_reason,
    parse_launch,
)
from ttft.gateway.runtime import ModelRuntime, Replica, fetch

log = logging.getLogger("ttft.gateway")

MAX_NAMES = 64  # per model: a hostile or odd upstream cannot grow the alias set without bound
MAX_NAME_CHARS = 256
MAX_SLOTS = 4096
MAX_ROOT_CHARS = 4096

# An answer's decoded JSON object ({} when it has none: a 404, not JSON), or None for no answer
# yet (unreachable, 5xx: a loading llama-server answers 503), which is asked again later.
Answer = dict[str, Any] | None
FetchJson = Callable[[Replica, control.Call], Awaitable[Answer]]
ReadLaunch = Callable[[Replica], Awaitable[EngineCommandLine | None]]


async def _read_in_thread(replica: Replica) -> EngineCommandLine | None:
    return await asyncio.to_thread(read_launch, replica)


async def fetch_json(replica: Replica, call: control.Call) -> Answer:
    try:
        status, raw = await fetch(replica, call)
    except (RequestFailed, TimeoutError, OSError):
        return None
    if status >= 500:
        return None
    try:
        data = json.loads(raw) if status == 200 else {}
    except (ValueError, RecursionError):  # 4 MB of "[[[[": the task died with it, unasked again
        return {}
    return data if isinstance(data, dict) else {}


def _name_ok(name: Any, limit: int = MAX_NAME_CHARS) -> bool:
    # Printable only: a name may end up in a log line or an error message.
    return isinstance(name, str) and 0 < len(name) <= limit and name.isprintable()


def model_entries(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The models of an OpenAI ``/v1/models`` answer by id, in its order, bounded, each with
    the facts the gateway uses (vLLM's ``root``: the model's folder or hub name, and
    ``max_model_len``) when they are well formed."""
    data = answer.get("data")
    if not isinstance(data, list):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for m in data[:MAX_NAMES]:
        if not isinstance(m, dict) or not _name_ok(m.get("id")) or m["id"] in out:
            continue
        facts: dict[str, Any] = {}
        if _name_ok(m.get("root"), MAX_ROOT_CHARS):
            facts["root"] = m["root"]
        length = m.get("max_model_len")
        if not isinstance(length, bool) and isinstance(length, int) and 0 < length < 1 << 31:
            facts["max_model_len"] = length
        out[m["id"]] = facts
    return out


def model_names(answer: dict[str, Any]) -> list[str]:
    """The ids of an OpenAI ``/v1/models`` answer, bounded."""
    return list(model_entries(answer))


def total_slots(props: dict[str, Any]) -> int | None:
    slots = props.get("total_slots")
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        return None
    return slots


def apply_cap(replica: Replica, cap: int, source: str, configured_reserve: int | None) -> None:
    """Set a replica's in-flight cap to the engine's own and say where it came from; waiting
    requests may start at once. With several workers, each admits against the whole cap,
    counted across them in the shared slot table (admission/slot_table.py)."""
    admission = replica.admission
    admission.max_in_flight = cap
    admission.long_reserve = resolve_long_reserve(configured_reserve, cap)
    replica.cap_from_engine = False
    replica.limit_source = f"the engine: {source}"
    log.info("upstream %s: at most %s in flight (from %s)", replica.name, cap, source)
    admission.dispatch()


def apply_slots(
    replica: Replica,
    slots: int,
    configured_reserve: int | None,
    pin: bool = True,
    partition: Partition = SOLE,
) -> None:
    """Set a replica's cap to llama-server's slot count. With ``pin`` and a short-lane
    reserve, requests are also sent to chosen slots: with several workers, through the shared
    slot table, so two workers never pin requests to the same slot."""
    apply_cap(replica, slots, f"total_slots {slots} of GET /props", configured_reserve)
    admission = replica.admission
    if not (pin and admission.split_lanes and admission.long_reserve > 0):
        return
    shared = admission.shared
    if isinstance(shared, SharedSlots):
        if slots <= PIN_SLOTS:
            replica.slot_pins = shared.pins(slots, admission.long_reserve)
        else:
            log.info("upstream %s: %d slots, more than the %d pinned across workers: "
                     "the engine picks slots", replica.name, slots, PIN_SLOTS)  # fmt: skip
    elif partition.count == 1:  # workers without the shared table would share slot ids
        replica.slot_pins = SlotPins(slots, admission.long_reserve)


def read_launch(replica: Replica) -> EngineCommandLine | None:
    """The launch command of the engine behind a loopback upstream (blocking: /proc scan)."""
    launch = launch_command(replica.config.host, replica.config.port)
    return None if launch is None else parse_launch(launch)


def cap_from_launch(
    replica: Replica, line: EngineCommandLine | None, engine: str, config: GatewayConfig
) -> None:
    """The in-flight cap from the engine's launch command, or a log line naming the default
    kept and how to set it."""
    found = None if line is None else concurrency_cap(line)
    if found is not None:
        apply_cap(replica, found[0], found[1], config.admission.long_reserve)
        return
    why = no_cap_reason(line, engine)
    replica.limit_source += f": {why}"
    log.warning(
        "upstream %s: at most %d in flight, the gateway's default for %s: %s; set "
        "max_in_flight (--max-in-flight) to the engine's real cap",
        replica.name,
        replica.admission.max_in_flight,
        engine,
        why,
    )


async def discover_replica(
    runtime: ModelRuntime,
    replica: Replica,
    config: GatewayConfig,
    get: FetchJson = fetch_json,
    read: ReadLaunch | None = None,
    *,
    retry_s: float = 2.0,
    attempts: int = 30,
) -> None:
    """Ask one replica until it answered (a loading llama-server answers 503 for a while).
    ``read`` finds the engine's launch command (default: ``read_launch`` off the event loop)."""
    if read is None:
        read = _read_in_thread
    engine = runtime.config.engine
    adapter = engine_adapter(engine)
    llama = adapter is not None and adapter.control_endpoints
    want_slots = replica.cap_from_engine and llama
    want_names = True
    for attempt in range(attempts):
        if want_names:
            answer = await get(replica, control.MODELS)
            if answer is not None:
                want_names = False
                room = max(0, MAX_NAMES - len(runtime.engine_models))
                listed = list(model_entries(answer).items())[:room]
                runtime.engine_models.update(listed)
                runtime.engine_names.update(name for name, _ in listed)
                # The engine answers, so it listens: its process can be found now.
                replica.launch = await read(replica)
                if replica.cap_from_engine and not llama:
                    cap_from_launch(replica, replica.launch, engine, config)
                runtime.listed.set()
        if want_slots:
            props = await get(replica, control.PROPS)
            if props is not None:
                want_slots = False
                slots = total_slots(props)
                if slots is not None:
                    apply_slots(
                        replica,
                        slots,
                        config.admission.long_reserve,
                        config.admission.pin_slots,
                        config.partition,
                    )
        if not (want_names or want_slots) or attempt == attempts - 1:
            return
        await asyncio.sleep(retry_s)
