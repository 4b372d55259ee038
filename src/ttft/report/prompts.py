"""The prefix-cache report of ``ttft lint prompts``: the numbers behind its findings (hit rates
now and after the fixes, shared-prefix structure, tokens and TTFT saved), as JSON and as rows.

The findings themselves, and their severity, are decided in ``ttft.lint.prompts.findings``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttft.core.findings import Finding
from ttft.lint.prompts.analysis import PromptsAnalysis
from ttft.lint.prompts.prefix_cache import CACHE_MODEL_HELP, CacheSimulation, distribution
from ttft.report.findings import (
    dumps,
    json_document,
    markdown_document,
    render_text,
    sarif_document,
)


def _side(sim: CacheSimulation) -> dict[str, Any]:
    return {
        "prompt_tokens": sim.total_tokens,
        "cached_tokens": sum(sim.cached_ideal),
        "hit_rate": round(sim.hit_rate_ideal, 4),
        "cached_tokens_one_slot": sum(sim.cached_one_slot),
        "hit_rate_one_slot": round(sim.hit_rate_one_slot, 4),
        "shared_prefix_tokens": distribution(sim.shared_ideal[1:]),
    }


def _groups(analysis: PromptsAnalysis, after: bool) -> list[dict[str, Any]]:
    groups = analysis.groups_after if after else analysis.groups_before
    rendered = analysis.rendered
    out = []
    for group in groups[:10]:
        first = rendered[group.members[0]].request
        out.append(
            {
                "requests": len(group.members),
                "shared_tokens": group.shared_tokens,
                "first": first.where,
            }
        )
    return out


def report(analysis: PromptsAnalysis) -> dict[str, Any]:
    """The prefix-cache report as plain data (the ``prefix_cache`` part of ``--format json``)."""
    n = len(analysis.rendered)
    saved = analysis.saved_tokens
    return {
        "requests": len(analysis.requests),
        "rendered": n,
        "template": analysis.template.origin,
        "cache_model": {
            "name": analysis.cache_model.name,
            "rule": CACHE_MODEL_HELP.get(analysis.cache_model.name, ""),
            "ideal": "every earlier prompt stays cached; llama-server caches one prompt per slot "
            "(plus a host-memory prompt cache), so hit_rate_one_slot is the pessimistic bound",
        },
        "before": _side(analysis.before),
        "after": _side(analysis.after),
        "groups_before": len(analysis.groups_before),
        "groups_after": len(analysis.groups_after),
        "largest_groups_before": _groups(analysis, after=False),
        "largest_groups_after": _groups(analysis, after=True),
        "saved_tokens": saved,
        "saved_tokens_per_request": round(saved / n, 1) if n else 0.0,
        "prefill_tokens_per_s": analysis.prefill_rate,
        "ttft_saved_ms_per_request": (
            round(analysis.saved_ms_per_request, 1)
            if analysis.saved_ms_per_request is not None
            else None
        ),
        "dynamic_spans": [
            {
                "request": i,
                "source": f.source,
                "text": f.span.text,
                "kind": f.span.kind,
                "movable": f.place is not None,
            }
            for i, r in enumerate(analysis.rendered)
            for f in r.spans
        ],
        "per_request": [
            {
                "where": r.request.where,
                "prompt_tokens": analysis.before.prompt_tokens[i],
                "cached_before": analysis.before.cached_ideal[i],
                "cached_after": analysis.after.cached_ideal[i],
            }
            for i, r in enumerate(analysis.rendered)
        ],
    }


def report_rows(analysis: PromptsAnalysis) -> list[tuple[str, str, str]]:
    """``(measure, now, after fixes)`` rows for a terminal table."""
    b, a = analysis.before, analysis.after
    db, da = distribution(b.shared_ideal[1:]), distribution(a.shared_ideal[1:])
    rows = [
        ("requests", f"{len(analysis.rendered)}", f"{len(analysis.rendered)}"),
        ("prompt tokens", f"{b.total_tokens:,}", f"{a.total_tokens:,}"),
        ("cached tokens (ideal cache)", f"{sum(b.cached_ideal):,}", f"{sum(a.cached_ideal):,}"),
        ("prefix-cache hit rate (ideal)", f"{b.hit_rate_ideal:.1%}", f"{a.hit_rate_ideal:.1%}"),
        (
            "hit rate, one slot (previous request only)",
            f"{b.hit_rate_one_slot:.1%}",
            f"{a.hit_rate_one_slot:.1%}",
        ),
        (
            "shared prefix p50 / p90 (tokens)",
            f"{db['p50']:.0f} / {db['p90']:.0f}",
            f"{da['p50']:.0f} / {da['p90']:.0f}",
        ),
        (
            "prefix groups (>= 16 shared tokens)",
            f"{len(analysis.groups_before)}",
            f"{len(analysis.groups_after)}",
        ),
        (
            "largest group: requests x shared tokens",
            _largest(analysis, False),
            _largest(analysis, True),
        ),
    ]
    return rows


def _largest(analysis: PromptsAnalysis, after: bool) -> str:
    groups = analysis.groups_after if after else analysis.groups_before
    return f"{len(groups[0].members)} x {groups[0].shared_tokens}" if groups else "-"


def saving_line(analysis: PromptsAnalysis) -> str:
    n = len(analysis.rendered)
    saved = analysis.saved_tokens
    per = saved / n if n else 0.0
    line = f"saved: {saved:,} prompt tokens served from cache ({per:.0f} per request)"
    ms = analysis.saved_ms_per_request
    if ms is not None and analysis.prefill_rate:
        line += (
            f"; at {analysis.prefill_rate:.0f} tokens/s prefill: ~{ms:.0f} ms less TTFT per request"
        )
    return line


def document_text(
    found: Sequence[Finding], analysis: PromptsAnalysis, fmt: str, subject: str
) -> str:
    """The findings with the prefix-cache numbers as json, sarif or markdown."""
    data: dict[str, Any] = report(analysis)
    if fmt == "json":
        document = json_document(found, subject=subject)
        document["prefix_cache"] = data
        return dumps(document)
    if fmt == "sarif":
        document = sarif_document(found)
        document["runs"][0]["properties"] = {"prefix_cache": data}
        return dumps(document)
    return markdown_document(found, subject=subject) + "\n" + saving_line(analysis)


def print_text(
    found: Sequence[Finding],
    analysis: PromptsAnalysis,
    model_name: str,
    console: Console,
    subject: str,
) -> None:
    """The findings, then the prefix-cache replay as a table and what the fixes save."""
    render_text(found, console, subject=subject)
    console.print()
    title = f"prefix-cache replay ({model_name} model: {CACHE_MODEL_HELP[model_name]})"
    console.print(_cache_table(report_rows(analysis), title))
    console.print(escape(saving_line(analysis)))
    console.print(
        "[dim]ideal cache: every earlier prompt stays cached. llama-server keeps one prompt "
        "per slot (plus a host-memory prompt cache): the one-slot row is its lower bound.[/dim]"
    )


def _cache_table(rows: list[tuple[str, str, str]], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=None, expand=False)
    table.add_column("prefix cache", no_wrap=True)
    table.add_column("now", justify="right", no_wrap=True)
    table.add_column("after fixes", justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table
