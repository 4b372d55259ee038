"""A peer in the same run: ``ttft bench`` against ``vllm bench serve`` (it ships with vLLM), both
pointed at the scripted SSE server, whose first-token times are known.

The server (a child process) sends the head at once, a role-only chunk after ``--role-ms`` and
the first content token ``--first-token-ms`` after that, then ``--tokens`` more every
``--interval-ms``; it logs ``perf_counter_ns()`` when each request arrived and just before each
write. The truth per request is its first content token's write minus its arrival; each tool's
error is its own TTFT p50 (p99) minus the truth's p50 (p99) over the same run. The role-only
chunk is a trap: a tool that stops its clock at the first chunk, not the first token, reports
about ``--first-token-ms`` too little.

Both tools run closed loops of N streams (``--streams 64,256``): ``ttft bench --concurrency N
--prompt-file`` and ``vllm bench serve --backend openai-chat --max-concurrency N`` with its
random dataset (its tokenizer: the small local model of ``ttft serve --engine vllm``).

    python -m ttft.engines.vllm.install         # once: vLLM's CPU build in its own venv
    python benchmarks/vllm_bench_peer.py
    python benchmarks/vllm_bench_peer.py --streams 64 --requests 512
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttft.engines.vllm.install import engine_env, vllm_binary, vllm_home
from ttft.engines.vllm.local import local_model
from ttft.testing.scripted_server import ServerProcess
from ttft.testing.sse_script import Script


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _truth(server: ServerProcess) -> list[float]:
    logs = server.snapshot(clear=True).logs
    out = []
    for log in logs:
        first = log.first_token_ns
        if first is not None:
            out.append((first - log.received_ns) / 1e6)
    return out


def run_ttft(url: str, streams: int, requests: int, work: Path) -> list[float]:
    prompts = work / "prompts.jsonl"
    line = {"messages": [{"role": "user", "content": "Say something."}], "max_tokens": 16}
    prompts.write_text("\n".join(json.dumps(line) for _ in range(requests)) + "\n")
    out = work / f"ttft-{streams}"
    cmd = [sys.executable, "-m", "ttft", "bench", "--url", url, "--model", "scripted"]
    cmd += ["--prompt-file", str(prompts), "--concurrency", str(streams)]
    cmd += ["--requests", str(requests), "--warmup", "0", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode not in (0, 1):
        raise SystemExit(f"ttft bench failed:\n{done.stderr[-2000:]}")
    ttfts = []
    for raw in (out / "records.jsonl").read_text().splitlines():
        line = json.loads(raw)
        rec = line.get("record") or {}
        if line.get("type") != "request" or rec.get("phase") != "warm":
            continue
        sent, first = rec.get("sent_ns"), rec.get("first_content_ns")
        if sent is not None and first is not None:
            ttfts.append((first - sent) / 1e6)
    return ttfts


def run_vllm(url: str, streams: int, requests: int, work: Path) -> tuple[float, float]:
    result = work / f"vllm-{streams}.json"
    cmd = [str(vllm_binary()), "bench", "serve", "--backend", "openai-chat"]
    cmd += ["--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "scripted"]
    cmd += ["--tokenizer", str(local_model()), "--dataset-name", "random"]
    cmd += ["--random-input-len", "16", "--random-output-len", "16"]
    cmd += ["--num-prompts", str(requests), "--max-concurrency", str(streams)]
    cmd += ["--percentile-metrics", "ttft", "--metric-percentiles", "50,99"]
    cmd += ["--save-result", "--result-dir", str(work), "--result-filename", result.name]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, env=engine_env(), cwd=str(work)
    )
    if done.returncode != 0 or not result.exists():
        raise SystemExit(f"vllm bench serve failed:\n{(done.stderr or done.stdout)[-2000:]}")
    data = json.loads(result.read_text())
    return float(data["median_ttft_ms"]), float(data["p99_ttft_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="64,256")
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--role-ms", type=float, default=5.0)
    parser.add_argument("--first-token-ms", type=float, default=145.0)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    if not vllm_binary().exists():
        raise SystemExit("vLLM is not installed: python -m ttft.engines.vllm.install")
    script = Script(
        role_delay_ms=args.role_ms,
        first_token_delay_ms=args.first_token_ms,
        token_interval_ms=args.interval_ms,
        n_tokens=args.tokens,
        timings=False,
    )
    print(
        f"vLLM home: {vllm_home()}; first content token at {args.role_ms + args.first_token_ms} "
        f"ms after arrival, role-only chunk at {args.role_ms} ms"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(script) as server:
        work = Path(tmp)
        for streams in (int(s) for s in args.streams.split(",")):
            _truth(server)  # clear
            started = time.monotonic()
            ours = run_ttft(server.base_url, streams, args.requests, work)
            truth = _truth(server)
            t50, t99 = _pct(truth, 0.5), _pct(truth, 0.99)
            rows.append(("ttft bench", streams, _pct(ours, 0.5) - t50, _pct(ours, 0.99) - t99))
            took_ttft = time.monotonic() - started
            started = time.monotonic()
            v50, v99 = run_vllm(server.base_url, streams, args.requests, work)
            truth = _truth(server)
            t50, t99 = _pct(truth, 0.5), _pct(truth, 0.99)
            rows.append(("vllm bench serve", streams, v50 - t50, v99 - t99))
            took_vllm = time.monotonic() - started
            print(
                f"  {streams} streams: truth p50 {t50:.1f} ms p99 {t99:.1f} ms "
                f"(ttft bench {took_ttft:.0f} s, vllm bench serve {took_vllm:.0f} s)"
            )
    print(f"\nTTFT error against the known first-token time ({args.requests} requests per run):")
    print(f"{'tool':<18} {'streams':>7} {'p50 error':>12} {'p99 error':>12}")
    for tool, streams, e50, e99 in rows:
        print(f"{tool:<18} {streams:>7} {e50:>+10.1f} ms {e99:>+10.1f} ms")
    errs = [abs(r[2]) for r in rows if r[0] == "ttft bench"]
    print(f"(ttft bench: largest p50 error {max(errs) if errs else 0:.1f} ms)")


if __name__ == "__main__":
    main()
