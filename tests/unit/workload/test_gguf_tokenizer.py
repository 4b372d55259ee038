"""GgufTokenizer's pure parts on a small hand-made SentencePiece vocabulary.

The Rust-backed encoder is checked against a slow, independent statement of llama.cpp's algorithm
(``_reference_encode``): special tokens cut out longest first, then "merge the adjacent pair whose
concatenation is the best-scoring entry, leftmost on a tie", bytes for what never formed an entry.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.workload.gguf_tokenizer import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    GgufTokenizer,
    GgufVocab,
    SpecialIndex,
    build_backend,
    split_specials,
    spm_merges,
)
from ttft.workload.tokenizer import Tokenizer

_ENTRIES: list[tuple[str, float, int]] = [
    ("<pad>", 0.0, CONTROL),
    ("<unk>", 0.0, UNKNOWN),
    ("<s>", 0.0, CONTROL),
    ("<ctl>", 0.0, CONTROL),
    ("<unused0>", 0.0, CONTROL),
    ("\n", 0.0, USER_DEFINED),
    ("\n\n", 0.0, USER_DEFINED),
    ("  ", 0.0, USER_DEFINED),
    ("<b>", 0.0, USER_DEFINED),
    ("<junk>", 0.0, UNUSED),
    *[(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)],
    ("▁", -1.0, NORMAL),
    ("a", -2.0, NORMAL),
    ("b", -3.0, NORMAL),
    ("c", -4.0, NORMAL),
    ("<", -5.0, NORMAL),
    (">", -6.0, NORMAL),
    ("t", -7.0, NORMAL),
    ("l", -8.0, NORMAL),
    ("bc", -9.0, NORMAL),  # better than "ab": "abc" goes a|bc first
    ("ab", -10.0, NORMAL),
    ("▁a", -11.0, NORMAL),
    ("abc", -12.0, NORMAL),
    ("▁ab", -13.0, NORMAL),
    ("ca", -14.0, NORMAL),
    ("<c", -15.0, NORMAL),
    ("tl>", -16.0, NORMAL),
    ("tl", -17.0, NORMAL),
    ("l>", -18.0, NORMAL),
    ("▁▁", -19.0, NORMAL),
    ("cab", -20.0, NORMAL),
    ("é", -21.0, NORMAL),
]


def _metadata(
    entries: list[tuple[str, float, int]] = _ENTRIES, **extra: object
) -> dict[str, object]:
    md: dict[str, object] = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [e[0] for e in entries],
        "tokenizer.ggml.scores": [e[1] for e in entries],
        "tokenizer.ggml.token_type": [e[2] for e in entries],
        "tokenizer.ggml.add_space_prefix": False,
    }
    md.update(extra)
    return md


def _tokenizer(parse_special: bool = True, **extra: object) -> GgufTokenizer:
    vocab = GgufVocab.from_metadata(_metadata(**extra))
    backend = build_backend(vocab, spm_merges(vocab.tokens, vocab.scores))
    return GgufTokenizer(vocab, backend, parse_special=parse_special)


def _reference_encode(vocab: GgufVocab, text: str, parse_special: bool) -> list[int]:
    """llama.cpp's SentencePiece tokenization written plainly, quadratic and obviously so."""
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    kinds = {USER_DEFINED, CONTROL, UNKNOWN} if parse_special else {USER_DEFINED}
    specials = sorted(
        (i for i, k in enumerate(vocab.types) if k in kinds),
        key=lambda i: (-len(vocab.tokens[i].encode()), i),
    )
    fragments: list[str | int] = [text] if text else []
    for sid in specials:
        stext = vocab.tokens[sid]
        done: list[str | int] = []
        for frag in fragments:
            while isinstance(frag, str) and stext in frag:
                at = frag.index(stext)
                if frag[:at]:
                    done.append(frag[:at])
                done.append(sid)
                frag = frag[at + len(stext) :]
            if frag != "":
                done.append(frag)
        fragments = done
    out: list[int] = []
    after_special = True
    for frag in fragments:
        if isinstance(frag, int):
            out.append(frag)
            after_special = True
            continue
        if vocab.add_space_prefix and after_special:
            frag = " " + frag
        after_special = False
        symbols = list(frag.replace(" ", "▁"))
        while True:
            best: tuple[float, int] | None = None
            for k in range(len(symbols) - 1):
                merged = ids.get(symbols[k] + symbols[k + 1])
                if merged is not None and (best is None or vocab.scores[merged] > best[0]):
                    best = (vocab.scores[merged], k)
            if best is None:
                break
            k = best[1]
            symbols[k : k + 2] = [symbols[k] + symbols[k + 1]]
        for sym in symbols:
            if sym in ids:
                out.append(ids[sym])
            else:
                out.extend(ids[f"<0x{b:02X}>"] for b in sym.encode())
    return out


