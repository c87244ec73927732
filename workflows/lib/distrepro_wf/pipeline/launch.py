"""torchrun command lines for one launch, locally or under Slurm, and the Slurm job's size.

* ``local``: ``torchrun --standalone --nproc-per-node N`` (one machine, a free port).
* ``slurm``: ``N`` ranks need ``ceil(N / gpus_per_node)`` machines ("hosts"), ``N / hosts``
  ranks on each.  One host: the same standalone torchrun, inside the job.  Several: the job
  holds ``hosts`` nodes with one task each (:func:`job_resources`, submitted by the Slurm
  profile); ``srun`` starts one torchrun per task, and they rendezvous (c10d) on the first
  node of the allocation at a port derived from the job id, so two jobs sharing a node do
  not collide.  ``launcher.emulate_nodes`` (a one-machine test cluster) asks for the hosts
  as tasks on one node, with ``--overcommit``: the same torchrun commands and rendezvous,
  on one node.
* A simulated group (``backend: simgrid``: one process however many virtual nodes) is a
  single-task job sized by ``launcher.mem_mb_simulated``, not by its node count.

GPUs: every rank gets one GPU (``gpus_per_node`` per host), except with ``backend:
gloo`` (CPUs only, no GPU requested); ``auto`` then uses NCCL where it finds the GPUs.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from typing import Any, Iterable, Mapping

from impls.backends import DEFAULT as DEFAULT_BACKEND
from impls.backends import backend_of

# where the c10d rendezvous listens on the first node: below Linux's ephemeral ports
RDZV_PORT_BASE, RDZV_PORT_SPAN = 29500, 2000
HEAD = "$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)"
PORT = f"$(({RDZV_PORT_BASE} + SLURM_JOB_ID % {RDZV_PORT_SPAN}))"
# memory of a job beside its ranks (per node): Snakemake's job processes, train.py and
# torchrun's agent (about 1.3 GB measured, page cache included, with torch 2.14 on CPU)
JOB_MEM_MB = 1500
# the Slurm resources of a train job (the rule declares all of them; None = not asked for)
RESOURCE_KEYS = ("nodes", "tasks", "cpus_per_task", "mem_mb", "gpu", "gres", "tasks_per_gpu", "mpi",
                 "slurm_extra")


def slurm_nodes(nodes: int, launcher: Mapping[str, Any]) -> int:
    return max(1, math.ceil(nodes / int(launcher.get("gpus_per_node", 8))))


def slurm_layout(nodes: int, launcher: Mapping[str, Any]) -> tuple[int, int]:
    """(hosts, ranks per host) of ``nodes`` ranks; ValueError naming the key if they do not split evenly."""
    hosts = slurm_nodes(nodes, launcher)
    per = nodes // hosts
    if per * hosts != nodes:
        raise ValueError(f"launcher.gpus_per_node: nodes={nodes} is not a multiple of the {hosts} Slurm nodes "
                         f"it needs (gpus_per_node={launcher.get('gpus_per_node', 8)})")
    return hosts, per


def torchrun(*args: Any, python: str | None = None) -> list[str]:
    """``python -m torch.distributed.run ARGS``: the project's only spelling of a torchrun."""
    return [python or sys.executable, "-m", "torch.distributed.run", *map(str, args)]


def standalone(nprocs: int, *entry: Any, python: str | None = None) -> list[str]:
    """The one single-host torchrun command of the project: ``nprocs`` ranks on this host
    (``--standalone``: a local c10d rendezvous) running ``entry`` (e.g. ``-m impls.run --config
    C --out O``); every launch, benchmark and rerun command line is built here or by
    :func:`torchrun_command` / :func:`multinode_args`."""
    return torchrun("--standalone", f"--nproc-per-node={nprocs}", *entry, python=python)


def run_command(nprocs: int, config: Any, out: Any, python: str | None = None) -> list[str]:
    """torchrun of one run config (``impls.run --config``) on ``nprocs`` ranks, writing to ``out``."""
    return standalone(nprocs, "-m", "impls.run", "--config", config, "--out", out, python=python)


def torchrun_command(nodes: int, plan_path: str | None, launcher: Mapping[str, Any] | None = None,
                     python: str | None = None, env: Mapping[str, str] | None = None,
                     entry: list[str] | None = None) -> list[str]:
    """Command that runs the plan (a list of runs, see ``impls.run``) on ``nodes`` ranks.

    ``env`` (default ``os.environ``): the job's environment, for the CPUs of a Slurm task;
    ``entry``: another program's torchrun arguments instead (``-m impls.bench.probe ...``: the
    probe, launched exactly as the experiments are)."""
    launcher = launcher or {}
    python = python or sys.executable
    env = os.environ if env is None else env
    if entry is None:
        entry = ["-m", "impls.run", "--plan", str(plan_path), "--backend", launcher.get("backend", DEFAULT_BACKEND)]
    kind = launcher.get("kind", "local")
    local = standalone(nodes, *entry, python=python)
    if kind == "local":
        return local
    if kind != "slurm":
        raise ValueError(f"launcher.kind: unknown {kind!r}; allowed values: local, slurm")
    hosts, per = slurm_layout(nodes, launcher)
    if hosts == 1:
        return local
    if "SLURM_JOB_ID" not in env:
        raise ValueError(f"launcher.kind: slurm: {nodes} ranks on {hosts} hosts need a Slurm job of {hosts} nodes; "
                         "run with --profile profiles/slurm (or use launcher.kind: local)")
    if launcher.get("emulate_nodes"):
        srun = ["srun", "--nodes=1", f"--ntasks={hosts}", "--overcommit"]
    else:
        srun = ["srun", f"--nodes={hosts}", f"--ntasks={hosts}", "--ntasks-per-node=1"]
    # Slurm 22.05's srun does not inherit the job's CPUs per task; ask for them again
    if env.get("SLURM_CPUS_PER_TASK"):
        srun.append(f"--cpus-per-task={env['SLURM_CPUS_PER_TASK']}")
    srun.append("--kill-on-bad-exit=1")  # one torchrun dies: stop the others (not wait for the rendezvous)
    # one bash string per task: the head node and port are expanded there, every path is quoted
    return [*srun, "bash", "-c",
            " ".join([*map(shlex.quote, torchrun(python=python)),
                      *multinode_args(hosts, per, f"{HEAD}:{PORT}", "$SLURM_JOB_ID"), shlex.join(entry)])]


