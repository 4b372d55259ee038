"""Builders for weight files used by the weights tests: real safetensors shards written by the
``safetensors`` library, and GGUF files written byte by byte with ``struct``."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

# One GGUF metadata value: (key, value type id, value); arrays as (key, 9, (item type, [items])).
GgufKV = tuple[str, int, Any]
# One GGUF tensor: (name, dims in file order, ggml type id, data bytes).
GgufTensorSpec = tuple[str, tuple[int, ...], int, bytes]


def make_sharded(folder: Path, shards: int = 3, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Write ``shards`` safetensors shards plus a Hugging Face style index; return the tensors."""
    rng = np.random.default_rng(seed)
    weight_map: dict[str, str] = {}
    contents: dict[str, dict[str, np.ndarray]] = {}
    total = 0
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        tensors = {
            f"layers.{i}.attn.weight": rng.standard_normal((16, 8)).astype(np.float32),
            f"layers.{i}.mlp.weight": rng.standard_normal((8, 8)).astype(np.float16),
            f"layers.{i}.norm.bias": rng.standard_normal(8).astype(np.float32),
        }
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
        contents[name] = tensors
        for key, value in tensors.items():
            weight_map[key] = name
            total += value.nbytes
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return contents


def read_header(path: Path) -> tuple[dict[str, Any], bytes]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def write_with_header(path: Path, header: dict[str, Any], data: bytes) -> None:
    """Write a safetensors file with a hand-edited header, padded to 8 bytes like the library."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def edit_header(path: Path, mutate: Callable[[dict[str, Any]], None]) -> None:
    header, data = read_header(path)
    mutate(header)
    write_with_header(path, header, data)


def _gguf_string(text: str | bytes, order: str = "<") -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(order + "Q", len(raw)) + raw


_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}


def _gguf_value(vtype: int, value: Any, order: str) -> bytes:
    if vtype == 8:
        return _gguf_string(value, order)
    if vtype == 9:
        item_type, items = value
        out = struct.pack(order + "IQ", item_type, len(items))
        return out + b"".join(_gguf_value(item_type, item, order) for item in items)
    return struct.pack(order + _SCALARS[vtype], value)


def gguf_bytes(
    kvs: Sequence[GgufKV],
    tensors: Sequence[GgufTensorSpec],
    *,
    alignment: int = 32,
    version: int = 3,
    order: str = "<",
    offsets: dict[str, int] | None = None,
    tensor_count: int | None = None,
) -> bytes:
    """A GGUF file: header, metadata, tensor infos, padding, data (each tensor aligned).

    ``offsets`` overrides the offset written for a tensor (to build broken files); ``tensor_count``
    overrides the count in the header.
    """
    out = bytearray(b"GGUF")
    out += struct.pack(order + "IQQ", version, tensor_count or len(tensors), len(kvs))
    for key, vtype, value in kvs:
        out += _gguf_string(key, order) + struct.pack(order + "I", vtype)
        out += _gguf_value(vtype, value, order)
    data = bytearray()
    for name, dims, ggml_type, blob in tensors:
        data += b"\0" * (-len(data) % alignment)
        offset = len(data) if offsets is None else offsets.get(name, len(data))
        out += _gguf_string(name, order) + struct.pack(order + "I", len(dims))
        out += struct.pack(order + f"{len(dims)}Q", *dims)
        out += struct.pack(order + "IQ", ggml_type, offset)
        data += blob
    out += b"\0" * (-len(out) % alignment)
    return bytes(out + data)


def small_gguf_spec() -> tuple[list[GgufKV], list[GgufTensorSpec]]:
    """Metadata of every kind a real model uses, and F32, F16 and Q8_0 tensors."""
    rng = np.random.default_rng(1)
    kvs: list[GgufKV] = [
        ("general.architecture", 8, "tiny"),
        ("general.name", 8, "Tiny Test Model"),
        ("tiny.block_count", 4, 2),
        ("tiny.rope.freq_base", 6, 10000.0),
        ("tokenizer.ggml.add_bos_token", 7, True),
        ("tokenizer.ggml.tokens", 9, (8, ["<pad>", "<s>", "</s>", "hello", "wörld"])),
        ("tokenizer.ggml.scores", 9, (6, [0.0, -1.0, -2.0, -3.0, -4.0])),
        ("tokenizer.ggml.token_type", 9, (5, [3, 3, 3, 1, 1])),
        ("tokenizer.chat_template", 8, "{% for m in messages %}{{ m.content }}{% endfor %}"),
        ("tiny.nested", 9, (9, [(4, [1, 2]), (4, [3])])),
        ("tiny.big", 11, -(2**40)),
    ]
    q8_blocks = 2  # Q8_0: 32 elements per 34-byte block
    tensors: list[GgufTensorSpec] = [
        ("token_embd.weight", (8, 5), 0, rng.standard_normal(40).astype("<f4").tobytes()),
        ("blk.0.attn_norm.weight", (8,), 1, rng.standard_normal(8).astype("<f2").tobytes()),
        ("blk.0.ffn_up.weight", (32, 2), 8, rng.integers(0, 255, 34 * q8_blocks, "u1").tobytes()),
        ("output_norm.weight", (8,), 0, rng.standard_normal(8).astype("<f4").tobytes()),
    ]
    return kvs, tensors
