"""The tokenizer.json tokenizer (Rust tokenizers): specials in the text kept, none added."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.workload.hf_tokenizer import HFTokenizer
from ttft.workload.tokenizer import VocabTokenizer

BuildTokenizer = Callable[[Path, list[str]], Path]


@pytest.fixture
def hf(tmp_path: Path, build_tokenizer_json: BuildTokenizer) -> HFTokenizer:
    path = build_tokenizer_json(tmp_path / "tokenizer.json", ["you are a helpful assistant", "hi"])
    return HFTokenizer.from_file(path)


def test_it_serves_as_the_tokenizer_the_workload_and_gateway_use(hf: HFTokenizer) -> None:
    """Encode/decode round-trip without added tokens, and a vocabulary lookup (the gateway's
    VocabTokenizer); the protocol itself is checked statically by mypy on the library."""
    tok: VocabTokenizer = hf
    text = "you are a helpful assistant"
    assert tok.decode(tok.encode(text)) == text
    assert tok.token_id("<|im_start|>") is not None and tok.token_id("no-such-token") is None


def test_special_tokens_in_the_text_are_single_tokens_and_none_are_added(hf: HFTokenizer) -> None:
    ids = hf.encode("<|im_start|>you are a helpful assistant<|im_end|>")
    assert len(ids) == 7
    assert ids[0] == hf.token_id("<|im_start|>") and ids[-1] == hf.token_id("<|im_end|>")
    assert hf.token_id("<bos>") not in ids


def test_decode_and_batch_agree_with_encode(hf: HFTokenizer) -> None:
    texts = ["you are", "<|im_start|>hi<|im_end|>"]
    assert hf.encode_batch(texts) == [hf.encode(t) for t in texts]
    assert "helpful" in hf.decode(hf.encode("a helpful assistant"))


def test_a_folder_holding_tokenizer_json_is_accepted(
    tmp_path: Path, build_tokenizer_json: BuildTokenizer
) -> None:
    build_tokenizer_json(tmp_path / "tokenizer.json", ["x"])
    assert HFTokenizer.from_file(tmp_path).origin == str(tmp_path / "tokenizer.json")


def test_missing_or_broken_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="tokenizer file not found"):
        HFTokenizer.from_file(tmp_path / "nope.json")
    (tmp_path / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(TtftError, match=r"not a loadable tokenizer\.json"):
        HFTokenizer.from_file(tmp_path / "tokenizer.json")


def test_without_the_tokenizers_package_the_extra_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(TtftError) as err:
        HFTokenizer.from_file(tmp_path / "tokenizer.json")
    assert "pip install 'ttft[tokenizers]'" in str(err.value)
