"""The benchmark's CPU reading: the processes behind a port, and their time on CPU."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from ttft.testing.proc_cpu import cpu_ns, listener_pids

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def test_the_process_holding_a_listening_socket_is_found_by_its_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert listener_pids(port) == [os.getpid()]
    assert listener_pids(port) == []  # closed: nobody listens there any more


def test_cpu_time_grows_with_work_and_is_none_for_a_process_that_is_gone() -> None:
    before = cpu_ns([os.getpid()])
    assert before is not None
    sum(i * i for i in range(300_000))
    after = cpu_ns([os.getpid()])
    assert after is not None and after > before
    assert cpu_ns([2**22 + 12345]) is None  # above Linux's pid limit: no such process
