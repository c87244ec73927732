"""The ``torch`` backend: real ranks under torchrun, ``torch.distributed`` (gloo on CPU,
NCCL on GPU), the wall clock.  The only module of ``impls/`` that imports
``torch.distributed``; see :mod:`impls.backends` for the interface."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from . import BACKENDS, Backend, NotAMember

OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def use_cuda(kind: str) -> bool:
    """Whether ranks of ``kind`` (``auto``, ``gloo``, ``nccl``) use this process's GPU (the spec's)."""
    return BACKENDS.get("torch")().use_cuda(kind)


def usable_gpus() -> int:
    """CUDA GPUs this machine's torch can use with NCCL (0 without CUDA or without NCCL)."""
    if not (dist.is_available() and dist.is_nccl_available()):
        return 0
    return torch.cuda.device_count()


def join(kind: str = "auto") -> "TorchBackend | None":
    """Join torchrun's process group (once per process); None without torchrun."""
    if "RANK" not in os.environ and not dist.is_initialized():
        return None
    if not dist.is_initialized():
        group = BACKENDS.get("torch")().process_group(kind)
        if group == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(group, timeout=timedelta(minutes=10))
    return TorchBackend()


class TorchBackend(Backend):
    def __init__(self, group=None):
        super().__init__()
        self.group = group
        self.rank = dist.get_rank(group) if group is not None else dist.get_rank()
        self.world = dist.get_world_size(group) if group is not None else dist.get_world_size()
        self.name = dist.get_backend(group) if group is not None else dist.get_backend()

    def all_reduce(self, t, op: str = "sum", async_op: bool = False):
        return dist.all_reduce(t, op=OPS[op], group=self.group, async_op=async_op)

    def all_gather(self, outs, t, async_op: bool = False):
        return dist.all_gather(list(outs), t, group=self.group, async_op=async_op)

    def broadcast(self, t, src: int, async_op: bool = False):
        return dist.broadcast(t, src=src, group=self.group, async_op=async_op)

    def reduce(self, t, dst: int, op: str = "sum", async_op: bool = False):
        return dist.reduce(t, dst=dst, op=OPS[op], group=self.group, async_op=async_op)

    def gather(self, t, outs, dst: int, async_op: bool = False):
        return dist.gather(t, gather_list=list(outs) if self.rank == dst else None, dst=dst, group=self.group,
                           async_op=async_op)

    def scatter(self, t, ins, src: int, async_op: bool = False):
        return dist.scatter(t, scatter_list=list(ins) if self.rank == src else None, src=src, group=self.group,
                            async_op=async_op)

    def reduce_scatter(self, out, ins, op: str = "sum", async_op: bool = False):
        return dist.reduce_scatter(out, list(ins), op=OPS[op], group=self.group, async_op=async_op)

    def barrier(self) -> None:
        dist.barrier(group=self.group)

    def all_gather_object(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def isend(self, t, dst: int):
        return dist.isend(t, dst=dst, group=self.group)

    def irecv(self, t, src: int | None):
        return dist.irecv(t, src=src, group=self.group)

    def counter_add(self, key: str, n: int = 1) -> int:
        return int(dist.distributed_c10d._get_default_store().add(key, n))

    def subgroup(self, ranks: list[int]) -> "Backend":
        """A backend over ``ranks`` (every rank must call this, members or not); a rank
        outside ``ranks`` gets a backend that refuses every operation."""
        group = dist.new_group(ranks=list(ranks))
        return TorchBackend(group) if self.rank in ranks else NotAMember(ranks)

    def side_group(self, kind: str) -> "TorchBackend":
        return self if self.name == kind else TorchBackend(dist.new_group(backend=kind))

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
