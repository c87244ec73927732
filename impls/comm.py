"""Instrumented communication: every byte an algorithm moves goes through here.

:class:`Communicator` wraps the rank's backend (:mod:`impls.backends`: torch.distributed
on real ranks) so that

* ``comm/bytes_sent`` / ``comm/bytes_recv`` are counted from the tensors actually
  passed (point-to-point: their exact size; collectives: the payload times the
  cost model of :mod:`impls.costmodel`, because the wire traffic happens inside the
  backend);
* ``time/comm_s`` is the wall time spent waiting for communication;
* ``time/net_emulated_s`` is the transfer time the emulated network
  (:mod:`impls.netmodel`) gives the messages completed in the step: the cost
  model's latency and bytes on the critical path over the link bandwidth, a
  deterministic function of the bytes and the network (summed over messages, even
  where they travel at the same time);
* ``time/net_delay_s`` is the part of it actually slept: what the real transfer,
  and any computation overlapped with it, had not already taken.

Algorithms call these methods, never the backend directly.  Calls
made with ``async_op=True`` return a :class:`Handle` whose ``wait()`` applies the
emulated delay, so overlap of communication with computation is preserved.

Set-up traffic, everything before the first :meth:`Communicator.pop_counters` (the
initial broadcast, which ends by resetting the counters), belongs to no step: it is
not emulated.  That is also what lets the runtime calibrate a relative network
(:meth:`~impls.netmodel.NetworkModel.calibrate`) after the set-up; any later message
on an uncalibrated one raises.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import torch

from .backends import Backend, Clock
from .costmodel import Cost, collective_cost
from .netmodel import NetworkConfig, NetworkModel


@dataclass
class Counters:
    bytes_sent: float = 0.0
    bytes_recv: float = 0.0
    comm_s: float = 0.0
    net_delay_s: float = 0.0
    net_emulated_s: float = 0.0
    messages: int = 0

    def as_metrics(self) -> dict[str, float]:
        return {
            "comm/bytes_sent": self.bytes_sent,
            "comm/bytes_recv": self.bytes_recv,
            "comm/messages": self.messages,
            "time/comm_s": self.comm_s,
            "time/net_delay_s": self.net_delay_s,
            "time/net_emulated_s": self.net_emulated_s,
        }


class Handle:
    """An in-flight operation.

    The emulated transfer starts when the operation is posted: ``wait()`` blocks for
    the real operation, then sleeps only what is left of ``post time + delay``, so
    communication overlapped with computation (overlap SGP, D-PSGD) is hidden as it
    would be on a real network.
    """

    def __init__(self, comm: "Communicator", work, delay_s: float, on_done=None):
        self._comm, self._work, self._delay, self._on_done = comm, work, delay_s, on_done
        self._posted = comm.clock.now()
        self._done = False

    def wait(self):
        if self._done:
            return
        clock = self._comm.clock
        t0 = clock.now()
        if self._work is not None:
            self._work.wait()
        left = self._posted + self._delay - clock.now()
        clock.sleep(left)
        self._done = True
        self._comm._add(comm_s=clock.now() - t0, net_delay_s=max(left, 0.0), net_emulated_s=self._delay)
        if self._on_done is not None:
            self._on_done()

    def is_completed(self) -> bool:
        return self._done or (self._work is not None and self._work.is_completed())


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator:
    def __init__(self, network: NetworkModel | None = None, backend: Backend | None = None,
                 clock: Clock | None = None):
        self.backend = backend if backend is not None else Backend()
        self.clock = clock if clock is not None else Clock()
        self.rank, self.world = self.backend.rank, self.backend.world
        self.net = network if network is not None else NetworkModel(NetworkConfig())
        self._c = Counters()
        self._lock = threading.Lock()  # async algorithms count from a gossip thread
        self._setup = True  # until the first pop_counters(): set-up traffic, not emulated

    # -- accounting -------------------------------------------------------------
    def _add(self, bytes_sent=0.0, bytes_recv=0.0, comm_s=0.0, net_delay_s=0.0, net_emulated_s=0.0, messages=0):
        with self._lock:
            c = self._c
            c.bytes_sent += bytes_sent
            c.bytes_recv += bytes_recv
            c.comm_s += comm_s
            c.net_delay_s += net_delay_s
            c.net_emulated_s += net_emulated_s
            c.messages += messages

    def pop_counters(self) -> Counters:
        """Counters since the last call (the runtime calls this once per step)."""
        with self._lock:
            c, self._c = self._c, Counters()
            self._setup = False
        return c

    def _delay(self, cost: Cost, concurrent: int) -> float:
        return 0.0 if self._setup else self.net.delay(cost, concurrent)

    def _finish(self, work, cost: Cost, concurrent: int, async_op: bool) -> Handle | None:
        self._add(bytes_sent=cost.bytes_sent, bytes_recv=cost.bytes_recv, messages=1)
        h = Handle(self, work, self._delay(cost, concurrent))
        if async_op:
            return h
        h.wait()
        return None

    # -- collectives ------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, op: str = "sum", async_op: bool = False):
        if self.world == 1:
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.all_reduce(t, op=op, async_op=True)
        cost = collective_cost("all_reduce", nbytes(t), self.world, self.net.cfg.allreduce_algorithm)
        return self._finish(work, cost, self.world, async_op)

    def all_gather(self, out: Sequence[torch.Tensor], t: torch.Tensor, async_op: bool = False):
        if self.world == 1:
            out[0].copy_(t)
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.all_gather(list(out), t, async_op=True)
        return self._finish(work, collective_cost("all_gather", nbytes(t), self.world), self.world, async_op)

    def broadcast(self, t: torch.Tensor, src: int, async_op: bool = False):
        if self.world == 1:
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.broadcast(t, src=src, async_op=True)
        return self._finish(work, collective_cost("broadcast", nbytes(t), self.world), self.world, async_op)

    def reduce(self, t: torch.Tensor, dst: int, op: str = "sum", async_op: bool = False):
        if self.world == 1:
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.reduce(t, dst=dst, op=op, async_op=True)
        return self._finish(work, collective_cost("reduce", nbytes(t), self.world), self.world, async_op)

    def gather(self, t: torch.Tensor, out: Sequence[torch.Tensor], dst: int, async_op: bool = False):
        """``out`` (``world`` tensors like ``t``) is filled on ``dst`` only."""
        if self.world == 1:
            out[0].copy_(t)
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.gather(t, out, dst=dst, async_op=True)
        return self._finish(work, collective_cost("gather", nbytes(t), self.world), self.world, async_op)

    def scatter(self, t: torch.Tensor, parts: Sequence[torch.Tensor], src: int, async_op: bool = False):
        """``parts`` (``world`` tensors like ``t``) are read on ``src`` only."""
        if self.world == 1:
            t.copy_(parts[0])
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.scatter(t, parts, src=src, async_op=True)
        return self._finish(work, collective_cost("scatter", nbytes(t), self.world), self.world, async_op)

    def reduce_scatter(self, out: torch.Tensor, parts: Sequence[torch.Tensor], op: str = "sum",
                       async_op: bool = False):
        """``out`` becomes the reduction of every rank's ``parts[rank]``."""
        if self.world == 1:
            out.copy_(parts[0])
            return Handle(self, None, 0.0) if async_op else None
        work = self.backend.reduce_scatter(out, parts, op=op, async_op=True)
        total = sum(nbytes(p) for p in parts)
        return self._finish(work, collective_cost("reduce_scatter", total, self.world), self.world, async_op)

    def barrier(self) -> None:
        if self.world > 1:
            t0 = self.clock.now()
            self.backend.barrier()
            self._add(comm_s=self.clock.now() - t0)

    # -- point to point -----------------------------------------------------------
    def isend(self, t: torch.Tensor, dst: int, concurrent: int = 1) -> Handle:
        """Non-blocking send; the sender pays no emulated delay (the receiver does)."""
        work = self.backend.isend(t, dst=dst)
        self._add(bytes_sent=nbytes(t), messages=1)
        return Handle(self, work, 0.0)

    def irecv(self, t: torch.Tensor, src: int, concurrent: int = 1) -> Handle:
        """Non-blocking receive; ``wait()`` adds the emulated transfer time of ``t``."""
        work = self.backend.irecv(t, src=src)
        self._add(bytes_recv=nbytes(t))
        return Handle(self, work, self._delay(collective_cost("p2p", nbytes(t), 2), concurrent))

    def send(self, t: torch.Tensor, dst: int) -> None:
        self.isend(t, dst).wait()

    def recv(self, t: torch.Tensor, src: int) -> None:
        self.irecv(t, src).wait()