def test_spm_merges_rank_every_two_entry_split_by_the_merged_entrys_score() -> None:
    """Merges are (left, right) id pairs for every entry that splits into two entries, best
    score first; an entry with two splits ("abc" = "a"+"bc" = "ab"+"c") contributes both."""
    tokens = ["a", "b", "c", "ab", "bc", "abc"]
    scores = [0.0, 0.0, 0.0, -2.0, -1.0, -3.0]
    assert spm_merges(tokens, scores) == [(1, 2), (0, 1), (0, 4), (3, 2)]


def test_spm_merges_use_the_last_id_of_a_duplicated_text_like_llama_cpp() -> None:
    """llama.cpp's text-to-id map keeps the last id of a repeated text; so do the merges."""
    assert spm_merges(["a", "b", "a", "ab"], [0.0, 0.0, 0.0, -1.0]) == [(2, 1)]


def test_split_specials_cuts_longest_first_and_each_occurrence_left_to_right() -> None:
    """A longer special wins over a shorter one inside it; every occurrence is cut; empty text
    pieces are dropped."""
    specials = [("\n\n", 6), ("\n", 5), ("<b>", 8)]
    assert split_specials("x\n\n\ny<b><b>", specials) == ["x", 6, 5, "y", 8, 8]
    assert split_specials("", specials) == []
    assert split_specials("plain", specials) == ["plain"]


def test_split_specials_rstrip_swallows_whitespace_after_the_token() -> None:
    """Phi-3's special tokens eat the spaces and newlines that follow them, as llama.cpp does."""
    assert split_specials("a<|end|> \n b", [("<|end|>", 7)], frozenset({7})) == ["a", 7, "b"]


def test_special_index_finds_only_tokens_present_in_order() -> None:
    """The index returns the occurring specials in their original (longest-first) order."""
    index = SpecialIndex([("<unused10>", 1), ("<unused1>", 2), ("\n\n", 3), ("\n", 4)])
    assert index.occurring("a<unused1>\nb") == [("<unused1>", 2), ("\n", 4)]
    assert index.occurring("nothing here") == []


def test_special_tokens_without_parse_special_are_user_defined_only() -> None:
    """With parse_special False control and unknown tokens are plain text; user-defined ones
    are still cut out (llama.cpp does that regardless), longest text in bytes first."""
    vocab = GgufVocab.from_metadata(_metadata())
    assert [t for t, _ in vocab.special_tokens(False)] == ["<b>", "\n\n", "  ", "\n"]
    assert "<ctl>" in [t for t, _ in vocab.special_tokens(True)]


def test_encode_prefers_the_best_scoring_pair_then_the_leftmost() -> None:
    """ "abc" merges b|c first ("bc" outscores "ab"), then a|bc; "cab" merges a|b before c|a
    ("ab" outscores "ca"), then c|ab."""
    tok = _tokenizer()
    ids = {t: i for i, t in enumerate(tok.vocab.tokens)}
    assert tok.encode("abc") == [ids["abc"]]
    assert tok.encode("cab") == [ids["cab"]]
    assert tok.encode(" a") == [ids["▁a"]]
    assert tok.encode("é") == [ids["é"]]


def test_encode_falls_back_to_bytes_for_characters_outside_the_vocabulary() -> None:
    """A character that is no entry becomes its UTF-8 bytes as <0xNN> tokens."""
    tok = _tokenizer()
    ids = {t: i for i, t in enumerate(tok.vocab.tokens)}
    assert tok.encode("中") == [ids["<0xE4>"], ids["<0xB8>"], ids["<0xAD>"]]


