"""The fix loop on real parts: doctor finds the faults of a misconfigured service and writes a
plan; ``tune ab --plan`` applies it cheapest first and proves the gain; a step ttft cannot apply
pauses with the command that resumes it, and resuming measures nothing twice.

The service is ``ttft.testing.seed_service`` (the embedded llama-server with one slot, a real
nginx that buffers and gzips the stream, a timestamp-first request log), shorter than the
benchmark's (``benchmarks/seed_story.py``). Assertions are relations (confidence intervals),
never absolute times. Every process the tests start carries a marker in its environment, so
"nothing remains" is checked on exactly those.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_testkit import wait_gone

from ttft.core.changes import Change
from ttft.core.plan import Plan, PlanStep, ServiceSpec, load_plan, plan_to_toml
from ttft.engines.llamacpp.embedded import launch_embedded
from ttft.engines.process import free_loopback_port
from ttft.testing.seed_service import seed_service

pytestmark = [pytest.mark.e2e, pytest.mark.nginx]

MARKER = "TTFT_FIX_LOOP_E2E"


PROCESSES = (b"llama-server", b"nginx")


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, value)
    yield value
    assert wait_gone(MARKER, value, PROCESSES) == [], "an engine or proxy outlived the test"


def ttft(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttft", *args],
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
        env=os.environ.copy(),
    )


def test_doctor_plans_the_proxy_transform_and_engine_fixes_and_tune_ab_proves_them(
    tmp_path: Path, marker: str
) -> None:
    plan_path = tmp_path / "plan.toml"
    with seed_service(tmp_path / "service", requests=16, system_words=300) as service:
        doctor = ttft("doctor", "--url", service.url, "--direct-url", service.direct_url,
                      "--nginx-conf", str(service.nginx_conf), "--engine-cmd", service.launch,
                      "--requests-log", str(service.requests_log), "--concurrency", "1,4",
                      "--budget", "8", "--plan", str(plan_path))  # fmt: skip
    assert plan_path.exists(), doctor.stderr[-3000:]
    plan = load_plan(plan_path)
    kinds = {kind for step in plan.steps for kind in step.change.kinds}
    assert {"engine", "proxy", "request"} <= kinds, plan_to_toml(plan) + doctor.stdout[-3000:]
    tiers = [step.change.cost_key() for step in plan.steps]
    assert tiers == sorted(tiers), "the plan is not cheapest first"
    # Shorter runs than the benchmark: the same loop, a few minutes.
    text = plan_path.read_text().replace("max_tokens = 64", "max_tokens = 48")
    text = text.replace("requests = 16", "requests = 8").replace("repeats = 2", "repeats = 1")
    plan_path.write_text(text)
    ab = ttft("tune", "ab", "--plan", str(plan_path), "--out", str(tmp_path / "ab"))
    assert ab.returncode == 0, ab.stderr[-3000:]
    summary = json.loads((tmp_path / "ab" / "summary.json").read_text())
    table = summary["table"]
    assert [row["step"] for row in table] == [f"step {k}" for k in range(len(plan.steps) + 1)]
    base, final = table[0], table[-1]
    base_low = float(base["p50_ci_ms"].split("-")[0])
    final_high = float(final["p50_ci_ms"].split("-")[1])
    assert final_high < base_low, f"final step not faster beyond the CIs: {table}"
    assert summary["total"]["p50_pct"] < 0
    assert all(row["verdict"] in ("kept", "no effect", "regressed") for row in table[1:])
    assert "the article" in ab.stdout


def test_a_step_ttft_cannot_apply_pauses_and_the_printed_command_resumes_it(
    tmp_path: Path, marker: str, engine_threads: int
) -> None:
    """The engine is someone else's (no launch command in the plan): the flag step pauses after
    the baseline; the person restarts the engine with the flag; the resume command measures the
    step and leaves the baseline's trial untouched."""
    port = free_loopback_port()
    plan_path = tmp_path / "plan.toml"
    service = ServiceSpec(url=f"http://127.0.0.1:{port}", engine="llamacpp", concurrency=2,
                          max_tokens=8, requests=4, repeats=1)  # fmt: skip
    step = PlanStep(Change("2 slots", {"-np": "2"}, engine="llamacpp"))
    plan_path.write_text(plan_to_toml(Plan(service, (step,))))
    out = tmp_path / "ab"
    common = {"ctx_size": 2048, "threads": engine_threads, "port": port}
    with launch_embedded(parallel=1, **common):
        paused = ttft("tune", "ab", "--plan", str(plan_path), "--out", str(out))
    assert paused.returncode == 3, paused.stderr[-2000:]
    assert "set -np 2" in paused.stdout
    resume = next(line.strip() for line in paused.stdout.splitlines() if "--resume" in line)
    baseline_trials = sorted(out.glob("trials/*/trial.json"))
    assert len(baseline_trials) == 1
    stamp = baseline_trials[0].stat().st_mtime_ns
    with launch_embedded(parallel=2, **common):
        argv = shlex.split(resume)
        assert argv[0] == "ttft"
        done = ttft(*argv[1:])
    assert done.returncode == 0, done.stderr[-2000:]
    assert baseline_trials[0].stat().st_mtime_ns == stamp, "the baseline was measured again"
    summary = json.loads((out / "summary.json").read_text())
    assert [row["applied_by"] for row in summary["table"]] == ["", "you"]
    assert len(list(out.glob("trials/*/trial.json"))) == 2
