"""`ttft doctor` and `ttft bench` against a real llama-server started with ``--api-key``.

Every call they make (the chat stream, /v1/models, /props, /tokenize, /apply-template, /metrics)
must carry the key: a control call sent without it would make doctor's steps incomplete or bench's
prompt calibration fall back. Without the key both commands stop with a clear message. The gateway
reaches the same server with the upstream's configured key (its /props, /apply-template, chat).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded

pytestmark = pytest.mark.e2e

KEY = "ttft-e2e-secret"


@pytest.fixture(scope="module")
def keyed_engine(engine_threads: int) -> Iterator[RunningEngine]:
    with launch_embedded(
        ctx_size=4096, parallel=2, threads=engine_threads, extra_args=("--api-key", KEY)
    ) as engine:
        yield engine


def ttft(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from ttft.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_engine_really_refuses_requests_without_the_key(keyed_engine: RunningEngine) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(keyed_engine.base_url + "/v1/models", timeout=10)
    assert refused.value.code == 401


def test_doctor_measures_every_step_with_the_key(keyed_engine: RunningEngine) -> None:
    done = ttft(
        "doctor", "--url", keyed_engine.base_url, "--api-key", KEY,
        "--concurrency", "1,2", "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    statuses = {s["name"]: s["status"] for s in report["steps"]}
    assert statuses["transport"] == statuses["prefix_cache"] == statuses["capacity"] == "ok"
    assert report["failed_steps"] == [] and report["unfinished_steps"] == [], report
    # /props was read with the key: the server's slot count is part of the evidence
    evidence = [e for s in report["steps"] for e in s["evidence"] if e["source"] == "/props"]
    assert evidence and evidence[0]["value"] == 2


def test_bench_calibrates_and_measures_with_the_key(
    keyed_engine: RunningEngine, tmp_path: Path
) -> None:
    done = ttft(
        "bench", "--url", keyed_engine.base_url, "--api-key", KEY, "--buckets", "64",
        "--concurrency", "1", "--requests", "3", "--warmup", "1", "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    cells = summary["cells"]
    assert cells and all(c["ok"] == c["n"] and not c["errors"] for c in cells), cells
    assert sum(c["ok"] for c in cells) >= 3
    lines = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    measured = [x["record"] for x in lines if x["type"] == "request"]
    # each prompt was counted in the server's own template with its tokenizer: exact length,
    # whatever seed this run drew
    assert measured and all(r["prompt_tokens"] == 64 for r in measured), measured[:2]
    # /metrics was scraped with the key: the cells carry the engine's counters
    scraped = [x["server"] for x in lines if x["type"] == "metrics" and x["phase"] == "warm"]
    assert scraped and all(s and s["engine"] == "llamacpp" for s in scraped), scraped


def test_the_gateway_reaches_a_keyed_upstream_with_its_key(engine_threads: int) -> None:
    import httpx

    from ttft.gateway.config import GatewayConfig, from_mapping
    from ttft.gateway.serve import GatewayThread

    # --swa-full: without it Gemma 3's server cannot pre-render (see test_gateway_e2e)
    extra = ("--api-key", KEY, "--swa-full")
    with launch_embedded(ctx_size=2048, parallel=1, threads=engine_threads, extra_args=extra) as e:

        def config(upstream: dict[str, str]) -> GatewayConfig:
            model = {"name": "gemma", "upstreams": [upstream]}
            return from_mapping({"listen": "127.0.0.1:0", "model": [model]})

        with GatewayThread(config({"url": e.base_url})) as gw:
            # without the key: refused, said once, not retried for ever as "pending"
            deadline = time.monotonic() + 30
            while (state := gw.call(lambda g: g.models["gemma"].prerender_state)).startswith("pe"):
                assert time.monotonic() < deadline, state
                time.sleep(0.2)
        assert state == f"disabled ({e.base_url} refused GET /props (HTTP 401))", state
        with GatewayThread(config({"url": e.base_url, "api_key": KEY})) as gw:
            # pre-rendering is on only if /props and /apply-template answered the gateway's calls
            assert gw.call(lambda g: g.models["gemma"].prerender_state) == "on"
            messages = [{"role": "user", "content": "Hi"}]
            body = {"model": "gemma", "messages": messages, "max_tokens": 4}
            answer = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-ttft-prerendered"] == "1"
    assert answer.json()["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.parametrize("command", ["doctor", "bench"])
def test_without_the_key_the_command_says_to_pass_it(
    keyed_engine: RunningEngine, command: str, tmp_path: Path
) -> None:
    done = ttft(command, "--url", keyed_engine.base_url, "--out", str(tmp_path), timeout=120)
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
    assert "--api-key" in done.stderr
    assert "Traceback" not in done.stderr


def test_verify_quality_compares_two_keyed_servers_with_the_key(
    keyed_engine: RunningEngine, engine_threads: int
) -> None:
    """verify takes --api-key like bench and doctor: both sides answer only with it (their
    /props, /tokenize and /completion), and without it the run stops with the refusal."""
    extra = ("--api-key", KEY)
    with launch_embedded(ctx_size=1024, parallel=1, threads=engine_threads, extra_args=extra) as e:
        args = ["verify", "quality", "--baseline", keyed_engine.base_url,
                "--candidate", e.base_url, "--lengths", "128", "--samples", "1",
                "--tokens", "4", "--format", "json"]  # fmt: skip
        done = ttft(*args, "--api-key", KEY)
        refused = ttft(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["verdict"] == "pass"  # the same model and settings on both sides
    assert refused.returncode != 0 and "401" in refused.stderr, refused.stderr[-2000:]
