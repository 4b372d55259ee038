"""The machine-applicable change behind a doctor finding, spelled for the engine measured.

A finding's ``action`` is a sentence for a person; its ``change`` is the same fix as data that
``ttft tune ab`` applies and measures. The flags come from the engine's adapter (which flag caps
the running requests, whether the slots share one context), the values from what doctor measured
(the load that queued, the server's per-slot context from ``/props``).
"""

from __future__ import annotations

from ttft.core.changes import Change
from ttft.core.findings import CostTier
from ttft.doctor.context import DoctorContext
from ttft.engines.adapter import EngineAdapter


def spelled(adapter: EngineAdapter, canonical: str) -> str:
    """The flag as people type it: the short form when the engine has one (``-np``)."""
    names = [n for n, spec in adapter.flags.items() if spec.canonical == canonical]
    shorts = [n for n in names if not n.startswith("--")]
    return (shorts or names or ["--" + canonical])[0]


def more_slots(ctx: DoctorContext, level: int) -> Change | None:
    """Run ``level`` requests at once: the engine's concurrency cap, and for engines whose slots
    share one context (llama.cpp ``-c``), the context grown so each slot keeps its own size."""
    adapter = ctx.adapter
    if adapter is None or adapter.roles.concurrency_cap is None:
        return None
    flags = {spelled(adapter, adapter.roles.concurrency_cap): str(level)}
    shared = adapter.roles.shared_context
    per_slot = _per_slot_context(ctx)
    if shared is not None and per_slot is not None:
        flags[spelled(adapter, shared)] = str(per_slot * level)
    return Change(
        f"{level} concurrent requests in the engine",
        flags,
        tier=CostTier.SCHEDULING,
        rule="capacity/queueing",
        engine=adapter.kind,
    )


def prefix_cache_on(ctx: DoctorContext) -> Change | None:
    """The engine's prefix-caching switch in its positive form (any ``--no-`` form removed)."""
    adapter = ctx.adapter
    if adapter is None or adapter.roles.prefix_cache is None:
        return None
    flag = "--" + adapter.roles.prefix_cache
    return Change(
        "prefix caching on",
        {flag: ""},
        tier=CostTier.CACHE,
        rule="cache/prefix-cache-off",
        engine=adapter.kind,
    )


def _per_slot_context(ctx: DoctorContext) -> int | None:
    settings = ctx.props.get("default_generation_settings")
    value = settings.get("n_ctx") if isinstance(settings, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def move_dynamic_last(spans: str = "") -> Change:
    """The ``move-dynamic`` request transform; ``spans`` names what it moves (the log analysis's
    summary), for the person who reads the plan."""
    label = "dynamic content moved after the static prefix"
    return Change(
        f"{label}: {spans}" if spans else label,
        transforms=("move-dynamic",),
        tier=CostTier.TRANSPORT,
        rule="cache/dynamic-prefix",
    )


def admission_cap(level: int) -> Change:
    """At most ``level`` requests in flight from the client side (admission control)."""
    return Change(
        f"at most {level} requests in flight",
        client={"concurrency": str(level)},
        tier=CostTier.SCHEDULING,
        rule="capacity/slo-limit",
    )
