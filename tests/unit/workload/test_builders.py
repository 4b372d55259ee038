"""Workload builders: exact lengths, distinct prompts, shared prefixes, file formats and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.workload.builders import from_jsonl, from_sharegpt, length_buckets, shared_prefix
from ttft.workload.exact_length import PromptFrame, text_of_tokens


class CharPairTokenizer:
    """Stand-in tokenizer: every two characters are one token (merges across words like BPE)."""

    def encode(self, text: str) -> list[int]:
        return [hash(text[i : i + 2]) for i in range(0, len(text), 2)]

    def decode(self, ids: list[int]) -> str:  # only lengths matter to the builders
        raise AssertionError("the builders decode through the tokenizer they were given")


class WordTokenizer:
    """A reversible word tokenizer: ids index a vocabulary built on the fly."""

    def __init__(self) -> None:
        self.vocab: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in text.split(" "):
            if word not in self.vocab:
                self.vocab.append(word)
            ids.append(self.vocab.index(word))
        return ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.vocab[i] for i in ids)


@pytest.mark.parametrize("n", [1, 5, 100, 777])
def test_text_has_exactly_the_asked_token_count(n: int) -> None:
    tok = WordTokenizer()
    assert len(tok.encode(text_of_tokens(tok, n, "s"))) == n


def test_bucket_prompts_total_the_bucket_after_template_overhead() -> None:
    tok = WordTokenizer()
    items = length_buckets(tok, [64, 128], 3, frame=PromptFrame(10))
    assert [i.bucket for i in items] == ["64"] * 3 + ["128"] * 3
    for item in items:
        content = item.body["messages"][0]["content"]
        assert len(tok.encode(content)) + 10 == int(item.bucket)


def test_prompts_of_a_bucket_differ_from_the_first_word_but_are_stable_across_runs() -> None:
    first = length_buckets(WordTokenizer(), [50], 4)
    again = length_buckets(WordTokenizer(), [50], 4)
    texts = [i.body["messages"][0]["content"] for i in first]
    assert texts == [i.body["messages"][0]["content"] for i in again]
    assert len({t.split()[0] + t.split()[1] for t in texts}) == 4


def test_bucket_shorter_than_the_template_is_a_clear_error() -> None:
    with pytest.raises(TtftError, match="shorter than the server's own 12 tokens"):
        length_buckets(WordTokenizer(), [8], 1, frame=PromptFrame(12))


def test_a_frame_that_merges_at_the_seam_still_gets_every_prompt_to_the_bucket() -> None:
    """Where the server counts the whole prompt (``PromptFrame.count``), a content whose last
    token merges with the template (as Gemma joins a final "." with "<|im_end|>") is cut
    elsewhere, so the server still counts the bucket; the content's own count + the overhead
    would have been one short for those prompts."""
    tok = WordTokenizer()

    def counted(text: str) -> int:
        return len(tok.encode(text)) + 10 - (1 if text.endswith(".") else 0)

    items = length_buckets(tok, [28, 45, 46], 3, frame=PromptFrame(10, counted))
    contents = [i.body["messages"][0]["content"] for i in items]
    assert all(counted(c) == int(i.bucket) for c, i in zip(contents, items, strict=True))
    naive = [text_of_tokens(tok, int(i.bucket) - 10, f"ttft/{i.bucket}/{n % 3}")
             for n, i in enumerate(items)]  # fmt: skip
    assert any(t.endswith(".") for t in naive)  # the case the frame's count is there for


def test_a_frame_with_no_room_for_content_is_a_clear_error() -> None:
    frame = PromptFrame(30, lambda text: len(text.split()) + 30)
    with pytest.raises(TtftError, match="leaves no room for content"):
        frame.content(WordTokenizer(), 30, "s")


def test_shared_prefix_requests_share_the_system_prompt_only() -> None:
    tok = WordTokenizer()
    items = shared_prefix(tok, 40, 10, 3)
    systems = {i.body["messages"][0]["content"] for i in items}
    users = {i.body["messages"][1]["content"] for i in items}
    assert len(systems) == 1 and len(users) == 3
    assert len(tok.encode(systems.pop())) == 40


def test_jsonl_lines_become_requests_and_stream_settings_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": False})
        + "\n\n"
        + json.dumps({"prompt": "once upon", "model": "x"})
        + "\n"
    )
    items = from_jsonl(path, max_tokens=3)
    assert [i.api for i in items] == ["chat", "completions"]
    assert "stream" not in items[0].body and "model" not in items[1].body
    assert items[0].body["max_tokens"] == 3 and items[1].meta["line"] == 3


def test_invalid_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [}\n')
    with pytest.raises(TtftError, match=r"log\.jsonl:2: not valid JSON"):
        from_jsonl(path)


def test_a_chat_line_is_checked_like_every_request_log(tmp_path: Path) -> None:
    """bench and doctor read request logs with the same checks as ``ttft lint prompts``."""
    path = tmp_path / "log.jsonl"
    path.write_text('{"messages": [{"content": "no role"}]}\n')
    with pytest.raises(TtftError, match=r"log\.jsonl:1: messages\[0\] is not an object"):
        from_jsonl(path)


def test_jsonl_line_without_messages_or_prompt_is_rejected_with_an_example(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"input": "x"}\n')
    with pytest.raises(TtftError, match=r":1: a request needs") as info:
        from_jsonl(path)
    assert info.value.fix and "messages" in info.value.fix


def test_sharegpt_takes_the_first_human_turn(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "Q1"},
                        {"from": "gpt", "value": "A"},
                    ]
                },
                {"conversations": [{"from": "gpt", "value": "only an answer"}]},
                {"conversations": [{"from": "human", "value": "Q2"}]},
            ]
        )
    )
    items = from_sharegpt(path, max_tokens=7)
    assert [i.body["messages"][0]["content"] for i in items] == ["Q1", "Q2"]
    assert items[0].body["max_tokens"] == 7


def test_char_pair_tokenizer_exact_length_needs_no_decode_when_it_fails_loudly() -> None:
    with pytest.raises(AssertionError):
        text_of_tokens(CharPairTokenizer(), 5, "x")


class OneProseTokenizer:
    """Every prose is the same ten-word sentence and more (ids 0..39), so every attempt with
    other prose meets the same sentence end."""

    def __init__(self) -> None:
        self.words = [f"w{i}" for i in range(40)]
        self.words[9] = "end."

    def encode(self, text: str) -> list[int]:
        return list(range(40))

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids)


def test_a_token_that_joins_the_frame_is_swapped_when_no_cut_gives_the_count() -> None:
    """A count that skips the total at a sentence end (cut 10 ends in "end." and counts one
    short, cut 11 one over), in every prose tried: the content keeps the nine words before the
    sentence end and takes the next word instead, which the frame counts exactly."""

    def counted(text: str) -> int:
        return len(text.split()) + 10 - (1 if text.endswith(".") else 0)

    content = PromptFrame(10, counted).content(OneProseTokenizer(), 20, "s")
    assert counted(content) == 20
    assert content == " ".join(f"w{i}" for i in (*range(9), 10))
