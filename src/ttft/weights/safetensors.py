"""Validate a safetensors file's header and layout without reading tensor data.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON, then the data
section. The JSON maps tensor names to ``{"dtype", "shape", "data_offsets": [begin, end]}`` with
offsets relative to the data section, plus an optional ``__metadata__`` of string pairs. A valid
file has byte ranges that match ``shape x dtype``, sit back to back from 0 without overlap, and end
exactly where the file ends, which is what catches a truncated download.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from ttft.core.findings import Finding
from ttft.weights.problems import problem

# Element widths in bits: safetensors has sub-byte types (F4, F6) packed along the last axis.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

# Real headers are a few MB at most; anything past this is a corrupt length, and reading it would
# be a large allocation driven by untrusted bytes.
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SafetensorsTensor:
    """One header entry; ``begin``/``end`` are byte offsets into the data section."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(slots=True)
class SafetensorsHeader:
    """A parsed header. ``tensors`` holds every entry whose fields were well-formed."""

    path: Path
    file_size: int
    header_size: int
    tensors: dict[str, SafetensorsTensor] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)  # every tensor name, well-formed or not

    @property
    def data_start(self) -> int:
        return 8 + self.header_size

    @property
    def data_size(self) -> int:
        return self.file_size - self.data_start


def expected_nbytes(dtype: str, shape: tuple[int, ...]) -> int | None:
    """Bytes that ``shape x dtype`` occupies, or None when it is not a whole number of bytes."""
    bits = prod(shape) * DTYPE_BITS[dtype]
    return bits // 8 if bits % 8 == 0 else None


def check_safetensors(path: Path, label: str) -> tuple[SafetensorsHeader | None, list[Finding]]:
    """Validate ``path``; ``label`` is the name problems carry (usually relative to the root).

    Returns the header when its JSON could be parsed (even if the layout is broken, so an index can
    still be compared with the names it holds) and every problem found. Never raises for a broken
    file; reads at most ``8 + min(N, MAX_HEADER_BYTES)`` bytes.
    """
    problems: list[Finding] = []
    try:
        file_size = path.stat().st_size
        with path.open("rb") as fh:
            prefix = fh.read(8)
            if len(prefix) < 8:
                problems.append(
                    problem(
                        label,
                        "file-too-short",
                        "file is too short to hold a safetensors header length",
                        expected=">= 8 bytes",
                        found=f"{file_size} bytes",
                    )
                )
                return None, problems
            (header_size,) = struct.unpack("<Q", prefix)
            if header_size > file_size - 8:
                problems.append(
                    problem(
                        label,
                        "header-length-beyond-file",
                        f"header length field says {header_size} bytes but the file has only "
                        f"{file_size - 8} bytes after it: the file is truncated or not safetensors",
                        expected=f"<= {file_size - 8}",
                        found=str(header_size),
                    )
                )
                return None, problems
            if header_size > MAX_HEADER_BYTES:
                problems.append(
                    problem(
                        label,
                        "header-length-too-large",
                        f"header length {header_size} bytes exceeds the sane limit; refusing to "
                        "read it",
                        expected=f"<= {MAX_HEADER_BYTES}",
                        found=str(header_size),
                    )
                )
                return None, problems
            raw = fh.read(header_size)
    except OSError as exc:
        problems.append(problem(label, "read-error", f"cannot read file: {exc.strerror or exc}"))
        return None, problems

    parsed = _parse_json(raw, label, problems)
    if parsed is None:
        return None, problems
    header = SafetensorsHeader(path=path, file_size=file_size, header_size=header_size)
    _collect_entries(parsed, header, label, problems)
    problems.extend(check_layout(header, label))
    return header, problems


def _parse_json(raw: bytes, label: str, problems: list[Finding]) -> dict[str, Any] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            problem(
                label,
                "header-not-utf8",
                f"header is not UTF-8 text (bad byte at header offset {exc.start}): "
                "the file is corrupt or not safetensors",
            )
        )
        return None
    duplicates: list[str] = []

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                duplicates.append(key)
            seen[key] = value
        return seen

    try:
        parsed = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as exc:
        problems.append(
            problem(
                label,
                "header-not-json",
                f"header is not valid JSON ({exc.msg} at header offset {exc.pos}): "
                "the file is corrupt or not safetensors",
                found=repr(text[:40]),
            )
        )
        return None
    if not isinstance(parsed, dict):
        problems.append(
            problem(
                label,
                "header-not-object",
                "header JSON is not an object",
                expected="object",
                found=type(parsed).__name__,
            )
        )
        return None
    for key in duplicates:
        problems.append(
            problem(
                label,
                "header-duplicate-key",
                f"header defines {key!r} more than once; readers keep only one of them",
                tensor=key,
            )
        )
    return parsed


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _collect_entries(
    parsed: dict[str, Any], header: SafetensorsHeader, label: str, problems: list[Finding]
) -> None:
    for name, info in parsed.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                problems.append(
                    problem(
                        label,
                        "metadata-invalid",
                        "__metadata__ must map strings to strings",
                        found=repr(info)[:80],
                    )
                )
            else:
                header.metadata = dict(info)
            continue
        header.names.add(name)
        entry = _entry(name, info, label, problems)
        if entry is not None:
            header.tensors[name] = entry


