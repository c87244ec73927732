#!/usr/bin/env bash
# Create ./.venv with the pinned dependencies (idempotent: reinstalls only when
# pyproject.toml or requirements/lock.txt changed).  torch 2.14.1 / torchvision 0.29.1
# come from this machine's local wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
want=$(cat pyproject.toml requirements/lock.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.distrepro-stamp 2>/dev/null)" != "$want" ]; then
  # (this machine's pip config names local indexes that lack some projects: drop those notices)
  .venv/bin/python -m pip install -q --disable-pip-version-check -c requirements/lock.txt -e ".[dev]" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$want" > .venv/.distrepro-stamp
fi
