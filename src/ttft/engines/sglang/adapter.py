"""SGLang as ttft knows it: metrics, flags and rules, the parts its flags play, advice, tunables."""

from __future__ import annotations

from collections.abc import Sequence

from ttft.engines.adapter import EngineAdapter, EngineAdvice, FlagRoles
from ttft.engines.sglang.flags import FLAGS
from ttft.engines.sglang.metrics import BLIND_SPOTS, SOURCES
from ttft.engines.sglang.rules import RULES


def _launcher(texts: Sequence[str], i: int) -> int | None:
    text, nxt = texts[i], texts[i + 1] if i + 1 < len(texts) else ""
    if text.rsplit("/", 1)[-1] == "sglang" and nxt == "serve":
        return 2
    if text == "-m" and nxt in ("sglang.launch_server", "sglang.launch_server.py"):
        return 2
    return None


ADAPTER = EngineAdapter(
    kind="sglang",
    display_name="SGLang",
    metric_prefix="sglang:",
    sources=SOURCES,
    blind_spots=BLIND_SPOTS,
    flags=FLAGS,
    flags_source="SGLang server args (python/sglang/srt/server_args.py)",
    help_command="python -m sglang.launch_server --help",
    launchers=(_launcher,),
    accepts_prefixes=True,
    roles=FlagRoles(
        token_budget="chunked-prefill-size",
        token_budget_default="chosen from GPU memory (2048 to 16384)",
        token_budget_negative_off=True,
        memory_fraction="mem-fraction-static",
        concurrency_cap="max-running-requests",
        concurrency_cap_default=None,  # sized from GPU memory: unknown from the command line
        kv_cache_dtype=("kv-cache-dtype",),
        eager_mode="disable-cuda-graph",
        cpu_offload="cpu-offload-gb",
        speculative=("speculative-algorithm", "speculative-draft-model-path"),
    ),
    rules=RULES,
    advice=EngineAdvice(
        cold_start="send a warm-up request before taking traffic (the first requests pay CUDA "
        "graph capture and kernel autotuning)",
        prefix_cache_off="SGLang: drop `--disable-radix-cache`",
        head_of_line="SGLang: `--chunked-prefill-size 2048`",
        more_slots="SGLang: raise `--max-running-requests` to at least {level}",
    ),
    sends_x_accel_buffering_no=False,  # its OpenAI server sets no such header
    ignores_eos=True,
    tunables={
        "chunked-prefill-size": ("1024", "2048", "4096"),
        "max-running-requests": ("32", "64", "128"),
        "mem-fraction-static": ("0.8", "0.85", "0.88"),
        "schedule-policy": ("fcfs", "lpm"),
    },
)
