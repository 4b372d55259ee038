"""Sharded safetensors checkpoints written by the safetensors library, verified clean, then broken
in one way per test; each break yields its own problem code and a message naming the file, the
tensor and the expected versus found values."""

from __future__ import annotations

import json
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from weights_testkit import edit_header, make_sharded, read_header, write_with_header

from ttft.weights import VerifyReport, verify
from ttft.weights.safetensors import MAX_HEADER_BYTES, check_safetensors

SHARD1 = "model-00001-of-00003.safetensors"
SHARD2 = "model-00002-of-00003.safetensors"
SHARD3 = "model-00003-of-00003.safetensors"


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    make_sharded(tmp_path)
    return tmp_path


def codes(report: VerifyReport) -> list[str]:
    return [p.code for p in report.problems]


def only(report: VerifyReport, code: str) -> Any:
    """The single problem with ``code``; fails listing everything found otherwise."""
    found = [p for p in report.problems if p.code == code]
    assert len(found) == 1, [p.describe() for p in report.problems]
    return found[0]


def test_clean_sharded_checkpoint_verifies_with_no_problems(ckpt: Path) -> None:
    report = verify(ckpt)
    assert report.ok and report.problems == []
    assert {f.path: f.tensors for f in report.files} == {
        SHARD1: 3,
        SHARD2: 3,
        SHARD3: 3,
        "model.safetensors.index.json": 9,
    }
    assert len(load_file(str(ckpt / SHARD1))) == 3  # the library itself agrees the files are fine


def test_single_file_checkpoint_without_index_verifies_clean(tmp_path: Path) -> None:
    save_file({"w": np.ones((3, 5), dtype=np.int64)}, str(tmp_path / "model.safetensors"))
    report = verify(tmp_path / "model.safetensors")
    assert report.ok and [f.path for f in report.files] == ["model.safetensors"]


def test_deleted_shard_is_reported_as_missing_with_its_tensor_count(ckpt: Path) -> None:
    (ckpt / SHARD2).unlink()
    report = verify(ckpt)
    problem = only(report, "shard-missing")
    assert problem.file == SHARD2
    assert "3 tensors" in problem.message and "not on disk" in problem.message
    assert codes(report) == ["shard-missing"]


def test_extra_shard_beside_the_index_is_reported_as_unexpected(ckpt: Path) -> None:
    save_file({"stray": np.zeros(4, np.float32)}, str(ckpt / "model-00004-of-00004.safetensors"))
    problem = only(verify(ckpt), "shard-unexpected")
    assert problem.file == "model-00004-of-00004.safetensors"
    assert "does not list it" in problem.message and "3 shards" in problem.message


def test_unrelated_single_file_beside_an_index_is_checked_on_its_own(ckpt: Path) -> None:
    save_file({"x": np.zeros(2, np.float32)}, str(ckpt / "adapter.safetensors"))
    assert verify(ckpt).ok


def test_tensor_missing_from_its_shard_names_tensor_and_shard(ckpt: Path) -> None:
    tensors = load_file(str(ckpt / SHARD2))
    del tensors["layers.2.mlp.weight"]
    save_file(tensors, str(ckpt / SHARD2))
    problem = only(verify(ckpt), "tensor-missing")
    assert (problem.file, problem.subject) == (SHARD2, "layers.2.mlp.weight")
    assert (problem.expected, problem.found) == (f"in {SHARD2}", "absent")


def test_extra_tensor_in_a_shard_fails_like_a_strict_load(ckpt: Path) -> None:
    tensors = load_file(str(ckpt / SHARD1))
    tensors["layers.1.extra.weight"] = np.zeros((2, 2), np.float32)
    save_file(tensors, str(ckpt / SHARD1))
    report = verify(ckpt)
    problem = only(report, "tensor-unexpected")
    assert (problem.file, problem.subject) == (SHARD1, "layers.1.extra.weight")
    assert "does not list it" in problem.message
    assert not report.ok


def test_tensor_in_the_wrong_shard_names_both_shards(ckpt: Path) -> None:
    one, two = load_file(str(ckpt / SHARD1)), load_file(str(ckpt / SHARD2))
    two["layers.1.norm.bias"] = one.pop("layers.1.norm.bias")
    save_file(one, str(ckpt / SHARD1))
    save_file(two, str(ckpt / SHARD2))
    report = verify(ckpt)
    missing, extra = only(report, "tensor-missing"), only(report, "tensor-unexpected")
    assert missing.file == SHARD1 and f"it is in {SHARD2}" in missing.message
    assert extra.file == SHARD2 and f"maps it to {SHARD1}" in extra.message


