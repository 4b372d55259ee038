"""Each engine rule: a command line that trips it and the nearest one that does not.

Baselines: the seed article's round-2 vLLM command (clean by construction), SGLang's README
command, and the embedded llama-server's flags from DESIGN.md with all layers on the GPU.
"""

from __future__ import annotations

import pytest

from ttft.core.findings import Finding, Severity
from ttft.engines.cmdline import parse, tokens_from_text
from ttft.engines.vllm.install import vllm_home
from ttft.lint.engine.common_rules import EngineLintOptions, parse_count
from ttft.lint.engine.run import lint_command

# The seed article's round-2 command (DIGEST.md section 3).
VLLM_OK = (
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.88 "
    "--enable-prefix-caching --enable-chunked-prefill --max-num-batched-tokens 2048 "
    "--max-num-seqs 64"
)
# SGLang's README quick start plus an explicit budget.
SGLANG_OK = (
    "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct "
    "--host 0.0.0.0 --port 30000 --chunked-prefill-size 2048 --max-running-requests 64"
)
# The embedded llama-server's flags (DESIGN.md) on a GPU machine, all layers offloaded, no mmap.
LLAMA_OK = "llama-server -m gemma.gguf -c 16384 -np 4 -ngl all -lm mlock -fa on --metrics"


def lint(
    text: str, *, expected: int | None = None, gpu: bool | None = True, engine: str | None = None
) -> list[Finding]:
    cmd = parse(tokens_from_text(text), engine)
    return lint_command(cmd, EngineLintOptions(expected_concurrency=expected, gpu=gpu))


def rule(findings: list[Finding], rule_id: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule_id]


@pytest.mark.parametrize("text", [VLLM_OK, SGLANG_OK, LLAMA_OK])
def test_baselines_are_clean(text: str) -> None:
    assert lint(text) == []
    assert lint(text, expected=4) == []  # within every baseline's concurrency cap


# --- flag table ------------------------------------------------------------------------------


def test_unknown_flag_is_info_and_does_not_stop_other_checks() -> None:
    found = lint(VLLM_OK + " --flux-capacitor 3 --enforce-eager")
    unknown = rule(found, "engine/unknown-flag")
    assert [f.severity for f in unknown] == [Severity.INFO]
    assert "--flux-capacitor" in unknown[0].title
    assert rule(found, "vllm/cuda-graphs")


def test_removed_and_deprecated_flags() -> None:
    found = lint(VLLM_OK + " --num-scheduler-steps 8 --disable-log-requests")
    removed = rule(found, "engine/removed-flag")
    assert len(removed) == 1 and removed[0].severity is Severity.WARNING
    deprecated = rule(found, "engine/deprecated-flag")[0]
    assert deprecated.action == "use --enable-log-requests (off by default)"
    llama = lint(LLAMA_OK.replace("-lm mlock", "--mlock --no-mmap"))
    assert {f.title for f in rule(llama, "engine/removed-flag")} == {
        "--mlock no longer exists",
        "--no-mmap no longer exists",
    }
    assert "use --load-mode mlock" in {f.action for f in rule(llama, "engine/removed-flag")}


def test_missing_value_at_the_end_of_the_line() -> None:
    found = rule(lint(VLLM_OK + " --max-model-len"), "engine/missing-value")
    assert len(found) == 1 and found[0].location.offset == 11  # argv index, 0 = "vllm"


def test_findings_point_at_the_token() -> None:
    found = rule(lint(VLLM_OK + " --enforce-eager"), "vllm/cuda-graphs")
    assert found[0].location.offset == 11 and found[0].location.offset_unit == "token"


# --- prefix caching and chunked prefill -------------------------------------------------------


def test_vllm_prefix_caching_off_is_flagged_and_on_is_not() -> None:
    off = VLLM_OK.replace("--enable-prefix-caching", "--no-enable-prefix-caching")
    assert [f.severity for f in rule(lint(off), "vllm/prefix-cache")] == [Severity.WARNING]
    no_flag = VLLM_OK.replace("--enable-prefix-caching", "")
    assert rule(lint(no_flag), "vllm/prefix-cache") == []  # V1 enables it by default


