"""Provenance of a run: code version, package versions, host, time, and where each rank ran."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "torchvision", "numpy", "pandas", "scikit-learn", "snakemake", "fairseq-fixed")


def git_commit(cwd: str | os.PathLike | None = None) -> str:
    cwd = cwd or Path(__file__).resolve().parents[2]  # the checkout (impls/runtime/ -> ..)
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("-dirty" if dirty and commit != "unknown" else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


def config_hash(cfg: Any) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]


def provenance(cfg: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "git_commit": git_commit(),
        "versions": versions(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "argv": sys.argv,
        "config_hash": config_hash(cfg),
        "seed": cfg.get("seed"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **(extra or {}),
    }


# what torchrun and Slurm tell a process about its place in the launch
TORCHRUN_ENV = {"local_rank": "LOCAL_RANK", "node_rank": "GROUP_RANK", "local_world_size": "LOCAL_WORLD_SIZE"}
SLURM_ENV = {"job_id": "SLURM_JOB_ID", "step_id": "SLURM_STEP_ID", "task": "SLURM_PROCID", "tasks": "SLURM_NTASKS",
             "node_id": "SLURM_NODEID", "nodes": "SLURM_NNODES", "node": "SLURMD_NODENAME",
             "nodelist": "SLURM_JOB_NODELIST"}


def placement(rank: int) -> dict[str, Any]:
    """This process's place: rank, host, pid, torchrun's node rank (``GROUP_RANK``) and local
    rank, and under Slurm its job, step, task and node (``slurm``)."""
    env = os.environ
    out: dict[str, Any] = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid()}
    for key, var in TORCHRUN_ENV.items():
        if env.get(var, "").isdigit():
            out[key] = int(env[var])
    if "CUDA_VISIBLE_DEVICES" in env:
        out["cuda_visible_devices"] = env["CUDA_VISIBLE_DEVICES"]
    slurm = {k: int(env[v]) if env[v].isdigit() else env[v] for k, v in SLURM_ENV.items() if v in env}
    if slurm:
        out["slurm"] = slurm
    return out


def rank_map(backend: Any) -> list[dict[str, Any]]:
    """Every rank's :func:`placement`, in rank order, on every rank (call it on all ranks).

    Real ranks gather it (one ``all_gather_object``); ranks that share one process (a
    backend whose spec says ``one_process``: simulated ones) record it once, unchanged by the
    simulation."""
    me = placement(backend.rank)
    if backend.world == 1 or backend.spec.one_process:
        return [me]
    return list(backend.all_gather_object(me))
