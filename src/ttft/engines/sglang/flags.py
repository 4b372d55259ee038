"""SGLang: the flags people put on serving command lines (kinds in ``engines/flags.py``)."""

from __future__ import annotations

from ttft.engines.flags import parse_flag_table

# SGLang (python/sglang/srt/server_args.py, ServerArgs fields at commit 001067ff: a field
# ``max_running_requests`` is the flag ``--max-running-requests``; aliases from Arg(aliases=...)),
# plus old spellings from SGLang 0.1-0.3 that current builds reject.
FLAGS = parse_flag_table(
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