def test_vllm_v0_without_prefix_caching_is_flagged() -> None:
    v0 = "VLLM_USE_V1=0 " + VLLM_OK.replace("--enable-prefix-caching", "")
    assert rule(lint(v0), "vllm/prefix-cache")
    assert rule(lint("VLLM_USE_V1=0 " + VLLM_OK), "vllm/prefix-cache") == []


def test_vllm_chunked_prefill_off() -> None:
    off = VLLM_OK.replace("--enable-chunked-prefill", "--no-enable-chunked-prefill")
    assert rule(lint(off), "vllm/chunked-prefill")
    assert rule(lint(VLLM_OK), "vllm/chunked-prefill") == []


def test_sglang_radix_cache_off() -> None:
    assert rule(lint(SGLANG_OK + " --disable-radix-cache"), "sglang/prefix-cache")
    assert rule(lint(SGLANG_OK), "sglang/prefix-cache") == []


def test_sglang_chunked_prefill_disabled_with_minus_one() -> None:
    off = SGLANG_OK.replace("--chunked-prefill-size 2048", "--chunked-prefill-size -1")
    assert rule(lint(off), "sglang/chunked-prefill")
    assert rule(lint(SGLANG_OK), "sglang/chunked-prefill") == []


def test_llama_prompt_cache_and_continuous_batching_off() -> None:
    found = lint(LLAMA_OK + " --no-cache-prompt -nocb --no-warmup")
    assert rule(found, "llamacpp/prompt-cache") and rule(found, "llamacpp/cont-batching")
    assert [f.severity for f in rule(found, "llamacpp/warmup")] == [Severity.INFO]
    assert not {"llamacpp/prompt-cache", "llamacpp/cont-batching"} & {
        f.rule for f in lint(LLAMA_OK)
    }


# --- token budget ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "severity"),
    [
        ("512", Severity.WARNING),
        ("1024", None),
        ("2048", None),
        ("4096", None),
        ("8k", Severity.INFO),
    ],
)
def test_token_budget_outside_1024_to_4096(budget: str, severity: Severity | None) -> None:
    text = VLLM_OK.replace("--max-num-batched-tokens 2048", f"--max-num-batched-tokens {budget}")
    found = rule(lint(text), "vllm/token-budget")
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_unset_token_budget_is_info_with_the_sweep() -> None:
    found = rule(lint(VLLM_OK.replace("--max-num-batched-tokens 2048", "")), "vllm/token-budget")
    assert [f.severity for f in found] == [Severity.INFO]
    assert "sweep 1024/2048/4096" in found[0].action


def test_sglang_small_chunk_size() -> None:
    small = SGLANG_OK.replace("--chunked-prefill-size 2048", "--chunked-prefill-size 256")
    assert rule(lint(small), "sglang/token-budget")


def test_human_readable_counts() -> None:
    assert parse_count("2048") == 2048 and parse_count("2k") == 2000 and parse_count("2K") == 2048
    assert parse_count("x") is None and parse_count("-1") == -1


# --- memory, concurrency, KV dtype, graphs, offload ------------------------------------------


@pytest.mark.parametrize(("value", "flagged"), [("0.88", False), ("0.92", False), ("0.95", True)])
def test_memory_fraction_above_092(value: str, flagged: bool) -> None:
    vllm = VLLM_OK.replace("0.88", value)
    assert bool(rule(lint(vllm), "vllm/memory-utilization")) is flagged
    sglang = SGLANG_OK + f" --mem-fraction-static {value}"
    assert bool(rule(lint(sglang), "sglang/memory-utilization")) is flagged


def test_concurrency_cap_below_expected_load() -> None:
    found = rule(lint(VLLM_OK, expected=128), "vllm/concurrency-cap")
    assert [f.severity for f in found] == [Severity.WARNING]
    assert "64 wait in a queue" in found[0].message
    assert rule(lint(VLLM_OK, expected=64), "vllm/concurrency-cap") == []


