"""Hash throughput: ttft's threaded SHA-256 against coreutils `sha256sum -c`, in the same run.

Creates a set of files in a temporary folder (default 4 x 512 MB), writes a manifest with
`ttft weights manifest`'s library call (which also warms the page cache for both contenders), then
alternates, for several repetitions:

- ttft: ``sha256_files`` on threads (default: one per CPU), digests compared with the manifest;
- ttft with one thread, to separate per-core speed from parallelism;
- ``sha256sum -c --quiet weights.sha256``: coreutils, sequential over files, as a user would run it.

Prints per-repetition times, medians, GB/s and the ratio. The folder is removed afterwards.

    python benchmarks/hash_throughput.py                     # ~2 GB
    python benchmarks/hash_throughput.py --total-mb 512 --reps 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ttft.weights.hashing import default_workers, sha256_files
from ttft.weights.manifest import MANIFEST_NAME, parse_manifest, write_manifest

BLOCK = 16 * 1024 * 1024


def make_files(folder: Path, count: int, size: int) -> list[Path]:
    block = bytearray(os.urandom(BLOCK))
    paths = []
    for i in range(count):
        path = folder / f"model-{i + 1:05d}-of-{count:05d}.safetensors"
        with path.open("wb") as fh:
            written = 0
            while written < size:
                block[:8] = written.to_bytes(8, "little")  # no two blocks alike
                piece = min(BLOCK, size - written)
                fh.write(block[:piece])
                written += piece
        paths.append(path)
    return paths


def timed(fn: Callable[[], None]) -> float:
    started = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - started) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--total-mb", type=int, default=2048, help="total size (default 2048)")
    parser.add_argument("--files", type=int, default=4, help="number of files (default 4)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--workers", type=int, default=None, help="ttft threads (default CPUs)")
    parser.add_argument("--dir", type=Path, default=None, help="where to create the files")
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        print("sha256sum (coreutils) is not installed", file=sys.stderr)
        return 2

    workers = args.workers or default_workers()
    size = args.total_mb * 1024 * 1024 // args.files
    folder = Path(tempfile.mkdtemp(prefix="ttft-hash-bench-", dir=args.dir))
    try:
        print(f"creating {args.files} x {size / 2**20:.0f} MiB in {folder} ...", flush=True)
        paths = make_files(folder, args.files, size)
        total = size * args.files
        manifest_path, _ = write_manifest(folder, source="benchmark")  # also warms the cache
        manifest, _ = parse_manifest(manifest_path.read_text(), MANIFEST_NAME)
        want = {folder / e.name: e.digest for e in manifest.entries}

        def ttft(n: int) -> Callable[[], None]:
            def run() -> None:
                results = sha256_files(paths, workers=n)
                assert all(results[p].digest == want[p] for p in paths), "digest mismatch"

            return run

        def coreutils() -> None:
            subprocess.run(["sha256sum", "-c", "--quiet", MANIFEST_NAME], cwd=folder, check=True)

        contenders: dict[str, Callable[[], None]] = {
            f"ttft ({workers} threads)": ttft(workers),
            "ttft (1 thread)": ttft(1),
            "sha256sum -c": coreutils,
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        print(f"{os.cpu_count()} CPUs; {args.reps} repetitions, contenders alternate")
        for rep in range(args.reps):
            row = []
            for name, fn in contenders.items():
                seconds = timed(fn)
                times[name].append(seconds)
                row.append(f"{name} {seconds:.2f} s")
            print(f"  rep {rep + 1}: " + ", ".join(row), flush=True)

        print(
            f"\nmedians over {args.reps} repetitions, {total / 1e9:.2f} GB in {args.files} files:"
        )
        medians = {name: statistics.median(t) for name, t in times.items()}
        for name, median in medians.items():
            print(f"  {name:<22} {median:6.2f} s  {total / median / 1e9:5.2f} GB/s")
        ours, theirs = medians[f"ttft ({workers} threads)"], medians["sha256sum -c"]
        faster = "ttft" if ours <= theirs else "sha256sum"
        print(f"\nratio sha256sum / ttft = {theirs / ours:.2f}x ({faster} faster)")
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
