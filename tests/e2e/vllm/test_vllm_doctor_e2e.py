"""`ttft doctor` on a real vLLM, one planted fault per server, each found with the vLLM flag as
its machine-applicable change; a healthy vLLM gets a clean bill of health."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vllm_testkit import doctor, evidence, rules, start

from ttft.engines.vllm.local import RunningVllm, VllmConfig
from ttft.workload.text_source import sentence_text

ANSWER_TOKENS = 32

pytestmark = pytest.mark.vllm


def shared_prompt_log(
    path: Path, n: int = 12, *, timestamp_first: bool = False, answer: int = ANSWER_TOKENS
) -> Path:
    """Chats sharing a ~1,000-token system prompt, asking for ``answer``-token answers."""
    policy = sentence_text("acme-policy", 700)
    lines = []
    for i in range(n):
        system = f"You are the support assistant of ACME. {policy}"
        if timestamp_first:
            system = f"Current time: 2026-03-15 14:{10 + i}:{(7 * i) % 60:02d}. {system}"
        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Question {i}: {sentence_text(f'q{i}', 12)}"},
            ],
            "max_tokens": answer,
        }
        lines.append(json.dumps(body))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_prefix_cache_off_and_one_sequence_are_both_found(tmp_path: Path) -> None:
    """The issue's misconfigured service: no prefix caching, one running sequence."""
    log = shared_prompt_log(tmp_path / "log.jsonl")
    plan = tmp_path / "plan.toml"
    with start(VllmConfig(prefix_caching=False, max_num_seqs=1), tmp_path) as engine:
        cmd = " ".join(["vllm", "serve", *engine.argv[2:]])
        report = doctor(
            "--url", engine.base_url, "--requests-log", str(log),
            "--concurrency", "1,4", "--engine-cmd", cmd, "--plan", str(plan),
        )  # fmt: skip
    by_rule = {f["rule"]: f for f in report["findings"]}
    assert "cache/prefix-cache-off" in by_rule and "capacity/queueing" in by_rule, rules(report)
    cache = by_rule["cache/prefix-cache-off"]
    assert cache["change"]["flags"] == {"--enable-prefix-caching": ""}
    queue = by_rule["capacity/queueing"]
    assert queue["change"]["flags"] == {"--max-num-seqs": "4"}
    capacity = next(s for s in report["steps"] if s["name"] == "capacity")
    seen = {e["name"]: e for e in capacity["evidence"]}
    # probed with the log's own answer length: a decode holds the one sequence
    assert seen["answer tokens per probe request"]["value"] == ANSWER_TOKENS
    assert "c=4" in seen["waiting before prefill (p50)"]["value"]
    text = plan.read_text()
    assert '"--enable-prefix-caching" = ""' in text and '"--max-num-seqs" = "4"' in text
    # --enforce-eager is the CPU backend's norm: the running server is on a CPU, so the plan
    # carries no step to drop it
    steps = text[text.index("\n[[step]]") :]  # the launch line above them keeps the flag
    assert "vllm/cuda-graphs" not in by_rule and "enforce-eager" not in steps, rules(report)


def test_kv_cache_too_small_shows_as_preemptions(tmp_path: Path) -> None:
    """A KV cache of 16 blocks (of 128 tokens on the CPU backend): one 1,536-token request fits;
    eight requests of doctor's 256-token probe prompt, admitted with three blocks each, run out of
    blocks when their answers grow past the third."""
    log = shared_prompt_log(tmp_path / "log.jsonl", n=4, answer=160)
    with start(VllmConfig(max_model_len=1536, kv_blocks=16), tmp_path) as engine:
        report = doctor(
            "--url", engine.base_url, "--requests-log", str(log), "--concurrency", "1,8"
        )  # fmt: skip
    by_rule = {f["rule"]: f for f in report["findings"]}
    assert "capacity/preemption" in by_rule, rules(report)
    finding = by_rule["capacity/preemption"]
    assert "--max-num-seqs" in finding["action"]
    assert finding["change"]["flags"] == {"--max-num-seqs": "1"}
    # requests that wait for KV blocks are not blamed on the running-sequence cap
    assert "capacity/queueing" not in by_rule
    kv = evidence(finding)
    assert any("preemption" in k for k in kv), kv


def test_timestamp_first_log_is_found(vllm_server: RunningVllm, tmp_path: Path) -> None:
    log = shared_prompt_log(tmp_path / "log.jsonl", n=6, timestamp_first=True)
    report = doctor(
        "--url", vllm_server.base_url, "--requests-log", str(log), "--concurrency", "1"
    )  # fmt: skip
    assert "cache/dynamic-prefix" in rules(report), rules(report)
    finding = next(f for f in report["findings"] if f["rule"] == "cache/dynamic-prefix")
    assert finding["change"]["transforms"] == ["move-dynamic"]


def test_healthy_vllm_gets_a_clean_bill(vllm_server: RunningVllm, tmp_path: Path) -> None:
    log = shared_prompt_log(tmp_path / "log.jsonl")
    report = doctor(
        "--url", vllm_server.base_url, "--requests-log", str(log), "--concurrency", "1,4"
    )  # fmt: skip
    assert report["findings"] == [], rules(report)
    assert report["healthy"] is True
    timeline = next(s for s in report["steps"] if s["name"] == "timeline")
    sources = {e["name"]: e["source"] for e in timeline["evidence"]}
    # the server timeline is split with vLLM's own histograms
    assert sources["queue"].startswith("engine histogram vllm:request_queue_time_seconds")
    assert sources["prefill"].startswith("engine histogram vllm:request_prefill_time_seconds")
