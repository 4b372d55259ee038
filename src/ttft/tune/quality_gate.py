"""``tune sweep --quality-gate``: each configuration's answers against the sweep's baseline.

The baseline is the sweep's first configuration (the first value of every ``--param``, as the
user wrote them). A configuration whose engine settings differ from it only in slots and
threads has the same numerics and is not checked; every other one gets a short ``ttft verify
quality`` run, and a "fail" is marked in the table and never chosen.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ttft.tune.runner import llama_settings
from ttft.tune.space import Config, config_label
from ttft.tune.sweep import QualityGate
from ttft.verify import QualityCheck, QualityOptions
from ttft.verify.sides import SideSpec

# Short on purpose: one length, two probes, eight tokens (~15 s per configuration on 2 cores).
# It catches a lever that breaks answers (q4_0 KV fails it at 512 tokens); it is no substitute
# for `ttft verify quality` at the lengths the service runs.
GATE_OPTIONS = QualityOptions(lengths=(512,), samples=2, n_tokens=8)
# Settings that decide how many requests run at once or on how many cores, not the numbers.
_NOT_NUMERIC = ("ctx_size", "parallel", "threads")


def gate_side(config: Config, model_path: Path | None) -> SideSpec:
    """An embedded verify side with the configuration's engine settings (slots, context and
    threads are the check's own, the same on both sides)."""
    settings: dict[str, Any] = llama_settings(config, per_slot_ctx=0, threads=None)
    for name in _NOT_NUMERIC:
        settings.pop(name, None)
    if not settings.get("extra_args"):
        settings.pop("extra_args", None)
    if model_path is not None:
        settings["model_path"] = model_path
    return SideSpec(spec=config_label(config), overrides=settings)


def quality_gate(baseline: Config, *, threads: int | None, model_path: Path | None) -> QualityGate:
    base = gate_side(baseline, model_path)
    # the baseline is measured once, on the first configuration that needs a check
    check = QualityCheck(base, replace(GATE_OPTIONS, threads=threads))

    def gate(config: Config) -> str | None:
        side = gate_side(config, model_path)
        if side.overrides == base.overrides:
            return None
        return check.against(side).verdict

    return gate
