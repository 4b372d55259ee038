"""``ttft tune frontend``'s report as text for a terminal and as Markdown (JSON is the
report's own ``to_json``): the stage table, then each saving, the cache estimate and any
tokenizer mismatch as sentences, the same sentences in both forms."""

from __future__ import annotations

from ttft.core.tables import markdown_table
from ttft.tune.frontend_report import FrontendReport


def _rows(report: FrontendReport) -> list[list[str]]:
    return [
        [s.stage, f"{s.p50_ms:.3f}", f"{s.p95_ms:.3f}", f"{s.mean_ms:.3f}", f"{s.cold_ms:.3f}"]
        for s in report.stages
    ]


_HEAD = ["stage", "p50 ms", "p95 ms", "mean ms", "cold ms"]


def _saved(ms: float) -> str:
    return f"saves {ms:.3f} ms" if ms >= 0 else f"costs {-ms:.3f} ms more"


def _lines(report: FrontendReport) -> tuple[list[str], list[str], list[str]]:
    """(savings, cache, problems) as sentences, shared by text and markdown."""
    savings = [
        f"{s.change}: {_saved(s.ms_per_request)} per request (best request {s.max_ms:.3f} ms; "
        f"{s.alternative} takes {s.ratio:.2f}x the time of {s.anchor})"
        for s in report.savings
    ]
    c = report.cache
    cache = [
        f"pre-render cache over this log in one pass: {c.requests - c.static_parts} hit(s) of "
        f"{c.requests}, {_saved(c.saving_ms_per_request)} per request; with dynamic content "
        f"moved last {c.requests - c.static_parts_moved} hit(s), "
        f"{_saved(c.saving_ms_per_request_moved)} per request (estimates from the medians)"
    ]
    problems = [
        f"mismatch: {m.tokenizer} tokenizer on {m.where}: {m.tokens} tokens vs {m.rust_tokens} "
        f"(Rust), first difference at token {m.first_difference}"
        for m in report.mismatches
    ]
    return savings, cache, problems


def render_text(report: FrontendReport) -> str:
    table = [_HEAD, *_rows(report)]
    widths = [max(len(row[k]) for row in table) for k in range(len(_HEAD))]
    out = [f"{k}: {v}" for k, v in report.sources.items()]
    out.append(f"{len(report.requests)} request(s), {report.repeats} warm runs each (+1 cold)")
    out.append("")
    for row in table:
        cells = [
            c.ljust(w) if k == 0 else c.rjust(w)
            for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells))
    savings, cache, problems = _lines(report)
    out += ["", *savings, *cache, *problems]
    out += [f"warning: {w}" for w in report.warnings]
    return "\n".join(out)


def render_markdown(report: FrontendReport) -> str:
    out = ["## Frontend cost", ""]
    out += [f"- {k}: `{v}`" for k, v in report.sources.items()]
    out += [f"- {len(report.requests)} request(s), {report.repeats} warm runs each (+1 cold)", ""]
    out += markdown_table(_HEAD, _rows(report), right_from=1)
    savings, cache, problems = _lines(report)
    out += ["", *[f"- {line}" for line in savings + cache + problems]]
    if report.warnings:
        out += ["", "Warnings:", "", *[f"- {w}" for w in report.warnings]]
    return "\n".join(out)
