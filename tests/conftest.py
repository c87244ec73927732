"""Shared fixtures: build run configs and launch real torchrun jobs (gloo, CPU)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

TINY_WORKLOAD: dict[str, Any] = {
    "dataset": {"name": "digits"},
    "model": {"name": "mlp", "hidden": [32]},
    "batch_size": 16,
    "epochs": 2,
    "max_steps_per_epoch": 10,
    "optimizer": {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
}


def make_config(algorithm: str | dict, nodes: int, seed: int = 1, **over: Any) -> dict[str, Any]:
    """A resolved run config on the tiny workload; ``over`` replaces top-level keys,
    ``workload=`` entries are merged into the tiny workload."""
    algo = {"name": algorithm} if isinstance(algorithm, str) else dict(algorithm)
    wl = copy.deepcopy(TINY_WORKLOAD)
    wl.update(over.pop("workload", {}))
    cfg = {"experiment": "test", "method": algo["name"], "nodes": nodes, "seed": seed, "algorithm": algo,
           "workload": wl, "straggler_name": "none", "straggler": {"kind": "none"}}
    cfg.update(over)
    return cfg


class RunResult:
    def __init__(self, out: Path, ckpt: Path, nodes: int):
        self.out, self.ckpt, self.nodes = out, ckpt, nodes

    def records(self, rank: int = 0, kind: str | None = None) -> list[dict[str, Any]]:
        lines = (self.out / "metrics" / f"rank{rank}.jsonl").read_text().splitlines()
        recs = [json.loads(x) for x in lines if x.strip()]
        return [r for r in recs if kind is None or r["kind"] == kind]

    def final_state(self, rank: int = 0) -> dict[str, torch.Tensor]:
        return torch.load(self.ckpt / f"rank{rank}.pt", weights_only=False)["model"]


def launch(configs: list[dict[str, Any]], tmp: Path, env: dict[str, str] | None = None,
           check: bool = True) -> tuple[list[RunResult], subprocess.CompletedProcess]:
    """Run ``configs`` (same world size) in one real torchrun launch; return their results.

    The world is the workers (``nodes``) plus the algorithm's other roles (a parameter server)."""
    from impls.config.runconfig import world_size

    nodes = configs[0]["nodes"]
    world = world_size(configs[0])
    tmp.mkdir(parents=True, exist_ok=True)
    entries, results = [], []
    for i, cfg in enumerate(configs):
        p = tmp / f"cfg{i}.json"
        p.write_text(json.dumps(cfg))
        out, ckpt = tmp / f"out{i}", tmp / f"ckpt{i}"
        entries.append({"config": str(p), "out": str(out), "checkpoint_dir": str(ckpt)})
        results.append(RunResult(out, ckpt, nodes))
    plan = tmp / "plan.json"
    plan.write_text(json.dumps(entries))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
           "-m", "impls.run", "--plan", str(plan)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})},
                          timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"torchrun failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return results, proc


@pytest.fixture
def run_torchrun(tmp_path):
    counter = iter(range(1000))

    def _run(configs, env=None, check=True):
        return launch(configs, tmp_path / f"launch{next(counter)}", env=env, check=check)

    return _run


def netns_skip_reason() -> str | None:
    """Why this machine cannot build the namespace testbed (root, ``ip``, ``tc``), or None."""
    from distrepro_wf.bench import netns

    try:
        netns.preflight()
    except netns.NetnsError as e:
        return str(e)
    return None


#: a test that builds network namespaces (``distrepro_wf.bench.netns``)
needs_netns = pytest.mark.skipif(netns_skip_reason() is not None, reason=str(netns_skip_reason()))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real local Slurm for the test module (``tests/slurm_local.py``; skipped where it cannot
    run): the environment additions of commands run against it."""
    from slurm_local import cluster

    with cluster(tmp_path_factory.mktemp("slurm-local")) as env:
        yield env