def test_encode_parse_special_decides_whether_control_tokens_are_text() -> None:
    """With parse_special (the server's default) "<s>" is one token; without, it is spelled
    out ("s" is no entry, so a byte); user-defined "<b>" is one token either way."""
    special, plain = _tokenizer(parse_special=True), _tokenizer(parse_special=False)
    ids = {t: i for i, t in enumerate(special.vocab.tokens)}
    assert special.encode("<s><b>") == [ids["<s>"], ids["<b>"]]
    assert plain.encode("<s><b>") == [ids["<"], ids["<0x73>"], ids[">"], ids["<b>"]]


def test_encode_without_parse_special_can_still_merge_into_a_control_entry() -> None:
    """llama.cpp's merging looks entries up by text whatever their type, so "<c" + "tl>" merge
    into the control token "<ctl>" even when control tokens are not parsed."""
    plain = _tokenizer(parse_special=False)
    ids = {t: i for i, t in enumerate(plain.vocab.tokens)}
    assert plain.encode("<ctl>") == [ids["<ctl>"]]
    assert plain.encode("<ctl>") == _reference_encode(plain.vocab, "<ctl>", parse_special=False)


def test_encode_adds_the_space_prefix_only_at_the_start_and_after_specials() -> None:
    """With add_space_prefix, the first text piece and each piece after a special token get a
    leading "▁", as llama.cpp does for SentencePiece vocabularies."""
    tok = _tokenizer(**{"tokenizer.ggml.add_space_prefix": True})
    ids = {t: i for i, t in enumerate(tok.vocab.tokens)}
    assert tok.encode("ab<b>a") == [ids["▁ab"], ids["<b>"], ids["▁a"]]
    assert tok.encode("") == []


@pytest.mark.parametrize("add_space_prefix", [False, True])
@pytest.mark.parametrize("parse_special", [False, True])
def test_encode_matches_the_reference_algorithm_on_random_text(
    add_space_prefix: bool, parse_special: bool
) -> None:
    """The merge list run by the Rust BPE gives llama.cpp's score-greedy result on 500 random
    strings over letters, spaces, newlines, specials' characters and out-of-vocabulary ones."""
    md = _metadata(**{"tokenizer.ggml.add_space_prefix": add_space_prefix})
    vocab = GgufVocab.from_metadata(md)
    tok = GgufTokenizer(
        vocab,
        build_backend(vocab, spm_merges(vocab.tokens, vocab.scores)),
        parse_special=parse_special,
    )
    rng = random.Random(7)
    alphabet = ["a", "b", "c", " ", "  ", "\n", "<", ">", "t", "l", "é", "中", "<ctl>", "<b>", "▁"]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
        assert tok.encode(text) == _reference_encode(vocab, text, parse_special), repr(text)


def test_decode_renders_pieces_like_llama_server() -> None:
    """ "▁" becomes a space, byte tokens their byte, control and user-defined tokens their text,
    unused-type tokens nothing; bytes are joined before UTF-8 decoding."""
    tok = _tokenizer()
    ids = {t: i for i, t in enumerate(tok.vocab.tokens)}
    seq = [
        ids["▁a"],
        ids["<ctl>"],
        ids["<b>"],
        ids["<junk>"],
        ids["<0xE4>"],
        ids["<0xB8>"],
        ids["<0xAD>"],
    ]
    assert tok.decode(seq) == " a<ctl><b>中"
    with pytest.raises(TtftError, match="out of range"):
        tok.decode([len(tok.vocab.tokens)])


def test_it_round_trips_text_as_a_workload_tokenizer() -> None:
    """What workloads need of a Tokenizer: ids for a text and the same text back."""
    tok: Tokenizer = _tokenizer()
    ids = tok.encode("hello world")
    assert ids and tok.decode(ids) == "hello world"


@pytest.mark.parametrize("model", ["gpt2", "bert", "t5", "something-new"])
def test_unsupported_vocab_type_names_the_type_and_the_fix(model: str) -> None:
    """Only SentencePiece vocabularies are rebuilt; others get an error naming the type and
    pointing at /tokenize or a tokenizer.json."""
    with pytest.raises(TtftError, match=model) as info:
        GgufVocab.from_metadata(_metadata(**{"tokenizer.ggml.model": model}), origin="m.gguf")
    assert info.value.fix is not None and "tokenizer.json" in info.value.fix
    assert "/tokenize" in info.value.fix


