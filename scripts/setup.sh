#!/usr/bin/env bash
# Create ./.venv with the pinned dependencies (idempotent: reinstalls only when
# pyproject.toml or requirements/lock.txt changed).  torch 2.14.1 / torchvision 0.29.1
# come from this machine's local wheels.  SimGrid (the simulated platform) is Debian's
# python3-simgrid 3.32, installed here if missing and made visible to the venv: it is one
# extension module for CPython 3.11.  (PyPI's simgrid is source-only, and its 4.1 build
# fails against pybind11 3.x; Debian's package installs in seconds.)
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

sg_so() { ls /usr/lib/python3/dist-packages/simgrid.cpython-311-*.so 2>/dev/null | head -n1; }
if [ -z "$(sg_so)" ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-simgrid >/dev/null
fi
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -e "$site/$(basename "$(sg_so)")" ] || ln -sf "$(sg_so)" "$site/"
.venv/bin/python -c 'import simgrid, sys; v = simgrid.simgrid_version; sys.exit(0 if str(v).split(".")[:2] == ["3", "32"] else f"SimGrid 3.32 expected, found {v}")' 2>/dev/null \
  || { echo "setup: SimGrid 3.32 does not import in .venv (it needs CPython 3.11 and Debian's python3-simgrid)" >&2; exit 1; }
