"""Pre-rendering: the cached frame gives exactly the full render, or the full render is used."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from ttft.gateway.prerender import Frame, Prerenderer, frame_bytes, template_literals
from ttft.prompts.chat_template import ChatTemplate

CHATML = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\\n' -}}\n{%- endif -%}"
)
# Gemma-style: BOS first, the system prompt merged into the first user turn, contents trimmed.
GEMMA = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
# Branches on the content of the last message: a frame cannot capture it.
BRANCHY = (
    "{%- for m in messages -%}{%- if m.content.startswith('<tool_response>') -%}TOOL:"
    "{%- endif -%}[{{ m.role }}]{{ m.content }}{%- endfor -%}[assistant]"
)
CLOCK = "Today is {{ strftime_now('%Y-%m-%d') }}.{% for m in messages %}{{ m.content }}{% endfor %}"
# Uses the last message's content twice.
TWICE = "{% for m in messages %}{{ m.content }}|{{ m.content|length }}{% endfor %}"


def conversation(user: str, system: str = "You are terse.") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": user},
    ]


def make(source: str, **kwargs: Any) -> Prerenderer:
    special = {"bos_token": "<bos>", "eos_token": "<eos>"}
    return Prerenderer(ChatTemplate(source, "test", special), **kwargs)


@pytest.mark.parametrize("source", [CHATML, GEMMA, BRANCHY, TWICE])
@pytest.mark.parametrize(
    "user",
    [
        "And 3+3?",
        "  padded with spaces \n",
        "",
        "multi\nline\n\ncontent",
        "ünïcödé ✓",
        "<tool_response>x",
        "<|im_start|>user\nnested",
    ],
)
def test_every_render_equals_the_full_template_render(source: str, user: str) -> None:
    pre = make(source)
    for _ in range(2):  # a miss, then a hit
        out = pre.render(conversation(user))
        assert out.text == pre.render_full(conversation(user))


def test_the_second_request_with_the_same_static_part_is_a_cache_hit() -> None:
    pre = make(CHATML)
    first = pre.render(conversation("one"))
    second = pre.render(conversation("two"))
    other = pre.render(conversation("two", system="Another system prompt"))
    assert (first.cache, second.cache, other.cache) == ("miss", "hit", "miss")
    assert second.static_text and second.text.startswith(second.static_text)
    assert second.static_text.endswith("<|im_start|>user\n")
    assert pre.cached_frames == 2


def test_a_leading_bos_is_removed_because_the_engine_adds_it() -> None:
    pre = make(GEMMA)
    out = pre.render(conversation("x"))
    assert not out.text.startswith("<bos>") and out.text.startswith("<start_of_turn>user\n")
    keep = make(GEMMA, strip_bos=False)
    assert keep.render(conversation("x")).text.startswith("<bos><start_of_turn>")


def test_a_trimming_template_gets_trimmed_content_on_the_fast_path() -> None:
    pre = make(GEMMA)
    pre.render(conversation("warm"))
    out = pre.render(conversation("  needs trimming \n"))
    assert out.cache == "hit"
    assert "needs trimming<end_of_turn>" in out.text


def test_content_holding_a_template_literal_is_rendered_whole() -> None:
    pre = make(BRANCHY)
    pre.render(conversation("warm"))
    out = pre.render(conversation("<tool_response>data"))
    assert (out.cache, out.reason) == ("full", "literal")
    assert "TOOL:[user]<tool_response>data" in out.text


def test_templates_that_read_the_clock_are_never_cached() -> None:
    pre = make(CLOCK)
    out = pre.render(conversation("x"))
    assert (out.cache, out.reason) == ("full", "clock")
    assert str(datetime.now().year) in out.text
    assert pre.cached_frames == 0


def test_a_template_using_the_content_twice_has_no_frame() -> None:
    pre = make(TWICE)
    out = pre.render(conversation("abc"))
    assert (out.cache, out.reason) == ("full", "no_frame")
    assert out.text.endswith("abc|3")


def test_the_cache_is_bounded_by_entries() -> None:
    pre = make(CHATML, max_entries=3)
    for i in range(10):
        pre.render(conversation("q", system=f"system {i}"))
    assert pre.cached_frames == 3


def test_the_cache_is_bounded_by_bytes_whatever_the_entry_count() -> None:
    """Long static parts (a 20,000-character system prompt each) evict old frames once the byte
    budget is spent, although the entry bound is far away."""
    pre = make(CHATML, max_entries=1000, max_bytes=200_000)
    for i in range(30):
        pre.render(conversation("q", system=f"system {i} " + "x" * 20_000))
    assert pre.cached_bytes <= 200_000
    assert 5 <= pre.cached_frames <= 10
    assert pre.render(conversation("q", system="system 29 " + "x" * 20_000)).cache == "hit"


def test_frame_bytes_counts_wide_characters_at_their_storage_width() -> None:
    narrow = frame_bytes(Frame("a" * 1000, "", "exact"))
    wide = frame_bytes(Frame("\U0001f600" * 1000, "", "exact"))
    assert wide - narrow >= 2900  # 4 bytes per character against 1


def test_markup_literals_are_found_and_plain_words_ignored() -> None:
    found = template_literals(CHATML + "{{ 'hello' }}{{ \"</think>\" }}")
    assert "<|im_start|>" in found and "</think>" in found and "hello" not in found


class SplitSensitive:
    """A toy tokenizer whose tokens can straddle a line break ("\\n<" is one token)."""

    def __init__(self) -> None:
        self.vocab = {"<bos>": 0}

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            piece = text[i : i + 2] if text[i : i + 2] == "\n<" else text[i]
            out.append(self.vocab.setdefault(piece, len(self.vocab)))
            i += len(piece)
        return out

    def token_id(self, token: str) -> int | None:
        return self.vocab.get(token)


def test_token_ids_are_cached_per_frame_and_equal_a_whole_tokenization() -> None:
    tok = SplitSensitive()
    pre = make(CHATML, tokenizer=tok)
    system = "Line one of a long system prompt.\n" * 6
    for user in ["first", "second question", "third\n<x>"]:
        out = pre.render(conversation(user, system=system))
        assert out.ids == [0, *tok.encode(out.text)]
        assert out.exact_tokens and out.n_tokens == len(out.ids)


def test_counts_without_a_tokenizer_are_estimates() -> None:
    pre = make(CHATML, chars_per_token=4.0)
    out = pre.render(conversation("x" * 400))
    assert not out.exact_tokens and out.ids is None
    assert out.n_tokens == round(len(out.text) / 4)


def test_a_real_tokenizer_json_gives_ids_equal_to_tokenizing_the_whole_prompt(
    tmp_path: Any,
) -> None:
    """Rust ``tokenizers`` through ``HFTokenizer``: the per-frame split never changes ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from ttft.workload.hf_tokenizer import HFTokenizer

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = [
        "<|im_start|>system\nYou are terse.<|im_end|>\n",
        "What is 2+2? And 3+3?",
        "Line one of a long system prompt.\n" * 3,
        "ünïcödé ✓ question answer",
    ] * 20
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<bos>", "<unk>", "<|im_start|>", "<|im_end|>"]
        ),
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    hf = HFTokenizer.from_file(path)
    pre = make(CHATML, tokenizer=hf)
    system = "Line one of a long system prompt.\n" * 8
    for user in ["What is 2+2?", "And 3+3? ünïcödé ✓", "  spaced  "]:
        out = pre.render(conversation(user, system=system))
        assert out.ids == [hf.token_id("<bos>"), *hf.encode(out.text)]
    frame = out.frame
    assert frame is not None and frame.ids_state == "safe" and frame.head_ids