def test_vocab_arrays_of_the_wrong_length_are_refused() -> None:
    """Scores or types that do not cover every token make a clear error, not a wrong count."""
    with pytest.raises(TtftError, match="one entry per token"):
        GgufVocab.from_metadata(_metadata(**{"tokenizer.ggml.scores": [0.0]}))
    with pytest.raises(TtftError, match=r"tokenizer\.ggml\.model"):
        GgufVocab.from_metadata({})


def test_missing_add_space_prefix_defaults_to_true_like_llama_cpp() -> None:
    """llama.cpp prefixes a space for SentencePiece vocabularies unless the GGUF says not to."""
    md = _metadata()
    del md["tokenizer.ggml.add_space_prefix"]
    assert GgufVocab.from_metadata(md).add_space_prefix is True


def _write_gguf(path: Path, md: dict[str, object]) -> None:
    """A GGUF v3 file with only metadata (no tensors), enough for the vocabulary reader."""

    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(md)))
    for key, value in md.items():
        out += string(key)
        if isinstance(value, bool):
            out += struct.pack("<I?", 7, value)
        elif isinstance(value, str):
            out += struct.pack("<I", 8) + string(value)
        elif isinstance(value, list) and value and isinstance(value[0], str):
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(string(v) for v in value)
        elif isinstance(value, list) and value and isinstance(value[0], float):
            out += struct.pack("<IIQ", 9, 6, len(value)) + struct.pack(f"<{len(value)}f", *value)
        elif isinstance(value, list):
            out += struct.pack("<IIQ", 9, 5, len(value)) + struct.pack(f"<{len(value)}i", *value)
        else:
            raise AssertionError(f"unsupported test value for {key}")
    out += b"\0" * (-len(out) % 32)
    path.write_bytes(bytes(out))


def test_from_gguf_reads_the_file_and_caches_the_merge_list(tmp_path: Path) -> None:
    """from_gguf builds the same tokenizer as the metadata does; the derived merges are written
    to the cache directory and a second load uses them (a planted list proves it is read)."""
    gguf = tmp_path / "tiny.gguf"
    _write_gguf(gguf, _metadata())
    cache = tmp_path / "cache"
    tok = GgufTokenizer.from_gguf(gguf, cache_dir=cache, cache_min_build_s=0.0)
    ids = {t: i for i, t in enumerate(tok.vocab.tokens)}
    assert tok.encode("abc") == [ids["abc"]]
    (entry,) = list(cache.iterdir())
    assert entry.suffix == ".merges"

    # Plant a list with only a+b: the next load must use it, so "abc" stops at ab|c.
    n = len(tok.vocab.tokens)
    planted = struct.pack("<ii", ids["a"], ids["b"])
    entry.write_bytes(b"TTFTMRG1" + n.to_bytes(4, "little") + planted)
    again = GgufTokenizer.from_gguf(gguf, cache_dir=cache, cache_min_build_s=0.0)
    assert again.encode("abc") == [ids["ab"], ids["c"]]

    # A damaged entry is ignored and rebuilt.
    entry.write_bytes(b"garbage")
    rebuilt = GgufTokenizer.from_gguf(gguf, cache_dir=cache, cache_min_build_s=0.0)
    assert rebuilt.encode("abc") == [ids["abc"]]


def test_from_gguf_skips_the_cache_when_deriving_is_quick(tmp_path: Path) -> None:
    """A small vocabulary is derived in milliseconds: nothing is written under the default
    threshold."""
    gguf = tmp_path / "tiny.gguf"
    _write_gguf(gguf, _metadata())
    GgufTokenizer.from_gguf(gguf, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_from_gguf_missing_file_is_a_ttft_error(tmp_path: Path) -> None:
    """A wrong path names the file."""
    with pytest.raises(TtftError, match="not found"):
        GgufTokenizer.from_gguf(tmp_path / "absent.gguf")
