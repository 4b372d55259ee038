"""SHA-256 of many files at once, on threads.

hashlib releases the GIL while it digests a buffer larger than about 2 KiB, and ``readinto`` does
the same while it waits on the disk, so plain threads hash several files in parallel; one file is
still one sequential digest, which SHA-256 cannot split.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

CHUNK_BYTES = 4 * 1024 * 1024


class HashProgress(Protocol):
    """Receives progress from worker threads; implementations must be thread-safe."""

    def start(self, path: Path, size: int) -> None: ...

    def advance(self, path: Path, nbytes: int) -> None: ...

    def finish(self, path: Path) -> None: ...


@dataclass(frozen=True, slots=True)
class HashResult:
    """A digest, or the reason the file could not be read."""

    path: Path
    digest: str | None
    error: str | None = None


def sha256_file(
    path: Path, advance: Callable[[int], None] | None = None, chunk: int = CHUNK_BYTES
) -> str:
    """Hex SHA-256 of one file, read in ``chunk``-byte pieces into one reused buffer."""
    digest = hashlib.sha256()
    buf = bytearray(chunk)
    view = memoryview(buf)
    with path.open("rb", buffering=0) as fh:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while n := fh.readinto(view):
            digest.update(view[:n])
            if advance is not None:
                advance(n)
    return digest.hexdigest()


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def sha256_files(
    paths: Sequence[Path],
    workers: int | None = None,
    progress: HashProgress | None = None,
) -> dict[Path, HashResult]:
    """Hash ``paths`` on ``workers`` threads (default: CPU count, at most 8).

    Largest files start first so that one big file does not run alone at the end. A file that
    cannot be read gets a result with ``error`` set; nothing raises for one bad file.
    """
    sizes: dict[Path, int] = {}
    for p in paths:
        try:
            sizes[p] = p.stat().st_size
        except OSError:
            sizes[p] = 0
    order = sorted(paths, key=lambda p: -sizes[p])

    def one(path: Path) -> HashResult:
        if progress is not None:
            progress.start(path, sizes[path])
        try:
            step = (lambda n: progress.advance(path, n)) if progress is not None else None
            return HashResult(path, sha256_file(path, step))
        except OSError as exc:
            return HashResult(path, None, exc.strerror or str(exc))
        finally:
            if progress is not None:
                progress.finish(path)

    n = min(workers or default_workers(), max(1, len(order)))
    if n == 1:
        return {r.path: r for r in map(one, order)}
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="ttft-sha256") as pool:
        return {r.path: r for r in pool.map(one, order)}
