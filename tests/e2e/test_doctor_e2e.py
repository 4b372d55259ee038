"""`ttft doctor` on the real embedded llama-server, one planted fault at a time.

Each test plants one fault (a buffering, gzipping nginx; a timestamp at the top of the system
prompt; one slot under load; long prompts mixed with short ones) and checks that doctor's top
finding names that cause with its evidence; a healthy setup must give no finding at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ttft.doctor.step_server import CAPACITY_PROMPT_TOKENS
from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.testing.nginx import run_nginx
from ttft.workload.text_source import sentence_text

pytestmark = [pytest.mark.e2e, pytest.mark.nginx]

DATA = Path(__file__).parent.parent / "data" / "doctor"


def doctor(*args: str, timeout: float = 420) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ttft.cli.main import main; main()",
            "doctor",
            "--format",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def rules(report: dict[str, Any]) -> list[str]:
    return [f["rule"] for f in report["findings"]]


@pytest.fixture(scope="module")
def one_slot_engine() -> Iterator[RunningEngine]:
    with launch_embedded(ctx_size=2048, parallel=1) as engine:
        yield engine


def test_gzip_and_ignored_accel_header_in_nginx_is_the_top_finding(
    embedded_server: RunningEngine,
) -> None:
    conf = (DATA / "nginx_buffering_gzip.conf").read_text()
    with run_nginx(conf, embedded_server.base_url) as proxy:
        report = doctor("--url", proxy, "--concurrency", "1")
    top = report["findings"][0]
    assert top["rule"] in ("transport/gzip-stream", "transport/buffered-stream")
    assert "gzip" in top["action"]
    evidence = {e["name"]: e["value"] for e in top["evidence"]}
    assert evidence["median gap between chunks (gzip)"] < 1.0  # bunched
    assert evidence["median gap between chunks (identity)"] > 2.0  # as generated
    assert evidence["client minus server (gzip)"] > 150


def _log(path: Path, bodies: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return path


def test_timestamp_first_in_the_system_prompt_is_the_top_finding(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    policy = sentence_text("acme-policy", 300)
    bodies = [
        {
            "messages": [
                {
                    "role": "system",
                    "content": f"Current time: 2026-03-15 14:{22 + i}:{(7 * i) % 60:02d}. "
                    f"You are the support assistant of ACME. {policy}",
                },
                {"role": "user", "content": f"Question {i}: {sentence_text(f'q{i}', 12)}"},
            ]
        }
        for i in range(6)
    ]
    log = _log(tmp_path / "requests.jsonl", bodies)
    # Twice on the same engine: the second run must not find the first one's replays in the
    # prefix cache (it did, and reported nothing at all).
    for _ in range(2):
        report = doctor(
            "--url", embedded_server.base_url, "--requests-log", str(log), "--concurrency", "1"
        )
        top = report["findings"][0]
        assert top["rule"] == "cache/dynamic-prefix", rules(report)
        assert "timestamp" in top["cause"] or "date" in top["cause"]
        evidence = {e["name"]: e["value"] for e in top["evidence"]}
        moved = evidence["cached prompt tokens moved (p50)"]
        cached = evidence["cached prompt tokens as they are (p50)"]
        assert moved > 250 and cached < 0.2 * moved
        assert top["change"]["transforms"] == ["move-dynamic"]


def unloaded_ttft_ms(base_url: str, tokens: int, n: int = 3) -> float:
    """The slowest of ``n`` lone requests like doctor's capacity probe (``tokens`` of fresh
    prose, one answer token), as this machine serves them right now."""
    worst = 0.0
    for i in range(n):
        text = sentence_text(f"unloaded/{i}", int(tokens / 1.3))
        body = {
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 1,
            "temperature": 0,
            "stream": True,
        }
        started = time.perf_counter()
        with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=120) as r:
            for line in r.iter_lines():
                if '"content":"' in line.replace(" ", "") or line.startswith("data: [DONE]"):
                    break
        worst = max(worst, (time.perf_counter() - started) * 1000)
    return worst


def test_one_slot_under_concurrency_8_is_the_top_finding(one_slot_engine: RunningEngine) -> None:
    # The SLO is scaled to this machine: three times the slowest lone request holds unloaded
    # (doctor's c=1), and one slot's staircase of eight (~8x) breaks it, on a fast machine or a
    # slow one.
    slo_ms = 3 * unloaded_ttft_ms(one_slot_engine.base_url, CAPACITY_PROMPT_TOKENS)
    report = doctor(
        "--url",
        one_slot_engine.base_url,
        "--concurrency",
        "1,8",
        "--slo",
        f"ttft:p99<{slo_ms:.0f}ms",
    )
    top = report["findings"][0]
    assert top["rule"] == "capacity/queueing", rules(report)
    # The staircase at c=8 takes the tail past the SLO that holds unloaded.
    assert "capacity/slo-limit" in rules(report), (slo_ms, rules(report))
    assert "-np 8" in top["action"]
    evidence = {e["name"]: e["value"] for e in top["evidence"]}
    assert evidence["server slots"] == 1


def test_long_prompts_mixed_with_short_ones_show_head_of_line_blocking(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    bodies = [
        {"messages": [{"role": "user", "content": sentence_text(f"s{i}", 15)}]} for i in range(4)
    ]
    bodies.insert(2, {"messages": [{"role": "user", "content": sentence_text("long", 1100)}]})
    log = _log(tmp_path / "mixed.jsonl", bodies)
    # Twice on the same engine: the second run sent the same long prompts, took them from the
    # prefix cache, and found no blocking (53 ms behind against 36 alone) until runs were marked.
    for _ in range(2):
        report = doctor(
            "--url", embedded_server.base_url, "--requests-log", str(log), "--concurrency", "1"
        )
        assert "scheduling/head-of-line" in rules(report)
        top = report["findings"][0]
        assert top["rule"] == "scheduling/head-of-line", rules(report)
        evidence = {e["name"]: e["value"] for e in top["evidence"]}
        assert (
            evidence["short request TTFT behind a long prompt (p50)"]
            > 3 * evidence["short request TTFT alone (p50)"]
        )


def test_prefix_caching_switched_off_on_the_engine_is_found() -> None:
    with launch_embedded(ctx_size=4096, parallel=2, extra_args=("--no-cache-prompt",)) as engine:
        report = doctor("--url", engine.base_url, "--concurrency", "1")
    top = report["findings"][0]
    assert top["rule"] == "cache/prefix-cache-off", rules(report)
    assert "--no-cache-prompt" in top["action"]
    evidence = {e["name"]: e["value"] for e in top["evidence"]}
    assert evidence["2nd request's cached prompt tokens"] < 16


def test_healthy_setup_gets_a_clean_bill_of_health(embedded_server: RunningEngine) -> None:
    report = doctor("--url", embedded_server.base_url, "--concurrency", "1,4")
    assert report["findings"] == [], rules(report)
    assert report["healthy"] is True
    statuses = {s["name"]: s["status"] for s in report["steps"]}
    assert statuses["transport"] == statuses["prefix_cache"] == statuses["capacity"] == "ok"


def test_doctor_on_the_embedded_default_finishes_within_its_default_budget(
    tmp_path: Path,
) -> None:
    """The README's main job: no options at all, the default 5-minute budget."""
    import time

    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ttft.cli.main import main; main()",
            "doctor",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert elapsed < 300
    assert "ttft doctor" in done.stdout and "Steps" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == "ttft.doctor/1"
    assert all(s["status"] != "failed" for s in report["steps"])
