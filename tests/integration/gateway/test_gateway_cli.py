"""``ttft gateway``: help, and bad invocations that stop before listening with a clear error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

RUN = [sys.executable, "-c", "from ttft.cli.main import main; main()", "gateway"]


def ttft_gateway(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUN, *args], capture_output=True, text=True, timeout=60, check=False)


def test_help_shows_the_main_options() -> None:
    out = ttft_gateway("--help")
    assert out.returncode == 0
    for option in (
        "--config",
        "--upstream",
        "--listen",
        "--api-key",
        "--no-prerender",
        "--long-prompt-tokens",
    ):
        assert option in out.stdout


def test_no_upstream_and_bad_configs_are_one_line_errors(tmp_path: Path) -> None:
    none = ttft_gateway()
    assert none.returncode == 2 and "no upstream" in none.stderr
    bad = tmp_path / "g.toml"
    bad.write_text('[[model]]\nname = "m"\nupstreams = ["http://127.0.0.1:1"]\ntypo = 1\n')
    typo = ttft_gateway("--config", str(bad))
    assert typo.returncode == 2 and "unknown key 'typo'" in typo.stderr
    assert "Traceback" not in typo.stderr
    both = ttft_gateway("--config", str(bad), "--upstream", "http://127.0.0.1:1")
    assert both.returncode == 2 and "not both" in both.stderr
    url = ttft_gateway("--upstream", "localhost:8080")
    assert url.returncode == 2 and "not an http(s) URL" in url.stderr


def test_a_busy_listen_address_is_a_clear_error() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = ttft_gateway("--upstream", "http://127.0.0.1:1", "--listen", f"127.0.0.1:{port}")
    assert out.returncode == 2 and "cannot listen" in out.stderr


def test_sigterm_lets_a_running_stream_finish_then_exits() -> None:
    import signal
    import socket
    import time

    import httpx
    from gateway_testkit import scripted

    from ttft.engines.process import free_loopback_port

    port = free_loopback_port()
    with scripted(first_token_delay_ms=50, token_interval_ms=50, n_tokens=10) as up:
        proc = subprocess.Popen(
            [*RUN, "--upstream", up.base_url, "--listen", f"127.0.0.1:{port}"],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
            with httpx.stream(
                "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30
            ) as r:
                lines = []
                for line in r.iter_lines():
                    lines.append(line)
                    if len(lines) == 4:
                        proc.send_signal(signal.SIGTERM)  # mid-stream
            assert proc.wait(20) == 0
            assert "data: [DONE]" in lines
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            if proc.stderr is not None:
                assert "listening on" in proc.stderr.read()
                proc.stderr.close()


@pytest.mark.parametrize("loop", ["auto", "asyncio"])
def test_streams_pass_on_either_event_loop_and_closing_clients_keep_upstream_connections(
    loop: str,
) -> None:
    """``auto`` runs on uvloop (a dev dependency, so this runs in CI): its transports are not
    ``asyncio.Transport``, which once crashed every upstream connect. A client that closes the
    moment its answer ends (one connection per request) must not cost the upstream connection:
    ten such requests in a row open one upstream connection, not ten."""
    import asyncio

    from ttft.engines.process import free_loopback_port
    from ttft.testing.gateway_process import gateway_child
    from ttft.testing.oneshot_client import send_oneshot
    from ttft.testing.scripted_server import ScriptedServerProcess
    from ttft.testing.sse_script import Script

    assert loop == "asyncio" or importlib.util.find_spec("uvloop") is not None
    port = free_loopback_port()
    script = Script(first_token_delay_ms=5, token_interval_ms=2, n_tokens=8)
    args = ["--upstream", "", "--listen", f"127.0.0.1:{port}"]
    with ScriptedServerProcess(script) as up:
        args[1] = up.base_url
        with gateway_child(args, port, env={"TTFT_GATEWAY_LOOP": loop}) as gateway:
            up.snapshot(clear=True)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}

            async def ten() -> list[bool]:
                return [(await send_oneshot(url, body, timeout_s=10)).ok for _ in range(10)]

            assert asyncio.run(ten()) == [True] * 10
            snap = up.snapshot()
            assert len(snap.logs) == 10
            assert snap.connections_opened == 1, snap.connections_opened
        assert "Traceback" not in gateway.stderr_text(), gateway.stderr_text()


def test_bad_worker_counts_are_one_line_errors() -> None:
    for value in ("0", "two", "-1"):
        out = ttft_gateway("--upstream", "http://127.0.0.1:1", "--workers", value)
        assert out.returncode == 2 and "--workers: expected a number" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    assert "--workers" in ttft_gateway("--help").stdout
