"""Check a GGUF file's tensor layout against its size, on top of :func:`read_gguf`.

Tensors must have a known ggml type, a first dimension that is a whole number of blocks, an
offset that respects ``general.alignment``, no overlap with another tensor, and bytes that lie
inside the file. A file that stops in the middle of its tensors is reported as truncated; a tensor
whose offset points past the end after a gap is reported on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.findings import Finding
from ttft.weights.ggml_types import GGML_TYPES
from ttft.weights.gguf import GgufFile, GgufFormatError, GgufTensor, read_gguf
from ttft.weights.problems import problem


def check_gguf(path: Path, label: str) -> tuple[GgufFile | None, list[Finding]]:
    """Validate ``path`` without reading tensor data; never raises for a broken file."""
    try:
        gguf = read_gguf(path)
    except GgufFormatError as exc:
        return None, [problem(label, exc.code, exc.problem, expected=exc.expected, found=exc.found)]
    except TtftError as exc:
        return None, [problem(label, "read-error", exc.problem)]
    problems = [
        problem(label, "duplicate-name", f"{name!r} is defined more than once", tensor=name)
        for name in gguf.duplicate_keys
    ]
    problems += [
        problem(
            label, "string-not-utf8", f"a string in {key!r} is not valid UTF-8", severity="warning"
        )
        for key in sorted(set(gguf.invalid_utf8))
    ]
    problems += _check_tensors(gguf, label)
    return gguf, problems


def _check_tensors(gguf: GgufFile, label: str) -> list[Finding]:
    """Each tensor's type, shape and alignment, then how the tensors lay out the data section."""
    problems, sized = _check_each_tensor(gguf, label)
    layout, covered, straddling = _check_layout(gguf, label, sized)
    return problems + layout + _check_data_end(gguf, label, sized, covered, straddling)


def _check_each_tensor(
    gguf: GgufFile, label: str
) -> tuple[list[Finding], list[tuple[GgufTensor, int]]]:
    """Problems of single tensors, and the tensors whose size is known (with that size)."""
    problems: list[Finding] = []
    sized: list[tuple[GgufTensor, int]] = []
    for t in gguf.tensors:
        known = GGML_TYPES.get(t.ggml_type)
        if known is None:
            problems.append(
                problem(
                    label,
                    "ggml-type-unknown",
                    f"tensor {t.name} has ggml type {t.ggml_type}, which ttft does not know, "
                    "so its size cannot be checked",
                    tensor=t.name,
                    expected="a known ggml type",
                    found=str(t.ggml_type),
                )
            )
            continue
        name, block, _ = known
        ne0 = t.shape[0] if t.shape else 1
        if ne0 % block:
            problems.append(
                problem(
                    label,
                    "shape-not-blocks",
                    f"tensor {t.name}: first dimension {ne0} is not a multiple of the "
                    f"{name} block size",
                    tensor=t.name,
                    expected=f"multiple of {block}",
                    found=str(ne0),
                )
            )
        if t.offset % gguf.alignment:
            problems.append(
                problem(
                    label,
                    "offset-misaligned",
                    f"tensor {t.name} starts at data offset {t.offset}, not a multiple of "
                    f"the alignment",
                    tensor=t.name,
                    expected=f"multiple of {gguf.alignment}",
                    found=str(t.offset),
                )
            )
        nbytes = t.nbytes
        assert nbytes is not None
        sized.append((t, nbytes))
    return problems, sized


