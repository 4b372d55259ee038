"""Compare a sharded safetensors checkpoint's index with the shards on disk.

``*.safetensors.index.json`` has a ``weight_map`` from tensor name to shard file. The checks are
strict, like a strict state-dict load: every listed shard exists, no stray shard sits beside them,
every tensor is in the shard the index names, and no shard holds a tensor the index does not list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ttft.core.findings import Finding
from ttft.weights.problems import problem
from ttft.weights.safetensors import SafetensorsHeader

INDEX_SUFFIX = ".safetensors.index.json"
_SHARD_NUMBER = re.compile(r"-(\d+)-of-(\d+)\.safetensors$")
# Index files are small (about 100 bytes per tensor); a bigger one is not an index.
MAX_INDEX_BYTES = 100 * 1024 * 1024


@dataclass(slots=True)
class SafetensorsIndex:
    """A parsed index: ``weight_map`` tensor -> shard file name (relative to the index's folder)."""

    path: Path
    weight_map: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        """``model`` for ``model.safetensors.index.json``: stray shards share this prefix."""
        return self.path.name[: -len(INDEX_SUFFIX)]

    @property
    def shards(self) -> list[str]:
        return sorted(set(self.weight_map.values()))


def read_index(path: Path, label: str) -> tuple[SafetensorsIndex | None, list[Finding]]:
    """Parse an index file; a broken one yields problems and None, never an exception."""
    try:
        size = path.stat().st_size
        if size > MAX_INDEX_BYTES:
            return None, [
                problem(
                    label,
                    "index-too-large",
                    "index file is too large to be an index",
                    expected=f"<= {MAX_INDEX_BYTES} bytes",
                    found=f"{size} bytes",
                )
            ]
        raw = path.read_bytes()
    except OSError as exc:
        return None, [problem(label, "read-error", f"cannot read index: {exc.strerror or exc}")]
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [problem(label, "index-not-json", f"index is not valid JSON: {exc}")]
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        return None, [
            problem(
                label,
                "index-no-weight-map",
                "index has no weight_map object mapping tensor names to shard files",
                expected='{"weight_map": {tensor: shard}}',
                found=repr(parsed)[:80],
            )
        ]
    problems: list[Finding] = []
    index = SafetensorsIndex(path=path)
    for tensor, shard in weight_map.items():
        pure = PurePosixPath(shard)
        if pure.is_absolute() or ".." in pure.parts or not shard.endswith(".safetensors"):
            problems.append(
                problem(
                    label,
                    "shard-path-invalid",
                    f"index maps tensor {tensor} to {shard!r}, not a .safetensors file "
                    "inside the index's folder",
                    tensor=tensor,
                )
            )
            continue
        index.weight_map[tensor] = shard
    metadata = parsed.get("metadata")
    if isinstance(metadata, dict):
        index.metadata = metadata
    return index, problems


def check_shard_names(index: SafetensorsIndex, label: str) -> list[Finding]:
    """Names like ``model-00002-of-00003.safetensors`` state the shard count; they must agree."""
    shards = index.shards
    numbered = [(s, _SHARD_NUMBER.search(s)) for s in shards]
    matches = [(s, m) for s, m in numbered if m is not None]
    if not matches:
        return []
    problems: list[Finding] = []
    totals = {int(m.group(2)) for _, m in matches}
    if len(totals) > 1:
        problems.append(
            problem(
                label,
                "shard-count-inconsistent",
                "shard names disagree on the shard count",
                expected="one count",
                found=", ".join(str(t) for t in sorted(totals)),
            )
        )
        return problems
    total = totals.pop()
    if total != len(shards):
        problems.append(
            problem(
                label,
                "shard-count-mismatch",
                f"shard names say the checkpoint has {total} shards but the index lists "
                f"{len(shards)}",
                expected=f"{total} shards",
                found=f"{len(shards)} shards",
            )
        )
    numbers = {int(m.group(1)) for _, m in matches}
    absent = sorted(set(range(1, total + 1)) - numbers)
    if absent:
        problems.append(
            problem(
                label,
                "shard-number-absent",
                f"the index maps no tensor to shard number(s) {absent} of {total}",
                expected=f"shards 1..{total}",
                found=", ".join(str(n) for n in sorted(numbers)),
            )
        )
    return problems


def check_index_against_shards(
    index: SafetensorsIndex,
    label: str,
    shard_labels: Mapping[str, str],
    headers: Mapping[str, SafetensorsHeader | None],
) -> list[Finding]:
    """Strict comparison of the weight map with the tensors each shard's header holds.

    ``shard_labels`` maps a shard name from the index to the label its problems carry; ``headers``
    has an entry for every shard that exists (None when its header could not be parsed, in which
    case its own problems already say why).
    """
    problems: list[Finding] = []
    by_shard: dict[str, set[str]] = {}
    for tensor, shard in index.weight_map.items():
        by_shard.setdefault(shard, set()).add(tensor)
    holder: dict[str, str] = {}
    for shard, header in headers.items():
        if header is not None:
            for name in header.names:
                holder.setdefault(name, shard)

    for shard in index.shards:
        shard_label = shard_labels[shard]
        if shard not in headers:
            problems.append(
                problem(
                    shard_label,
                    "shard-missing",
                    f"shard {shard} is listed in {index.path.name} "
                    f"({len(by_shard[shard])} tensors) but is not on disk",
                    expected="file present",
                    found="missing",
                )
            )
            continue
        header = headers[shard]
        if header is None:
            continue
        expected, found = by_shard[shard], header.names
        for tensor in sorted(expected - found):
            elsewhere = holder.get(tensor)
            where = f"; it is in {elsewhere}" if elsewhere else ""
            problems.append(
                problem(
                    shard_label,
                    "tensor-missing",
                    f"tensor {tensor} is mapped to {shard} by the index but the shard does "
                    f"not contain it{where}",
                    tensor=tensor,
                    expected=f"in {shard}",
                    found=f"in {elsewhere}" if elsewhere else "absent",
                )
            )
        for tensor in sorted(found - expected):
            listed = index.weight_map.get(tensor)
            why = f"maps it to {listed}" if listed else "does not list it"
            problems.append(
                problem(
                    shard_label,
                    "tensor-unexpected",
                    f"shard {shard} contains tensor {tensor} but the index {why}",
                    tensor=tensor,
                    expected=f"in {listed}" if listed else "not present",
                    found=f"in {shard}",
                )
            )
    problems.extend(_check_total_size(index, label, headers))
    return problems


def _check_total_size(
    index: SafetensorsIndex, label: str, headers: Mapping[str, SafetensorsHeader | None]
) -> list[Finding]:
    declared = index.metadata.get("total_size")
    if not isinstance(declared, int) or isinstance(declared, bool):
        return []
    parsed = [headers.get(s) for s in index.shards]
    actual = 0
    for header in parsed:
        if header is None:
            return []  # a shard is missing or unreadable; its own problem says so
        actual += sum(t.nbytes for t in header.tensors.values())
    if actual == declared:
        return []
    # Exporters differ on what total_size counts (shared storage, padding): a hint, not a failure.
    return [
        problem(
            label,
            "index-total-size",
            "metadata.total_size differs from the sum of tensor sizes in the shards",
            expected=f"{declared} bytes",
            found=f"{actual} bytes",
            severity="warning",
        )
    ]