def test_concurrency_cap_far_above_expected_load_is_info() -> None:
    text = VLLM_OK.replace("--max-num-seqs 64", "--max-num-seqs 256")
    found = rule(lint(text, expected=16), "vllm/concurrency-cap")
    assert [f.severity for f in found] == [Severity.INFO]
    assert "800 ms to 4 s" in found[0].message


def test_no_concurrency_check_without_expected_load() -> None:
    assert rule(lint(VLLM_OK.replace("64", "2")), "vllm/concurrency-cap") == []


def test_sglang_running_requests_cap() -> None:
    assert rule(lint(SGLANG_OK, expected=100), "sglang/concurrency-cap")


def test_llama_slots_default_to_four() -> None:
    default = LLAMA_OK.replace("-np 4 ", "")
    found = rule(lint(default, expected=8), "llamacpp/concurrency-cap")
    assert len(found) == 1 and "(the default)" in found[0].message
    assert "1.2 / 2.7 / 4.2 / 5.8 s" in found[0].message
    assert rule(lint(default, expected=4), "llamacpp/concurrency-cap") == []


@pytest.mark.parametrize(
    ("text", "rule_id"),
    [
        (VLLM_OK + " --kv-cache-dtype fp8", "vllm/kv-cache-quantized"),
        (VLLM_OK + " --kv-cache-dtype fp8_e5m2", "vllm/kv-cache-quantized"),
        (SGLANG_OK + " --kv-cache-dtype fp8_e4m3", "sglang/kv-cache-quantized"),
        (LLAMA_OK + " -ctk q8_0", "llamacpp/kv-cache-quantized"),
        (LLAMA_OK + " -ctv q4_0", "llamacpp/kv-cache-quantized"),
    ],
)
def test_quantized_kv_cache_needs_a_quality_check(text: str, rule_id: str) -> None:
    assert rule(lint(text), rule_id)


@pytest.mark.parametrize(
    "text",
    [VLLM_OK + " --kv-cache-dtype auto", LLAMA_OK + " -ctk f16 -ctv f16", SGLANG_OK],
)
def test_full_precision_kv_cache_is_fine(text: str) -> None:
    assert not [f for f in lint(text) if f.rule.endswith("/kv-cache-quantized")]


def test_cuda_graphs_disabled() -> None:
    assert [f.severity for f in rule(lint(VLLM_OK + " --enforce-eager"), "vllm/cuda-graphs")] == [
        Severity.WARNING
    ]
    assert rule(lint(SGLANG_OK + " --disable-cuda-graph"), "sglang/cuda-graphs")
    assert rule(lint(VLLM_OK + " --no-enforce-eager"), "vllm/cuda-graphs") == []


def test_cuda_graphs_say_nothing_on_a_cpu() -> None:
    assert rule(lint(VLLM_OK + " --enforce-eager", gpu=False), "vllm/cuda-graphs") == []
    assert rule(lint(SGLANG_OK + " --disable-cuda-graph", gpu=False), "sglang/cuda-graphs") == []


@pytest.mark.parametrize(
    ("prefix", "suffix", "gpu"),
    [
        ("VLLM_TARGET_DEVICE=cpu ", "", False),
        ("VLLM_CPU_KVCACHE_SPACE=4 ", "", False),
        ("CUDA_VISIBLE_DEVICES= ", "", False),
        ("CUDA_VISIBLE_DEVICES=-1 ", "", False),
        ("", " --device cpu", False),
        ("VLLM_TARGET_DEVICE=cuda ", "", True),
        ("", " --device cuda", True),
        ("CUDA_VISIBLE_DEVICES=0,1 ", "", None),
        ("", "", None),
    ],
)
def test_the_device_is_detected_from_the_command(
    prefix: str, suffix: str, gpu: bool | None
) -> None:
    from ttft.engines.device import detect_gpu

    command = prefix + VLLM_OK + " --enforce-eager" + suffix
    detected, why = detect_gpu(parse(tokens_from_text(command)))
    assert detected is gpu and why
    # unknown is a GPU: where these engines usually run, and the rule's reason to exist
    found = rule(lint(command, gpu=None), "vllm/cuda-graphs")
    assert len(found) == (0 if gpu is False else 1)


