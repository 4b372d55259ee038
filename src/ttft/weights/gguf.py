"""Read a GGUF file's metadata and tensor infos without touching tensor data.

Layout (all integers in the file's byte order, little-endian unless the version field says
otherwise): magic ``GGUF``, version (u32, 2 or 3), tensor count (u64), metadata count (u64), the
metadata key/value pairs, the tensor infos (name, dims, ggml type, offset), padding up to
``general.alignment`` (default 32), then the data section that tensor offsets are relative to.

:func:`read_gguf` is the public reader: other layers use it for ``tokenizer.chat_template`` and the
``tokenizer.ggml.*`` vocabulary. Every count and length read from the file is checked against the
bytes that remain before anything is allocated, so a corrupt file costs an error, not memory.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, BinaryIO

from ttft.core.errors import TtftError
from ttft.weights.ggml_types import GGML_TYPES

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # llama.cpp's GGML_MAX_DIMS: it refuses tensors with more
MAX_STRING_BYTES = 64 * 1024 * 1024
MAX_ARRAY_BYTES = 64 * 1024 * 1024
MAX_ARRAY_DEPTH = 4
_CHUNK = 1 << 20


class GgufValueType(IntEnum):
    """Metadata value types, as numbered on disk."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_SCALAR_FORMATS: dict[GgufValueType, str] = {
    GgufValueType.UINT8: "B",
    GgufValueType.INT8: "b",
    GgufValueType.UINT16: "H",
    GgufValueType.INT16: "h",
    GgufValueType.UINT32: "I",
    GgufValueType.INT32: "i",
    GgufValueType.FLOAT32: "f",
    GgufValueType.BOOL: "?",
    GgufValueType.UINT64: "Q",
    GgufValueType.INT64: "q",
    GgufValueType.FLOAT64: "d",
}


class GgufFormatError(TtftError):
    """The file is not a readable GGUF; ``code`` names the defect for machines."""

    def __init__(
        self, code: str, message: str, expected: str | None = None, found: str | None = None
    ) -> None:
        super().__init__(message, "re-download the file or re-export it with llama.cpp's tools")
        self.code = code
        self.expected = expected
        self.found = found


@dataclass(frozen=True, slots=True)
class GgufTensor:
    """One tensor info. ``shape`` is in file order (ggml's ``ne``: fastest-varying first);
    ``offset`` is relative to the data section; ``nbytes`` is None for an unknown ggml type."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def type_name(self) -> str:
        known = GGML_TYPES.get(self.ggml_type)
        return known[0] if known else f"type{self.ggml_type}"

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int | None:
        known = GGML_TYPES.get(self.ggml_type)
        if known is None:
            return None
        _, block, size = known
        return self.n_elements // block * size


@dataclass(slots=True)
class GgufFile:
    """Header of a GGUF file: metadata values as Python objects (arrays as lists), tensor infos,
    and where the data section starts (``data_offset``, absolute in the file)."""

    path: Path
    version: int
    byte_order: str  # "little" or "big"
    file_size: int
    alignment: int
    data_offset: int
    metadata: dict[str, object] = field(default_factory=dict)
    value_types: dict[str, GgufValueType] = field(default_factory=dict)
    tensors: list[GgufTensor] = field(default_factory=list)
    invalid_utf8: list[str] = field(default_factory=list)  # keys whose strings were not UTF-8
    duplicate_keys: list[str] = field(default_factory=list)

    @property
    def data_size(self) -> int:
        return self.file_size - self.data_offset

    def get_str(self, key: str) -> str | None:
        """A string value (e.g. ``tokenizer.chat_template``); None when absent or not a string."""
        value = self.metadata.get(key)
        return value if isinstance(value, str) else None

    def get_int(self, key: str) -> int | None:
        """An integer value (e.g. ``tokenizer.ggml.bos_token_id``); booleans do not count."""
        value = self.metadata.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def get_strs(self, key: str) -> list[str] | None:
        """An array of strings (e.g. ``tokenizer.ggml.tokens``), or None otherwise."""
        value = self.metadata.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [str(v) for v in value]
        return None

    def chat_metadata(self) -> dict[str, str]:
        """``chat_template``, ``bos_token`` and ``eos_token``, where the file has them: the
        template text, and the texts of the special tokens its ids point at."""
        out: dict[str, str] = {}
        template = self.get_str("tokenizer.chat_template")
        if template is not None:
            out["chat_template"] = template
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        for name in ("bos", "eos"):
            token_id = self.get_int(f"tokenizer.ggml.{name}_token_id")
            if isinstance(tokens, list) and token_id is not None and 0 <= token_id < len(tokens):
                text = tokens[token_id]
                if isinstance(text, str):
                    out[f"{name}_token"] = text
        return out

    def sliding_window(self) -> int | None:
        """The model's sliding attention window (``<arch>.attention.sliding_window``), if any:
        llama-server can restore such a model's prefix only at context checkpoints."""
        arch = self.get_str("general.architecture")
        window = self.get_int(f"{arch}.attention.sliding_window") if arch else None
        return window or None


