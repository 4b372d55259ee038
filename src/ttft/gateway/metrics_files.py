"""The files through which ``--workers N`` gateways share their metrics (one directory).

The supervisor creates a private directory (``create_share_dir``: mode 0700, under the temp
dir) and removes it on shutdown. In it:
- ``<name>.json``: one worker's snapshot (``metrics_merge``), written by that worker only,
  atomically (a temporary file, then ``os.replace``), so a reader sees a whole old or a whole
  new snapshot; ``<name>`` is unique to one start of one worker (``w<slot>g<generation>``);
- ``retired.json``: the counters and histograms of workers that have exited, with the names
  already folded in; written by the supervisor only (``fold_retired``), also atomically.

A reader reads the snapshots first and ``retired.json`` second, and drops a snapshot whose
name ``retired.json`` lists: a fold between the two reads is then counted once, and one
before them too (the supervisor writes ``retired.json`` before it removes the snapshot).

Standard library only: the configuration names a ``MetricsShare`` and is read by ``--help``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.gateway.metrics_merge import Family, families_from_json, merge

log = logging.getLogger("ttft.gateway")

RETIRED = "retired.json"
_KEEP_FOLDED = 256  # names remembered: a reader's two reads are milliseconds apart
_VERSION = 1

Warn = Callable[[Path, Exception], None]  # told of a file that is not a whole snapshot


def _warn(path: Path, exc: Exception) -> None:
    log.warning("metrics snapshot %s ignored: %s", path, exc)


@dataclass(frozen=True)
class MetricsShare:
    """Where one worker writes its snapshot (``directory/<name>.json``) and reads the others."""

    directory: str
    name: str

    def snapshot_path(self) -> Path:
        return Path(self.directory) / f"{self.name}.json"


def create_share_dir() -> str:
    """A new private directory (``mkdtemp`` makes it 0700, readable by this user only)."""
    return tempfile.mkdtemp(prefix="ttft-gateway-metrics-")


def remove_share_dir(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON at ``path``: written beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(data, out, separators=(",", ":"))
    os.replace(tmp, path)


def write_snapshot(share: MetricsShare, families: list[Family]) -> None:
    data = {"version": _VERSION, "name": share.name, "pid": os.getpid()}
    data["families"] = [f.to_json() for f in families]
    write_atomic(share.snapshot_path(), data)


def read_families(path: Path, warn: Warn = _warn) -> tuple[list[Family], list[str]] | None:
    """A file's families and (for ``retired.json``) the names folded into it; None when it is
    missing, partial or not a snapshot (``warn``: a reader never fails on one bad file)."""
    try:
        with open(path, encoding="utf-8") as source:
            data = json.load(source)
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError("not a version 1 snapshot")
        folded = data.get("folded", [])
        if not isinstance(folded, list) or not all(isinstance(n, str) for n in folded):
            raise ValueError("folded: expected a list of names")
        return families_from_json(data.get("families")), folded
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        warn(path, exc)
        return None


def read_others(directory: str, exclude: str, warn: Warn = _warn) -> list[list[Family]]:
    """The snapshots of every worker but ``exclude``, and the retired totals (last)."""
    root = Path(directory)
    snapshots: dict[str, list[Family]] = {}
    with contextlib.suppress(FileNotFoundError):
        for path in root.glob("w*.json"):
            name = path.name[: -len(".json")]
            if name != exclude and (read := read_families(path, warn)) is not None:
                snapshots[name] = read[0]
    retired = read_families(root / RETIRED, warn)
    if retired is None:
        return list(snapshots.values())
    families, folded = retired
    dropped = set(folded)
    return [f for name, f in snapshots.items() if name not in dropped] + [families]


def fold_retired(directory: str, name: str) -> None:
    """The supervisor, once worker ``name`` has exited: add its last snapshot's counters and
    histograms to ``retired.json`` (gauges die with it), then remove the snapshot."""
    root = Path(directory)
    retired = read_families(root / RETIRED)
    families, folded = retired if retired is not None else ([], [])
    if name not in folded:
        last = read_families(root / f"{name}.json")
        if last is not None:
            families = merge([families, last[0]], cumulative_only=True)
        folded = [*folded, name][-_KEEP_FOLDED:]
        data = {"version": _VERSION, "folded": folded}
        data["families"] = [f.to_json() for f in families]
        try:
            write_atomic(root / RETIRED, data)
        except OSError as exc:
            log.error("cannot keep the metrics of exited worker %s: %s", name, exc)
            return  # its snapshot stays, and is still counted
    for path in (root / f"{name}.json", root / f".{name}.json.tmp"):
        with contextlib.suppress(OSError):
            path.unlink()
