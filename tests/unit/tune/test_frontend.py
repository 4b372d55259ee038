"""ttft tune frontend's pure parts: statistics, savings, warnings and JSON from fixed timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli
from ttft.prompts.chat_template import ChatTemplate
from ttft.tune.frontend import compare_ids, distinct_static_parts, measure_frontend, static_key
from ttft.tune.frontend_report import (
    SCHEMA,
    Mismatch,
    RequestTimings,
    build_report,
    cache_reuse,
    saving_of,
    summarize_stage,
    to_json,
)
from ttft.workload.request_log import ChatRequest

MS = 1_000_000


def _row(where: str, full: list[int], cached: list[int], cold: int = 5 * MS) -> RequestTimings:
    row = RequestTimings(where)
    row.add("render_full", cold, True)
    row.add("render_prerendered", cold, True)
    for ns in full:
        row.add("render_full", ns, False)
    for ns in cached:
        row.add("render_prerendered", ns, False)
    row.prerenderable = True
    return row


def test_the_cold_call_is_kept_apart_and_stages_summarize_per_request_medians() -> None:
    rows = [
        _row("a", [1 * MS, 2 * MS, 3 * MS], [MS // 10] * 3),
        _row("b", [3 * MS, 3 * MS, 3 * MS], [MS // 10] * 3, cold=9 * MS),
    ]
    assert rows[0].median("render_full") == 2 * MS and rows[0].warm["render_full"][0] == MS
    full = summarize_stage(rows, "render_full")
    assert full.p50_ms == pytest.approx(2.5) and full.mean_ms == pytest.approx(2.5)
    assert full.p95_ms == pytest.approx(2.95) and full.cold_ms == pytest.approx(7.0)


def test_a_saving_is_the_mean_per_request_difference_of_medians() -> None:
    rows = [_row("a", [2 * MS] * 3, [MS] * 3), _row("b", [6 * MS] * 3, [MS] * 3)]
    saving = saving_of(rows, "render_full", "render_prerendered", "pre-rendered")
    assert saving.ms_per_request == pytest.approx(3.0) and saving.max_ms == pytest.approx(5.0)
    assert saving.ratio == pytest.approx(2 / 8)


def test_cache_reuse_counts_a_miss_per_static_part_and_a_hit_for_the_rest() -> None:
    rows = [_row(str(i), [3 * MS] * 3, [MS] * 3) for i in range(4)]
    reuse = cache_reuse(rows, static_parts=4, moved=1)
    # every request a miss: a hit's cost more than the full render, nothing saved
    assert reuse.saving_ms_per_request == pytest.approx(-1.0)
    # three hits save 2 ms each, the one miss costs 1 ms more: (6 - 1) / 4
    assert reuse.saving_ms_per_request_moved == pytest.approx(1.25)


def _report(repeats: int, rows: list[RequestTimings], **kw: object) -> dict[str, object]:
    args: dict[str, object] = {
        "mismatches": [],
        "static_parts": len(rows),
        "static_parts_moved": 1,
        "clock_overhead_ns": 50,
        "sources": {"template": "t.jinja"},
    }
    args.update(kw)
    return to_json(build_report(rows, repeats=repeats, **args))  # type: ignore[arg-type]


def test_warnings_say_what_is_wrong_in_words() -> None:
    rows = [
        _row("log:1", [MS, MS, 5 * MS], [500, 500, 500]),
        _row("log:2", [MS, MS, MS], [500, 500, 500]),
    ]
    rows[1].prerenderable = False
    bad = Mismatch("log:2", "python", 10, 11, 4)
    warnings = _report(3, rows, mismatches=[bad])["warnings"]
    text = "\n".join(warnings)  # type: ignore[arg-type]
    assert "Only 3 warm run(s)" in text
    assert "High spread in render_full: on 1 of 2 requests" in text and "log:1" in text
    assert "render_prerendered takes 0.5 us" in text and "upper bound" in text
    assert "python tokenizer's ids differ" in text and "at token 4" in text
    assert "cannot be pre-rendered (first: log:2)" in text
    assert "never hits on this log" in text and "there would be 1" in text


def test_enough_quiet_runs_give_no_warning() -> None:
    rows = [_row(f"log:{i}", [MS] * 30, [MS // 2] * 30) for i in range(2)]
    assert _report(30, rows, static_parts=1)["warnings"] == []


def test_json_document_is_versioned_and_complete() -> None:
    doc = _report(3, [_row("log:1", [2 * MS] * 3, [MS] * 3)])
    assert doc["schema"] == SCHEMA == "ttft.tune.frontend/1"
    assert set(doc) == {
        "schema", "repeats", "clock_overhead_ns", "sources", "stages", "savings", "cache",
        "requests", "mismatches", "warnings",
    }  # fmt: skip
    assert doc["stages"]["render_full"]["p50_ms"] == 2.0  # type: ignore[index]
    assert doc["savings"][0]["ms_per_request"] == 1.0  # type: ignore[index]
    assert doc["requests"][0]["stages"]["render_full"]["runs"] == 3  # type: ignore[index]
    json.dumps(doc)


def test_compare_ids_names_the_first_difference() -> None:
    assert compare_ids("x", "tokenize_python", [1, 2], [1, 2]) is None
    assert compare_ids("x", "tokenize_python", [1, 3, 4], [1, 2, 4]) == Mismatch(
        "x", "python", 3, 3, 1
    )
    assert compare_ids("x", "tokenize_server", [1, 2], [1, 2, 3]) == Mismatch(
        "x", "server", 2, 3, 2
    )


_CHATML = ChatTemplate(
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "test",
)


class _Chars:
    """A fake tokenizer: one id per character, optionally off by one on long texts."""

    def __init__(self, wrong_from: int | None = None) -> None:
        self.wrong_from = wrong_from

    def encode(self, text: str) -> list[int]:
        ids = [ord(c) for c in text]
        if self.wrong_from is not None and len(ids) > self.wrong_from:
            ids[self.wrong_from] += 1
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


def _requests() -> list[ChatRequest]:
    system = {"role": "system", "content": "Date: 2026-03-15 14:22:00. You help."}
    other = {"role": "system", "content": "Date: 2026-03-15 14:23:00. You help."}
    return [
        ChatRequest([system, {"role": "user", "content": "hi"}], file="log", line=1),
        ChatRequest([other, {"role": "user", "content": "x" * 200}], file="log", line=2),
        ChatRequest([system, {"role": "user", "content": [{"type": "text", "text": "p"}]}]),
    ]


def test_measure_frontend_times_every_stage_and_reports_mismatches() -> None:
    ticks = iter(range(0, 10**12, 1000))
    report = measure_frontend(
        _requests(),
        _CHATML,
        python_tokenizer=_Chars(wrong_from=200),
        rust_tokenizer=_Chars(),
        repeats=3,
        clock=lambda: next(ticks),
    )
    assert [s.stage for s in report.stages] == [
        "render_full", "render_prerendered", "tokenize_python", "tokenize_rust",
    ]  # fmt: skip
    rows = report.requests
    assert all(len(r.warm["render_full"]) == 3 and "render_full" in r.cold for r in rows)
    assert [r.prerenderable for r in rows] == [True, True, False]  # list content: no frame
    assert rows[0].tokens == rows[0].chars
    assert [m.where for m in report.mismatches] == ["log:2"]
    assert report.cache.static_parts == 2 and report.cache.static_parts_moved == 1


def test_static_key_ignores_only_the_last_user_content() -> None:
    a, b, c = _requests()
    assert static_key(a) != static_key(b)  # the date differs
    assert static_key(a) == static_key(c)  # only the content differs
    assert distinct_static_parts([a, b], moved=True) == 1  # the dates moved last


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["tune", "frontend", "--request-log", str(tmp_path / "no")])
    assert missing.exit_code == 2 and "request log not found" in missing.output
    assert "fix:" in missing.output and len(missing.output.strip().splitlines()) == 1
    log = tmp_path / "log.jsonl"
    log.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    no_template = runner.invoke(
        cli,
        ["tune", "frontend", "--request-log", str(log), "--chat-template", str(tmp_path / "t")],
    )
    assert no_template.exit_code == 2 and "chat template file not found" in no_template.output
    log.write_text("not json\n")
    unreadable = runner.invoke(cli, ["tune", "frontend", "--request-log", str(log)])
    assert unreadable.exit_code == 2 and "log.jsonl:1: not valid JSON" in unreadable.output


def test_static_key_is_unambiguous_across_field_boundaries_and_extra_fields() -> None:
    def req(*messages: dict[str, object]) -> ChatRequest:
        return ChatRequest([*messages, {"role": "user", "content": "q"}])  # type: ignore[list-item]

    assert static_key(req({"role": "system", "content": "ab"})) != static_key(
        req({"role": "systema", "content": "b"})
    )
    named = req({"role": "system", "content": "ab", "name": "x"})
    assert static_key(named) != static_key(req({"role": "system", "content": "ab"}))
    tools = ChatRequest([{"role": "user", "content": "q"}], tools=[{"type": "function"}])
    assert static_key(tools) != static_key(req())


def test_text_and_markdown_state_each_saving_in_words() -> None:
    from ttft.report.frontend import render_markdown, render_text

    rows = [_row("log:1", [2 * MS] * 3, [3 * MS] * 3)]
    report = build_report(
        rows,
        repeats=3,
        mismatches=[Mismatch("log:1", "python", 3, 4, 2)],
        static_parts=1,
        static_parts_moved=1,
        clock_overhead_ns=50,
        sources={"template": "t.jinja"},
    )
    text = render_text(report)
    assert "render_full" in text and "costs 1.000 ms more per request" in text
    assert "mismatch: python tokenizer on log:1: 3 tokens vs 4 (Rust)" in text
    markdown = render_markdown(report)
    assert "| render_prerendered | 3.000 |" in markdown and "Warnings:" in markdown
