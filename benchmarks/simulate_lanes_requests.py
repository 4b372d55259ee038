"""The lanes point of ``simulate_accuracy.py`` request by request: each request's measured TTFT
through a real ``ttft gateway`` with lanes (one embedded llama-server, 2 slots, reserve 1)
beside its simulated TTFT and llama-server's own timings for it.

Where the percentiles disagree, this tells a model error (the same requests off in quiet
moments) from a machine whose speed moved during the run (a 96-token prompt's ``prompt_ms``
several times the calibrated cost, for that request only).

    python benchmarks/simulate_lanes_requests.py --calibration cal.json --requests 24 --load 0.5
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from simulate_accuracy import mixed_trace, solo_s
from ttft.engines.control import ServerTokenizer
from ttft.simulate.fleet import simulate
from ttft.simulate.gateway_sim import Lanes
from ttft.simulate.live_fleet import embedded_fleet, lane_tokens
from ttft.simulate.model import Calibration
from ttft.simulate.validate import measure, measured_ttft_s
from ttft.simulate.workloads import WorkloadSource
from ttft.workload.trace import TraceSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calibration", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    cal = Calibration.load(args.calibration)
    solo = (solo_s(cal, 832, 4) + 2 * solo_s(cal, 96, 4)) / 3
    lanes = Lanes(long_prompt_tokens=400, long_reserve=1)
    with tempfile.TemporaryDirectory() as tmp:
        trace = mixed_trace(Path(tmp) / "mixed.jsonl", args.requests, round(args.load / solo, 3))
        source = WorkloadSource(TraceSpec(trace, "mooncake", block_size=64))
        requests = source.requests(0)
        with embedded_fleet(
            1, slots=2, policy="least-loaded", max_in_flight=2, threads=args.threads, lanes=lanes
        ) as fleet:
            items, arrival = source.real(requests, ServerTokenizer(fleet.replica))
            estimates = lane_tokens(items)
            records = measure(fleet.gateway, items, arrival)
    mirrored = [replace(r, lane_tokens=n) for r, n in zip(requests, estimates, strict=True)]
    result = simulate(
        mirrored, cal.cost, replace(cal.engine, slots=2), lanes=lanes, max_in_flight=2
    )
    simulated = {o.request.index: o.ttft_s for o in result.outcomes}
    print("index  arrival_s  tokens  measured_s  simulated_s  prompt_ms  ms/token")
    for request, record in zip(requests, records, strict=True):
        measured = measured_ttft_s(record)
        timings = record.server_timings or {}
        prompt_ms = timings.get("prompt_ms", float("nan"))
        per_token = timings.get("prompt_per_token_ms", float("nan"))
        print(
            f"{request.index:5d}  {request.arrival_s:9.2f}  {request.prompt_tokens:6d}  "
            f"{measured if measured is not None else float('nan'):10.2f}  "
            f"{simulated[request.index] or float('nan'):11.2f}  {prompt_ms:9.0f}  {per_token:8.1f}"
        )
    print(f"calibrated prompt cost {cal.cost.prefill_token_s * 1e3:.2f} ms/token")


if __name__ == "__main__":
    main()
