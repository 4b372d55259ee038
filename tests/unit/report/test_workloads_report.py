"""The terminal and Markdown reports say when a cell saturated, how far repeats spread, where
the load stopped holding, and TTFT per turn."""

from __future__ import annotations

from rich.console import Console

from ttft.core.records import RequestRecord
from ttft.core.summary import summarize_run
from ttft.report.markdown import summary_to_markdown
from ttft.report.terminal import print_summary

MS = 1_000_000
S = 1_000_000_000


def _saturated_records() -> list[RequestRecord]:
    """4/s arrivals, a wait that grows by 250 ms per request: a queue without bound."""
    records = []
    for i in range(40):
        t = i * S // 4
        wait = 300 * MS + 250 * MS * i
        r = RequestRecord(i, cell="64 tok rate=4/s", scheduled_ns=t, sent_ns=t)
        r.first_content_ns = r.done_ns = t + wait
        records.append(r)
    return records


def _render(summary: object) -> str:
    console = Console(record=True, width=100)
    print_summary(summary, console)  # type: ignore[arg-type]
    return console.export_text()


def test_a_saturated_cell_and_the_last_load_that_held_are_in_both_reports() -> None:
    summary = summarize_run(_saturated_records())
    summary.meta["saturation"] = [
        {"group": "64 tok", "saturated_at": "64 tok rate=4/s", "last_held": "64 tok rate=1/s",
         "skipped": ["64 tok rate=8/s"]}
    ]  # fmt: skip
    text = _render(summary)
    assert "SATURATED at this load" in text and "ms per s" in text
    assert "last load that held: 64 tok rate=1/s" in text and "64 tok rate=8/s" in text
    markdown = summary_to_markdown(summary)
    assert "SATURATED at this load" in markdown and "last load that held" in markdown


def test_repeats_and_turns_are_reported() -> None:
    records = []
    for i in range(12):
        r = RequestRecord(i, cell="c", sent_ns=0, first_content_ns=(100 + 30 * (i // 4)) * MS)
        r.done_ns, r.repeat, r.turn, r.prompt_tokens = r.first_content_ns, i // 4, 1 + i % 2, 300
        records.append(r)
    text = _render(summarize_run(records))
    assert "ttft p50 over 3 runs" in text and "CI" in text
    assert "medians per turn" in text


def test_the_html_page_lists_the_saturation_verdict_among_its_notes() -> None:
    from ttft.report.html_bench import bench_page

    summary = summarize_run(_saturated_records()).to_dict()
    page = bench_page(summary, None, generated="now")
    assert "SATURATED at this load" in page
