#!/usr/bin/env bash
# Set up, then run the whole test suite (unit, multi-process gloo, workflow tiers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
python -m pytest -q "$@"