def test_truncated_shard_reports_expected_and_found_file_size(ckpt: Path) -> None:
    path = ckpt / SHARD3
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-100])
    problem = only(verify(ckpt), "data-truncated")
    assert problem.file == SHARD3 and "truncated" in problem.message
    assert (problem.expected, problem.found) == (f"file size {size} bytes", f"{size - 100} bytes")


def test_file_cut_inside_its_header_reports_the_header_length_beyond_the_file(ckpt: Path) -> None:
    path = ckpt / SHARD3
    path.write_bytes(path.read_bytes()[:50])
    problem = only(verify(ckpt), "header-length-beyond-file")
    assert problem.file == SHARD3 and problem.expected == "<= 42"


def test_flipped_data_byte_passes_structure_and_is_caught_only_by_the_manifest(ckpt: Path) -> None:
    from ttft.weights import write_manifest

    write_manifest(ckpt)
    path = ckpt / SHARD2
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x01
    path.write_bytes(bytes(raw))
    assert verify(ckpt, options=_no_hash()).ok  # headers and layout are still perfect
    report = verify(ckpt)
    problem = only(report, "sha256-mismatch")
    assert problem.file == SHARD2 and problem.expected != problem.found
    assert codes(report) == ["sha256-mismatch"]


def _no_hash() -> Any:
    from ttft.weights import VerifyOptions

    return VerifyOptions(check_hashes=False)


