"""The one analysis of a request log: dynamic spans found by alignment wherever they sit, the move
of exactly those spans, and the refusal of moves that would change meaning."""

from __future__ import annotations

import pytest

from ttft.prompts.align import varying_spans
from ttft.prompts.log_analysis import TOOL_REASON, analyse_bodies, analyse_log
from ttft.testing.dynamic_logs import BUILDERS, DynamicLog, second_line


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_log_yields_exactly_the_values_that_change_and_nothing_on_a_clean_log(
    name: str,
) -> None:
    log: DynamicLog = BUILDERS[name]()
    analysis = analyse_bodies(log.bodies)
    assert [{s.text for s in per} for per in analysis.spans] == log.expected
    assert analysis.fields() == ([log.field] if log.field else [])


@pytest.mark.parametrize("name", ["first-line", "second-line", "mid-sentence", "few-shot"])
def test_after_the_move_every_request_shares_its_whole_static_part(name: str) -> None:
    log = BUILDERS[name]()
    analysis = analyse_bodies(log.bodies)
    moved = analysis.moved_all()
    statics = {str(m.messages[:-1]) for m in moved}
    assert len(statics) == 1
    again = analyse_log(moved)
    assert not again.found, again.names()


def test_the_move_keeps_every_static_word_and_carries_each_value_to_the_last_user_message() -> None:
    log = second_line(count=3)
    analysis = analyse_bodies(log.bodies)
    for index, request in enumerate(analysis.moved_all()):
        last = request.messages[-1]["content"]
        original = log.bodies[index]["messages"][0]["content"]
        assert last.endswith(original.split("\n")[1])
        system = request.messages[0]["content"]
        assert system == "\n".join(original.split("\n")[0:1] + original.split("\n")[2:])


def test_a_value_in_a_tool_description_is_named_but_not_moved_with_the_reason() -> None:
    log = BUILDERS["tool-description"]()
    analysis = analyse_bodies(log.bodies)
    assert analysis.unmovable() and not analysis.movable()
    assert all(s.reason == TOOL_REASON for s in analysis.unmovable())
    assert analysis.moved(0) == analysis.requests[0]


def test_a_few_shot_turn_that_is_only_the_value_is_not_emptied() -> None:
    bodies = [
        {
            "messages": [
                {"role": "system", "content": "Static rules. " * 40},
                {"role": "user", "content": "Who am I?"},
                {"role": "assistant", "content": f"Hello {name}!"},
                {"role": "user", "content": "Thanks."},
            ]
        }
        for name in ("Alice", "Bob", "Carol")
    ]
    analysis = analyse_bodies(bodies)
    assert analysis.all_spans and not analysis.movable()
    assert "few-shot turn" in analysis.all_spans[0].reason


def test_two_unrelated_prompts_are_content_not_values() -> None:
    texts = [
        "You are a pirate. Speak like one at all times.",
        "Summarise legal contracts in plain English.",
    ]
    assert varying_spans(texts) == [[], []]


def test_a_value_two_requests_share_is_still_marked_in_both() -> None:
    base = "Customer {} opened a ticket. " + "Rules apply to everyone equally. " * 10
    texts = [base.format(u) for u in ("u-1", "u-2", "u-1")]
    spans = varying_spans(texts)
    assert [[t[s:e] for s, e in per] for t, per in zip(texts, spans, strict=True)] == [
        ["u-1"],
        ["u-2"],
        ["u-1"],
    ]


def test_a_known_pattern_counts_in_one_request_but_not_when_the_log_shows_it_constant() -> None:
    system = {"role": "system", "content": "Now 2026-03-15 14:22:31.\nRules."}
    one = [{"messages": [system, {"role": "user", "content": "Hi"}]}]
    assert [s.kind for s in analyse_bodies(one).all_spans] == ["timestamp"]
    assert not analyse_bodies(one * 3).found


def test_static_after_counts_what_follows_the_first_span() -> None:
    analysis = analyse_bodies(second_line(count=2, words=50).bodies)
    after = analysis.static_after(0)
    system = analysis.requests[0].messages[0]["content"]
    assert after == len(system) - system.index("u-12345")
    assert analysis.static_after(0, count=lambda t: len(t.split())) < after
