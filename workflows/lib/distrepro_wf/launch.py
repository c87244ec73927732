"""torchrun command lines for one run, locally or under Slurm.

* ``local``: ``torchrun --standalone --nproc-per-node N`` (one machine, a free port).
* ``slurm``: the job holds ``ceil(N / gpus_per_node)`` nodes (the Slurm profile asks
  for them from the rule's resources); ``srun`` starts one torchrun per node, which
  rendezvous on the first node of the allocation with the c10d backend.
"""

from __future__ import annotations

import math
import shlex
import sys
from typing import Any


def slurm_nodes(nodes: int, launcher: dict[str, Any]) -> int:
    return max(1, math.ceil(nodes / int(launcher.get("gpus_per_node", 8))))


def torchrun_command(nodes: int, plan_path: str, launcher: dict[str, Any] | None = None,
                     python: str | None = None) -> list[str]:
    """Command that runs the plan (a list of runs, see ``impls.run``) on ``nodes`` ranks."""
    launcher = launcher or {}
    python = python or sys.executable
    entry = ["-m", "impls.run", "--plan", plan_path, "--backend", launcher.get("backend", "auto")]
    kind = launcher.get("kind", "local")
    if kind == "local":
        return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nodes}", *entry]
    if kind == "slurm":
        hosts = slurm_nodes(nodes, launcher)
        per = nodes // hosts
        if per * hosts != nodes:
            raise ValueError(f"nodes={nodes} is not a multiple of the {hosts} Slurm nodes it needs")
        # one bash string per node: the head node and job id are expanded there, every path is quoted
        head = "$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)"
        return ["srun", f"--nodes={hosts}", "--ntasks-per-node=1", "bash", "-c",
                " ".join([shlex.quote(python), "-m", "torch.distributed.run", f"--nnodes={hosts}",
                          f"--nproc-per-node={per}", "--rdzv-backend=c10d", f"--rdzv-endpoint={head}:29500",
                          "--rdzv-id=$SLURM_JOB_ID", shlex.join(entry)])]
    raise ValueError(f"launcher.kind: unknown {kind!r}; allowed values: local, slurm")
