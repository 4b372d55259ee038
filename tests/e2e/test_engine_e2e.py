"""The real embedded llama-server: health, a streaming chat completion, metrics via the adapter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from ttft.engines.llamacpp.embedded import RunningEngine
from ttft.engines.metrics import CommonMetric, metric_deltas
from ttft.engines.prometheus import scrape_url

pytestmark = pytest.mark.e2e


def _post_stream(base_url: str, body: dict[str, object]) -> list[dict[str, object]]:
    req = urllib.request.Request(
        base_url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    events: list[dict[str, object]] = []
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


def test_health_answers_200(embedded_server: RunningEngine) -> None:
    with urllib.request.urlopen(embedded_server.base_url + "/health", timeout=5) as resp:
        assert resp.status == 200


def test_streaming_chat_yields_tokens_and_timings(embedded_server: RunningEngine) -> None:
    """The stream carries a role-only chunk, content chunks, then usage with llama timings."""
    events = _post_stream(
        embedded_server.base_url,
        {
            "messages": [{"role": "user", "content": "Count from one to five."}],
            "max_tokens": 6,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    contents = [
        e["choices"][0]["delta"].get("content")  # type: ignore[index]
        for e in events
        if e.get("choices")
    ]
    assert any(isinstance(c, str) and c for c in contents)
    final = events[-1]
    assert final["usage"]["completion_tokens"] == 6  # type: ignore[index]
    assert final["timings"]["prompt_n"] > 0  # type: ignore[index]


def test_metrics_are_read_and_mapped_through_the_adapter(embedded_server: RunningEngine) -> None:
    """Prompt and generated token counters move by what one request processed."""
    before = scrape_url(embedded_server.metrics_url)
    events = _post_stream(
        embedded_server.base_url,
        {
            "messages": [{"role": "user", "content": "A unique prompt for the metrics test 7319."}],
            "max_tokens": 4,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    after = scrape_url(embedded_server.metrics_url)
    deltas = metric_deltas(embedded_server.adapter, before, after)
    timings = events[-1]["timings"]
    assert deltas[CommonMetric.PROMPT_TOKENS].value == timings["prompt_n"]  # type: ignore[index]
    assert deltas[CommonMetric.GENERATION_TOKENS].value == 4
    assert deltas[CommonMetric.PREFILL_TIME].value > 0
    assert CommonMetric.RUNNING in deltas and CommonMetric.WAITING in deltas


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_killing_the_parent_leaves_no_llama_server(tmp_path: Path) -> None:
    """A process that launched the engine is SIGKILLed: its llama-server goes down with it."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import time
            from ttft.engines.llamacpp.embedded import launch_embedded
            engine = launch_embedded(ctx_size=1024)
            print(engine.process.pid, flush=True)
            time.sleep(300)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    assert _alive(server_pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server_pid)


def _ttft(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from ttft.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_serve_check_starts_answers_and_stops() -> None:
    done = _ttft("serve", "--port", "0", "--check")
    assert done.returncode == 0, done.stderr
    assert "OpenAI base URL: http://127.0.0.1:" in done.stdout
    assert "chat check:" in done.stdout


def test_serve_with_a_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    done = _ttft("serve", "--model", str(tmp_path / "missing.gguf"), "--port", "0")
    assert done.returncode == 2
    assert "model file not found" in done.stderr and "Traceback" not in done.stderr


def test_serve_on_a_busy_port_is_a_clear_error(embedded_server: RunningEngine) -> None:
    done = _ttft("serve", "--port", str(embedded_server.config.port))
    assert done.returncode == 2
    assert f"port {embedded_server.config.port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_with_a_file_that_is_not_a_model_reports_the_server_log(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file at all")
    done = _ttft("serve", "--model", str(bogus), "--port", "0")
    assert done.returncode == 2
    assert "exited with code" in done.stderr and "Traceback" not in done.stderr


def test_serve_stops_cleanly_on_ctrl_c() -> None:
    """SIGINT to a foreground `ttft serve`: exit code 0 and no server left behind."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ttft.cli.main import main; main()", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url_line = ""
    deadline = time.monotonic() + 60
    while "OpenAI base URL" not in url_line and time.monotonic() < deadline:
        url_line = proc.stdout.readline()
    port = int(url_line.rsplit(":", 1)[1].split("/")[0])
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