def test_the_running_engines_own_process_tells_the_device() -> None:
    """doctor passes the live process of a loopback engine: its environment and executable."""
    from ttft.engines.device import detect_gpu
    from ttft.engines.local_process import LaunchCommand

    cmd = parse(tokens_from_text(VLLM_OK + " --enforce-eager"))
    live = LaunchCommand(7, ("python", "/x/bin/vllm", "serve"), {"VLLM_TARGET_DEVICE": "cpu"})
    assert detect_gpu(cmd, live)[0] is False
    options = EngineLintOptions(live=live)
    assert rule(lint_command(cmd, options), "vllm/cuda-graphs") == []
    ttft_build = LaunchCommand(
        7, (f"{vllm_home()}/venv/bin/python", f"{vllm_home()}/venv/bin/vllm")
    )
    detected, why = detect_gpu(cmd, ttft_build)
    assert detected is False and "CPU build" in why
    # a model folder under ttft's cache is not the executable
    model = parse(tokens_from_text(f"vllm serve {vllm_home()}/models/m --enforce-eager"))
    assert detect_gpu(model)[0] is None
    # a command that says cuda loses to the process that runs on a CPU
    cuda = parse(tokens_from_text("VLLM_TARGET_DEVICE=cuda " + VLLM_OK))
    assert detect_gpu(cuda, live)[0] is False


def test_cpu_offload() -> None:
    assert rule(lint(VLLM_OK + " --cpu-offload-gb 10"), "vllm/cpu-offload")
    assert rule(lint(VLLM_OK + " --cpu-offload-gb 0"), "vllm/cpu-offload") == []


def test_sglang_lpm_starvation_note() -> None:
    found = rule(lint(SGLANG_OK + " --schedule-policy lpm"), "sglang/schedule-lpm")
    assert [f.severity for f in found] == [Severity.INFO]
    assert rule(lint(SGLANG_OK + " --schedule-policy fcfs"), "sglang/schedule-lpm") == []


# --- llama.cpp specifics ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ngl", "severity"),
    [
        ("", Severity.WARNING),
        ("-ngl 0", Severity.ERROR),
        ("-ngl 20", Severity.WARNING),
        ("-ngl auto", Severity.INFO),
        ("-ngl 99", None),
        ("--gpu-layers all", None),
    ],
)
def test_gpu_layers_on_a_gpu_deployment(ngl: str, severity: Severity | None) -> None:
    found = rule(lint(LLAMA_OK.replace("-ngl all", ngl)), "llamacpp/gpu-layers")
    assert [f.severity for f in found] == ([severity] if severity else [])


def test_gpu_layers_are_moot_on_cpu_and_said_so() -> None:
    found = rule(lint(LLAMA_OK.replace("-ngl all", ""), gpu=False), "llamacpp/gpu-layers")
    assert [f.severity for f in found] == [Severity.INFO]
    assert "moot on a CPU-only deployment" in found[0].title


def test_mmap_default_is_flagged_and_mlock_is_not() -> None:
    found = rule(lint(LLAMA_OK.replace("-lm mlock", "")), "llamacpp/mmap")
    assert [f.severity for f in found] == [Severity.INFO]  # all layers on GPU: start-up only
    cpu = rule(lint(LLAMA_OK.replace("-lm mlock", ""), gpu=False), "llamacpp/mmap")
    assert [f.severity for f in cpu] == [Severity.WARNING]
    assert rule(lint(LLAMA_OK.replace("-lm mlock", "-lm mmap+mlock")), "llamacpp/mmap") == []
    assert rule(lint(LLAMA_OK.replace("-lm mlock", "--load-mode mmap"), gpu=False), "llamacpp/mmap")


