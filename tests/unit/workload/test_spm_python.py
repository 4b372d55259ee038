"""The pure-Python merge loop gives the Rust backend's ids on the same vocabulary and merges."""

from __future__ import annotations

import random

from ttft.workload.gguf_tokenizer import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    GgufTokenizer,
    GgufVocab,
    build_backend,
    spm_merges,
)
from ttft.workload.spm_python import PythonBpe

_ENTRIES: list[tuple[str, float, int]] = [
    ("<unk>", 0.0, UNKNOWN),
    ("<s>", 0.0, CONTROL),
    *[(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)],
    ("▁", -1.0, NORMAL),
    ("a", -2.0, NORMAL),
    ("b", -3.0, NORMAL),
    ("c", -4.0, NORMAL),
    ("bc", -9.0, NORMAL),  # better than "ab": "abc" goes a|bc first
    ("ab", -10.0, NORMAL),
    ("▁a", -11.0, NORMAL),
    ("abc", -12.0, NORMAL),
    ("▁ab", -13.0, NORMAL),
    ("ca", -14.0, NORMAL),
    ("▁▁", -19.0, NORMAL),
    ("cab", -20.0, NORMAL),
    ("aa", -21.0, NORMAL),
    ("aaa", -22.0, NORMAL),
    ("é", -23.0, NORMAL),
]


def _vocab() -> GgufVocab:
    return GgufVocab.from_metadata(
        {
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": [e[0] for e in _ENTRIES],
            "tokenizer.ggml.scores": [e[1] for e in _ENTRIES],
            "tokenizer.ggml.token_type": [e[2] for e in _ENTRIES],
            "tokenizer.ggml.add_space_prefix": True,
        }
    )


def test_python_and_rust_backends_agree_on_random_text() -> None:
    vocab = _vocab()
    merges = spm_merges(vocab.tokens, vocab.scores)
    rust = GgufTokenizer(vocab, build_backend(vocab, merges))
    python = GgufTokenizer(vocab, PythonBpe(vocab, merges))
    rng = random.Random(7)
    alphabet = ["a", "b", "c", " ", "é", "ü", "<s>", "aa", "日"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert python.encode(text) == rust.encode(text), repr(text)


def test_merges_lowest_rank_first_and_leftmost_on_a_tie() -> None:
    vocab = _vocab()
    bpe = PythonBpe(vocab, spm_merges(vocab.tokens, vocab.scores))
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    assert bpe.merge("abc") == [ids["abc"]]  # a|bc, then abc
    assert bpe.merge("aaa") == [ids["aaa"]]  # the leftmost aa, then aa|a
    assert bpe.merge("aaaa") == [ids["aa"], ids["aa"]]  # aa|aa is not an entry
    assert bpe.merge("ü") == [ids["<0xC3>"], ids["<0xBC>"]]  # bytes for what is missing
    assert bpe.token_to_id("ab") == ids["ab"] and bpe.token_to_id("zz") is None
