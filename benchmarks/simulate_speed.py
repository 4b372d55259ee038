"""How fast `ttft simulate` runs: a million requests through 64 llama.cpp replicas (the issue's
target: under a minute on a 2-core machine), and smaller runs of the vLLM and SGLang models.

The calibration is synthetic (about the embedded engine: ~2.5 ms a prompt token, 20 ms a decode
step), the arrivals a Poisson process at 70% of the fleet's capacity, 300-token prompts of
which 128 come from one of 8 shared prefixes, 48 output tokens. Workload generation is timed
apart from the simulation.

The anchor is the same simulation at a tenth of the requests (and a tenth of the replicas, so
the load per replica is the same), measured in the same process right before: the ratio
``(big requests/s) / (anchor requests/s)`` is 1.0 when the simulator scales linearly, and it
cancels the machine's speed (a neighbour's load on a shared machine moves both alike). A plain
Python loop would say how fast the interpreter is, not whether a million requests cost more per
request than a hundred thousand (heaps, garbage collection, caches growing).

    python benchmarks/simulate_speed.py                  # 1M llama.cpp, 100k vLLM, 100k SGLang
    python benchmarks/simulate_speed.py --requests 200000 --vllm-requests 20000
    python benchmarks/simulate_speed.py --requests 0     # vLLM and SGLang only, same process
    python benchmarks/simulate_speed.py --requests 0 --repeat 3 --kv-tokens 3040  # a full KV
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace

from ttft.simulate.fleet import simulate
from ttft.simulate.model import CostModel, EngineKind, EngineSettings
from ttft.simulate.requests import SimRequest, poisson_times, synthetic

COST = CostModel(
    step_base_s=0.01,
    prefill_token_s=0.0025,
    decode_seq_s=0.002,
    attention_s=0.0002,
    cached_token_s=0.00001,
    overhead_s=0.02,
)
PROMPT, OUTPUT, SLOTS = 300, 48, 8


@dataclass
class Timing:
    kind: str
    requests: int
    replicas: int
    workload_s: float
    simulate_s: float
    steps: int
    ttft_p50_s: float

    @property
    def per_s(self) -> float:
        return self.requests / self.simulate_s


def _workload(count: int, replicas: int, load: float) -> list[SimRequest]:
    # a replica's time per request: its whole prompt (prefill runs one slot after another)
    # plus its share of OUTPUT decode steps of a full batch
    decode = COST.step_s(0, SLOTS, SLOTS * PROMPT / 1000) / SLOTS
    rate = load * replicas / (PROMPT * COST.prefill_token_s + OUTPUT * decode)
    mix = synthetic(
        count,
        prompt_tokens=PROMPT,
        output_tokens=OUTPUT,
        shared_prefix_tokens=128,
        prefix_groups=8,
    )
    return poisson_times(mix, rate, seed=1)


def measure(
    kind: EngineKind, count: int, replicas: int, load: float, kv_tokens: int | None = None
) -> Timing:
    t0 = time.perf_counter()
    requests = _workload(count, replicas, load)
    t1 = time.perf_counter()
    settings = EngineSettings(kind=kind, slots=SLOTS, batch_tokens=2048)
    if kv_tokens is not None and kind != "llamacpp":  # vLLM: blocks of 16; SGLang: pages of 1
        page = 16 if kind == "vllm" else 1
        settings = replace(settings, kv_blocks=kv_tokens // page, block_tokens=page)
    result = simulate(requests, COST, settings, replicas=replicas)
    t2 = time.perf_counter()
    ttfts = sorted(o.ttft_s for o in result.outcomes if o.ttft_s is not None)
    return Timing(kind, count, replicas, t1 - t0, t2 - t1, result.steps, ttfts[len(ttfts) // 2])


def show(label: str, t: Timing) -> None:
    print(
        f"{label:<8} {t.kind:<8} {t.requests:>9,} req {t.replicas:>3} replicas  "
        f"workload {t.workload_s:6.1f} s  simulate {t.simulate_s:6.1f} s  "
        f"{t.per_s:>9,.0f} req/s  {t.steps:>11,} steps  TTFT p50 {t.ttft_p50_s * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--vllm-requests", type=int, default=100_000)
    parser.add_argument("--vllm-replicas", type=int, default=16)
    parser.add_argument("--sglang-requests", type=int, default=100_000)
    parser.add_argument("--sglang-replicas", type=int, default=16)
    parser.add_argument("--load", type=float, default=0.7, help="of the fleet's capacity")
    parser.add_argument(
        "--kv-tokens",
        type=int,
        default=None,
        help="Give the vLLM and SGLang replicas a KV pool of this many tokens each (default: "
        "unbounded), so evictions and preemptions are part of the run.",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Measure the vLLM and SGLang targets this many times, taking turns, and keep each "
        "one's fastest (a neighbour's load on a shared machine slows single runs).",
    )
    args = parser.parse_args()
    runs = []
    if args.requests > 0:
        runs.append(("llamacpp", args.requests, args.replicas))
    if args.vllm_requests > 0:
        runs.append(("vllm", args.vllm_requests, args.vllm_replicas))
    if args.sglang_requests > 0:
        runs.append(("sglang", args.sglang_requests, args.sglang_replicas))
    per_s: dict[str, float] = {}
    for kind, count, replicas in runs:
        small = max(1, count // 10), max(1, replicas // 10)
        anchor = measure(kind, *small, args.load, args.kv_tokens)  # type: ignore[arg-type]
        big = measure(kind, count, replicas, args.load, args.kv_tokens)  # type: ignore[arg-type]
        show("anchor", anchor)
        show("target", big)
        print(
            f"{kind}: {big.requests:,} requests in {big.simulate_s:.1f} s "
            f"({big.simulate_s / 60:.2f} of the minute); "
            f"requests/s against the anchor: {big.per_s / anchor.per_s:.2f}x"
        )
        per_s[kind] = big.per_s
    pair = [(kind, count, replicas) for kind, count, replicas in runs if kind != "llamacpp"]
    for _ in range(args.repeat - 1):
        for kind, count, replicas in pair:
            again = measure(kind, count, replicas, args.load, args.kv_tokens)  # type: ignore[arg-type]
            show("again", again)
            per_s[kind] = max(per_s[kind], again.per_s)
    if "vllm" in per_s and "sglang" in per_s:
        print(
            f"SGLang requests/s against vLLM's, same run (fastest of {args.repeat}): "
            f"{per_s['sglang']:,.0f} / {per_s['vllm']:,.0f} = "
            f"{per_s['sglang'] / per_s['vllm']:.2f}x"
        )


if __name__ == "__main__":
    main()
