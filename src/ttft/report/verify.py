"""``verify quality`` as text for a terminal and as Markdown; JSON is the report's own dict."""

from __future__ import annotations

import json

from ttft.core.tables import markdown_table
from ttft.verify.quality import LengthSummary, QualityReport


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _kl(s: LengthSummary) -> str:
    if s.mean_kl is None:
        return "n/a"
    ci = s.mean_kl_ci
    return f"{s.mean_kl:.4f}" + (f" [{ci.low:.4f}, {ci.high:.4f}]" if ci else "")


def _top1(s: LengthSummary) -> str:
    if s.top1 is None:
        return "n/a"
    ci = s.top1_ci
    return f"{s.top1:.0%}" + (f" [{ci.low:.0%}, {ci.high:.0%}]" if ci else "")


HEADER = (
    "length",
    "n",
    "verdict",
    "mean KL (95% CI)",
    "max KL",
    "top-1 agree (95% CI)",
    "identical",
    "1st diff",
    "recall base/cand",
    "TTFT p50 base/cand ms",
)


def _recall(s: LengthSummary) -> str:
    if s.recall_baseline is None or s.recall_candidate is None:
        return "n/a"
    return f"{s.recall_baseline:.0%}/{s.recall_candidate:.0%}"


def _kv(report: QualityReport) -> str:
    def one(mib: float | None) -> str:
        return "unknown" if mib is None else f"{mib:.2f} MiB"

    return (
        f"KV memory: {report.baseline} {one(report.kv_mib_baseline)}, "
        f"{report.candidate} {one(report.kv_mib_candidate)}"
    )


def rows(report: QualityReport) -> list[tuple[str, ...]]:
    return [
        (
            s.name,
            str(s.samples),
            s.verdict,
            _kl(s),
            _num(s.max_kl, ".4f"),
            _top1(s),
            f"{s.identical_share:.0%}",
            f"{s.first_divergence_mean:.1f}",
            _recall(s),
            f"{s.ttft_p50_baseline_ms:.0f}/{s.ttft_p50_candidate_ms:.0f}",
        )
        for s in report.rows
    ]


def text_report(report: QualityReport) -> str:
    table = [HEADER, *rows(report)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    lines = [
        f"verify quality: {report.candidate} against {report.baseline} "
        f"({report.n_tokens} greedy tokens per probe)",
        "",
    ]
    for r in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    lines.append("")
    for s in report.rows:
        if s.reasons:
            lines.append(f"{s.name}: {s.verdict} ({'; '.join(s.reasons)})")
    lines.append(_kv(report))
    lines.append("thresholds: " + "; ".join(report.thresholds.describe()))
    lines.extend(f"note: {n}" for n in report.notes)
    lines.append(f"verdict: {report.verdict}")
    lines.append(report.trade())
    return "\n".join(lines) + "\n"


def markdown_report(report: QualityReport) -> str:
    lines = [
        f"# verify quality: {report.candidate} against {report.baseline}",
        "",
        f"**{report.trade()}** (overall verdict: {report.verdict})",
        "",
        *markdown_table(HEADER, rows(report)),
    ]
    lines.append("")
    for s in report.rows:
        if s.reasons:
            lines.append(f"- {s.name}: {s.verdict} ({'; '.join(s.reasons)})")
    lines.append(f"- {_kv(report)}")
    lines.append("")
    lines.append("Thresholds:")
    lines.extend(f"- {t}" for t in report.thresholds.describe())
    lines.extend(f"\n> note: {n}" for n in report.notes)
    return "\n".join(lines) + "\n"


def render(report: QualityReport, fmt: str) -> str:
    """The report in ``fmt`` (text, json or markdown), ending with a newline."""
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2) + "\n"
    if fmt == "markdown":
        return markdown_report(report)
    return text_report(report)
