#!/usr/bin/env bash
# Set up, then run the default reproduction (tiny stand-ins) ending in reports/index.html.
# Extra arguments go to snakemake, e.g. `bash scripts/reproduce.sh --configfile F.yaml`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/snakemake --profile workflows/profiles/local "$@"
echo "report: $(pwd)/reports/index.html"
