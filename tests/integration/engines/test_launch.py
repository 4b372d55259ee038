"""llama-server command lines against a build's --help, and the process guarantees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.engines.llamacpp.launch import LlamaServerConfig, build_argv
from ttft.engines.process import ServerProcess, ensure_port_free, free_loopback_port

# Excerpt in the shape of this build's `llama-server --help` (flags only).
NEW_HELP = """
-c,    --ctx-size N
-np,   --parallel N
-b,    --batch-size N
-ub,   --ubatch-size N
-fa,   --flash-attn [on|off|auto]
-ctk,  --cache-type-k TYPE
-ctv,  --cache-type-v TYPE
-lm,   --load-mode {auto,none,mmap,mlock,mmap+mlock,dio}
-t,    --threads N
--metrics
-fit,  --fit [on|off]
"""
OLD_HELP = """
-c,    --ctx-size N
--no-mmap
--mlock
--metrics
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_config_becomes_flags_of_this_build(model: Path) -> None:
    cfg = LlamaServerConfig(
        model, port=9000, parallel=1, ubatch_size=512, flash_attn="on", load_mode="mlock"
    )
    argv = build_argv(cfg, "/bin/llama-server", NEW_HELP)
    joined = " ".join(argv)
    assert "-np 1" in joined and "-ub 512" in joined and "-fa on" in joined
    assert "-lm mlock" in joined and "--metrics" in argv and "-fit off" in joined
    assert argv[argv.index("--port") + 1] == "9000"


def test_load_mode_uses_the_old_switches_on_an_old_build(model: Path) -> None:
    argv = build_argv(LlamaServerConfig(model, load_mode="mlock"), "/bin/x", OLD_HELP)
    assert "--no-mmap" in argv and "--mlock" in argv and "-lm" not in argv


def test_a_flag_the_build_lacks_is_a_clear_error(model: Path) -> None:
    with pytest.raises(TtftError, match="no -ub flag"):
        build_argv(LlamaServerConfig(model, ubatch_size=512), "/bin/x", OLD_HELP)


def test_missing_model_file_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="model file not found") as info:
        build_argv(LlamaServerConfig(tmp_path / "nope.gguf"), "/bin/x", NEW_HELP)
    assert info.value.fix is not None and ".gguf" in info.value.fix


def test_busy_port_is_reported_before_launch() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(TtftError, match=f"port {port}"):
            ensure_port_free("127.0.0.1", port)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_server_dies_when_its_parent_is_killed_with_sigkill(tmp_path: Path) -> None:
    """No orphans: SIGKILL of the parent (no cleanup code runs) still takes the server down."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from ttft.engines.process import ServerProcess
            p = ServerProcess(["/bin/sleep", "300"], health_url="http://127.0.0.1:1/")
            p.start()
            print(p.pid, flush=True)
            time.sleep(300)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert _alive(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _wait_dead(child_pid), "server outlived its killed parent"


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    """A server that forks helpers: stop() leaves none of them behind."""
    script = tmp_path / "forker.sh"
    # Written aside and renamed: the file appears whole (an `echo > pid` was read empty once,
    # between the file's creation and its write).
    pid = str(tmp_path / "pid")
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid}.tmp\nmv {pid}.tmp {pid}\nwait\n")
    script.chmod(0o755)
    proc = ServerProcess([str(script)], health_url="http://127.0.0.1:1/")
    proc.start()
    deadline = time.monotonic() + 5
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    grandchild = int((tmp_path / "pid").read_text())
    proc.stop()
    assert _wait_dead(grandchild)


def test_a_server_that_exits_early_is_reported_with_its_log(tmp_path: Path) -> None:
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\necho 'error: cannot load model xyz'\nexit 3\n")
    script.chmod(0o755)
    port = free_loopback_port()
    proc = ServerProcess([str(script)], health_url=f"http://127.0.0.1:{port}/health")
    proc.start()
    with pytest.raises(TtftError, match="exited with code 3") as info:
        proc.wait_healthy(timeout_s=10)
    assert "cannot load model xyz" in str(info.value)
