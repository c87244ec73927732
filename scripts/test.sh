#!/usr/bin/env bash
# Set up (scripts/setup.sh, and the report's browser test's Debian packages chromium and
# chromium-driver when missing), then run the whole test suite (unit, multi-process gloo,
# workflow tiers).
#
#   bash scripts/test.sh              everything; the Slurm tests and the study configs beside the rest (below)
#   bash scripts/test.sh ARGS...      python -m pytest -q ARGS... (one process, as given)
#
# The Slurm tests (tests/test_slurm.py, ~3-4 min; tests/test_slurm_plan.py, probe and verify,
# ~2 min) spend about half their time waiting: on
# Slurm's scheduling and on Snakemake's status polling of its jobs; much of the main suite
# waits too (charged clocks sleeping, shaped links, process start-up), with one core idle.
# So with no arguments a second pytest process runs beside the main one: the Slurm tests, then
# the study configs' real runs (tests/test_study_configs.py, the suite's longest file), in its
# own temporary directory; its report is printed after the main one's, and the suite fails if
# either fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the browser of tests/test_report_browser.py (DISTREPRO_NO_BROWSER=1 skips those tests, and this)
[ "${DISTREPRO_NO_BROWSER:-}" = 1 ] || bash scripts/system-packages.sh chromium chromium-driver
export PATH="$PWD/.venv/bin:$PATH"
if [ $# -gt 0 ]; then
  exec python -m pytest -q "$@"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/distrepro-tests.XXXXXX")
python -m pytest -q --durations=10 -p no:cacheprovider --basetemp "$tmp/beside" tests/test_slurm.py \
  tests/test_slurm_plan.py tests/test_study_configs.py \
  >"$tmp/beside.log" 2>&1 &
beside=$!
trap 'kill "$beside" 2>/dev/null || true' INT TERM
rc=0
python -m pytest -q --durations=25 -m "not slurm" --ignore=tests/test_study_configs.py --basetemp "$tmp/main" || rc=$?
src=0
wait "$beside" || src=$?
echo "---- tests/test_slurm.py, tests/test_slurm_plan.py and tests/test_study_configs.py (run beside the others) ----"
cat "$tmp/beside.log"
rm -rf "$tmp"
# pytest's 5: no test collected (not a failure of the other part)
[ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || exit "$rc"
[ "$src" -eq 0 ] || [ "$src" -eq 5 ] || exit "$src"
