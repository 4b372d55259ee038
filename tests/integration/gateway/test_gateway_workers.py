"""``ttft gateway --workers 2``: two processes on one port, with admission that holds across them.

The workers share a replica's slots through a mapped table (``admission/slot_table.py``). The
scripted upstream counts how many requests it holds at once; more than the limit would break it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ttft.gateway.config import from_mapping
from ttft.testing.gateway_process import gateway_child
from ttft.testing.proc_cpu import listener_pids
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="--workers needs SO_REUSEPORT (Linux)"
)

BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _args(upstream: str, port: int, *extra: str) -> list[str]:
    return [
        "--upstream",
        upstream,
        "--engine",
        "openai",
        "--model",
        "m",
        "--no-prerender",
        "--listen",
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        *extra,
    ]


async def _many(port: int, count: int) -> list[int]:
    async def one() -> int:
        # A client each: a connection each, which the kernel spreads over the workers.
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY)
            return answer.status_code

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _at_upstream(up: ScriptedServer, count: int, within_s: float = 20.0) -> None:
    """Until the upstream has received ``count`` requests (they are then mid-answer)."""
    deadline = time.monotonic() + within_s
    while len(up.snapshot().logs) < count:
        assert time.monotonic() < deadline, "the requests did not reach the upstream"
        await asyncio.sleep(0.02)


def _workers(port: int, supervisor: int, want: int, within_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pids = [p for p in listener_pids(port) if p != supervisor]
        if len(pids) == want:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"expected {want} workers on {port}, found {listener_pids(port)}")


def test_with_two_workers_the_in_flight_limit_holds_exactly_across_them() -> None:
    script = Script(first_token_delay_ms=400, n_tokens=2)
    with ScriptedServer(script).in_thread() as up:
        port = _free_port()
        with gateway_child(_args(up.base_url, port, "--max-in-flight", "3"), port) as gw:
            workers = _workers(port, gw.pid, 2)
            assert gw.pid not in workers  # the supervisor only holds the port
            codes = asyncio.run(_many(port, 16))
            snap = up.snapshot()
    assert codes == [200] * 16  # queued in its worker's lane, never refused
    assert len(snap.logs) == 16
    assert snap.peak_requests() == 3  # never 4, and every slot used


def test_sigterm_stops_every_worker_after_their_running_answers_end() -> None:
    script = Script(first_token_delay_ms=1500, n_tokens=3)
    with ScriptedServer(script).in_thread() as up, tempfile.TemporaryFile() as log:
        port = _free_port()
        cmd = [sys.executable, "-m", "ttft", "gateway", *_args(up.base_url, port)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
        try:
            workers = _workers(port, proc.pid, 2, within_s=30)

            async def stream_then_term() -> int:
                task = asyncio.ensure_future(_many(port, 2))
                await _at_upstream(up, 2)  # both requests are mid-answer
                os.kill(proc.pid, signal.SIGTERM)
                codes = await task
                return sum(1 for c in codes if c == 200)

            finished = asyncio.run(stream_then_term())
            assert proc.wait(20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert finished == 2  # the streams in flight finished (drain)
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)
    assert listener_pids(port) == []


def test_a_worker_that_dies_is_replaced_and_the_port_keeps_answering() -> None:
    with ScriptedServer(Script(first_token_delay_ms=1, n_tokens=1)).in_thread() as up:
        port = _free_port()
        with gateway_child(_args(up.base_url, port), port) as gw:
            first = _workers(port, gw.pid, 2)
            os.kill(first[0], signal.SIGKILL)
            deadline = time.monotonic() + 15
            now = first
            while time.monotonic() < deadline:
                now = [p for p in listener_pids(port) if p != gw.pid]
                if len(now) == 2 and first[0] not in now:
                    break
                time.sleep(0.1)
            # Seen once beside a one-core hog: no listener at all after 15 s (not reproduced in
            # six runs beside the same hog); the supervisor's log says what it did.
            assert len(now) == 2 and first[0] not in now and first[1] in now, (
                first,
                now,
                gw.stderr_text()[-3000:],
            )
            assert asyncio.run(_many(port, 8)) == [200] * 8
            assert "restarting it" in gw.stderr_text()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except OSError:
        return True


def test_a_worker_killed_after_it_listens_but_before_it_says_so_is_restarted(
    tmp_path: Path,
) -> None:
    """The CI race: a worker was killed (SIGKILL) while the supervisor still waited for its
    ready message, and the whole gateway exited ("exited with -9 before it listened"). Worker 0
    kills itself here at exactly that moment, the first time only; the supervisor restarts it
    and reports both workers ready."""
    from ttft.gateway.workers import Supervisor

    marker = tmp_path / "killed-once"

    def die_once(_gateway: object) -> None:
        if not marker.exists():
            marker.write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)

    seen: list[list[int]] = []

    def all_ready(_url: str, pids: list[int]) -> None:
        seen.append(pids)
        os.kill(os.getpid(), signal.SIGTERM)  # stop at once: the start-up is what is tested

    with ScriptedServer(Script(first_token_delay_ms=1, n_tokens=1)).in_thread() as up:
        raw = {
            "listen": "127.0.0.1:0",
            "model": [{"name": "m", "upstreams": [up.base_url], "prerender": False}],
            "workers": 2,
        }
        code = Supervisor(from_mapping(raw), on_ready=die_once, on_all_ready=all_ready).run()
    assert code == 0 and marker.exists()
    assert len(seen) == 1 and len(seen[0]) == 2


def test_one_slot_two_workers_every_worker_serves_and_the_slot_is_never_doubled() -> None:
    """The workers share the replica's slot (admission/slot_table.py): whichever worker a
    connection lands on serves it, one request at a time at the engine. (With the slots split
    instead, the second worker held none and answered 503.)"""
    script = Script(first_token_delay_ms=100, n_tokens=2)
    with ScriptedServer(script).in_thread() as up:
        port = _free_port()
        with gateway_child(_args(up.base_url, port, "--max-in-flight", "1"), port) as gw:
            _workers(port, gw.pid, 2)
            codes = asyncio.run(_many(port, 8))
            snap = up.snapshot()
    assert codes == [200] * 8
    assert snap.peak_requests() == 1


def test_clients_on_both_workers_get_fair_turns_at_one_slot() -> None:
    """Six keep-alive clients in a closed loop on one slot: the kernel spreads their
    connections over the two workers, and the slot goes to the request that waited longest
    whichever worker holds it. (Before, a worker gave every slot it released to its own
    waiters: its clients got 39 answers each in 12 s, the other worker's one, then a 503.)"""
    script = Script(first_token_delay_ms=100, n_tokens=2)
    with ScriptedServer(script).in_thread() as up:
        port = _free_port()
        args = _args(up.base_url, port, "--max-in-flight", "1", "--queue-timeout", "5")
        with gateway_child(args, port) as gw:
            _workers(port, gw.pid, 2)

            async def closed_loop(stop: float) -> list[int]:
                codes = []
                async with httpx.AsyncClient(timeout=30) as client:
                    while time.monotonic() < stop:
                        answer = await client.post(
                            f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY
                        )
                        codes.append(answer.status_code)
                return codes

            async def six() -> list[list[int]]:
                stop = time.monotonic() + 6.0
                return list(await asyncio.gather(*(closed_loop(stop) for _ in range(6))))

            per_client = asyncio.run(six())
    assert all(code == 200 for codes in per_client for code in codes), per_client
    answered = sorted(len(codes) for codes in per_client)
    assert answered[0] >= answered[-1] // 2, answered  # ~10 each; unfair: 1 against 20


def test_slots_held_by_a_killed_worker_are_freed_for_the_others() -> None:
    """A worker killed mid-answer (SIGKILL: it cannot give its slot back) leaves its count in
    the table; the supervisor clears its row, so the replica's only slot serves again at once
    instead of every later request waiting out its queue timeout."""
    slow = Script(first_token_delay_ms=10, n_tokens=400, token_interval_ms=50)
    with ScriptedServer(slow).in_thread() as up:
        port = _free_port()
        args = _args(up.base_url, port, "--max-in-flight", "1")
        with gateway_child([*args, "--queue-timeout", "3"], port) as gw:
            first = _workers(port, gw.pid, 2)

            async def hold_then_kill() -> None:
                async with httpx.AsyncClient(timeout=60) as client:
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    async with client.stream("POST", url, json=BODY) as answer:
                        assert answer.status_code == 200
                        await _at_upstream(up, 1)
                        for pid in first:  # whichever holds the slot: both
                            os.kill(pid, signal.SIGKILL)
                        with pytest.raises(httpx.HTTPError):
                            async for _ in answer.aiter_bytes():
                                pass

            asyncio.run(hold_then_kill())
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                now = [p for p in listener_pids(port) if p != gw.pid]
                if len(now) == 2 and not set(now) & set(first):
                    break
                time.sleep(0.1)
            quick = {"first_token_delay_ms": 1, "n_tokens": 1}
            started = time.monotonic()
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={**BODY, "ttft_script": quick},
                timeout=30,
            )
            waited_s = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert waited_s < 3.0  # not the queue timeout: the dead worker's slot was freed


