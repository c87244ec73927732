"""Regenerate the golden first-step losses from the current code: ``python tests/update_golden.py``.

``tests/golden/first_losses.json`` holds, for every synchronous method, the first
``STEPS`` training losses of every rank on the tiny workload (seed 1, one epoch of
``STEPS`` steps), and the node count each was run at.  ``tests/test_spawn_golden.py``
only reads the file; this command is the only writer.  Run it after an intended
change of the numbers and say in the commit why they changed.

Settings, chosen so that every row can catch a change to its own method:

* the distributed methods run at ``NODES`` = 4 ranks: at 2 ranks the 1-peer
  exponential graph is exact pairwise averaging, and SGP's losses equal AR-SGD's;
* ``serial_sgd`` runs at 1 rank with batch 2 x 16 (unchanged from the 2-rank file);
* ``d2`` runs plain SGD (it rejects momentum); AD-PSGD is left out (asynchronous,
  its steps depend on timing).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from conftest import RunResult, launch, make_config

GOLDEN = Path(__file__).parent / "golden" / "first_losses.json"
STEPS = 5
NODES = 4
REL_TOL = 1e-5
WL = {"epochs": 1, "max_steps_per_epoch": STEPS}
PLAIN = {**WL, "optimizer": {"lr": 0.05, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}}
METHODS: dict[str, tuple[dict[str, Any], int, dict[str, Any]]] = {  # name -> (algorithm, nodes, workload)
    "serial_sgd": ({"name": "serial_sgd"}, 1, {**WL, "batch_size": 32}),
    "allreduce_sgd": ({"name": "allreduce_sgd"}, NODES, WL),
    "sgp_1peer": ({"name": "sgp", "topology": {"name": "exponential", "peers": 1}}, NODES, WL),
    "sgp_2peer": ({"name": "sgp", "topology": {"name": "exponential", "peers": 2}}, NODES, WL),
    "osgp": ({"name": "osgp", "tau": 1}, NODES, WL),
    "dpsgd": ({"name": "dpsgd"}, NODES, WL),
    "d2": ({"name": "d2"}, NODES, PLAIN),
}


def losses(run: RunResult) -> list[list[float]]:
    """Per rank, the training loss of every step, in order."""
    return [[r["loss/train"] for r in run.records(k, "step")] for k in range(run.nodes)]


def collect(tmp: Path, extra: list[dict[str, Any]] = ()) -> tuple[dict[str, list[list[float]]], list[RunResult]]:
    """Run every golden method (one launch per node count) and return its losses.

    ``extra`` configs (at ``NODES`` ranks) join the ``NODES`` launch; their results
    are returned as they are, in order."""
    got: dict[str, list[list[float]]] = {}
    extra_runs: list[RunResult] = []
    for nodes in sorted({n for _, n, _ in METHODS.values()}):
        names = [k for k, (_, n, _) in METHODS.items() if n == nodes]
        more = list(extra) if nodes == NODES else []
        runs, _ = launch([make_config(METHODS[k][0], nodes, workload=METHODS[k][2]) for k in names] + more,
                         tmp / f"n{nodes}")
        got.update({k: losses(r) for k, r in zip(names, runs)})
        extra_runs += runs[len(names):]
    return got, extra_runs


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        got, _ = collect(Path(d))
    nodes = {k: n for k, (_, n, _) in METHODS.items()}
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(got[k])}" for k in sorted(got))
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(f'{{"steps": {STEPS}, "rel_tol": {REL_TOL},\n "nodes": {json.dumps(nodes, sort_keys=True)},\n'
                      f' "losses": {{\n{rows}\n }}\n}}\n')
    print(f"wrote {GOLDEN} ({len(got)} methods)", file=sys.stderr)


if __name__ == "__main__":
    main()
