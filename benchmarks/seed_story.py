"""The article's result, reproduced: a misconfigured service found, planned and fixed by ttft.

    python benchmarks/seed_story.py [--out results/seed-story] [--requests 16] [--repeats 2]
    python benchmarks/seed_story.py --service support-bot --cut 70


Builds the service from real parts (``ttft.testing.seed_service``: the embedded llama-server with
one slot, a real nginx whose site file buffers and gzips the token stream, a request log whose
system prompt starts with a timestamp), then runs the loop a user would, with ttft's own CLI:

1. ``ttft doctor`` on the service, with the proxy's site file, the engine's launch command and the
   request log, writing ``plan.toml``;
2. ``ttft tune ab --plan plan.toml``: baseline, each step cumulatively and alone, interleaved.

Every change comes from ttft's plan; no weight, model or prompt wording changes. It prints the
attribution table and the total p50/p95 cut next to the article's -77% (1830 -> 420 ms), and
exits 1 when the p50 cut falls short of 77% (``--cut``). The anchor is the baseline measured in the
same run. ``--service support-bot`` runs the same loop on a service built unlike the article's
(``ttft.testing.support_bot``: a customer id and a date on the system prompt's second line, gzip
from an included snippet, 3 users on one slot).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from ttft.testing.seed_service import seed_service
from ttft.testing.support_bot import support_bot

ARTICLE_CUT_PCT = 77.0


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(argv[:3]) + " ...", flush=True)
    return subprocess.run(argv, text=True, capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/seed-story"))
    parser.add_argument("--requests", type=int, default=16, help="measured requests per run")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--budget", type=float, default=None, help="doctor's budget, minutes")
    parser.add_argument("--service", choices=("seed", "support-bot"), default="seed")
    parser.add_argument("--cut", type=float, default=ARTICLE_CUT_PCT, help="p50 cut to pass, %%")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    plan = out / "plan.toml"
    started = time.monotonic()
    build = support_bot if args.service == "support-bot" else seed_service
    levels = "1,3" if args.service == "support-bot" else "1,4"
    budget = [] if args.budget is None else ["--budget", str(args.budget)]
    with build(out / "service") as service:
        print(f"service: {service.url} (nginx) -> {service.direct_url} (llama-server -np 1)")
        doctor = run([
            sys.executable, "-m", "ttft", "doctor", "--url", service.url,
            "--direct-url", service.direct_url, "--nginx-conf", str(service.nginx_conf),
            "--engine-cmd", service.launch, "--requests-log", str(service.requests_log),
            "--concurrency", levels, *budget, "--plan", str(plan),
        ])  # fmt: skip
        print(doctor.stdout[-4000:])
        if not plan.exists():
            print(doctor.stderr[-3000:], file=sys.stderr)
            return 2
        print(f"doctor took {time.monotonic() - started:.0f} s; plan:\n{plan.read_text()}")
        _set_sizes(plan, args.requests, args.repeats)
        ab = run([sys.executable, "-m", "ttft", "tune", "ab", "--plan", str(plan),
                  "--out", str(out / "ab")])  # fmt: skip
    print(ab.stdout)
    if ab.returncode != 0:
        print(ab.stderr[-3000:], file=sys.stderr)
        return 2
    summary = json.loads((out / "ab" / "summary.json").read_text())
    total = summary["total"]
    print((out / "ab" / "summary.md").read_text())
    if total is None:
        print("FAIL: the baseline or every step failed; see the table's failed column")
        return 1
    print(
        f"p50 {total['baseline_p50_ms']:.0f} -> {total['final_p50_ms']:.0f} ms "
        f"({total['p50_pct']:+.1f}%), p95 {total['baseline_p95_ms']:.0f} -> "
        f"{total['final_p95_ms']:.0f} ms ({total['p95_pct']:+.1f}%); the article: -77% p50"
    )
    print(f"whole story took {time.monotonic() - started:.0f} s")
    ok = -total["p50_pct"] >= args.cut
    print(f"{'PASS: at least' if ok else 'FAIL: less than'} a {args.cut:.0f}% cut")
    return 0 if ok else 1


def _set_sizes(plan: Path, requests: int, repeats: int) -> None:
    """The benchmark's run sizes in the plan's [service] (a person would edit the same keys)."""
    lines = []
    for line in plan.read_text().splitlines():
        key = line.split("=", 1)[0].strip()
        if key == "requests":
            line = f"requests = {requests}"
        elif key == "repeats":
            line = f"repeats = {repeats}"
        lines.append(line)
    plan.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
