"""Dynamic-delay cyclic gradient updates (DDCGU): a token, and gradients accumulated meanwhile.

Paper: Hu, Wang, Wang, Zhou, Xiang, Li, Shi, "Dynamic Delay Based Cyclic Gradient Update
Method for Distributed Training" (PRCV 2018).  Only its abstract is public: workers push
gradients to the parameter servers in a round-robin order with dynamic delays; stale
gradient information is accumulated locally in each worker; the worker that obtains the
token pushes its accumulated gradients; against synchronous and cyclic delayed updates
(``ps_sync``, ``ps_cyclic``) it reaches the same accuracy faster.

What is sent to whom, and when (``W`` workers, :mod:`impls.families.ps`):

1. Worker (main loop): reads the newest parameters it has received, computes a gradient
   and adds it to its accumulation ``a`` (``k`` gradients).  It never waits for its turn.
2. Worker (a background activity: a thread on real ranks, an actor on the simulated
   platform): waits for the token (a grant from server 0) and, if no gradient has
   finished since its last turn, for the next one (at most one step of this worker, the
   stall ``adapt`` spares the fast workers from a slow one); then takes ``a`` as it is,
   whatever gradient the main loop is in the middle of, and sends every server a header
   (rank, the parameter version its oldest gradient was computed on, ``k``, its measured
   seconds per gradient) and its part of ``a``; then receives the new parameters, which
   the main loop installs before its next gradient.
3. Server: grants the token to the next worker in the order (below), receives that
   worker's push, applies ``a`` with weight ``1/W`` (each gradient counts as one
   ``ps_sync`` worker's share: nothing is lost or counted twice, tested by checksum),
   replies, and grants the next.  Every server shard follows the same order (computed
   from the same headers); only server 0 sends grants.
4. At the end a worker's activity pushes its remainder with "done" at its next turn;
   when all are done every worker receives the final parameters.

So the token circulates at the pace of the network and of the fastest workers: a
gradient's delay is the time to its worker's next turn, longer for more workers and a
slower network, and a push sums as many gradients as its worker finished meanwhile: the
"dynamic delay".  A gradient is typically ``2 W`` pushes stale (the reply of a turn lands
while the next gradient is computed on the parameters before it), against ``W - 1`` for
``ps_cyclic``, and a push of ``k`` gradients moves the model ``k`` times as far: tune the
learning rate down (the default experiment's grid picked 0.03 for ``ddcgu`` against 0.1
for the other modes).

**The order (the abstract does not say how the dynamic delay is chosen).**  With
``adapt: false`` the token goes round robin over the workers still training.  With
``adapt: true`` (default) the server keeps each worker's seconds per gradient ``tau_i``
(from its pushes) and visits worker ``i`` only in every
``p_i = max(1, round(tau_i / median(tau)))``-th cycle: a 4x slow worker gets the token a
quarter as often, so its turns carry about as many gradients as a fast worker's and the
fast workers' turns come round sooner (their gradients are fresher).  Tried first: the
token checked by the main loop between gradients (no background activity).  A grant then
waits for the holder's current gradient, so with workers in step every turn costs a
whole step time, pushes sum ~W gradients ~W turns stale, and it diverged on the digits
stand-in at the learning rate every other mode trains with.  Not tried: a deadline after
which the token skips its holder (a background push makes it unnecessary).

Hyperparameters (and the learning rate, above):

* ``adapt`` (true): the speed-adapted visiting period above; off: plain round robin.
* ``servers`` (1): server ranks, each owning an equal range of the parameters.

With one worker the token never leaves it: a push every step, plain SGD (tested).
Epochs are shared (``shared_epochs``): fast workers take more of an epoch's steps.
"""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass, field

import torch

from ..comm import stepcost as sc
from ..protocol import ServeContext, StepContext
from ..families.ps import DONE, HEADER, PUSH, ParameterServer, split, staleness_stats
from . import register


@dataclass
class DDCGUConfig:
    adapt: bool = True
    servers: int = field(default=1, metadata={"min": 1})


def visit(cycle: int, tau: list[float | None], live: list[int], adapt: bool) -> list[int]:
    """The live workers that get the token in cycle ``cycle``, in order (see the docstring)."""
    known = [tau[i] for i in live if tau[i]]
    if not adapt or not known:
        return list(live)
    med = statistics.median(known)
    out = [i for i in live if not tau[i] or cycle % max(1, round(tau[i] / med)) == 0]
    return out or list(live)


