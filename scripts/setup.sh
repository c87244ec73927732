#!/usr/bin/env bash
# Create ./.venv with the pinned dependencies (idempotent: reinstalls only when
# pyproject.toml or requirements/lock.txt changed).  torch 2.14.1 / torchvision 0.29.1
# come from this machine's local wheels.  SimGrid (the simulated platform) is Debian's
# python3-simgrid 3.32, installed here if missing and made visible to the venv: it is one
# extension module for CPython 3.11.  (PyPI's simgrid is source-only, and its 4.1 build
# fails against pybind11 3.x; Debian's package installs in seconds.)  fairseq (the translation
# task) is built once into a wheel cache, see below.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
want=$(cat pyproject.toml requirements/lock.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.distrepro-stamp 2>/dev/null)" != "$want" ]; then
  # (this machine's pip config names local indexes that lack some projects: drop those notices)
  .venv/bin/python -m pip install -q --disable-pip-version-check -c requirements/lock.txt -e ".[dev]" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  # fairseq (the translation task): fairseq-fixed is source-only and its build compiles C++
  # extensions against the torch just installed (a few minutes), so it is built once, without
  # build isolation (an isolated build would fetch another torch), into a wheel cache kept
  # across clones ($DISTREPRO_WHEEL_CACHE, per torch version); later set-ups install the cached wheel.
  wheels=${DISTREPRO_WHEEL_CACHE:-$HOME/.cache/distrepro/wheels}/$(grep -i '^torch==' requirements/lock.txt)
  fairseq=$(grep -i '^fairseq-fixed==' requirements/lock.txt)
  if ! ls "$wheels"/fairseq_fixed-"${fairseq#*==}"-*.whl >/dev/null 2>&1; then
    echo "setup: building $fairseq once (a few minutes; cached in $wheels)" >&2
    tools=$(mktemp -d)
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target "$tools" \
      "$(grep -i '^cython==' requirements/lock.txt)" "$(grep -i '^wheel==' requirements/lock.txt)" \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    env -u CUDA_HOME PYTHONPATH="$tools" PATH="$tools/bin:$PATH" .venv/bin/python -m pip wheel -q --disable-pip-version-check \
      --no-deps --no-build-isolation -w "$wheels" "$fairseq" \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    rm -rf "$tools"
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check -c requirements/lock.txt -e ".[dev,fairseq]" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-index --find-links "$wheels" "$fairseq"
  echo "$want" > .venv/.distrepro-stamp
fi

sg_so() { ls /usr/lib/python3/dist-packages/simgrid.cpython-311-*.so 2>/dev/null | head -n1; }
bash scripts/system-packages.sh python3-simgrid
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -e "$site/$(basename "$(sg_so)")" ] || ln -sf "$(sg_so)" "$site/"
.venv/bin/python -c 'import simgrid, sys; v = simgrid.simgrid_version; sys.exit(0 if str(v).split(".")[:2] == ["3", "32"] else f"SimGrid 3.32 expected, found {v}")' 2>/dev/null \
  || { echo "setup: SimGrid 3.32 does not import in .venv (it needs CPython 3.11 and Debian's python3-simgrid)" >&2; exit 1; }
