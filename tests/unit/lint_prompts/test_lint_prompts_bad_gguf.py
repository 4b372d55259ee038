"""``ttft lint prompts --template`` on a broken GGUF: one clear error naming the file, exit 2.

The template is read with the same bounded GGUF reader as ``ttft weights verify``, so a header
that claims more than the file holds is refused before anything is allocated (once it was a
MemoryError traceback).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli

LOG = Path(__file__).resolve().parents[2] / "data" / "requests" / "timestamp_first.jsonl"


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _header(n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv)


VALID = _header(1) + _string("tokenizer.chat_template") + struct.pack("<I", 8) + _string("{{x}}")
BROKEN = {
    "truncated mid-string": VALID[: len(VALID) - 3],
    "2**40 metadata entries": _header(2**40),
    "a 2**50-byte key": _header(1) + struct.pack("<Q", 2**50) + b"abc",
    "a 2**50-byte value": _header(1)
    + _string("tokenizer.chat_template")
    + struct.pack("<I", 8)
    + struct.pack("<Q", 2**50),
    "an array of 2**60 strings": _header(1)
    + _string("tokenizer.ggml.tokens")
    + struct.pack("<IIQ", 9, 8, 2**60),
    "not GGUF at all": b"PK\x03\x04" + b"\0" * 64,
}


@pytest.mark.parametrize("defect", sorted(BROKEN))
def test_a_broken_gguf_template_is_one_clear_error_and_exit_2(tmp_path: Path, defect: str) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(BROKEN[defect])
    result = CliRunner().invoke(cli, ["lint", "prompts", str(LOG), "--template", str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    first = result.output.strip().splitlines()[0]
    assert str(path) in first and "GGUF" in first, result.output
    assert "Traceback" not in result.output and "MemoryError" not in result.output


def test_the_valid_header_of_the_same_shape_gives_its_template(
    tmp_path: Path, build_tokenizer_json: Callable[[Path, list[str]], Path]
) -> None:
    """The control: the unbroken file is read, so the errors above come from the defects."""
    path = tmp_path / "model.gguf"
    path.write_bytes(VALID)
    tokenizer = build_tokenizer_json(tmp_path / "tokenizer.json", LOG.read_text().splitlines())
    args = ["lint", "prompts", str(LOG), "--template", str(path), "--tokenizer", str(tokenizer)]
    result = CliRunner().invoke(cli, args)
    assert "is not a readable GGUF" not in result.output
    assert result.exit_code in (0, 1), result.output
