"""What the engines say about themselves: their model names and (llama-server) their slot count.

A gateway configured with a name of its own (``default``) must still answer a client that sends
the engine's real model name, and a cap of 4 in flight throttles a vLLM replica built for 256
sequences while overloading a llama-server started with ``-np 2``. So, per replica, once it
answers:

- ``GET /v1/models``: every listed id is accepted as an alias of the configured model;
- ``GET /props`` (llama.cpp only, and only when the user gave no ``max_in_flight``):
  ``total_slots`` becomes the replica's in-flight cap, and the short-lane reserve is recomputed
  for it unless configured.

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
from ttft.gateway.admission.lanes import resolve_long_reserve
from ttft.gateway.admission.partition import SOLE, Partition
from ttft.gateway.admission.slot_pins import SlotPins
from ttft.gateway.config import GatewayConfig, engine_adapter
from ttft.gateway.runtime import ModelRuntime, Replica, fetch

log = logging.getLogger("ttft.gateway")

MAX_NAMES = 64  # per model: a hostile or odd upstream cannot grow the alias set without bound
MAX_NAME_CHARS = 256
MAX_SLOTS = 4096

# An answer's decoded JSON object ({} when it has none: a 404, not JSON), or None for no answer
# yet (unreachable, 5xx: a loading llama-server answers 503), which is asked again later.
Answer = dict[str, Any] | None
FetchJson = Callable[[Replica, control.Call], Awaitable[Answer]]


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


def model_names(answer: dict[str, Any]) -> list[str]:
    """The ids of an OpenAI ``/v1/models`` answer, bounded."""
    data = answer.get("data")
    if not isinstance(data, list):
        return []
    names = [m.get("id") for m in data[:MAX_NAMES] if isinstance(m, dict)]
    # Printable only: a name may end up in a log line or an error message.
    return [
        n for n in names if isinstance(n, str) and 0 < len(n) <= MAX_NAME_CHARS and n.isprintable()
    ]


def total_slots(props: dict[str, Any]) -> int | None:
    slots = props.get("total_slots")
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        return None
    return slots


def apply_slots(
    replica: Replica,
    slots: int,
    configured_reserve: int | None,
    pin: bool = True,
    partition: Partition = SOLE,
) -> None:
    """Set a replica's cap to the engine's slot count (this worker's part of it); waiting
    requests may start at once. With ``pin`` and a short-lane reserve, requests are also sent
    to chosen slots (one worker only: two would pin requests to the same slot)."""
    admission = replica.admission
    whole, slots = slots, partition.part(slots, replica.index)
    pin = pin and partition.count == 1
    if admission.max_in_flight != slots:
        log.info("upstream %s: %d of its %d slots (from /props)", replica.name, slots, whole)
    admission.max_in_flight = slots
    admission.long_reserve = resolve_long_reserve(configured_reserve, slots)
    if pin and admission.split_lanes and admission.long_reserve > 0:
        replica.slot_pins = SlotPins(slots, admission.long_reserve)
    replica.cap_from_engine = False
    admission.dispatch()


async def discover_replica(
    runtime: ModelRuntime,
    replica: Replica,
    config: GatewayConfig,
    get: FetchJson = fetch_json,
    *,
    retry_s: float = 2.0,
    attempts: int = 30,
) -> None:
    """Ask one replica until it answered (a loading llama-server answers 503 for a while)."""
    adapter = engine_adapter(runtime.config.engine)
    want_slots = replica.cap_from_engine and adapter is not None and adapter.control_endpoints
    want_names = True
    for attempt in range(attempts):
        if want_names:
            answer = await get(replica, control.MODELS)
            if answer is not None:
                want_names = False
                room = MAX_NAMES - len(runtime.engine_names)
                runtime.engine_names.update(model_names(answer)[: max(0, room)])
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
