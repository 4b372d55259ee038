"""Read the chat template and special tokens from a GGUF file's metadata, without loading weights.

GGUF (llama.cpp's model format) starts with a key/value table: ``tokenizer.chat_template`` holds the
Jinja text when the model ships one, ``tokenizer.ggml.bos_token_id`` / ``eos_token_id`` index into
the ``tokenizer.ggml.tokens`` string array. The tensors after the table are never read.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from ttft.core.errors import TtftError

# GGUF value types -> struct format of the scalar (strings and arrays are handled apart).
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_TOKENS = "tokenizer.ggml.tokens"


class _Reader:
    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh, self.path = fh, path

    def take(self, fmt: str) -> int | float | bool:
        size = struct.calcsize(fmt)
        raw = self.fh.read(size)
        if len(raw) != size:
            raise TtftError(f"{self.path}: GGUF metadata ends early (truncated file?)")
        value: int | float | bool = struct.unpack(fmt, raw)[0]
        return value

    def string(self) -> str:
        n = int(self.take("<Q"))
        raw = self.fh.read(n)
        if len(raw) != n:
            raise TtftError(f"{self.path}: GGUF metadata ends early (truncated file?)")
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.fh.seek(int(self.take("<Q")), 1)

    def skip_value(self, vtype: int) -> None:
        if vtype == _STRING:
            self.skip_string()
        elif vtype == _ARRAY:
            item_type, count = int(self.take("<I")), int(self.take("<Q"))
            if item_type == _STRING:
                for _ in range(count):
                    self.skip_string()
            elif item_type in _SCALARS:
                self.fh.seek(struct.calcsize(_SCALARS[item_type]) * count, 1)
            else:
                raise TtftError(f"{self.path}: unknown GGUF array item type {item_type}")
        elif vtype in _SCALARS:
            self.take(_SCALARS[vtype])
        else:
            raise TtftError(f"{self.path}: unknown GGUF value type {vtype}")


def read_gguf_chat_metadata(path: Path) -> dict[str, str]:
    """``chat_template``, ``bos_token`` and ``eos_token`` from the GGUF metadata, where present."""
    found, tokens_at = _open_and_read(path)
    out: dict[str, str] = {}
    template = found.get("tokenizer.chat_template")
    if isinstance(template, str):
        out["chat_template"] = template
    if tokens_at is not None:
        with path.open("rb") as fh:
            reader = _Reader(fh, path)
            for name in ("bos", "eos"):
                token_id = found.get(f"tokenizer.ggml.{name}_token_id")
                if isinstance(token_id, int) and not isinstance(token_id, bool):
                    text = _token_text(reader, tokens_at, token_id)
                    if text is not None:
                        out[f"{name}_token"] = text
    return out


def read_gguf_sliding_window(path: Path) -> int | None:
    """The model's sliding attention window (``<arch>.attention.sliding_window``), if it has one.

    llama-server can restore a sliding-window model's prefix only at context checkpoints.
    """
    found, _ = _open_and_read(path)
    window = found.get(f"{found.get('general.architecture')}.attention.sliding_window")
    return window if isinstance(window, int) and not isinstance(window, bool) and window else None


def _open_and_read(path: Path) -> tuple[dict[str, object], int | None]:
    try:
        with path.open("rb") as fh:
            return _read(_Reader(fh, path))
    except OSError as exc:
        raise TtftError(f"cannot read {path}: {exc}") from None


def _read(r: _Reader) -> tuple[dict[str, object], int | None]:
    """Every scalar and string of the key/value table, and where the token texts start."""
    if r.fh.read(4) != b"GGUF":
        raise TtftError(f"{r.path}: not a GGUF file (no GGUF magic at the start)")
    version = int(r.take("<I"))
    count_fmt = "<I" if version == 1 else "<Q"
    r.take(count_fmt)  # tensor count: the tensors are not read
    n_kv = int(r.take(count_fmt))
    found: dict[str, object] = {}
    tokens_at: int | None = None
    for _ in range(n_kv):
        key = r.string()
        vtype = int(r.take("<I"))
        if vtype == _STRING:
            found[key] = r.string()
        elif vtype in _SCALARS:
            found[key] = r.take(_SCALARS[vtype])
        else:
            if key == _TOKENS and vtype == _ARRAY:
                tokens_at = r.fh.tell()
            r.skip_value(vtype)
    return found, tokens_at


def _token_text(r: _Reader, tokens_at: int, index: int) -> str | None:
    r.fh.seek(tokens_at)
    item_type, count = int(r.take("<I")), int(r.take("<Q"))
    if item_type != _STRING or not 0 <= index < count:
        return None
    for _ in range(index):
        r.skip_string()
    return r.string()
