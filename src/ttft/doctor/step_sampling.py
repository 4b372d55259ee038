"""Sampling cost: the same request with greedy decoding and with the user's sampling settings.

The article's round 3 got part of its -160 ms from "cheaper sampling: tens of ms". The first
token is sampled once, but a chain that looks at the whole vocabulary (no top-k before top-p,
typical-p, penalties, DRY) sorts or scans every candidate - 262k of them for Gemma 3 - before the
first token can leave. The settings come from the request log when it has any; otherwise a heavy
default chain stands in, so the step says what such settings would cost on this engine.

Both variants send one fixed, short prompt again and again: after the first time the engine
reuses its cached prefix, so TTFT is little more than one forward step plus sampling, and the
difference between the variants is the sampling chain rather than prefill noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.stats import bootstrap_difference
from ttft.doctor.context import DoctorContext, median, ttfts_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.workload.requests import WorkItem

ROUNDS = 8  # requests per variant, sent alternately so drifts in load hit both alike
PROMPT = "Name three colours of the sea, one word each."
# Request fields that configure sampling (OpenAI's, and the engines' documented extensions).
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "repetition_penalty",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "xtc_probability",
    "xtc_threshold",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "dynatemp_range",
    "samplers",
)
OPENAI_SAMPLING = {"temperature": 1.0, "top_p": 0.95, "presence_penalty": 0.5}
# A heavy chain per engine, in its own parameter names: no top-k cut (every candidate reaches
# top-p), penalties, and on llama.cpp typical-p and DRY, which scan the whole vocabulary.
HEAVY: Mapping[str, Mapping[str, Any]] = {
    "llamacpp": {
        **OPENAI_SAMPLING,
        "frequency_penalty": 0.5,
        "top_k": 0,
        "min_p": 0.0,
        "typical_p": 0.9,
        "repeat_penalty": 1.3,
        "repeat_last_n": 2048,
        "dry_multiplier": 0.8,
    },
    "vllm": {**OPENAI_SAMPLING, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.3},
    "sglang": {**OPENAI_SAMPLING, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.3},
}
MATERIAL_MS, MATERIAL_SHARE = 10.0, 0.10  # "tens of ms" in the article; and a tenth of TTFT
RESAMPLES, SEED = 2000, 16  # the bootstrap of the difference (core/stats)


def user_settings(items: Sequence[WorkItem]) -> dict[str, Any] | None:
    """The sampling fields of the first logged request that sets any (``{}``: none does)."""
    for item in items:
        found = {k: item.body[k] for k in SAMPLING_KEYS if k in item.body}
        if found:
            return found
    return None if not items else {}


def is_greedy(settings: Mapping[str, Any]) -> bool:
    return settings.get("temperature") == 0 or settings.get("top_k") == 1


def _item(ctx: DoctorContext, settings: Mapping[str, Any]) -> WorkItem:
    item = ctx.chat(PROMPT, max_tokens=1)
    body = {k: v for k, v in item.body.items() if k != "temperature"}
    return WorkItem({**body, **settings}, item.api, "sampling")


def sampling(ctx: DoctorContext) -> StepResult:
    step = StepResult("sampling", "Sampling cost: greedy against your sampling settings")
    if ctx.seconds_left() < 15:
        step.status = StepStatus.OUT_OF_BUDGET
        step.notes.append("the time budget ran out before this step (raise --budget)")
        return step
    settings = user_settings(ctx.real_items)
    origin = "your request log"
    if settings and is_greedy(settings):
        step.status = StepStatus.SKIPPED
        step.summary = "your logged requests decode greedily: no sampling chain to make cheaper"
        return step
    if not settings:
        settings = dict(HEAVY.get(ctx.engine_kind or "", OPENAI_SAMPLING))
        origin = "a heavy default chain (no sampling settings in --requests-log)"
    greedy, chosen = _item(ctx, {"temperature": 0}), _item(ctx, settings)
    ctx.sample([greedy])  # puts the prompt in the prefix cache for both variants
    probe = ctx.sample([chosen])
    if not probe.ok and probe.records and probe.records[0].error is not None:
        error = probe.records[0].error
        step.notes.append(
            f"the engine refused the settings from {origin} ({error.kind}: "
            f"{error.message[:120]}); measured OpenAI's standard fields only"
        )
        settings = {k: v for k, v in settings.items() if k in OPENAI_SAMPLING}
        chosen = _item(ctx, settings)
    a: list[float] = []
    b: list[float] = []
    for _ in range(ROUNDS):
        a += ttfts_ms(ctx.sample([greedy]).records)
        b += ttfts_ms(ctx.sample([chosen]).records)
    if len(a) < 3 or len(b) < 3:
        step.status = StepStatus.FAILED
        step.notes.append("too few successful requests to compare the two settings")
        return step
    # The chosen settings' TTFT over greedy's, each group resampled on its own.
    diff, ci = bootstrap_difference(b, a, resamples=RESAMPLES, seed=SEED)
    base = median(a) or 0.0
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    step.evidence += [
        Evidence("TTFT with greedy decoding (p50)", base, "ms", "client"),
        Evidence("TTFT with the sampling settings (p50)", median(b) or 0.0, "ms", "client"),
        Evidence("difference (p50)", diff, "ms", "client"),
        Evidence("difference, 95% CI", f"{ci.low:.1f} .. {ci.high:.1f} ms", "", "bootstrap"),
        Evidence("sampling settings", f"{shown} (from {origin})", "", "request"),
        Evidence("requests per setting", float(len(b)), "", "client"),
    ]
    whose = "the logged sampling settings" if origin == "your request log" else "a heavy chain"
    step.summary = (
        f"{whose} cost {diff:.0f} ms of TTFT over greedy (95% CI {ci.low:.0f} .. {ci.high:.0f} ms)"
    )
    material = ci.low > 0 and diff >= max(MATERIAL_MS, MATERIAL_SHARE * base)
    if material and origin != "your request log":
        # A chain nobody asked for is a reference number, not a fault of this service.
        step.summary = (
            f"no sampling settings logged; a heavy chain would cost {diff:.0f} ms over greedy "
            f"(95% CI {ci.low:.0f} .. {ci.high:.0f} ms): keep a top-k before top-p"
        )
        step.notes.append(
            "your own sampling settings were not measured (give --requests-log with them)"
        )
    elif material:
        step.add_finding(
            rule="sampling/costly-chain",
            title=f"the sampling settings add {diff:.0f} ms to the first token "
            f"(greedy {base:.0f} ms; 95% CI {ci.low:.0f} .. {ci.high:.0f} ms)",
            message="the sampler scans or sorts the whole vocabulary before the first token "
            "leaves (no top-k before top-p, typical-p, penalties, DRY)",
            action="keep only the samplers the answers need: put a top-k (e.g. 40) before "
            "top-p so it sorts 40 candidates instead of the vocabulary, drop typical-p, DRY and "
            "penalties over long windows, and use greedy where determinism is fine; check the "
            "engine's default sampler chain too (llama-server `--samplers`)",
            tier=CostTier.TRANSPORT,  # request fields: no restart
            confidence=Confidence.MEDIUM,
            expected_gain_ms=diff,
            gain=f"about {diff:.0f} ms per request (the article: tens of ms)",
        )
    return step
