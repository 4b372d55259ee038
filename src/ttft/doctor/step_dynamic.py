"""Dynamic content in the user's prompts: what the log analysis predicts, measured on the engine.

The request log is read by the one analysis that ``ttft lint prompts`` uses
(:mod:`ttft.prompts.log_analysis`): the spans that change between requests before the static
parts, wherever they sit. Then the same requests are replayed twice, one at a time: as they are,
and with the movable spans moved to the end of the last user message. The engine's own counts of
cached prompt tokens and the client's TTFT of the two replays, with a bootstrap interval on the
difference, are the evidence; the finding carries the ``move-dynamic`` change that ``tune ab``
applies, naming the spans it moves. Spans that cannot be moved without changing what the prompt
means (a value in a tool's schema) get their own finding, with the reason.
"""

from __future__ import annotations

from typing import Any

from ttft.core.errors import TtftError
from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.records import RequestRecord
from ttft.core.stats import bootstrap_difference
from ttft.doctor.changes import move_dynamic_last
from ttft.doctor.context import DoctorContext, median, server_ms, ttft_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.prompts.chat_template import TemplateRenderer
from ttft.prompts.log_analysis import LogAnalysis, analyse_bodies, keep_rendered, summary
from ttft.prompts.sources import template_from_props
from ttft.prompts.static_prefix import analyse
from ttft.workload.requests import WorkItem

REPLAY_MAX = 8  # requests per replay (each replayed as is and moved)
REPLAY_MIN = 3  # the first of each replay only warms its own prefix: at least 2 compared
MIN_GAIN_TOKENS = 32  # fewer cached tokens gained than this is no finding
_RESAMPLES, _SEED = 2000, 26  # the bootstrap of the TTFT saved (core/stats)


def analysis_of(ctx: DoctorContext) -> LogAnalysis | None:
    """The log analysis of the chat requests given with ``--requests-log`` (computed once),
    keeping only what the engine's chat template renders (when ``/props`` shows it), as
    ``ttft lint prompts`` does."""
    handoff = ctx.handoff
    if not handoff.dynamic_analysed:
        bodies = [i.body for i in ctx.real_items if i.api == "chat"]
        analysis = analyse_bodies(bodies) if bodies else None
        if analysis is not None and analysis.found:
            analysis = _rendered_only(ctx, analysis)
        handoff.dynamic_analysis, handoff.dynamic_analysed = analysis, True
    return handoff.dynamic_analysis


def _rendered_only(ctx: DoctorContext, analysis: LogAnalysis) -> LogAnalysis:
    template = template_from_props(ctx.props, "")
    if template is None:
        return analysis
    try:
        renderer = TemplateRenderer(template)
        statics = [analyse(renderer, request).static_text for request in analysis.requests]
    except TtftError as exc:  # a syntax error, or a template that refuses a request
        ctx.handoff.dynamic_notes.append(
            f"the engine's chat template could not render the log ({exc}): every span is kept"
        )
        return analysis
    return keep_rendered(analysis, statics)


def _cached(record: RequestRecord) -> float | None:
    if record.cached_tokens is not None:
        return float(record.cached_tokens)
    return server_ms(record, "cache_n")


def dynamic_prefix(ctx: DoctorContext) -> StepResult:
    step = StepResult(
        "dynamic_prefix",
        "Dynamic content before your prompts' static parts: replayed as is and moved",
    )
    analysis = analysis_of(ctx)
    step.notes += ctx.handoff.dynamic_notes
    if analysis is None or len(analysis.requests) < 2:
        step.status = StepStatus.SKIPPED
        step.notes.append("no --requests-log with 2 or more chat requests: nothing to align")
        return step
    if not analysis.found:
        step.summary = "no content changes between your requests before their static parts"
        return step
    step.evidence.append(Evidence("dynamic spans", summary(analysis), "", "log analysis"))
    _unmovable(step, analysis)
    if not analysis.movable():
        step.summary = "dynamic content found, none of it movable"
        return step
    _replay(ctx, step, analysis)
    return step


def _unmovable(step: StepResult, analysis: LogAnalysis) -> None:
    spans = analysis.unmovable()
    if not spans:
        return
    first = spans[0]
    values = list(dict.fromkeys(s.text for s in spans))
    step.add_finding(
        rule="cache/dynamic-unmovable",
        title=f"{first.label} ({first.text!r}) in {first.field.key} changes between requests",
        message=f"{len(values)} different value(s) there end the prefix every request shares; "
        f"ttft does not move it: {first.reason}",
        action="keep that part the same for every request (pass the value as an argument or "
        "in the last user message) so the prefix cache can reuse what follows it",
        tier=CostTier.TRANSPORT,
        confidence=Confidence.MEDIUM,
        evidence=(Evidence("unmovable spans", "; ".join(s.describe() for s in spans[:4]), "", ""),),
    )


