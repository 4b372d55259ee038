"""The gateway's hygiene learns from the requests it has seen: the log analysis on a stream."""

from __future__ import annotations

import json

from ttft.prompts.hygiene import HygieneLearner
from ttft.testing.dynamic_logs import BUILDERS


def test_a_value_on_line_2_is_moved_once_a_second_version_of_the_field_is_seen() -> None:
    learner = HygieneLearner()
    log = BUILDERS["second-line"](count=4, words=80)
    outs = [learner.move(body["messages"]) for body in log.bodies]
    # The first request: only the date is a known pattern; its line (with the id) moves.
    assert all(kinds for _, kinds in outs)
    statics = {json.dumps(messages[:-1]) for messages, _ in outs}
    assert len(statics) == 1
    assert "varying" in outs[1][1]


def test_a_known_pattern_moves_even_when_every_request_repeats_it() -> None:
    learner = HygieneLearner()
    messages = [
        {"role": "system", "content": "Now: 2026-03-15 14:22:31\nRules apply."},
        {"role": "user", "content": "Hi"},
    ]
    first, second = learner.move(messages), learner.move(messages)
    assert first == second and first[1] == ["timestamp"]


def test_a_clean_stream_is_left_as_it_is() -> None:
    learner = HygieneLearner()
    for body in BUILDERS["clean"](count=3, words=60).bodies:
        assert learner.move(body["messages"]) == (body["messages"], [])


def test_memory_and_moves_are_bounded() -> None:
    learner = HygieneLearner(memory=2, max_spans=3)
    for i in range(5):
        system = " ".join(f"id-{i}-{k} static words here." for k in range(10))
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "q"}]
        _, kinds = learner.move(messages)
        assert len(kinds) <= 3
    assert len(learner._recent) == 2