def _entry(
    name: str, info: object, label: str, problems: list[Finding]
) -> SafetensorsTensor | None:
    def bad(code: str, message: str, expected: str, found: object) -> None:
        problems.append(
            problem(label, code, message, tensor=name, expected=expected, found=repr(found)[:80])
        )

    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
        bad(
            "tensor-entry-invalid",
            f"tensor {name} has no dtype/shape/data_offsets entry",
            "{dtype, shape, data_offsets}",
            info,
        )
        return None
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        bad("dtype-unknown", f"tensor {name} has an unknown dtype", "a safetensors dtype", dtype)
        return None
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        bad("shape-invalid", f"tensor {name} has an invalid shape", "list of ints >= 0", shape)
        return None
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        bad(
            "offsets-invalid",
            f"tensor {name} has invalid data_offsets",
            "[begin, end] with 0 <= begin <= end",
            offsets,
        )
        return None
    entry = SafetensorsTensor(name, dtype, tuple(shape), offsets[0], offsets[1])
    want = expected_nbytes(dtype, entry.shape)
    if want is None:
        bad(
            "size-not-whole-bytes",
            f"tensor {name}: shape {list(shape)} x {dtype} is not a whole number of bytes",
            "a multiple of 8 bits",
            f"{prod(shape) * DTYPE_BITS[dtype]} bits",
        )
    elif want != entry.nbytes:
        problems.append(
            problem(
                label,
                "size-mismatch",
                f"tensor {name}: shape {list(shape)} x {dtype} does not match its byte range "
                f"[{entry.begin}, {entry.end})",
                tensor=name,
                expected=f"{want} bytes",
                found=f"{entry.nbytes} bytes",
            )
        )
    return entry


def check_layout(header: SafetensorsHeader, label: str) -> list[Finding]:
    """Byte ranges must tile the data section exactly: from 0, no gap, no overlap, to the end."""
    problems: list[Finding] = []
    ordered = sorted(header.tensors.values(), key=lambda t: (t.begin, t.end))
    covered = 0
    last: SafetensorsTensor | None = None
    for tensor in ordered:
        if tensor.begin < covered and last is not None:
            problems.append(
                problem(
                    label,
                    "offsets-overlap",
                    f"tensor {tensor.name} [{tensor.begin}, {tensor.end}) overlaps tensor "
                    f"{last.name} [{last.begin}, {last.end})",
                    tensor=tensor.name,
                    expected=f"begin >= {covered}",
                    found=f"begin {tensor.begin}",
                )
            )
        elif tensor.begin > covered:
            problems.append(
                problem(
                    label,
                    "offsets-gap",
                    f"data bytes [{covered}, {tensor.begin}) before tensor {tensor.name} belong "
                    "to no tensor",
                    tensor=tensor.name,
                    expected=f"begin {covered}",
                    found=f"begin {tensor.begin}",
                )
            )
        if last is None or tensor.end >= covered:
            last = tensor
        covered = max(covered, tensor.end)

    data_size = header.data_size
    beyond = [t for t in ordered if t.end > data_size]
    if beyond:
        first = beyond[0]
        problems.append(
            problem(
                label,
                "data-truncated",
                f"tensor {first.name} ends at data byte {first.end} but the data section has "
                f"only {data_size} bytes ({len(beyond)} tensor(s) reach past the end): the file "
                "is truncated",
                tensor=first.name,
                expected=f"file size {header.data_start + covered} bytes",
                found=f"{header.file_size} bytes",
            )
        )
    elif covered < data_size:
        problems.append(
            problem(
                label,
                "data-trailing-bytes",
                f"the data section has {data_size - covered} bytes after the last tensor that "
                "belong to no tensor",
                expected=f"file size {header.data_start + covered} bytes",
                found=f"{header.file_size} bytes",
            )
        )
    return problems
