"""Instrumented communication: every byte an algorithm moves goes through here.

:class:`Communicator` wraps the rank's backend (:mod:`impls.backends`: torch.distributed
on real ranks) so that

* ``comm/bytes_sent`` / ``comm/bytes_recv`` are counted from the tensors actually
  passed (point-to-point: their exact size; collectives: the payload times the
  cost model of :mod:`impls.comm.costmodel` for the configured all-reduce algorithm,
  because the wire traffic happens inside the backend), and ``comm/messages``
  counts the sends and collectives;
* ``time/comm_s`` is the time (of the rank's clock) spent waiting for communication;
* every payload is staged between the device and the transport's host memory, both ways
  (a collective: its tensor out and back; a send: out; a receive: in), declared to the
  clock as a ``stage`` op (:meth:`impls.backends.Clock.charge_op`: nothing on the wall
  clock; on the simulated one PCIe time under a GPU profile, free without a device).

Real ranks measure the machine's own network: nothing here delays a message (a
network is studied on the simulated platform, not emulated on real ranks).

Algorithms call these methods, never the backend directly.  Calls made with
``async_op=True`` return a :class:`Handle` whose ``wait()`` blocks for the operation
and counts the time waited, so overlap of communication with computation is kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import torch

from ..backends import Backend, Clock
from .costmodel import ALGORITHMS, Cost, collective_cost

#: passes over a payload staged between the device and the transport's host memory (op kind
#: ``stage``), as :class:`Communicator` charges them: a send out, a receive in, an all-reduce out
#: and back (a closed form counts its messages by these: :func:`impls.comm.stepcost.ops_s`)
STAGE_PASSES = {"send": 1, "recv": 1, "all_reduce": 2}


@dataclass
class Counters:
    bytes_sent: float = 0.0
    bytes_recv: float = 0.0
    comm_s: float = 0.0
    messages: int = 0

    def as_metrics(self) -> dict[str, float]:
        return {
            "comm/bytes_sent": self.bytes_sent,
            "comm/bytes_recv": self.bytes_recv,
            "comm/messages": self.messages,
            "time/comm_s": self.comm_s,
        }


class Handle:
    """An in-flight operation: ``wait()`` blocks until it is done and counts the time
    waited in ``time/comm_s`` (once; later calls return at once)."""

    def __init__(self, comm: "Communicator", work):
        self._comm, self._work = comm, work
        self._done = False

    def wait(self):
        if self._done:
            return
        clock = self._comm.clock
        t0 = clock.now()
        if self._work is not None:
            self._work.wait()
        self._done = True
        self._comm._add(comm_s=clock.now() - t0)

    def is_completed(self) -> bool:
        return self._done or (self._work is not None and self._work.is_completed())


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator:
    """``allreduce_algorithm`` (``ring``, ``tree``, ``recursive_doubling``): the algorithm
    the cost model assumes when it counts an all-reduce's bytes."""

    def __init__(self, backend: Backend | None = None, clock: Clock | None = None,
                 allreduce_algorithm: str = "ring"):
        if allreduce_algorithm not in ALGORITHMS:
            raise ValueError(f"unknown allreduce algorithm {allreduce_algorithm!r}; known: {', '.join(ALGORITHMS)}")
        self.backend = backend if backend is not None else Backend()
        self.clock = clock if clock is not None else Clock()
        self.rank, self.world = self.backend.rank, self.backend.world
        self.allreduce_algorithm = allreduce_algorithm
        self._c = Counters()
        self._lock = threading.Lock()  # async algorithms count from a gossip thread

    def receive_from_any(self) -> None:
        """Carry this communicator's traffic from now on over a group of the same ranks that
        can receive from any source (``irecv(t, None)``): :meth:`Backend.any_source_group`
        (on NCCL ranks a gloo group beside it).  Every rank calls it (it may create a group)."""
        self.backend = self.backend.any_source_group()

    # -- accounting -------------------------------------------------------------
    def _add(self, bytes_sent=0.0, bytes_recv=0.0, comm_s=0.0, messages=0):
        with self._lock:
            c = self._c
            c.bytes_sent += bytes_sent
            c.bytes_recv += bytes_recv
            c.comm_s += comm_s
            c.messages += messages

    def pop_counters(self) -> Counters:
        """Counters since the last call (the runtime calls this once per step)."""
        with self._lock:
            c, self._c = self._c, Counters()
        return c

    def _finish(self, work, cost: Cost, async_op: bool) -> Handle | None:
        self._add(bytes_sent=cost.bytes_sent, bytes_recv=cost.bytes_recv, messages=1)
        h = Handle(self, work)
        if async_op:
            return h
        h.wait()
        return None

    # -- collectives ------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, op: str = "sum", async_op: bool = False):
        if self.world == 1:
            return Handle(self, None) if async_op else None
        # to the transport's buffer, and back (before it starts)
        self.clock.charge_op("stage", STAGE_PASSES["all_reduce"] * nbytes(t))
        work = self.backend.all_reduce(t, op=op, async_op=True)
        algo = self.backend.allreduce_algorithm_for(nbytes(t), self.allreduce_algorithm)
        cost = collective_cost("all_reduce", nbytes(t), self.world, algo)
        return self._finish(work, cost, async_op)

    def all_gather(self, out: Sequence[torch.Tensor], t: torch.Tensor, async_op: bool = False):
        if self.world == 1:
            out[0].copy_(t)
            return Handle(self, None) if async_op else None
        work = self.backend.all_gather(list(out), t, async_op=True)
        return self._finish(work, collective_cost("all_gather", nbytes(t), self.world), async_op)

    def broadcast(self, t: torch.Tensor, src: int, async_op: bool = False):
        if self.world == 1:
            return Handle(self, None) if async_op else None
        work = self.backend.broadcast(t, src=src, async_op=True)
        return self._finish(work, collective_cost("broadcast", nbytes(t), self.world), async_op)

    def reduce(self, t: torch.Tensor, dst: int, op: str = "sum", async_op: bool = False):
        if self.world == 1:
            return Handle(self, None) if async_op else None
        work = self.backend.reduce(t, dst=dst, op=op, async_op=True)
        return self._finish(work, collective_cost("reduce", nbytes(t), self.world), async_op)

    def gather(self, t: torch.Tensor, out: Sequence[torch.Tensor], dst: int, async_op: bool = False):
        """``out`` (``world`` tensors like ``t``) is filled on ``dst`` only."""
        if self.world == 1:
            out[0].copy_(t)
            return Handle(self, None) if async_op else None
        work = self.backend.gather(t, out, dst=dst, async_op=True)
        return self._finish(work, collective_cost("gather", nbytes(t), self.world), async_op)

    def scatter(self, t: torch.Tensor, parts: Sequence[torch.Tensor], src: int, async_op: bool = False):
        """``parts`` (``world`` tensors like ``t``) are read on ``src`` only."""
        if self.world == 1:
            t.copy_(parts[0])
            return Handle(self, None) if async_op else None
        work = self.backend.scatter(t, parts, src=src, async_op=True)
        return self._finish(work, collective_cost("scatter", nbytes(t), self.world), async_op)

    def reduce_scatter(self, out: torch.Tensor, parts: Sequence[torch.Tensor], op: str = "sum",
                       async_op: bool = False):
        """``out`` becomes the reduction of every rank's ``parts[rank]``."""
        if self.world == 1:
            out.copy_(parts[0])
            return Handle(self, None) if async_op else None
        work = self.backend.reduce_scatter(out, parts, op=op, async_op=True)
        total = sum(nbytes(p) for p in parts)
        return self._finish(work, collective_cost("reduce_scatter", total, self.world), async_op)

    def barrier(self) -> None:
        if self.world > 1:
            t0 = self.clock.now()
            self.backend.barrier()
            self._add(comm_s=self.clock.now() - t0)

    # -- point to point -----------------------------------------------------------
    def isend(self, t: torch.Tensor, dst: int) -> Handle:
        """Non-blocking send of ``t`` to rank ``dst``."""
        self.clock.charge_op("stage", STAGE_PASSES["send"] * nbytes(t))  # to the transport's buffer, then it leaves
        work = self.backend.isend(t, dst=dst)
        self._add(bytes_sent=nbytes(t), messages=1)
        return Handle(self, work)

    def irecv(self, t: torch.Tensor, src: int | None) -> Handle:
        """Non-blocking receive into ``t`` from rank ``src`` (``None``: from any rank)."""
        work = self.backend.irecv(t, src=src)
        self._add(bytes_recv=nbytes(t))
        self.clock.charge_op("stage", STAGE_PASSES["recv"] * nbytes(t))  # from the transport's buffer (when posted)
        return Handle(self, work)

    def send(self, t: torch.Tensor, dst: int) -> None:
        self.isend(t, dst).wait()

    def recv(self, t: torch.Tensor, src: int | None) -> None:
        self.irecv(t, src).wait()