@register("ddcgu")
class DDCGU(ParameterServer):
    Config = DDCGUConfig
    step_schedule = "shared_epochs"
    timing_dependent = True  # a push sums what accumulated while the token went round

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, **opts) -> float:
        """A worker's main loop never waits (its background activity pushes at its turn): the
        gradient rate is the workers' compute rate, ``T = n / sum_i 1/(C f_i)``."""
        return p.nodes / sum(1 / (p.compute_s * f) for f in sc.worker_factors(p))

    def setup(self, model):
        super().setup(model)
        self.acc = [torch.zeros(n, dtype=self.shards.dtype) for n in self.shards.sizes]
        self.k, self.busy, self.acc_version = 0, 0.0, list(self.version)
        self.t_exit = self.comm.clock.now()
        b = self.comm.backend
        self._lock, self._thread, self._error = b.lock(), None, None
        self.pending: list[torch.Tensor] | None = None  # received parameters, installed before the next gradient
        self.finishing = False
        self._ready = b.event()  # set: a gradient is waiting in the accumulation (or the worker is finishing)

    # -- main loop ---------------------------------------------------------------------
    @contextlib.contextmanager
    def computing(self, s: StepContext):  # 1
        with self._lock:
            pending, self.pending = self.pending, None
            read = list(self.version)
        if pending is not None:
            self.shards.write(pending)
        self.read_version = read
        yield

    def step(self, s: StepContext) -> dict[str, float]:
        clock = self.comm.clock
        busy = clock.now() - self.t_exit  # this gradient's compute (+ straggler delay)
        grads = self.shards.grads()
        out = {"ps/grad_sum": float(sum(float(g.double().sum()) for g in grads))}
        if self.ctx.world == 1:  # the token never leaves: a push every step
            out["ps/staleness"] = self.push_pull(grads, 1.0)[1]
        else:
            if self._thread is None:
                self._thread = self.comm.backend.start_background(self._run, "ddcgu-token")
            with self._lock:
                if self.k == 0:
                    self.acc_version = self.read_version
                for a, g in zip(self.acc, grads):
                    a.add_(g)
                self.k += 1
                self.busy += busy
                self._ready.set()
            self._raise()
        self.t_exit = clock.now()
        return out

    def close(self) -> None:  # 4
        if self.closed or not self.is_worker():
            return
        self.closed = True
        if self.ctx.world == 1:
            sends = self.push([None] * self.cfg.servers, 0.0, DONE)
        else:
            with self._lock:
                self.finishing = True
                self._ready.set()
            if self._thread is None:
                self._thread = self.comm.backend.start_background(self._run, "ddcgu-token")
            self._thread.join()
            self._raise()
            sends = []
        self.pull()  # the final parameters
        for h in sends:
            h.wait()

    def _raise(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"ddcgu rank {self.ctx.rank}: token activity failed") from self._error

    # -- background activity: the token's turns ---------------------------------------
    def _run(self) -> None:  # 2
        try:
            grant, servers = self.shards.empty(HEADER), range(self.cfg.servers)
            while True:
                self.comm.irecv(grant, self.shards.rank(0)).wait()
                self._ready.wait()  # the token waits for this worker's first gradient since its last turn
                with self._lock:
                    self._ready.clear()
                    acc, k, busy, ver, done = self.acc, self.k, self.busy, self.acc_version, self.finishing
                    self.acc = [torch.zeros(n, dtype=self.shards.dtype) for n in self.shards.sizes]
                    self.k, self.busy = 0, 0.0
                head = [[self.ctx.rank, ver[j], k, DONE if done else PUSH, busy / k if k else 0.0] for j in servers]
                sends = [self.comm.isend(torch.tensor(head[j], dtype=self.shards.dtype), self.shards.rank(j)) for j in servers]
                if k:
                    sends += [self.comm.isend(acc[j], self.shards.rank(j)) for j in servers]
                for h in sends:
                    h.wait()
                if done:
                    return
                if k:
                    bufs = [self.shards.buffer(j) for j in servers]
                    for h in [self.comm.irecv(b, self.shards.rank(j)) for j, b in enumerate(bufs)]:
                        h.wait()
                    parts = [split(b) for b in bufs]
                    with self._lock:
                        self.pending = [body for body, _ in parts]
                        self.version = [h[0] for _, h in parts]
        except BaseException as e:  # noqa: BLE001 - re-raised in the main loop
            self._error = e

    # -- server ----------------------------------------------------------------------------
    def serve(self, sc: ServeContext) -> None:  # 3
        W, sh = self.ctx.world, self.server
        S = sc.steps_per_epoch * W
        head, body = self.shards.empty(HEADER), self.shards.empty(sh.hi - sh.lo)
        tau: list[float | None] = [None] * W
        done = [False] * W
        applied, pushes, epoch, cycle = 0, 0, sc.start_epoch, 0
        stale, checksum = [], 0.0
        clock = self.comm.clock
        while not all(done):
            for w in visit(cycle, tau, [i for i in range(W) if not done[i]], self.cfg.adapt):
                t0 = clock.now()
                if W == 1:  # the worker pushes every step (no token)
                    buf = self.shards.buffer(sh.j)
                    self.comm.irecv(buf, w).wait()
                    g, (_, ver, k, flag, sec) = split(buf)
                else:
                    if sh.j == 0:
                        self.comm.isend(torch.zeros(HEADER, dtype=self.shards.dtype), w).wait()
                    self.comm.irecv(head, w).wait()
                    _, ver, k, flag, sec = (float(v) for v in head)
                    if k > 0:
                        self.comm.irecv(body, w).wait()
                    g = body
                if sec > 0:
                    tau[w] = sec
                st = sh.version - ver
                if k > 0:
                    sh.apply(g, sc.lr_at(sc.start_epoch + applied / S), 1.0 / W, k)
                    applied += int(k)
                    stale.append(st)
                    checksum += float(g.double().sum())
                    sc.log(epoch, pushes, {"ps/worker": w, "ps/staleness": st, "ps/k": k, "ps/version": sh.version,
                                           "ps/wait_s": clock.now() - t0})
                    pushes += 1
                if flag == DONE:
                    done[w] = True
                elif k > 0:
                    self.send_reply(w, [sh.version, st, 0.0, 0.0, 0.0])
                while epoch < sc.epochs - 1 and applied >= (epoch + 1 - sc.start_epoch) * S:
                    self.end_epoch(sc, epoch, {**staleness_stats(stale), "ps/applied_sum": checksum})
                    stale, checksum, epoch = [], 0.0, epoch + 1
            cycle += 1
        for w in range(W):
            self.send_reply(w, [sh.version, 0.0, 0.0, 0.0, 0.0])
        self.drain_replies()
        self.end_epoch(sc, sc.epochs - 1, {**staleness_stats(stale), "ps/applied_sum": checksum})
