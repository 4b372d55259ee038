"""llama.cpp's llama-server as ttft knows it: metrics, flags and rules, advice, tunables.

The launch side (typed config, argv checked against the build's ``--help``) is ``launch.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ttft.engines.adapter import EngineAdapter, EngineAdvice, FlagRoles
from ttft.engines.llamacpp.flags import ENV_FLAGS, FLAGS
from ttft.engines.llamacpp.metrics import BLIND_SPOTS, SOURCES
from ttft.engines.llamacpp.rules import RULES


def _launcher(texts: Sequence[str], i: int) -> int | None:
    text = texts[i]
    if text.rsplit("/", 1)[-1] in ("llama-server", "llama-server.exe"):
        return 1
    if re.search(r"llama\.cpp:(full-|light-)?server", text):  # ghcr.io/ggml-org/llama.cpp:server
        return 1
    return None


ADAPTER = EngineAdapter(
    kind="llamacpp",
    display_name="llama.cpp llama-server",
    metric_prefix="llamacpp:",
    sources=SOURCES,
    blind_spots=BLIND_SPOTS,
    flags=FLAGS,
    flags_source="llama.cpp tools/server/README.md (build with -lm/--load-mode)",
    env_flags=ENV_FLAGS,
    help_command="llama-server --help",
    launchers=(_launcher,),
    module_flag_is_model=True,
    roles=FlagRoles(
        concurrency_cap="parallel",
        concurrency_cap_spelled="-np/--parallel",
        concurrency_cap_default=4,  # -np auto gives 4 slots on the embedded build (DESIGN.md)
        concurrency_note=" On the embedded llama-server, 4 concurrent ~600-token prompts with "
        "-np 1 got first tokens at 1.2 / 2.7 / 4.2 / 5.8 s.",
        concurrency_fix_note=" (and -c large enough for all slots)",
        shared_context="ctx-size",
        prefix_cache="cache-prompt",
        kv_cache_dtype=("cache-type-k", "cache-type-v"),
        speculative=("spec-draft-model", "spec-type", "draft"),
    ),
    rules=RULES,
    advice=EngineAdvice(
        prefix_cache_off="llama-server: drop `--no-cache-prompt` (prompt caching is on by "
        "default), keep `cache_prompt` true in requests, and have enough slots (`-np`) for the "
        "distinct prefixes in flight",
        # Measured on the pinned build: with -b/-ub 256 or 512 a short request still waited for
        # the whole 1500-token prefill (2.4-2.5 s against ~100 ms alone), so the lever on
        # llama-server is where long prompts run, not the batch size.
        head_of_line="llama-server fills each batch slot by slot in slot order, so a short "
        "prompt in a higher slot waits for a long prompt's whole prefill: put `ttft gateway` "
        "in front (it reserves the lowest slot for short requests and pins them there with "
        "`id_slot`) and lower `-b`/`-ub` (e.g. 64-256) so a batch takes a few hundred ms; or "
        "serve long prompts from their own replica",
        more_slots="llama-server: `-np {level}` (and scale `-c` so each slot keeps its "
        "context: -c = per-slot context x slots)",
    ),
    sends_x_accel_buffering_no=True,  # on streamed responses (checked on the embedded build)
    control_endpoints=True,
    completions_prompt_gets_bos=True,
    ignores_eos=True,
    tunables={
        "-np": ("1", "2", "4"),
        "-b": ("512", "2048"),
        "-ub": ("128", "512"),
        "-fa": ("on", "off"),
        "-ctk": ("f16", "q8_0"),
        "-ctv": ("f16", "q8_0"),
        "--cache-reuse": ("0", "256"),
        "-t": ("2", "4", "8"),
        "-lm": ("mmap", "none"),
    },
)
