"""The fix loop on a real vLLM: the misconfigured service found, planned and fixed by ttft.

    python -m ttft.engines.vllm.install       # once: vLLM's CPU build in its own venv
    python benchmarks/seed_story_vllm.py [--out results/seed-story-vllm] [--requests 16]

The service (``ttft.testing.seed_vllm``): vLLM's CPU build with ``--no-enable-prefix-caching
--max-num-seqs 1`` behind a real nginx whose site file buffers and gzips the token stream, and a
request log whose system prompt starts with a timestamp. The loop is the one a user runs, with
ttft's own CLI: ``ttft doctor ... --plan plan.toml``, then ``ttft tune ab --plan plan.toml``
(each arm starts its own vLLM and nginx with the plan's changes). Every change comes from ttft's
plan. Exits 1 when the p50 cut falls short of 70% (issue 27's bar).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from ttft.testing.seed_vllm import seed_vllm_service

CUT_PCT = 70.0


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(argv[2:5]) + " ...", flush=True)
    return subprocess.run(argv, text=True, capture_output=True, check=False)


def sized(plan: Path, requests: int, repeats: int) -> None:
    """The run sizes in the plan's [service], edited as a person would."""
    lines = []
    for line in plan.read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        if key in ("requests", "repeats"):
            line = f"{key} = {requests if key == 'requests' else repeats}"
        lines.append(line)
    plan.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/seed-story-vllm"))
    parser.add_argument("--requests", type=int, default=16, help="measured requests per run")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--budget", type=float, default=4.0, help="doctor's budget, minutes")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    plan = out / "plan.toml"
    started = time.monotonic()
    with seed_vllm_service(out / "service") as service:
        print(f"service: {service.url} (nginx) -> {service.direct_url}: {service.launch}")
        doctor = run([
            sys.executable, "-m", "ttft", "doctor", "--url", service.url,
            "--direct-url", service.direct_url, "--nginx-conf", str(service.nginx_conf),
            "--engine-cmd", service.launch, "--requests-log", str(service.requests_log),
            "--concurrency", "1,4", "--budget", str(args.budget), "--plan", str(plan),
        ])  # fmt: skip
        print(doctor.stdout[-4000:])
    if not plan.exists():
        print(doctor.stderr[-3000:], file=sys.stderr)
        return 2
    print(f"doctor took {time.monotonic() - started:.0f} s; plan:\n{plan.read_text()}")
    sized(plan, args.requests, args.repeats)
    ab = run([sys.executable, "-m", "ttft", "tune", "ab", "--plan", str(plan),
              "--out", str(out / "ab")])  # fmt: skip
    print(ab.stdout)
    if ab.returncode != 0:
        print(ab.stderr[-3000:], file=sys.stderr)
        return 2
    total = json.loads((out / "ab" / "summary.json").read_text())["total"]
    if total is None:
        print("FAIL: the baseline or every step failed; see the table's failed column")
        return 1
    print(
        f"p50 {total['baseline_p50_ms']:.0f} -> {total['final_p50_ms']:.0f} ms "
        f"({total['p50_pct']:+.1f}%), p95 {total['baseline_p95_ms']:.0f} -> "
        f"{total['final_p95_ms']:.0f} ms ({total['p95_pct']:+.1f}%)"
    )
    print(f"whole story took {time.monotonic() - started:.0f} s")
    ok = -total["p50_pct"] >= CUT_PCT
    print(f"PASS: a cut of at least {CUT_PCT:.0f}%" if ok else f"FAIL: less than {CUT_PCT:.0f}%")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
