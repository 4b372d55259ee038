"""What request bodies of a client's choosing cost the gateway to parse, and what they hold.

For each shape of a ~3.6 MB body (small objects, empty arrays, token ids, short strings,
floats, one long text): the gateway's own ``parse_body`` (stdlib ``json`` with the duplicate-key
and finiteness checks), plain ``json.loads``, ``orjson.loads`` when installed, the memory the
parsed body holds (tracemalloc), and ``body_cost``'s estimate (units and memory), so the
weights in ``ttft.gateway.body_cost`` can be checked on another machine.

    python benchmarks/gateway_body_cost.py
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from typing import Any

from ttft.gateway.body_cost import body_cost
from ttft.gateway.validate import parse_body


def shapes(n: int) -> dict[str, bytes]:
    head = b'{"messages":[{"role":"user","content":"x"}],"x":['
    return {
        "small objects": head + b",".join([b'{"a":1}'] * (n // 8)) + b"]}",
        "empty arrays": head + b",".join([b"[]"] * (n // 3)) + b"]}",
        "token ids": b'{"prompt":[' + b",".join([b"1"] * (n // 2)) + b"]}",
        "short strings": head + b",".join([b'""'] * (n // 3)) + b"]}",
        "floats": head + b",".join([b"1.5"] * (n // 4)) + b"]}",
        "long text": b'{"messages":[{"role":"user","content":"'
        + b"hello, world " * (n // 13)
        + b'"}]}',
    }


def best_ms(fn: Callable[[], Any], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        gc.collect()
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def held_bytes(raw: bytes) -> int:
    gc.collect()
    tracemalloc.start()
    body = parse_body(raw)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del body
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, default=3_600_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    try:
        import orjson

        fast: Callable[[bytes], Any] | None = orjson.loads
    except ImportError:
        fast = None
    print(
        f"{'shape':14s} {'MB':>4s} {'parse_body':>10s} {'json':>7s} {'orjson':>7s} "
        f"{'units':>9s} {'ns/unit':>7s} {'held MB':>7s} {'est. MB':>7s}"
    )
    for name, raw in shapes(args.bytes).items():
        ours = best_ms(partial(parse_body, raw), args.reps)
        plain = best_ms(partial(json.loads, raw), args.reps)
        other = best_ms(partial(fast, raw), args.reps) if fast else float("nan")
        cost = body_cost(raw)
        held = held_bytes(raw)
        print(
            f"{name:14s} {len(raw) / 1e6:4.1f} {ours:8.1f}ms {plain:5.1f}ms {other:5.1f}ms "
            f"{cost.units:9d} {ours * 1e6 / max(1, cost.units):7.0f} {held / 1e6:7.1f} "
            f"{(cost.memory + len(raw)) / 1e6:7.1f}"
        )


if __name__ == "__main__":
    main()
