"""Every breakage from the acceptance list, run through the `ttft` command: exit code 1, no
traceback, and a problem code of its own that names the broken file."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
from weights_testkit import edit_header, gguf_bytes, make_sharded, small_gguf_spec

from ttft.weights import write_manifest

S1, S2, S3 = (f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3))


def delete_shard(d: Path) -> None:
    (d / S2).unlink()


def extra_shard(d: Path) -> None:
    save_file({"x": np.zeros(2, np.float32)}, str(d / "model-00004-of-00003.safetensors"))


def tensor_missing(d: Path) -> None:
    tensors = load_file(str(d / S1))
    del tensors["layers.1.mlp.weight"]
    save_file(tensors, str(d / S1))


def tensor_extra(d: Path) -> None:
    tensors = load_file(str(d / S3))
    tensors["layers.3.surprise"] = np.ones(3, np.float32)
    save_file(tensors, str(d / S3))


def truncate(d: Path) -> None:
    (d / S2).write_bytes((d / S2).read_bytes()[:-64])


def flip_byte(d: Path) -> None:
    write_manifest(d)
    raw = bytearray((d / S3).read_bytes())
    raw[-3] ^= 0x10
    (d / S3).write_bytes(bytes(raw))


def header_2_63(d: Path) -> None:
    (d / S1).write_bytes(struct.pack("<Q", 2**63) + (d / S1).read_bytes()[8:])


def header_not_json(d: Path) -> None:
    raw = (d / S2).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    (d / S2).write_bytes(raw[:8] + b"\x00garbage" + b" " * (n - 8) + raw[8 + n :])


def overlap(d: Path) -> None:
    def mutate(header: dict[str, Any]) -> None:
        begin = header["layers.3.attn.weight"]["data_offsets"][0]
        header["layers.3.norm.bias"]["data_offsets"] = [begin, begin + 32]

    edit_header(d / S3, mutate)


def gguf_truncated(d: Path) -> None:
    kvs, tensors = small_gguf_spec()
    (d / "m.gguf").write_bytes(gguf_bytes(kvs, tensors)[:-40])


def gguf_beyond_end(d: Path) -> None:
    kvs, tensors = small_gguf_spec()
    (d / "m.gguf").write_bytes(gguf_bytes(kvs, tensors, offsets={"output_norm.weight": 4096}))


BREAKAGES: list[tuple[Callable[[Path], None], str, str]] = [
    (delete_shard, "shard-missing", S2),
    (extra_shard, "shard-unexpected", "model-00004-of-00003.safetensors"),
    (tensor_missing, "tensor-missing", S1),
    (tensor_extra, "tensor-unexpected", S3),
    (truncate, "data-truncated", S2),
    (flip_byte, "sha256-mismatch", S3),
    (header_2_63, "header-length-beyond-file", S1),
    (header_not_json, "header-not-json", S2),
    (overlap, "offsets-overlap", S3),
    (gguf_truncated, "data-truncated", "m.gguf"),
    (gguf_beyond_end, "tensor-beyond-end", "m.gguf"),
]


def run_ttft(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from ttft.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("breakage", "code", "file"), BREAKAGES, ids=[b[0].__name__ for b in BREAKAGES]
)
def test_each_breakage_exits_1_with_its_own_problem_and_no_traceback(
    tmp_path: Path, breakage: Callable[[Path], None], code: str, file: str
) -> None:
    make_sharded(tmp_path)
    breakage(tmp_path)
    result = run_ttft("weights", "verify", "--json", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    problems = [p for f in json.loads(result.stdout)["files"] for p in f["problems"]]
    errors = [p for p in problems if p["severity"] == "error"]
    assert (code, file) in [(p["code"], p["file"]) for p in errors], errors
    table = run_ttft("weights", "verify", str(tmp_path))
    assert table.returncode == 1 and f"[{code}]" in table.stdout
    assert "Traceback" not in table.stderr


def test_the_breakages_are_told_apart_by_their_codes_and_files() -> None:
    assert len({(code, file) for _, code, file in BREAKAGES}) == len(BREAKAGES)


def test_sarif_output_names_each_breakage_by_rule_and_file(tmp_path: Path) -> None:
    """Weights problems are findings like lint's, so code-scanning UIs get them as SARIF."""
    make_sharded(tmp_path)
    delete_shard(tmp_path)
    overlap(tmp_path)
    result = run_ttft("weights", "verify", "--format", "sarif", str(tmp_path))
    assert result.returncode == 1, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    found = {(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
             for r in run["results"]}  # fmt: skip
    assert ("weights/offsets-overlap", S3) in {(rule, Path(uri).name) for rule, uri in found}
    assert any(rule == "weights/shard-missing" for rule, _ in found)
