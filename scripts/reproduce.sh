#!/usr/bin/env bash
# Set up, then run the default reproduction (tiny stand-ins) ending in reports/index.html.
# Extra arguments go to snakemake, e.g. `bash scripts/reproduce.sh --configfile F.yaml`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# a --configfile's YAML syntax error, named with its file and line before Snakemake reads it
.venv/bin/python -m distrepro_wf.pipeline.precheck "$@"
.venv/bin/snakemake --profile profiles/local "$@"
echo "report: $(pwd)/reports/index.html"