def test_old_mlock_spelling_counts_as_intent() -> None:
    found = lint(LLAMA_OK.replace("-lm mlock", "--mlock"))
    assert rule(found, "llamacpp/mmap") == [] and rule(found, "engine/removed-flag")


@pytest.mark.parametrize(
    ("flags", "flagged"),
    [("-ub 128", True), ("-b 256", True), ("-ub 512", False), ("-ub 1024 -b 4096", False)],
)
def test_small_physical_batch(flags: str, flagged: bool) -> None:
    assert bool(rule(lint(f"{LLAMA_OK} {flags}"), "llamacpp/ubatch")) is flagged


def test_flash_attention_off_and_bare_fa() -> None:
    off = rule(lint(LLAMA_OK.replace("-fa on", "-fa off")), "llamacpp/flash-attn")
    assert [f.severity for f in off] == [Severity.WARNING]
    cpu = rule(lint(LLAMA_OK.replace("-fa on", "-fa off"), gpu=False), "llamacpp/flash-attn")
    assert [f.severity for f in cpu] == [Severity.INFO]
    bare = rule(lint(LLAMA_OK.replace("-fa on", "-fa")), "llamacpp/flash-attn")
    assert len(bare) == 1 and bare[0].action == "-fa on"
    assert rule(lint(LLAMA_OK.replace("-fa on", "-fa auto")), "llamacpp/flash-attn") == []


def test_context_per_slot() -> None:
    """-c is shared by the slots: 4096 / 4 leaves 1024 tokens per request."""
    small = rule(lint(LLAMA_OK.replace("-c 16384", "-c 4096")), "llamacpp/slot-context")
    assert [f.severity for f in small] == [Severity.WARNING] and "1024 tokens" in small[0].message
    some = rule(lint(LLAMA_OK.replace("-c 16384", "-c 8192")), "llamacpp/slot-context")
    assert [f.severity for f in some] == [Severity.INFO]
    assert rule(lint(LLAMA_OK), "llamacpp/slot-context") == []


def test_kv_offload_off_only_matters_on_gpu() -> None:
    assert rule(lint(LLAMA_OK + " -nkvo"), "llamacpp/kv-offload")
    assert rule(lint(LLAMA_OK + " -nkvo", gpu=False), "llamacpp/kv-offload") == []


def test_vllm_default_cap_far_above_a_small_load_is_info() -> None:
    """Unset --max-num-seqs is vLLM's default (256 or more): the article's 64 -> 256 lesson."""
    text = VLLM_OK.replace("--max-num-seqs 64", "")
    found = rule(lint(text, expected=32), "vllm/concurrency-cap")
    assert [f.severity for f in found] == [Severity.INFO] and "(the default)" in found[0].message
    assert rule(lint(text, expected=128), "vllm/concurrency-cap") == []


# --- speculative decoding --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rule_id", "flag"),
    [
        (
            VLLM_OK + ' --speculative-config {"method":"eagle","num_speculative_tokens":3}',
            "vllm/speculative-decoding",
            "--speculative-config",
        ),
        (
            SGLANG_OK + " --speculative-algorithm EAGLE --speculative-num-steps 3",
            "sglang/speculative-decoding",
            "--speculative-algorithm",
        ),
        (LLAMA_OK + " -md draft.gguf", "llamacpp/speculative-decoding", "-md"),
    ],
)
def test_speculative_decoding_is_an_info_note_that_it_targets_tpot(
    text: str, rule_id: str, flag: str
) -> None:
    (note,) = rule(lint(text), rule_id)
    assert note.severity == Severity.INFO
    assert "TPOT" in note.title and "TTFT" in note.title
    assert flag in note.message and "prefill" in note.message


def test_removed_llama_draft_flag_still_gets_the_note() -> None:
    found = lint(LLAMA_OK + " -md draft.gguf --draft 8")
    assert len(rule(found, "llamacpp/speculative-decoding")) == 1
