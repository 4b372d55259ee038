#!/usr/bin/env bash
# The main job on a fresh machine: install ttft with the embedded engine, then examine that engine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
python -m pip install -q --disable-pip-version-check -e ".[all]"
exec ttft doctor "$@"