def multinode_args(hosts: int, per: int, endpoint: str, rdzv_id: str) -> list[str]:
    """torchrun's arguments of one host of a multi-host launch: ``hosts`` torchruns of
    ``per`` ranks each rendezvous (c10d) at ``endpoint`` (the first host's address:port)
    under ``rdzv_id``.  Used by the Slurm launch (shell-expanded endpoint and id) and by
    the network-namespace tier (:mod:`distrepro_wf.bench.netns`), which tests it for real."""
    return [f"--nnodes={hosts}", f"--nproc-per-node={per}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
            f"--rdzv-id={rdzv_id}"]


def launch_world(cfg: Mapping[str, Any]) -> int | None:
    """Processes the launch of a run config starts: its workers plus the algorithm's other
    roles (``None``: a simulated run, one process).  A config the runtime will refuse runs
    with its workers alone (it fails there, named)."""
    if backend_of(cfg.get("backend")).one_process:
        return None
    from impls.errors import ConfigError
    from impls.config.runconfig import world_size

    try:
        return world_size(dict(cfg))
    except ConfigError:
        return int(cfg["nodes"])


def check_layouts(worlds: Iterable[int], launcher: Mapping[str, Any]) -> None:
    """Raise ValueError (naming the key) if a launch of one of ``worlds`` ranks cannot be laid out."""
    if launcher.get("kind", "local") == "slurm":
        for w in sorted(set(worlds)):
            slurm_layout(w, launcher)


def job_resources(worlds: Iterable[int | None], launcher: Mapping[str, Any]) -> dict[str, Any]:
    """The Slurm resources (:data:`RESOURCE_KEYS`) of the train job of a launch group.

    ``worlds``: the processes each launch of the group starts (workers plus other roles),
    ``None`` for a simulated member (one process).  Empty for ``launcher.kind: local``.
    Sized for the largest launch: ``hosts`` nodes, one task per node (``mpi``: the job runs
    its own ``srun``), ``ranks per host x cpus_per_rank`` CPUs and ``ranks per host x
    mem_mb_per_rank +`` :data:`JOB_MEM_MB` memory per node, one GPU per rank unless
    ``backend: gloo``.  A group of only simulated members is one task with
    ``mem_mb_simulated + JOB_MEM_MB``.
    """
    if launcher.get("kind", "local") != "slurm":
        return {}
    res: dict[str, Any] = dict.fromkeys(RESOURCE_KEYS)
    cpus_per_rank = int(launcher.get("cpus_per_rank", launcher.get("threads_per_rank", 1)))
    mem_per_rank = int(launcher.get("mem_mb_per_rank", 4000))
    real = [w for w in worlds if w is not None]
    if not real:  # simulated: one process, its size is its memory
        res.update(nodes=1, cpus_per_task=cpus_per_rank, mem_mb=int(launcher.get("mem_mb_simulated", 16000)) + JOB_MEM_MB)
        return res
    hosts, per = max(slurm_layout(w, launcher) for w in real)
    requested = launcher.get("backend", DEFAULT_BACKEND)
    gpus = backend_of(requested).may_use_gpu(requested)  # gloo: CPUs only; auto, nccl: a GPU per rank
    mem = per * mem_per_rank + JOB_MEM_MB  # per node
    if hosts == 1:
        res.update(nodes=1, cpus_per_task=per * cpus_per_rank, mem_mb=mem, gpu=per if gpus else None)
    elif launcher.get("emulate_nodes"):
        res.update(nodes=1, tasks=hosts, mpi="srun", cpus_per_task=per * cpus_per_rank,
                   mem_mb=hosts * mem, gres=f"gpu:{hosts * per}" if gpus else None,
                   tasks_per_gpu=0 if gpus else None, slurm_extra="--overcommit")
    else:  # --nodes=H --ntasks=H: one task per node
        res.update(nodes=hosts, tasks=hosts, mpi="srun", cpus_per_task=per * cpus_per_rank,
                   mem_mb=mem, gres=f"gpu:{per}" if gpus else None, tasks_per_gpu=0 if gpus else None)
    return res
