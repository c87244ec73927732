"""The package installs: ``pip install .`` gives the whole library, not only what an editable
install of the source tree happens to show.

The wheel is built from a copy of the repository (``pip wheel --no-deps --no-build-isolation``:
the running interpreter's setuptools, nothing downloaded, nothing written into the checkout),
installed into a fresh venv without pip, which sees the heavy dependencies (torch, SimGrid, ...)
through a ``.pth`` line naming the current interpreter's site-packages.  A ``.pth`` line only
adds a folder to ``sys.path``; the ``.pth`` files inside it (the editable install's finder) are
not run, so ``impls`` can only come from the wheel, which every check asserts.  Everything runs
with the working directory outside the repository and without ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT, make_config

# The package roots of pyproject.toml: import name -> folder in the source tree.
PACKAGES = {"impls": ROOT / "impls", "distrepro_wf": ROOT / "workflows" / "lib" / "distrepro_wf"}
SKIP = shutil.ignore_patterns(".git", ".venv", ".snakemake", ".pytest_cache", "__pycache__", "*.pyc",
                              "*.egg-info", "build", "dist", "results", "reports")
EQUAL_TOL = 1e-6  # simulated equals real parameters (as tests/test_sim_runs.py)

# Run inside the installed venv: where each package comes from, and every module imported
# (pkgutil walks the installed tree; ``__main__`` modules are entry points, not imported).
PROBE = """
import importlib, json, pkgutil, sys
def fail(name):
    raise ImportError(f"cannot import package {name}")
out = {}
for top in sys.argv[1:]:
    pkg = importlib.import_module(top)
    out[top] = pkg.__file__
    for m in pkgutil.walk_packages(pkg.__path__, top + ".", onerror=fail):
        if m.name.rsplit(".", 1)[-1] != "__main__":
            out[m.name] = importlib.import_module(m.name).__file__
print(json.dumps(out))
"""


def _source_files(name: str, root: Path) -> set[str]:
    """Every file of a source package, as its path relative to site-packages."""
    return {f"{name}/{p.relative_to(root).as_posix()}" for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc" and not p.name.startswith(".")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """Build the wheel, install it into a clean venv; its python, site-packages and env."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-w", str(tmp / "dist"), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    wheel, = (tmp / "dist").glob("distrepro-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "_distrepro_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH")}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    run = tmp / "run"
    run.mkdir()
    assert ROOT not in run.parents
    return {"python": str(python), "purelib": purelib, "env": env, "cwd": run, "tmp": tmp}


def _run(inst: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([inst["python"], *args], cwd=inst["cwd"], env=inst["env"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _done(p: subprocess.Popen, what: str) -> str:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, f"{what} failed ({p.returncode}):\n{out[-2000:]}\n{err[-4000:]}"
    return out


def test_wheel_holds_every_package(installed):
    """Every file of the source packages is in the installed wheel (a package missing from
    pyproject.toml is named), and every module imports from the venv, not from the source tree."""
    purelib = installed["purelib"]
    for name, root in PACKAGES.items():
        have = {f"{name}/{p.relative_to(purelib / name).as_posix()}" for p in (purelib / name).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts} if (purelib / name).is_dir() else set()
        missing = sorted(_source_files(name, root) - have)
        missing_pkgs = sorted({m.rsplit("/", 1)[0].replace("/", ".") for m in missing})
        assert not missing, f"the wheel lacks packages {missing_pkgs}: files {missing}"
    mods = json.loads(_done(_run(installed, "-c", PROBE, *PACKAGES), "import of every module"))
    expected = {f"{name}.{p.relative_to(root).with_suffix('').as_posix().replace('/', '.')}".removesuffix(".__init__")
                for name, root in PACKAGES.items() for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    expected = {m for m in expected if not m.endswith(".__main__")} | set(PACKAGES)
    assert sorted(expected - set(mods)) == [], "modules not imported from the installed wheel"
    outside = {m: f for m, f in mods.items() if not Path(f).is_relative_to(purelib)}
    assert not outside, f"imported from outside the venv: {outside}"


@pytest.mark.spawn
def test_installed_package_runs_both_backends(installed):
    """One simulated and one real 2-rank gloo run (torchrun) of the installed package end with
    the same parameters: the backend seam, the collectives and the simulator all shipped."""
    tmp = installed["tmp"]
    wl = {"epochs": 1, "max_steps_per_epoch": 2}
    real_cfg = make_config("allreduce_sgd", 2, workload=wl)
    sim_cfg = make_config("allreduce_sgd", 2, workload=wl, backend="simgrid", platform="ethernet_10g",
                          profile={"name": "fixed", "step_ms": 10})
    (tmp / "real.json").write_text(json.dumps(real_cfg))
    (tmp / "sim.json").write_text(json.dumps(sim_cfg))
    # both at once: each mostly imports torch, and CI has 2 cores
    real = _run(installed, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "impls.run",
                "--config", str(tmp / "real.json"), "--out", str(tmp / "real"), "--checkpoint-dir",
                str(tmp / "real_ckpt"))
    sim = _run(installed, "-m", "impls.sim", "--config", str(tmp / "sim.json"), "--out", str(tmp / "sim"),
               "--checkpoint-dir", str(tmp / "sim_ckpt"))
    try:
        _done(real, "torchrun -m impls.run (installed)")
        _done(sim, "python -m impls.sim (installed)")
    finally:  # a failed or timed-out side leaves nothing running
        for p in (real, sim):
            if p.poll() is None:
                p.kill()
                p.wait()
    for side in ("real", "sim"):
        prov = json.loads((tmp / side / "provenance.json").read_text())
        assert (prov["backend"] == "simgrid") == (side == "sim"), (side, prov["backend"])  # real: gloo
        assert len((tmp / side / "metrics" / "rank0.jsonl").read_text().splitlines()) > 0
    for r in range(2):
        a = torch.load(tmp / "real_ckpt" / f"rank{r}.pt", weights_only=False)["model"]
        b = torch.load(tmp / "sim_ckpt" / f"rank{r}.pt", weights_only=False)["model"]
        assert a.keys() == b.keys()
        diff = max((a[k] - b[k]).abs().max().item() for k in a)
        assert diff <= EQUAL_TOL, (r, diff)