def test_with_two_workers_one_keys_slot_share_holds_across_them(tmp_path: Path) -> None:
    """4 slots, a key may hold 2 of them: each worker lets it hold 1 (its part of 2), so eight
    requests of one key never hold more than 2 slots in all."""
    script = Script(first_token_delay_ms=400, n_tokens=2)
    with ScriptedServer(script).in_thread() as up:
        port = _free_port()
        path = tmp_path / "gateway.toml"
        path.write_text(
            f'listen = "127.0.0.1:{port}"\napi_keys = ["sk-a"]\nworkers = 2\n'
            "[admission]\nmax_in_flight = 4\nmax_slots_per_client = 2\n"
            f'[[model]]\nname = "m"\nengine = "openai"\nprerender = false\n'
            f'upstreams = ["{up.base_url}"]\n'
        )
        with gateway_child(["--config", str(path)], port) as gw:
            _workers(port, gw.pid, 2)

            async def many() -> list[int]:
                async def one() -> int:
                    async with httpx.AsyncClient(timeout=60) as client:
                        answer = await client.post(
                            f"http://127.0.0.1:{port}/v1/chat/completions",
                            json=BODY,
                            headers={"Authorization": "Bearer sk-a"},
                        )
                        return answer.status_code

                return list(await asyncio.gather(*(one() for _ in range(8))))

            codes = asyncio.run(many())
            snap = up.snapshot()
    assert codes == [200] * 8
    assert snap.peak_requests() <= 2