def _check_layout(
    gguf: GgufFile, label: str, sized: list[tuple[GgufTensor, int]]
) -> tuple[list[Finding], int, list[GgufTensor]]:
    """Overlaps and tensors beyond the end; returns the bytes covered and the tensors that run
    past the end of a truncated file (the end check reports those once)."""
    problems: list[Finding] = []
    sized = sorted(sized, key=lambda item: (item[0].offset, item[1]))
    covered = 0
    previous: GgufTensor | None = None
    straddling: list[GgufTensor] = []
    data_size = gguf.data_size
    for t, nbytes in sized:
        end = t.offset + nbytes
        if previous is not None and t.offset < covered:
            problems.append(
                problem(
                    label,
                    "offsets-overlap",
                    f"tensor {t.name} [{t.offset}, {end}) overlaps tensor {previous.name}, "
                    f"which runs to {covered}",
                    tensor=t.name,
                    expected=f"offset >= {covered}",
                    found=str(t.offset),
                )
            )
        gap = t.offset > _align(covered, gguf.alignment)
        if end > data_size:
            if gap:
                problems.append(
                    problem(
                        label,
                        "tensor-beyond-end",
                        f"tensor {t.name} [{t.offset}, {end}) lies beyond the end of the "
                        f"data section ({data_size} bytes); its offset is corrupt",
                        tensor=t.name,
                        expected=f"end <= {data_size}",
                        found=f"end {end}",
                    )
                )
            else:
                straddling.append(t)
        if end >= covered:
            previous = t
        covered = max(covered, end)
    return problems, covered, straddling


def _check_data_end(
    gguf: GgufFile,
    label: str,
    sized: list[tuple[GgufTensor, int]],
    covered: int,
    straddling: list[GgufTensor],
) -> list[Finding]:
    """A truncated file, or bytes after the last tensor that belong to none."""
    problems: list[Finding] = []
    data_size = gguf.data_size
    if straddling:
        first = straddling[0]
        needed = gguf.data_offset + max(t.offset + (t.nbytes or 0) for t in straddling)
        problems.append(
            problem(
                label,
                "data-truncated",
                f"tensor {first.name} ends past the end of the file ({len(straddling)} "
                "tensor(s) incomplete): the file is truncated",
                tensor=first.name,
                expected=f">= {needed} bytes",
                found=f"{gguf.file_size} bytes",
            )
        )
    elif data_size < 0 and not sized:
        problems.append(
            problem(
                label,
                "data-truncated",
                "the file ends before its data section starts",
                expected=f">= {gguf.data_offset} bytes",
                found=f"{gguf.file_size} bytes",
            )
        )
    elif data_size > _align(covered, gguf.alignment):
        problems.append(
            problem(
                label,
                "data-trailing-bytes",
                f"{data_size - covered} bytes after the last tensor belong to no tensor",
                expected=f"{gguf.data_offset + _align(covered, gguf.alignment)} bytes",
                found=f"{gguf.file_size} bytes",
                severity="warning",
            )
        )
    return problems


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


_SPLIT_NAME = re.compile(r"^(.*)-(\d{5})-of-(\d{5})\.gguf$")


def check_gguf_splits(files: dict[Path, GgufFile], label: Callable[[Path], str]) -> list[Finding]:
    """A model split by llama.cpp (``name-00001-of-00003.gguf``) needs every part beside it, and
    the parts together must hold the ``split.tensors.count`` tensors the first part announces."""
    problems: list[Finding] = []
    groups: dict[tuple[Path, str, int], list[GgufFile]] = {}
    for path, gguf in files.items():
        match = _SPLIT_NAME.match(path.name)
        count = gguf.metadata.get("split.count")
        if match is None or not isinstance(count, int) or count <= 1:
            continue
        groups.setdefault((path.parent, match.group(1), count), []).append(gguf)
    for (folder, prefix, count), parts in sorted(groups.items(), key=lambda kv: str(kv[0][:2])):
        for number in range(1, count + 1):
            part = folder / f"{prefix}-{number:05d}-of-{count:05d}.gguf"
            if not part.exists():
                problems.append(
                    problem(
                        label(part),
                        "split-missing",
                        f"part {number} of {count} of split GGUF {prefix} is not on disk",
                        expected="file present",
                        found="missing",
                    )
                )
        parts.sort(key=lambda g: g.path.name)
        declared = parts[0].metadata.get("split.tensors.count")
        if isinstance(declared, int) and len(parts) == count:
            total = sum(len(p.tensors) for p in parts)
            if total != declared:
                problems.append(
                    problem(
                        label(parts[0].path),
                        "split-tensor-count",
                        f"the {count} parts of {prefix} hold {total} tensors, not the "
                        "split.tensors.count they declare",
                        expected=str(declared),
                        found=str(total),
                    )
                )
    return problems