class _Reader:
    """Sequential reads from a file through a buffer, each one bounded by the file's size."""

    def __init__(self, fh: BinaryIO, file_size: int) -> None:
        self._fh = fh
        self._size = file_size
        self._buf = b""
        self._pos = 0
        self._base = 0  # file offset of _buf[0]
        self.set_order("<")

    def set_order(self, order: str) -> None:
        self.order = order
        self._u64 = struct.Struct(order + "Q")

    @property
    def offset(self) -> int:
        return self._base + self._pos

    def fits(self, n: int, what: str) -> None:
        """Fail unless ``n`` more bytes exist in the file; reads nothing."""
        if self.offset + n > self._size:
            raise GgufFormatError(
                "truncated",
                f"{what} at byte {self.offset} needs {n} bytes but the file ends at byte "
                f"{self._size}: the file is truncated or corrupt",
                expected=f">= {self.offset + n} bytes",
                found=f"{self._size} bytes",
            )

    def need(self, n: int, what: str) -> None:
        """Make ``n`` bytes available in the buffer at the current position."""
        if self._pos + n > len(self._buf):
            self.fits(n, what)
            rest = self._buf[self._pos :]
            self._base += self._pos
            self._buf = rest + self._fh.read(max(n - len(rest), _CHUNK))
            self._pos = 0

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = self._buf[self._pos : self._pos + n]
        self._pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        s = struct.Struct(self.order + fmt)
        self.need(s.size, what)
        values = s.unpack_from(self._buf, self._pos)
        self._pos += s.size
        return values

    def u32(self, what: str) -> int:
        (value,) = self.unpack("I", what)
        return int(value)

    def u64(self, what: str) -> int:
        self.need(8, what)
        (value,) = self._u64.unpack_from(self._buf, self._pos)
        self._pos += 8
        return int(value)

    def raw_string(self, what: str) -> bytes:
        n = self.u64(f"length of {what}")
        if n > MAX_STRING_BYTES:
            raise GgufFormatError(
                "string-too-long",
                f"{what} at byte {self.offset - 8} claims {n} bytes",
                expected=f"<= {MAX_STRING_BYTES}",
                found=str(n),
            )
        return self.take(n, what)


