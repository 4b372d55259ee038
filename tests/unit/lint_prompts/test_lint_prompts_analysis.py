"""The whole analysis on real templates, with a word tokenizer standing in for the engine's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.core.findings import Severity
from ttft.lint.prompts.analysis import lint_prompts
from ttft.lint.prompts.prefix_cache import CACHE_MODELS
from ttft.lint.prompts.tokens import PromptTokens
from ttft.prompts.chat_template import ChatTemplate, TemplateRenderer
from ttft.prompts.static_prefix import analyse
from ttft.report.prompts import findings, report, report_rows, saving_line
from ttft.workload.request_log import ChatRequest, load_request_log

LOG = Path(__file__).resolve().parents[2] / "data" / "requests" / "timestamp_first.jsonl"
Load = Callable[[str], ChatTemplate]


def chat(
    system: str, user: str, line: int, tools: list[dict[str, object]] | None = None
) -> ChatRequest:
    return ChatRequest(
        [{"role": "system", "content": system}, {"role": "user", "content": user}],
        tools=tools,
        file="log.jsonl",
        line=line,
    )


def test_timestamp_first_drops_the_shared_prefix_to_near_zero_and_the_move_restores_it(
    template: Load, tokens: PromptTokens
) -> None:
    requests = load_request_log(LOG)
    analysis = lint_prompts(requests, template("llama_server_chatml"), tokens)
    # After the move, requests share exactly the rendered system turn plus the user header.
    fixed = analyse(TemplateRenderer(template("llama_server_chatml")), analysis.fixed[0])
    static = len(tokens.tokens(fixed.static_text))
    assert static > 250
    # Each request reuses the static prefix, plus the first words of its question when an
    # earlier question starts the same way ("How long ..." / "How should ...").
    assert min(analysis.after.cached_ideal[1:]) == static
    assert max(analysis.after.cached_ideal[1:]) <= static + 2
    # Before: only "<|im_start|>system\nCurrent date and time: 2026-03-15T14" and a digit or two.
    assert max(analysis.before.cached_ideal) <= 20
    assert analysis.before.hit_rate_ideal < 0.06 and analysis.after.hit_rate_ideal > 0.7
    assert analysis.saved_tokens == sum(analysis.after.cached_ideal) - sum(
        analysis.before.cached_ideal
    )


def test_the_timestamp_finding_points_at_the_log_line_with_offset_and_the_fix(
    template: Load, tokens: PromptTokens
) -> None:
    analysis = lint_prompts(
        load_request_log(LOG), template("llama_server_chatml"), tokens, prefill_rate=400.0
    )
    (finding,) = findings(analysis, tokens)
    assert finding.rule == "prompts/dynamic-prefix"
    assert finding.severity is Severity.ERROR
    assert (finding.location.file, finding.location.line) == (str(LOG), 1)
    assert [loc.line for loc in finding.related] == [2, 3, 4]
    # "<|im_start|>", "system", "\n" precede the timestamp's label.
    assert "at token 3 of a" in finding.message
    assert "Seen in 12 of 12 requests, 12 distinct values" in finding.message
    assert "end of the last user message" in finding.action
    assert "ms less TTFT per request at 400 tokens/s" in finding.gain


def test_the_report_has_hit_rates_before_and_after_and_the_ttft_saving(
    template: Load, tokens: PromptTokens
) -> None:
    analysis = lint_prompts(
        load_request_log(LOG), template("llama_server_chatml"), tokens, prefill_rate=400.0
    )
    data = report(analysis)
    assert data["requests"] == 12 and data["rendered"] == 12
    assert data["before"]["hit_rate"] < 0.06 < 0.7 < data["after"]["hit_rate"]
    assert data["saved_tokens"] == analysis.saved_tokens
    assert data["ttft_saved_ms_per_request"] == pytest.approx(
        1000 * analysis.saved_tokens / 12 / 400, abs=0.1
    )
    assert data["groups_before"] == 1  # all share "<|im_start|>system\nCurrent date ..." (>16)
    assert len(data["per_request"]) == 12 and data["per_request"][0]["where"].endswith(":1")
    rows = {name: (now, after) for name, now, after in report_rows(analysis)}
    assert rows["requests"] == ("12", "12")
    assert "ms less TTFT per request" in saving_line(analysis)


def test_a_single_sample_is_located_by_token_offset(template: Load, tokens: PromptTokens) -> None:
    sample = ChatRequest(
        [
            {"role": "system", "content": "Be brief.\nRequest id: req_8f7a6b5c4d2e"},
            {"role": "user", "content": "Hi"},
        ],
        file="sample.json",
    )
    (finding,) = findings(lint_prompts([sample], template("llama_server_chatml"), tokens), tokens)
    assert finding.location.line is None
    assert finding.location.offset_unit == "token" and finding.location.offset == 8
    assert finding.severity is Severity.ERROR


def test_gemma3_system_prompt_in_the_first_user_turn_is_still_the_static_prefix(
    template: Load, tokens: PromptTokens
) -> None:
    system = "Session: sess_a1b2c3d{i}e5\n" + "You are a careful assistant. " * 10
    requests = [chat(system.format(i=i), f"Q{i}?", i) for i in range(1, 5)]
    analysis = lint_prompts(requests, template("gemma3"), tokens)
    assert [g.kind for g in analysis.dynamic] == ["request-id"]
    assert analysis.before.cached_ideal == [0, 7, 7, 7]  # "<bos><start_of_turn>user\nSession: "
    assert analysis.after.hit_rate_ideal > 0.5
    assert analysis.fixed[0].messages[-1]["content"] == "Q1?\n\nSession: sess_a1b2c3d1e5"


def test_every_occurrence_of_a_repeated_value_is_moved(
    template: Load, tokens: PromptTokens
) -> None:
    system = "Session sess_a1b2c3d{i}e5 starts.\nRules.\nAgain: sess_a1b2c3d{i}e5 is yours."
    requests = [chat(system.format(i=i), f"Q{i}?", i) for i in range(1, 3)]
    analysis = lint_prompts(requests, template("llama_server_chatml"), tokens)
    assert analysis.fixed[0].messages[0]["content"] == "Rules."
    assert analysis.fixed[0].messages[1]["content"].count("sess_a1b2c3d1e5") == 2


def test_llama3_2_template_clock_is_reported_at_the_strftime_now_line(
    template: Load, tokens: PromptTokens
) -> None:
    requests = [chat("You are helpful.", f"Q{i}", i) for i in range(1, 4)]
    analysis = lint_prompts(requests, template("llama3_2"), tokens)
    assert analysis.clock is not None and not analysis.clock.changes_within_a_day
    clock = [f for f in findings(analysis, tokens) if f.rule == "prompts/template-clock"]
    assert len(clock) == 1
    assert clock[0].severity is Severity.WARNING  # a date: one cold prefix a day
    assert clock[0].location.file.endswith("llama3_2.jinja") and clock[0].location.line == 10
    assert "Today Date: 15 Mar 2026" in clock[0].message


def test_tool_definitions_with_keys_in_another_order_are_an_instability(
    template: Load, tokens: PromptTokens
) -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool_a = {"type": "function", "function": {"name": "weather", "parameters": params}}
    tool_b = {"function": {"parameters": params, "name": "weather"}, "type": "function"}
    requests = [
        chat("S.", "Q1", 1, [tool_a]),
        chat("S.", "Q2", 2, [tool_b]),
        chat("S.", "Q3", 3, [tool_a]),
    ]
    analysis = lint_prompts(requests, template("llama3_2"), tokens)
    (unstable,) = [f for f in findings(analysis, tokens) if f.rule == "prompts/tool-key-order"]
    assert unstable.location.line == 2 and unstable.related[0].line == 1
    assert "tool 'weather'" in unstable.message
    assert analysis.after.cached_ideal[1] > analysis.before.cached_ideal[1]


def test_trailing_whitespace_drift_in_the_system_prompt_is_an_instability(
    template: Load, tokens: PromptTokens
) -> None:
    requests = [chat("Rules.\nMore rules.", "Q1", 1), chat("Rules. \nMore rules.", "Q2", 2)]
    analysis = lint_prompts(requests, template("llama_server_chatml"), tokens)
    (drift,) = findings(analysis, tokens)
    assert drift.rule == "prompts/whitespace-drift" and drift.severity is Severity.WARNING
    assert "differs only in whitespace" in drift.message


def test_a_value_no_detector_knows_is_found_by_comparing_requests(
    template: Load, tokens: PromptTokens
) -> None:
    system = "You are a shopping assistant for the store.\nCredits left: {n} of 500.\n" + (
        "Always answer in English and keep answers short and polite. " * 4
    )
    requests = [chat(system.format(n=n), f"Q{n}", i) for i, n in enumerate((41, 38, 27), 1)]
    analysis = lint_prompts(requests, template("llama_server_chatml"), tokens)
    (group,) = analysis.dynamic
    # Every request carries the value, the first one too: it differs from the others.
    assert group.kind == "varying" and group.values == ["41", "38", "27"]
    assert analysis.after.hit_rate_ideal > analysis.before.hit_rate_ideal


def test_dynamic_content_in_earlier_turns_is_history_not_a_finding(
    template: Load, tokens: PromptTokens
) -> None:
    req = ChatRequest(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "It is 2026-03-15T14:22:31Z, what day?"},
            {"role": "assistant", "content": "Sunday."},
            {"role": "user", "content": "Thanks"},
        ],
    )
    assert lint_prompts([req], template("llama_server_chatml"), tokens).dynamic == []


def test_a_value_equal_in_every_logged_request_is_only_info(
    template: Load, tokens: PromptTokens
) -> None:
    requests = [
        chat("Build 4bf92f3577b34da6a3ce929d0e0e4736.\nBe brief.", f"Q{i}", i) for i in range(1, 4)
    ]
    (finding,) = findings(lint_prompts(requests, template("llama_server_chatml"), tokens), tokens)
    assert finding.severity is Severity.INFO
    assert "same value in all 3 requests" in finding.message


def test_a_request_the_template_refuses_becomes_a_finding_and_the_rest_is_analysed(
    template: Load, tokens: PromptTokens
) -> None:
    bad = ChatRequest(
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        file="log.jsonl",
        line=2,
    )
    requests = [chat("S.", "Q1", 1), bad, chat("S.", "Q3", 3)]
    analysis = lint_prompts(requests, template("gemma3"), tokens)
    assert len(analysis.rendered) == 2
    (error,) = [f for f in findings(analysis, tokens) if f.rule == "prompts/template-error"]
    assert error.location.line == 2 and "must alternate" in error.message
    assert "gemma3.jinja: line 19" in error.message


def test_when_no_request_renders_the_template_error_is_raised(
    template: Load, tokens: PromptTokens
) -> None:
    bad = ChatRequest(
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        file="log.jsonl",
        line=1,
    )
    with pytest.raises(TtftError, match=r"log\.jsonl:1"):
        lint_prompts([bad], template("gemma3"), tokens)


def test_the_checkpoint_model_reuses_only_from_user_message_starts(
    template: Load, tokens: PromptTokens
) -> None:
    requests = load_request_log(LOG)
    analysis = lint_prompts(
        requests, template("llama_server_chatml"), tokens, cache_model=CACHE_MODELS["checkpoint"]
    )
    token_model = lint_prompts(
        requests, template("llama_server_chatml"), PromptTokens(tokens.tokenizer)
    )
    assert sum(analysis.before.cached_ideal) == 0
    # Checkpoint at the user turn's start, minus one: the 3 tokens of "<|im_start|>user\n" + 1
    # (and the shared first words of a question, which the token model also reuses).
    gap = [
        t - c
        for t, c in zip(
            token_model.after.cached_ideal[1:], analysis.after.cached_ideal[1:], strict=True
        )
    ]
    assert min(gap) == 4 and max(gap) <= 6


def test_a_clean_log_has_no_findings_and_nothing_left_to_gain(
    template: Load, tokens: PromptTokens
) -> None:
    system = "You are a support assistant. Answer briefly and politely. " * 5
    requests = [
        chat(system, f"Question number {word}?", i)
        for i, word in enumerate(("one", "two", "three"), 1)
    ]
    analysis = lint_prompts(requests, template("llama_server_chatml"), tokens)
    assert findings(analysis, tokens) == []
    assert analysis.saved_tokens == 0
    assert analysis.before.hit_rate_ideal > 0.5


def test_a_date_inside_a_tool_definition_is_found_with_the_tools_fix(
    template: Load, tokens: PromptTokens
) -> None:
    def tool(day: str) -> dict[str, object]:
        return {
            "type": "function",
            "function": {
                "name": "bookings",
                "description": f"Bookings from 2026-03-{day} 09:00 on.",
            },
        }

    requests = [chat("S.", "Q1", 1, [tool("15")]), chat("S.", "Q2", 2, [tool("16")])]
    analysis = lint_prompts(requests, template("llama3_2"), tokens)
    (finding,) = [f for f in findings(analysis, tokens) if f.rule == "prompts/dynamic-prefix"]
    assert "in tools" in finding.message
    assert "tool definitions" in finding.action
    # Tools cannot be edited by the move: the replay after the fixes gains nothing there.
    assert analysis.after.cached_ideal == analysis.before.cached_ideal


def test_a_time_passed_in_chat_template_kwargs_is_found_with_the_kwargs_fix(
    template: Load, tokens: PromptTokens
) -> None:
    requests = [
        replace(chat("S.", f"Q{i}", i), template_kwargs={"date_string": f"15 Mar 2026 14:2{i}"})
        for i in range(1, 3)
    ]
    analysis = lint_prompts(requests, template("llama3_2"), tokens)
    assert analysis.clock is None  # date_string given: the template does not read the clock
    (finding,) = findings(analysis, tokens)
    assert "in chat_template_kwargs" in finding.message
    assert finding.action.startswith("pass a value that changes rarely")
