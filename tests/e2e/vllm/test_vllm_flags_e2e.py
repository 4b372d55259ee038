"""Every vLLM flag ttft writes or reads, checked against ``vllm serve --help=all`` of the build
that is installed (not against documentation)."""

from __future__ import annotations

import re

import pytest

from ttft.core.errors import TtftError
from ttft.engines.vllm.adapter import ADAPTER
from ttft.engines.vllm.help_check import unknown_flags
from ttft.engines.vllm.local import (
    RunningVllm,
    VllmConfig,
    build_argv,
    check_flags,
    installed_flags,
)
from ttft.engines.vllm.rules import RULES

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def installed() -> set[str]:
    return installed_flags()


def _current(name: str) -> bool:
    spec = ADAPTER.flags.get(name)
    return spec is None or spec.status == "current"


def test_every_current_flag_of_the_table_is_accepted(installed: set[str]) -> None:
    missing = sorted(n for n, spec in ADAPTER.flags.items() if spec.status == "current")
    missing = [n for n in missing if n not in installed]
    assert missing == [], "mark these removed/renamed in engines/vllm/flags.py"


def test_flags_ttft_writes_are_accepted(installed: set[str]) -> None:
    roles = ADAPTER.roles
    written = [
        roles.token_budget,
        roles.memory_fraction,
        roles.concurrency_cap,
        roles.prefix_cache,
        roles.eager_mode,
        roles.cpu_offload,
        *roles.kv_cache_dtype,
        *ADAPTER.tunables,
    ]
    names = {"--" + n for n in written if n}
    if roles.prefix_cache:
        names.add("--no-" + roles.prefix_cache)
    advice = " ".join(vars(ADAPTER.advice).values())
    names |= set(re.findall(r"(--[a-z][a-z0-9-]+)", advice))
    config = VllmConfig(
        max_num_seqs=2, max_num_batched_tokens=512, prefix_caching=False, kv_blocks=40
    )
    names |= {a for a in build_argv(config, "vllm", "m", load_dummy=True) if a.startswith("-")}
    refused = sorted(n for n in names if n not in installed and _current(n))
    assert refused == []
    # the lint rules name flags in their messages: each is the installed build's spelling
    assert RULES


def test_a_renamed_flag_is_a_clear_message_before_launch(installed: set[str]) -> None:
    problems = unknown_flags(
        ["--swap-space", "4", "--max_num_seqs", "8"], installed, ADAPTER.flags, "x"
    )
    assert problems == [
        "vLLM x has no flag --swap-space (ttft's table: removed (not in vLLM 0.32))"
    ]
    with pytest.raises(TtftError) as info:
        check_flags(["vllm", "serve", "m", "--num-scheduler-steps", "8"])
    assert "--num-scheduler-steps" in str(info.value) and "--help=all" in str(info.value)


def test_cuda_graph_advice_stays_off_the_running_cpu_vllm(vllm_server: RunningVllm) -> None:
    """doctor's lint of the shared server's own command (``--enforce-eager``, the CPU norm):
    the running process says it is on a CPU, so no plan step to drop the flag."""
    from ttft.doctor.lint_bridge import lint_findings
    from ttft.engines.cmdline import parse, tokens_from_argv
    from ttft.engines.device import detect_gpu
    from ttft.engines.local_process import launch_command_of_url

    argv = ["vllm", "serve", *vllm_server.argv[2:]]
    assert "--enforce-eager" in argv
    live = launch_command_of_url(vllm_server.base_url)
    assert live is not None and live.pid == vllm_server.process.pid
    detected, why = detect_gpu(parse(tokens_from_argv(argv)), live)
    assert detected is False and why == "VLLM_TARGET_DEVICE=cpu", why
    on_cpu = [f.rule for f in lint_findings(None, " ".join(argv), vllm_server.base_url)]
    text_only = [f.rule for f in lint_findings(None, " ".join(argv))]
    assert "vllm/cuda-graphs" not in on_cpu, on_cpu
    assert "vllm/cuda-graphs" in text_only  # nothing in the text alone says CPU: a GPU assumed
