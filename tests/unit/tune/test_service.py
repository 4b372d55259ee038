"""What a plan's service lets ttft apply itself, and what it leaves to a person (and why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttft.core.changes import Change
from ttft.core.plan import ServiceSpec
from ttft.core.text_edits import TextEdit
from ttft.tune.service import ServiceRunner, engine_address, runnable_launch

EDIT = Change("proxy", edits=(TextEdit("site.conf", 3, "insert", "location /", "gzip off;"),))
FLAGS = Change("slots", {"-np": "4"})
MOVE = Change("moved", transforms=("move-dynamic",))
CAP = Change("cap", client={"concurrency": "2"})


def test_a_live_service_leaves_engine_and_proxy_steps_to_a_person() -> None:
    runner = ServiceRunner(ServiceSpec(url="http://127.0.0.1:8080", engine="vllm"))
    assert not runner.managed
    assert "ttft does not start this engine" in (runner.manual_reason(FLAGS) or "")
    assert "not ttft's to restart" in (runner.manual_reason(EDIT) or "")
    assert runner.manual_reason(MOVE) is None and runner.manual_reason(CAP) is None


def test_a_restart_command_makes_engine_steps_ttfts_own() -> None:
    spec = ServiceSpec(url="http://gpu1:8000", engine="vllm", restart="ssh gpu1 restart {args}")
    runner = ServiceRunner(spec)
    assert runner.manual_reason(FLAGS) is None
    assert runner.manual_reason(EDIT) is not None  # the proxy is still not ttft's


def test_apply_manual_pauses_even_what_ttft_could_apply() -> None:
    spec = ServiceSpec(url="http://h:1", engine="llamacpp", restart="x", apply="manual")
    assert ServiceRunner(spec).manual_reason(FLAGS) == 'the plan says apply = "manual"'
    assert ServiceRunner(spec).manual_reason(MOVE) is None


def test_a_gateway_step_needs_the_engines_own_address() -> None:
    gateway = Change("gateway", gateway={"hygiene": ""})
    assert ServiceRunner(ServiceSpec(url="http://h:1")).manual_reason(gateway) is not None
    spec = ServiceSpec(url="http://h:1", direct_url="http://h:2")
    assert ServiceRunner(spec).manual_reason(gateway) is None


def test_only_a_llama_server_command_with_its_model_on_this_machine_is_runnable(
    tmp_path: Path,
) -> None:
    assert runnable_launch(None, None)[0] is None
    assert "not 'python'" in runnable_launch("python -m sglang.launch_server", "sglang")[1]
    missing = runnable_launch("llama-server -m /nowhere/model.gguf", "llamacpp")
    assert missing[0] is None and "/nowhere/model.gguf" in missing[1]


def test_a_vllm_command_runs_on_the_vllm_ttft_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTFT_VLLM_HOME", str(tmp_path))
    assert "not installed" in runnable_launch("vllm serve m", "vllm")[1]
    exe = tmp_path / "venv" / "bin" / "vllm"
    exe.parent.mkdir(parents=True)
    exe.write_text("")
    argv, _ = runnable_launch("vllm serve org/model --max-num-seqs 1", None)
    assert argv == [str(exe), "serve", "org/model", "--max-num-seqs", "1"]
    missing = runnable_launch("vllm serve /nowhere/model", "vllm")
    assert missing[0] is None and "/nowhere/model" in missing[1]
    assert engine_address(ServiceSpec(engine="vllm"), ["vllm", "serve", "m"]) == "127.0.0.1:8000"


def test_the_engine_address_comes_from_direct_url_or_the_launch_port() -> None:
    spec = ServiceSpec(direct_url="http://127.0.0.1:8081")
    assert engine_address(spec, None) == "127.0.0.1:8081"
    argv = ["llama-server", "--port", "9000"]
    assert engine_address(ServiceSpec(), argv) == "127.0.0.1:9000"
    assert engine_address(ServiceSpec(), ["llama-server"]) == "127.0.0.1:8080"