def test_workers_stop_when_the_supervisor_is_killed() -> None:
    with ScriptedServer(Script(first_token_delay_ms=1, n_tokens=1)).in_thread() as up:
        port = _free_port()
        cmd = [sys.executable, "-m", "ttft", "gateway", *_args(up.base_url, port)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            workers = _workers(port, proc.pid, 2, within_s=30)
            proc.kill()
            proc.wait(10)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and listener_pids(port):
                time.sleep(0.1)
            assert listener_pids(port) == []
        finally:
            for pid in listener_pids(port):
                os.kill(pid, signal.SIGKILL)
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)


def test_sighup_replaces_the_workers_with_the_configuration_read_again(tmp_path: Path) -> None:
    """A new worker listens before the old one drains: a stream running through the reload
    finishes, and the new configuration (a model alias here) is served afterwards."""
    script = Script(first_token_delay_ms=1200, n_tokens=2)
    with ScriptedServer(script).in_thread() as up:
        port = _free_port()
        path = tmp_path / "gateway.toml"

        def write(aliases: str) -> None:
            path.write_text(
                f'listen = "127.0.0.1:{port}"\nworkers = 2\n'
                f'[[model]]\nname = "m"\nengine = "openai"\nprerender = false\n'
                f'aliases = [{aliases}]\nupstreams = ["{up.base_url}"]\n'
            )

        write("")
        with gateway_child(["--config", str(path)], port) as gw:
            before = _workers(port, gw.pid, 2)
            write('"renamed"')

            async def reload_during_a_stream() -> int:
                task = asyncio.ensure_future(_many(port, 1))
                await _at_upstream(up, 1)
                os.kill(gw.pid, signal.SIGHUP)
                return (await task)[0]

            assert asyncio.run(reload_during_a_stream()) == 200
            deadline = time.monotonic() + 30
            after = before
            while time.monotonic() < deadline:
                after = [p for p in listener_pids(port) if p != gw.pid]
                if len(after) == 2 and not set(after) & set(before):
                    break
                time.sleep(0.1)
            assert len(after) == 2 and not set(after) & set(before), (before, after)
            renamed = {**BODY, "model": "renamed"}
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions", json=renamed, timeout=30
            )
            assert answer.status_code == 200
            assert "replaced" in gw.stderr_text()
