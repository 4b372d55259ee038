"""``ttft gateway`` in front of the real vLLM (the shared server of this folder).

What the gateway must learn from the engine itself: its model names (``/v1/models``), where its
in-flight cap comes from (vLLM exposes no ``max_num_seqs`` over HTTP; the launch command of the
loopback process can name it), and the chat template of the model folder it serves, confirmed
by vLLM's own ``/tokenize``. Streams must come through as they are made, not at the end.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from vllm_testkit import start

from ttft.cli.gateway_options import GatewayCliOptions
from ttft.engines.vllm.local import RunningVllm, VllmConfig
from ttft.gateway.serve import GatewayThread

pytestmark = pytest.mark.vllm


@contextmanager
def gateway(engine: RunningVllm, **flags: Any) -> Iterator[GatewayThread]:
    """The gateway as ``ttft gateway --upstream URL --engine vllm [flags]`` builds it."""
    options = GatewayCliOptions(
        config_path=None,
        upstreams=(engine.base_url,),
        model=None,
        engine="vllm",
        chat_template="auto",
        tokenizer=None,
        no_prerender=False,
        hygiene=False,
        listen="127.0.0.1:0",
        api_keys=(),
        api_key_env=None,
        max_in_flight=None,
        queue_size=None,
        long_prompt_tokens=None,
        no_lanes=False,
        queue_timeout=None,
    )
    with GatewayThread(dataclasses.replace(options, **flags).config()) as gw:
        yield gw


def _stream(url: str, body: dict[str, Any]) -> tuple[httpx.Headers, list[tuple[int, str]], int]:
    """Each content piece with the time it was read (ns after sending), and the end time."""
    pieces: list[tuple[int, str]] = []
    sent = time.perf_counter_ns()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            for choice in event.get("choices", []):
                text = choice.get("delta", {}).get("content")
                if text:
                    pieces.append((time.perf_counter_ns() - sent, text))
        return r.headers, pieces, time.perf_counter_ns() - sent


def test_gateway_in_front_of_vllm_learns_names_limit_source_and_template(
    vllm_server: RunningVllm,
) -> None:
    engine_models = httpx.get(vllm_server.base_url + "/v1/models", timeout=30).json()
    with gateway(vllm_server) as gw:
        listed = httpx.get(gw.url + "/v1/models", timeout=30).json()
        health = httpx.get(gw.url + "/health", timeout=30).json()
    names = [m["id"] for m in engine_models["data"]]
    assert names and [m["id"] for m in listed["data"]] == names  # not "default"
    assert listed["data"][0]["max_model_len"] == engine_models["data"][0]["max_model_len"]
    (model,) = health["models"].values()
    # the template of the served model folder, confirmed by vLLM's /tokenize
    assert model["prerender"] == "on", model
    (upstream,) = model["upstreams"]
    # The shared server runs with its build's default max-num-seqs, which vLLM says nowhere:
    # the gateway read the server's own command line (its pid) and kept its documented default.
    pid = vllm_server.process.pid
    assert upstream["max_in_flight"] == 64
    assert upstream["limit_source"].startswith("the gateway's default for vllm: ")
    assert f"the launch command of pid {pid} has no --max-num-seqs" in upstream["limit_source"]
    with gateway(vllm_server, max_in_flight=3) as gw:
        (model,) = httpx.get(gw.url + "/health", timeout=30).json()["models"].values()
    assert model["upstreams"][0]["max_in_flight"] == 3
    assert model["upstreams"][0]["limit_source"].startswith("configured")


def test_a_prerendered_stream_through_the_gateway_is_vllms_answer_token_by_token(
    vllm_server: RunningVllm,
) -> None:
    name = vllm_server.model_name
    body = {
        "model": name,
        "messages": [
            {"role": "system", "content": "You answer in one long paragraph."},
            {"role": "user", "content": "Describe a river at dawn."},
        ],
        "stream": True,
        "max_tokens": 96,
        "ignore_eos": True,  # random weights: an early end-of-sequence would cut the stream
        "temperature": 0,
    }
    _, direct, _ = _stream(vllm_server.base_url, body)
    with gateway(vllm_server) as gw:
        _stream(gw.url, body)  # warm: the first request pays for the gateway's connection
        headers, pieces, done_ns = _stream(gw.url, body)
    assert headers["x-ttft-prerendered"] == "1"  # went to /v1/completions with our render
    # the same prompt, so the same greedy answer as vLLM's own chat endpoint
    assert "".join(t for _, t in pieces) == "".join(t for _, t in direct)
    assert len(pieces) >= 48
    first_ns = pieces[0][0]
    # Unbuffered: the first token came long before the end, and the pieces came spread over
    # the decode (a buffering proxy delivers them all in the last read, at the end).
    assert done_ns - first_ns > 0.5 * done_ns, (first_ns, done_ns)
    distinct = len({t // 1_000_000 for t, _ in pieces})
    assert distinct > len(pieces) // 4, distinct


def test_a_vllm_started_with_max_num_seqs_sets_the_gateways_cap(tmp_path: Path) -> None:
    """The cap from the real server's own command line (one more vLLM start, ~30-50 s here:
    the shared server runs with the build's default, which no source names)."""
    with start(VllmConfig(max_num_seqs=2), tmp_path) as engine, gateway(engine) as gw:
        (model,) = httpx.get(gw.url + "/health", timeout=30).json()["models"].values()
    (upstream,) = model["upstreams"]
    pid = engine.process.pid
    assert upstream["max_in_flight"] == 2
    assert upstream["limit_source"] == (
        f"the engine: --max-num-seqs 2 in the launch command of pid {pid}"
    )