def _body(body: dict[str, Any], messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out = {**body, "max_tokens": 1, "temperature": 0}
    if messages is not None:
        out["messages"] = messages
    return out


def _size(ctx: DoctorContext, analysis: LogAnalysis, first_s: float) -> int:
    """Requests per replay that fit in half the time left (the as-is replay is the slow one)."""
    fits = int(0.5 * ctx.seconds_left() / max(first_s, 0.05) / 1.3)
    movable = [i for i, spans in enumerate(analysis.spans) if any(s.movable for s in spans)]
    return max(REPLAY_MIN, min(REPLAY_MAX, fits, len(movable)))


def _replay(ctx: DoctorContext, step: StepResult, analysis: LogAnalysis) -> None:
    indexes = [i for i, spans in enumerate(analysis.spans) if any(s.movable for s in spans)]
    bodies = [i.body for i in ctx.real_items if i.api == "chat"]
    # ``ctx.sample`` starts every prompt with the run's mark, so neither replay finds what an
    # earlier doctor run sent in the prefix cache (it did, and "as they are" read as cached).
    first = ctx.sample([WorkItem(_body(bodies[indexes[0]]), "chat", "as-is")])
    first_s = first.duration_ns / 1e9
    chosen = indexes[: _size(ctx, analysis, first_s)]
    need = first_s * (2 * len(chosen) + 1)
    if ctx.seconds_left() < need:
        step.status = StepStatus.OUT_OF_BUDGET
        step.notes.append(
            f"the replay needs about {need:.0f} s and {ctx.seconds_left():.0f} s of the budget "
            "are left (raise --budget)"
        )
        return
    if len(chosen) < 2:
        step.notes.append("fewer than 2 requests carry movable dynamic content: nothing to compare")
        return
    as_is = (
        first.records
        + ctx.sample([WorkItem(_body(bodies[i]), "chat", "as-is") for i in chosen[1:]]).records
    )
    moved = ctx.sample(
        [WorkItem(_body(bodies[i], analysis.moved(i).messages), "chat", "moved") for i in chosen]
    ).records
    # The first request of each replay warms its own prefix; the rest are compared.
    before, after = as_is[1:], moved[1:]
    t_before = [v for v in (ttft_ms(r) for r in before) if v is not None]
    t_after = [v for v in (ttft_ms(r) for r in after) if v is not None]
    if not t_before or not t_after:
        if ctx.seconds_left() < 10:  # the requests' timeout shrinks with the budget left
            step.status = StepStatus.OUT_OF_BUDGET
            step.notes.append("the budget ran out during the replay (raise --budget)")
            return
        step.status = StepStatus.FAILED
        step.notes.append("the replayed requests failed: see the transport step")
        return
    c_before = [v for v in (_cached(r) for r in before) if v is not None]
    c_after = [v for v in (_cached(r) for r in after) if v is not None]
    cached_before, cached_after = median(c_before), median(c_after)
    # TTFT saved: as they are minus moved, each replay resampled on its own.
    point, ci = bootstrap_difference(t_before, t_after, resamples=_RESAMPLES, seed=_SEED)
    low, high = ci.low, ci.high
    step.evidence += [
        Evidence("requests replayed (each as is and moved)", float(len(chosen)), "", "client"),
        Evidence("your prompts as they are: TTFT p50", median(t_before) or 0.0, "ms", "client"),
        Evidence("dynamic spans moved: TTFT p50", median(t_after) or 0.0, "ms", "client"),
        Evidence("TTFT saved p50 (95% interval)", f"{point:.0f} ms [{low:.0f}, {high:.0f}]"),
    ]
    if cached_before is not None and cached_after is not None:
        step.evidence += [
            Evidence("cached prompt tokens as they are (p50)", cached_before, "tokens", "engine"),
            Evidence("cached prompt tokens moved (p50)", cached_after, "tokens", "engine"),
        ]
        gained = cached_after - cached_before
        measured = gained >= MIN_GAIN_TOKENS and point > 0
    else:
        gained = None
        measured = low > 0
    step.summary = f"moving the spans saves {point:.0f} ms of TTFT p50 [{low:.0f}, {high:.0f}]"
    if not measured:
        step.notes.append("moving the dynamic spans changed neither the cached tokens nor TTFT")
        return
    lead = analysis.movable()[0]
    step.add_finding(
        rule="cache/dynamic-prefix",
        title=(
            f"your requests reuse {cached_before:.0f} cached prompt tokens; with the dynamic "
            f"content moved, {cached_after:.0f}"
            if gained is not None and cached_before is not None and cached_after is not None
            else f"moving the dynamic content saves {point:.0f} ms of TTFT per request"
        ),
        message=f"{lead.label} ({lead.text!r}) in {lead.field.key} changes between requests and "
        "ends the prefix they share: the prefix cache computes everything after it again",
        action="move the dynamic content to the end of the last user message (ttft's "
        "move-dynamic transform moves exactly these spans); keep the static parts "
        "byte-identical across requests",
        tier=CostTier.TRANSPORT,  # a request change: the cheapest tier
        confidence=Confidence.HIGH if low > 0 else Confidence.MEDIUM,
        expected_gain_ms=point,
        change=move_dynamic_last(summary(analysis)),
        gain=f"about {point:.0f} ms per request (95% interval {low:.0f} to {high:.0f} ms)",
    )
