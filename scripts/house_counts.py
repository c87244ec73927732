"""The house's structure figures (issue 32), printed as JSON; run from a checkout's root:

    PYTHONPATH=$PWD:$PWD/workflows/lib python scripts/house_counts.py [--sim]

* ``workflow_cycle_modules``: modules of workflows/lib inside an import cycle (every ``import``
  counted, function-level ones too), and ``workflow_cycles``: how many cycles (strongly
  connected components) they form;
* ``algorithm_name_uses``: registered algorithm names compared (``==``, ``!=``, ``in``), gathered in
  a set literal, or keyed in a dict of non-config values, outside impls/algorithms;
* ``functions_over_40`` / ``functions_over_60``: function lengths in workflows/;
* ``platform_parses_workflow``: PlatformConfig parses per simulated run of the default config's
  check (``distrepro_wf.pipeline.config.validate``); with ``--sim``, ``platform_parses_sim_n4``:
  in one 4-rank simulated run's process (a 2-step run, a few seconds).
Self-contained (only tests/test_structure.py's import-graph helpers), so the same file measures
an older checkout too.  Figures of 2026-11-27: docs/architecture.md ("The house's structure")."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT / "tests"))
import test_structure as ts  # noqa: E402


def cycle_modules() -> tuple[int, int]:
    lib = ROOT / "workflows" / "lib"
    g = ts.import_graph({ts.module_name(p, lib): (p.read_text(), p.name == "__init__.py") for p in lib.rglob("*.py")})
    reach = {}
    for m in g:
        seen, todo = set(), [m]
        while todo:
            for w in g[todo.pop()] - seen:
                seen.add(w)
                todo.append(w)
        reach[m] = seen
    comps = {frozenset({m} | {x for x in reach[m] if m in reach[x]}) for m in g if m in reach[m]}
    return sum(map(len, comps)), len(comps)


def name_uses(names: set[str]) -> int:
    def named(e):
        return (isinstance(e, ast.Constant) and e.value in names) or (
            isinstance(e, (ast.Tuple, ast.List, ast.Set)) and any(named(x) for x in e.elts))

    def config_value(v):
        return isinstance(v, ast.Dict) or (isinstance(v, ast.Constant) and isinstance(v.value, str)) or (
            isinstance(v, ast.Name) and v.id.isupper())
    n = 0
    for d in ("impls", "workflows/lib", "workflows/scripts"):
        for p in (ROOT / d).rglob("*.py"):
            if ROOT / "impls" / "algorithms" in p.parents:
                continue
            for x in ast.walk(ast.parse(p.read_text())):
                n += (isinstance(x, ast.Compare) and any(named(e) for e in (x.left, *x.comparators))) or (
                    isinstance(x, ast.Set) and named(x)) or (isinstance(x, ast.Dict) and any(
                        k is not None and named(k) and not config_value(v) for k, v in zip(x.keys, x.values)))
    return n


def workflow_parses() -> float:
    import yaml

    import impls.sim.platforms as P
    from distrepro_wf.pipeline.config import validate
    from impls.backends import is_simulated
    count, orig = [0], P.PlatformConfig.validate
    P.PlatformConfig.validate = lambda self, key: (count.__setitem__(0, count[0] + 1), orig(self, key))[1]
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["experiments"] = {e: x for e, x in cfg["experiments"].items() if is_simulated(x.get("backend")) or any(
        is_simulated((m or {}).get("backend")) for m in x["methods"].values())}  # every run of these is simulated
    runs = validate(cfg)
    return round(count[0] / len(runs), 2)


SIM = """import json, sys, tempfile
sys.path.insert(0, "tests")
from conftest import make_config
import impls.sim.platforms as P
n, orig = [0], P.PlatformConfig.validate
P.PlatformConfig.validate = lambda self, key: (n.__setitem__(0, n[0] + 1), orig(self, key))[1]
d = tempfile.mkdtemp()
open(d + "/c.json", "w").write(json.dumps(make_config("allreduce_sgd", 4, backend="simgrid", platform="ethernet_10g",
    profile={"name": "fixed", "step_ms": 10.0}, workload={"epochs": 1, "max_steps_per_epoch": 2})))
from impls.sim.__main__ import run_one
run_one(d + "/c.json", d + "/out", None, None)
print(n[0])"""

if __name__ == "__main__":
    from impls.algorithms import ALGORITHMS
    mods, comps = cycle_modules()
    fs = [ast.parse(p.read_text()) for p in (ROOT / "workflows").rglob("*.py")]
    out = {"workflow_cycle_modules": mods, "workflow_cycles": comps,
           "algorithm_name_uses": name_uses(set(ALGORITHMS.names()) | {"signum_mv_allgather"}),
           "functions_over_40": sum(len(ts._long_functions(t, 40)) for t in fs),
           "functions_over_60": sum(len(ts._long_functions(t, 60)) for t in fs),
           "platform_parses_workflow": workflow_parses()}
    if "--sim" in sys.argv:
        p = subprocess.run([sys.executable, "-c", SIM], capture_output=True, text=True, cwd=ROOT, timeout=600)
        out["platform_parses_sim_n4"] = int(p.stdout.split()[-1]) if p.returncode == 0 else p.stderr[-500:]
    print(json.dumps(out))