def read_gguf(path: Path | str) -> GgufFile:
    """Parse the header of a GGUF file (metadata and tensor infos), reading no tensor data.

    Raises :class:`GgufFormatError` (a :class:`TtftError`) when the header itself is unreadable.
    Layout problems of the data section (sizes, overlaps, truncation) are not errors here; see
    :func:`ttft.weights.gguf_check.check_gguf`.
    """
    path = Path(path)
    try:
        file_size = path.stat().st_size
        with path.open("rb") as fh:
            return _read(fh, path, file_size)
    except OSError as exc:
        raise TtftError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _read(fh: BinaryIO, path: Path, file_size: int) -> GgufFile:
    r = _Reader(fh, file_size)
    magic = r.take(4, "magic") if file_size >= 4 else b""
    if magic != GGUF_MAGIC:
        raise GgufFormatError(
            "not-gguf",
            "file does not start with the GGUF magic",
            expected="b'GGUF'",
            found=repr(magic) if magic else f"{file_size}-byte file",
        )
    version = r.u32("version")
    if version & 0xFFFF == 0 and version >> 16 != 0:
        r.set_order(">")  # big-endian files: the version reads byte-swapped in little-endian
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise GgufFormatError(
            "version-unsupported",
            f"GGUF version {version} is not supported"
            + (" (v1 is obsolete; re-convert the model)" if version == 1 else ""),
            expected="2 or 3",
            found=str(version),
        )
    n_tensors = r.u64("tensor count")
    n_kv = r.u64("metadata count")
    remaining = file_size - r.offset
    # Each metadata pair takes at least 13 bytes (key length, type, one byte); each tensor info
    # at least 24 (name length, n_dims, type, offset): larger counts cannot fit in the file.
    if n_kv * 13 > remaining:
        raise GgufFormatError(
            "count-impossible",
            f"metadata count {n_kv} cannot fit in the file",
            expected=f"<= {remaining // 13}",
            found=str(n_kv),
        )
    if n_tensors * 24 > remaining:
        raise GgufFormatError(
            "count-impossible",
            f"tensor count {n_tensors} cannot fit in the file",
            expected=f"<= {remaining // 24}",
            found=str(n_tensors),
        )
    out = GgufFile(
        path=path,
        version=version,
        byte_order="big" if r.order == ">" else "little",
        file_size=file_size,
        alignment=DEFAULT_ALIGNMENT,
        data_offset=0,
    )
    for i in range(n_kv):
        raw_key = r.raw_string(f"metadata key #{i}")
        key = _decode(raw_key, out, None)
        vtype = _value_type(r.u32(f"type of metadata {key}"), key)
        if key in out.metadata:
            out.duplicate_keys.append(key)
        out.value_types[key] = vtype
        out.metadata[key] = _value(r, vtype, key, out, 0)
    out.alignment = _alignment(out)

    seen: set[str] = set()
    for i in range(n_tensors):
        name = _decode(r.raw_string(f"name of tensor #{i}"), out, None)
        n_dims = r.u32(f"dimension count of tensor {name}")
        if n_dims > MAX_DIMS:
            raise GgufFormatError(
                "tensor-dims",
                f"tensor {name} has {n_dims} dimensions",
                expected=f"<= {MAX_DIMS}",
                found=str(n_dims),
            )
        dims = r.unpack(f"{n_dims}Q", f"dimensions of tensor {name}")
        ggml_type = r.u32(f"type of tensor {name}")
        offset = r.u64(f"offset of tensor {name}")
        if name in seen:
            out.duplicate_keys.append(name)
        seen.add(name)
        out.tensors.append(GgufTensor(name, tuple(int(d) for d in dims), ggml_type, offset))
    out.data_offset = -(-r.offset // out.alignment) * out.alignment
    return out


def _decode(raw: bytes, out: GgufFile, key: str | None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        # A vocabulary with one broken token should not hide the chat template from callers.
        out.invalid_utf8.append(key if key is not None else raw.decode("utf-8", "replace"))
        return raw.decode("utf-8", "replace")


def _value_type(type_id: int, key: str) -> GgufValueType:
    try:
        return GgufValueType(type_id)
    except ValueError:
        raise GgufFormatError(
            "value-type-unknown",
            f"metadata {key} has unknown value type {type_id}",
            expected="0..12",
            found=str(type_id),
        ) from None


def _value(r: _Reader, vtype: GgufValueType, key: str, out: GgufFile, depth: int) -> object:
    if vtype is GgufValueType.STRING:
        return _decode(r.raw_string(f"value of {key}"), out, key)
    if vtype is not GgufValueType.ARRAY:
        (value,) = r.unpack(_SCALAR_FORMATS[vtype], f"value of {key}")
        return value
    if depth >= MAX_ARRAY_DEPTH:
        raise GgufFormatError(
            "array-too-deep",
            f"metadata {key} nests arrays too deeply",
            expected=f"<= {MAX_ARRAY_DEPTH} levels",
            found="more",
        )
    item = _value_type(r.u32(f"array type of {key}"), key)
    count = r.u64(f"array length of {key}")
    if item is GgufValueType.STRING or item is GgufValueType.ARRAY:
        # Each string item takes at least its 8-byte length, each nested array 12 bytes.
        r.fits(count * (8 if item is GgufValueType.STRING else 12), f"{count} items of {key}")
        if item is GgufValueType.STRING:
            return [_decode(r.raw_string(f"item of {key}"), out, key) for _ in range(count)]
        return [_value(r, item, key, out, depth + 1) for _ in range(count)]
    fmt = _SCALAR_FORMATS[item]
    nbytes = count * struct.calcsize(fmt)
    if nbytes > MAX_ARRAY_BYTES:
        raise GgufFormatError(
            "array-too-large",
            f"metadata {key} claims {count} items",
            expected=f"<= {MAX_ARRAY_BYTES} bytes",
            found=f"{nbytes} bytes",
        )
    r.fits(nbytes, f"{count} items of {key}")
    return list(r.unpack(f"{count}{fmt}", f"{count} items of {key}"))


def _alignment(out: GgufFile) -> int:
    value = out.metadata.get("general.alignment")
    if value is None:
        return DEFAULT_ALIGNMENT
    if (
        out.value_types["general.alignment"] is not GgufValueType.UINT32
        or not isinstance(value, int)
        or value <= 0
        or value & (value - 1)
    ):
        raise GgufFormatError(
            "alignment-invalid",
            "general.alignment must be a power-of-two UINT32",
            expected="power of two",
            found=repr(value),
        )
    return value
