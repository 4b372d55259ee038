"""vLLM as ttft knows it: metrics, flags and rules, the parts its flags play, advice, tunables."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ttft.engines.adapter import EngineAdapter, EngineAdvice, FlagRoles
from ttft.engines.vllm.flags import FLAGS
from ttft.engines.vllm.metrics import BLIND_SPOTS, SOURCES
from ttft.engines.vllm.rules import RULES


def _launcher(texts: Sequence[str], i: int) -> int | None:
    text, nxt = texts[i], texts[i + 1] if i + 1 < len(texts) else ""
    if text.rsplit("/", 1)[-1] == "vllm" and nxt == "serve":
        return 2
    if text == "-m" and nxt.startswith("vllm.entrypoints."):
        return 2
    if re.search(r"(^|/)vllm-openai(:|$)", text):  # the vllm/vllm-openai container image
        return 1
    return None


ADAPTER = EngineAdapter(
    kind="vllm",
    display_name="vLLM",
    metric_prefix="vllm:",
    sources=SOURCES,
    blind_spots=BLIND_SPOTS,
    flags=FLAGS,
    flags_source="vLLM 0.11 engine args (vllm/engine/arg_utils.py) and OpenAI server args",
    help_command="vllm serve --help",
    launchers=(_launcher,),
    accepts_underscores=True,
    roles=FlagRoles(
        token_budget="max-num-batched-tokens",
        token_budget_default="2048 or 8192 by GPU memory (vLLM V1 API server)",
        memory_fraction="gpu-memory-utilization",
        concurrency_cap="max-num-seqs",
        concurrency_cap_default=256,  # the smallest default of recent vLLM (more on large GPUs)
        prefix_cache="enable-prefix-caching",
        kv_cache_dtype=("kv-cache-dtype",),
        eager_mode="enforce-eager",
        cpu_offload="cpu-offload-gb",
        speculative=("speculative-config", "speculative-model", "num-speculative-tokens"),
    ),
    rules=RULES,
    advice=EngineAdvice(
        cold_start="send a warm-up request before taking traffic (the first requests pay CUDA "
        "graph capture and kernel autotuning)",
        prefix_cache_off="vLLM: `--enable-prefix-caching` (and drop `--no-enable-prefix-caching`)",
        head_of_line="vLLM: `--enable-chunked-prefill --max-num-batched-tokens 2048` (sweep "
        "1024/2048/4096)",
        more_slots="vLLM: raise `--max-num-seqs` to at least {level}",
    ),
    sends_x_accel_buffering_no=False,  # its OpenAI server sets no such header
    ignores_eos=True,
    tokenizes_chat=True,
    # usage.prompt_tokens_details only with --enable-prompt-tokens-details (off by default)
    reports_cached_tokens=False,
    tunables={
        "max-num-batched-tokens": ("1024", "2048", "4096"),
        "max-num-seqs": ("32", "64", "128", "256"),
        "gpu-memory-utilization": ("0.85", "0.88", "0.9"),
        "kv-cache-dtype": ("auto", "fp8"),
        "enable-chunked-prefill": ("on", "off"),
        "enable-prefix-caching": ("on", "off"),
        # The attention backend, chosen by measuring short, medium and long prompts (the article:
        # -120 ms); vLLM >= 0.20 takes it as a flag (docs.vllm.ai design/attention_backends).
        "attention-backend": ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"),
        # CUDA graph mode: vLLM >= 0.10.2 reads it from the compilation config; the values are
        # vllm.config.compilation.CUDAGraphMode (NONE, PIECEWISE, FULL, FULL_DECODE_ONLY,
        # FULL_AND_PIECEWISE: the default of recent releases).
        "compilation-config": (
            '{"cudagraph_mode":"PIECEWISE"}',
            '{"cudagraph_mode":"FULL_DECODE_ONLY"}',
            '{"cudagraph_mode":"FULL_AND_PIECEWISE"}',
        ),
    },
)
