"""Results appended to disk as they happen: a crash or Ctrl-C loses nothing already measured.

The file is JSON Lines. Each line is one whole JSON object written with a single ``write`` and
flushed, so a killed run leaves every finished line readable. Line types:

- ``{"type": "run", ...}`` first: schema version, wall-clock anchor, target, settings;
- ``{"type": "request", "record": {...}}`` for every finished request (ok or failed);
- ``{"type": "metrics", "cell": ..., "phase": ..., "server": {...}}`` server metric deltas per
  cell and phase (cold, warmup, warm);
- ``{"type": "cold_start", "index": ..., "startup_s": ...}`` in ``--cold`` mode, per restart;
- ``{"type": "end", ...}`` when the run finished on its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ttft.core.errors import TtftError
from ttft.core.records import SCHEMA_VERSION, RequestRecord

RESULTS_SCHEMA = f"ttft.bench.results/{SCHEMA_VERSION}"


class JsonlSink:
    """Appends one JSON object per line, flushed (and optionally fsynced) per line."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._file: IO[str] | None = None

    def open(self) -> JsonlSink:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise TtftError(
                f"cannot write results to {self.path}: {exc.strerror}", "choose another --out"
            ) from exc
        return self

    def write(self, obj: dict[str, Any]) -> None:
        assert self._file is not None, "open() first"
        self._file.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())

    def write_record(self, record: RequestRecord) -> None:
        self.write({"type": "request", "record": record.to_dict()})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> JsonlSink:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass
class LoadedRun:
    """What a results file holds, read back (a truncated last line is skipped and counted)."""

    header: dict[str, Any]
    records: list[RequestRecord]
    metrics: list[dict[str, Any]]
    finished: bool
    damaged_lines: int


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8", errors="replace") as f:
        yield from enumerate(f, start=1)


def read_results(path: Path) -> LoadedRun:
    """A results file as written: its run header, records, metrics lines, whether it ended;
    a torn line (the one being written when the process died) is counted, not read."""
    header: dict[str, Any] = {}
    records: list[RequestRecord] = []
    metrics: list[dict[str, Any]] = []
    finished, damaged = False, 0
    try:
        for _, line in _lines(path):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
            if not isinstance(obj, dict):
                damaged += 1  # only the line being written when the process died
                continue
            kind = obj.get("type")
            if kind == "run":
                header = obj
            elif kind == "request":
                records.append(RequestRecord.from_dict(obj["record"]))
            elif kind == "metrics":
                metrics.append(obj)
            elif kind == "end":
                finished = True
    except FileNotFoundError:
        raise TtftError(f"results file not found: {path}") from None
    return LoadedRun(header, records, metrics, finished, damaged)
