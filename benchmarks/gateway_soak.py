"""Gateway soak: RSS, statuses and upstream connections over minutes of mixed, hostile traffic.

Steady keep-alive streams, a slow reader (reads nothing of a 4 MB answer) every few seconds and
a client that disconnects mid-answer every second, against ``ttft gateway`` in its own process
in front of a scripted upstream (``ttft.testing.gateway_soak``). Prints the RSS curve (start,
peak, end), the statuses the steady clients got, and the upstream connections left open.

    python benchmarks/gateway_soak.py --minutes 3
    python benchmarks/gateway_soak.py --minutes 3 --workers 2   # RSS per worker process
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ttft.testing.gateway_soak import run_soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--streams", type=int, default=16, help="steady keep-alive clients")
    parser.add_argument("--slow-every", type=float, default=5.0, help="s between slow readers")
    parser.add_argument("--drop-every", type=float, default=1.0, help="s between disconnects")
    parser.add_argument("--workers", type=int, default=1, help="the gateway's --workers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run_soak(
            Path(tmp),
            duration_s=args.minutes * 60,
            streams=args.streams,
            slow_every_s=args.slow_every,
            drop_every_s=args.drop_every,
            sample_every_s=max(1.0, args.minutes * 60 / 60),
            workers=args.workers,
        )
    print(f"soak: {report.duration_s:.0f} s, {args.streams} steady streams")
    which = "the gateway" if args.workers == 1 else f"the largest of {args.workers} workers"
    print(
        f"RSS MiB ({which}): start {report.start_mb:.1f}, peak {report.peak_mb:.1f}, end "
        f"{report.end_mb:.1f}"
    )
    if args.workers > 1:
        first, last = report.worker_rss_mb[0], report.worker_rss_mb[-1]
        print(
            "per worker, start -> end: "
            + ", ".join(f"{first[p]:.1f} -> {last.get(p, float('nan')):.1f}" for p in sorted(first))
            + f"; worker processes seen {len(report.worker_pids)} (more: one was replaced)"
        )
    print(f"curve: {report.curve(12)}")
    print(
        f"steady requests {report.requests}, statuses {dict(report.statuses)}, "
        f"client errors {dict(report.errors) or 'none'}"
    )
    print(
        f"slow readers {report.slow_readers} (dropped by the gateway: "
        f"{report.slow_readers_dropped}), disconnects {report.disconnects}"
    )
    print(
        f"upstream connections open at the end: {report.upstream_open_end} "
        f"(peak {report.upstream_peak}; idle keep-alive connections may stay, up to the "
        f"streams' count)"
    )


if __name__ == "__main__":
    main()