def test_header_length_of_two_to_the_63_is_refused_without_allocating(ckpt: Path) -> None:
    path = ckpt / SHARD1
    raw = path.read_bytes()
    path.write_bytes(struct.pack("<Q", 2**63) + raw[8:])
    tracemalloc.start()
    header, problems = check_safetensors(path, SHARD1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert header is None and [p.code for p in problems] == ["header-length-beyond-file"]
    assert problems[0].found == str(2**63)
    assert peak < 1_000_000


def test_header_length_inside_a_huge_file_but_over_the_cap_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.safetensors"
    with path.open("wb") as fh:  # sparse: 200 MB of apparent size, almost no disk
        fh.write(struct.pack("<Q", MAX_HEADER_BYTES + 1))
        fh.truncate(200 * 1024 * 1024)
    tracemalloc.start()
    _, problems = check_safetensors(path, path.name)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [p.code for p in problems] == ["header-length-too-large"]
    assert peak < 1_000_000


def test_non_json_header_is_reported_with_the_parse_error(ckpt: Path) -> None:
    path = ckpt / SHARD1
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    path.write_bytes(raw[:8] + b"{not json" + b" " * (n - 9) + raw[8 + n :])
    problem = only(verify(ckpt), "header-not-json")
    assert problem.file == SHARD1 and "not valid JSON" in problem.message


def test_non_utf8_header_is_reported(ckpt: Path) -> None:
    path = ckpt / SHARD1
    raw = bytearray(path.read_bytes())
    raw[10] = 0xFF
    path.write_bytes(bytes(raw))
    assert only(verify(ckpt), "header-not-utf8").file == SHARD1


def test_overlapping_offsets_name_both_tensors(ckpt: Path) -> None:
    def overlap(header: dict[str, Any]) -> None:
        a = header["layers.1.attn.weight"]["data_offsets"]  # 512 bytes of F32
        b = header["layers.1.norm.bias"]
        size = b["data_offsets"][1] - b["data_offsets"][0]
        b["data_offsets"] = [a[0] + 8, a[0] + 8 + size]

    edit_header(ckpt / SHARD1, overlap)
    report = verify(ckpt)
    problem = only(report, "offsets-overlap")
    assert problem.file == SHARD1 and problem.subject == "layers.1.norm.bias"
    assert "overlaps tensor layers.1.attn.weight" in problem.message


def test_byte_range_that_disagrees_with_shape_and_dtype_is_a_size_mismatch(ckpt: Path) -> None:
    edit_header(ckpt / SHARD1, lambda h: h["layers.1.norm.bias"].update(shape=[9]))
    problem = only(verify(ckpt), "size-mismatch")
    assert problem.subject == "layers.1.norm.bias"
    assert (problem.expected, problem.found) == ("36 bytes", "32 bytes")


def test_unknown_dtype_is_named(ckpt: Path) -> None:
    edit_header(ckpt / SHARD1, lambda h: h["layers.1.norm.bias"].update(dtype="F12"))
    problem = only(verify(ckpt), "dtype-unknown")
    assert problem.subject == "layers.1.norm.bias" and problem.found == "'F12'"


def test_bytes_covered_by_no_tensor_are_a_gap(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
        "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]},
    }
    write_with_header(tmp_path / "gap.safetensors", header, bytes(12))
    problem = only(verify(tmp_path), "offsets-gap")
    assert problem.subject == "b" and (problem.expected, problem.found) == ("begin 4", "begin 8")


def test_bytes_after_the_last_tensor_are_reported(tmp_path: Path) -> None:
    header = {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}
    path = tmp_path / "tail.safetensors"
    write_with_header(path, header, bytes(10))
    problem = only(verify(tmp_path), "data-trailing-bytes")
    size = path.stat().st_size
    assert (problem.expected, problem.found) == (f"file size {size - 6} bytes", f"{size} bytes")


def test_tensor_defined_twice_in_one_header_is_reported(tmp_path: Path) -> None:
    entry = '{"dtype":"U8","shape":[2],"data_offsets":[0,2]}'
    text = ('{"a":' + entry + ',"a":' + entry + "}").encode()
    (tmp_path / "dup.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(2))
    assert only(verify(tmp_path), "header-duplicate-key").subject == "a"


def test_sub_byte_dtype_sizes_follow_the_safetensors_rule(tmp_path: Path) -> None:
    header = {"f4": {"dtype": "F4", "shape": [2, 6], "data_offsets": [0, 6]}}
    write_with_header(tmp_path / "f4.safetensors", header, bytes(6))
    assert verify(tmp_path).ok


def test_index_naming_four_shards_while_listing_three_reports_the_shard_count(ckpt: Path) -> None:
    index_path = ckpt / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    for shard in (SHARD1, SHARD2, SHARD3):
        renamed = shard.replace("of-00003", "of-00004")
        (ckpt / shard).rename(ckpt / renamed)
    index["weight_map"] = {
        k: v.replace("of-00003", "of-00004") for k, v in index["weight_map"].items()
    }
    index_path.write_text(json.dumps(index))
    report = verify(ckpt)
    mismatch = only(report, "shard-count-mismatch")
    assert (mismatch.expected, mismatch.found) == ("4 shards", "3 shards")
    assert "[4]" in only(report, "shard-number-absent").message


def test_index_that_is_not_json_is_reported_and_shards_are_still_checked(ckpt: Path) -> None:
    (ckpt / "model.safetensors.index.json").write_text("{broken")
    report = verify(ckpt)
    assert codes(report) == ["index-not-json"]
    assert {f.tensors for f in report.files if f.format == "safetensors"} == {3}


def test_total_size_that_disagrees_with_the_shards_is_only_a_warning(ckpt: Path) -> None:
    index_path = ckpt / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["metadata"]["total_size"] += 1
    index_path.write_text(json.dumps(index))
    report = verify(ckpt)
    assert report.ok and only(report, "index-total-size").severity == "warning"


def test_every_tensor_level_problem_carries_expected_and_found(ckpt: Path) -> None:
    edit_header(ckpt / SHARD2, lambda h: h["layers.2.norm.bias"].update(shape=[3, 3]))
    tensors = load_file(str(ckpt / SHARD3))
    tensors["extra"] = np.zeros(1, np.float32)
    save_file(tensors, str(ckpt / SHARD3))
    report = verify(ckpt)
    assert sorted(p.code for p in report.errors) == ["size-mismatch", "tensor-unexpected"]
    for problem in report.errors:
        assert problem.subject is not None
        assert problem.expected is not None and problem.found is not None


def test_header_metadata_is_kept_and_read_without_touching_data(ckpt: Path) -> None:
    header, problems = check_safetensors(ckpt / SHARD1, SHARD1)
    assert problems == [] and header is not None
    assert header.metadata == {"format": "pt"}
    assert read_header(ckpt / SHARD1)[0]["__metadata__"] == {"format": "pt"}
