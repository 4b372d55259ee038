"""Conversations for multi-turn runs: synthesised exact lengths, JSONL files, option syntax."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.workload.conversations import (
    SessionsSpec,
    parse_think_time,
    parse_turn_tokens,
    read_conversations,
    synthesize,
)


class ReversibleWords:
    """One token per word, ids into a vocabulary built on the fly."""

    def __init__(self) -> None:
        self.vocab: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in text.split():
            if word not in self.vocab:
                self.vocab.append(word)
            ids.append(self.vocab.index(word))
        return ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.vocab[i] for i in ids)


def test_synthesised_sessions_have_exact_turn_lengths_and_differ_from_the_first_word() -> None:
    tokenizer = ReversibleWords()
    spec = SessionsSpec(sessions=3, turns=4, first_tokens=40, next_tokens=7)
    conversations = synthesize(tokenizer, spec, 3, seed="s")
    assert [len(c.users) for c in conversations] == [4, 4, 4]
    for conversation in conversations:
        lengths = [len(tokenizer.encode(text)) for text in conversation.users]
        assert lengths == [40, 7, 7, 7]
    assert len({tuple(c.users[0].split()[:3]) for c in conversations}) == 3
    again = synthesize(tokenizer, spec, 3, seed="s")
    assert again == conversations  # same seed, same conversations
    assert synthesize(tokenizer, spec, 3, seed="s/repeat2") != conversations


def test_a_conversations_file_keeps_system_prompts_and_user_turns_and_drops_answers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.jsonl"
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "One?"},
        {"role": "assistant", "content": "recorded answer"},
        {"role": "user", "content": "Two?"},
    ]
    path.write_text(json.dumps({"messages": messages}) + "\n\n")
    (conversation,) = read_conversations(path)
    assert conversation.prefix == ({"role": "system", "content": "Be brief."},)
    assert conversation.users == ("One?", "Two?")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ({"messages": []}, "no 'messages'"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "no user turn"),
        ({"messages": [{"role": "user", "content": ""}]}, "without text"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "role 'tool'"),
    ],
)
def test_bad_conversations_name_the_line_and_the_fix(
    tmp_path: Path, line: dict[str, object], words: str
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(TtftError) as info:
        read_conversations(path)
    assert words in str(info.value) and f"{path}:1" in str(info.value)
    assert info.value.fix and "messages" in info.value.fix


def test_asking_for_more_sessions_than_the_file_holds_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}]}) + "\n")
    with pytest.raises(TtftError) as info:
        read_conversations(path, limit=3)
    assert "--sessions 1" in (info.value.fix or "")


def test_think_time_is_fixed_or_a_uniform_range() -> None:
    assert parse_think_time("2") == (2.0, 2.0)
    assert parse_think_time("1-3") == (1.0, 3.0)
    spec = SessionsSpec(think_s=(1.0, 3.0))
    draws = [spec.think_time(random.Random(i)) for i in range(50)]
    assert all(1.0 <= d <= 3.0 for d in draws) and max(draws) - min(draws) > 1.0
    for bad in ("soon", "3-1", "-1"):
        with pytest.raises(TtftError):
            parse_think_time(bad)


def test_turn_tokens_are_first_colon_next() -> None:
    assert parse_turn_tokens("256:32") == (256, 32)
    for bad in ("256", "a:b", "0:5"):
        with pytest.raises(TtftError):
            parse_turn_tokens(bad)
