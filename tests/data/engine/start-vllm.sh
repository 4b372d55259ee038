#!/usr/bin/env bash
# Launch script in the style of a team's deploy/start.sh: vLLM on one 80 GB GPU.
set -euo pipefail

export HF_HOME=/models/hf

MODEL=meta-llama/Llama-3.1-8B-Instruct

exec vllm serve "$MODEL" \
    --host 0.0.0.0 --port 8000 \
    --gpu-memory-utilization 0.95 \
    --no-enable-prefix-caching \
    --max-num-batched-tokens 512 \
    --max-num-seqs 256 \
    --enforce-eager
