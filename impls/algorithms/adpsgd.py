"""AD-PSGD: asynchronous decentralized parallel SGD with atomic pairwise averaging.

Paper: Lian, Zhang, Zhang, Liu, "Asynchronous Decentralized Parallel Stochastic
Gradient Descent", ICML 2018 (arXiv 1710.06952), Algorithm 1.  Every worker ``i``
keeps its own model ``x_i`` and repeats, at its own pace, with no global barrier:

1. read ``x_hat = x_i`` and compute a stochastic gradient ``g`` at ``x_hat`` on a
   local batch (``computing``: ``x_hat`` is copied into the module's parameters);
2. meanwhile average atomically with one neighbour ``j``: ``x_i = x_j = (x_i + x_j)/2``
   (an active worker's background thread, overlapping step 1 and the straggler sleep);
3. apply the gradient to the *current* model: ``x_i = x_i - lr * d(g)`` (``step``; ``d``
   is the local optimizer's direction: momentum / Nesterov stay local, as in the paper's
   experiments, and the L2 term ``weight_decay * x_hat`` is added to ``g`` at ``x_hat``,
   the point where the gradient was taken, not at the current ``x_i``; parameters only,
   buffers such as BN statistics stay local).  An active worker then waits until its
   step-2 average has landed, so at most one is in flight and the next read includes it
   (``gossip/wait_s``: this wait, the only time the main thread waits for communication).

Deadlock avoidance (paper Sec. 4): the bipartite exponential graph of
:mod:`impls.comm.topology` (odd ranks active, even ranks passive, every edge across the
split).  Only active workers initiate an average; a passive worker's thread only
answers, one request at a time, so no cycle of waits can form.  What is sent:

* active ``a`` -> passive ``p``: ``[x_a, 1, a]`` (model, "request" flag, sender rank),
  ``4 (#params + 2)`` bytes; ``p`` (receiving from any source) answers with ``x_p``
  (``4 #params`` bytes) and, under its lock, sets ``x_p = (x_p + x_a) / 2`` in the same
  critical section as it copied the reply, so its main thread cannot apply a gradient
  in between.  ``a`` sets ``x_a += (x_p - x_a_sent) / 2``: equal to ``(x_a_sent + x_p)/2``
  plus whatever gradient step ``a`` applied while the exchange was in flight, i.e.
  exactly Algorithm 1's "average, then apply the gradient" (the two commute).  Both
  sides average the same two models, so the sum of all models is conserved up to
  rounding and no gradient step is lost.
* one exchange per step of each active worker; passive workers exchange as often as
  their active neighbours ask (a fast active neighbour averages a slow passive often).
* at ``close`` each active worker sends ``[x, 0, a]`` ("done") to each neighbour;
  passive threads stop when all their neighbours are done.  The "done" message has the
  full request's size (a model copy: the passive side's receive-from-any is posted
  with the request's size, and gloo matches sizes), once per neighbour per run; it is
  counted in the bytes like any message.

All point-to-point traffic of a rank runs on its one background activity, through
``ctx.comm`` (bytes are counted there; ``time/comm_s`` is thus the activity's waiting,
overlapped with compute).  The activity and its lock, event and queue come from the
backend (``start_background``, ``lock``, ``event``, ``queue``): threads on real ranks,
actors on the simulated platform, where the order of the exchanges follows simulated
time and a run is deterministic.  Epochs are shared by all workers
(``step_schedule = "shared_epochs"``, see :mod:`impls.runtime.steps`).

Logged per step: ``gossip/staleness`` = averages applied to ``x_i`` between reading
``x_hat`` (step 1) and applying its gradient (step 3): for an active worker 1 if its
own step-2 average landed before the gradient, else 0; for a passive one the number
of requests it served meanwhile.  (The paper's analysis bounds the *global* number of
updates in between, which needs a global clock this method does not have.)  Also
``gossip/steps_done`` (this worker's steps so far), ``gossip/averages`` (so far).

Hyperparameters:

* ``peer_selection`` (``random``, the paper: a uniformly random neighbour each step;
  ``cyclic``: the graph's hop schedule by own step count, as the SGP repo's bilat
  gossip).  Random mixes more robustly when speeds differ; both are doubly stochastic.
* ``timeout_s`` (300): the longest the main thread waits for an average, or at ``close``
  for the thread, before the run fails instead of hanging (raise it for very slow steps);
  seconds of the run's clock (``comm.clock``: wall clock on real ranks, simulated time on
  the simulated platform), counted from the first unanswered poll.

Differences from the SGP repo's AD-PSGD (``gossip_module/ad_psgd.py``, the only public
code; the authors' Torch/MPI code was never released): there, a gossip *process*
averages continuously, independently of the gradient steps, passive ranks receive from
their scheduled in-peer (a slow active stalls its passive's gossip) and reply with a
model flattened before the receive, so the two sides can end with different models
(not the paper's atomic average); gradient steps are applied inside the gossip process.
Here, as in Algorithm 1: one atomic average per gradient step, passive ranks answer
whoever asks first, and a failure in the thread fails the run (the SGP repo logs and
drops the round).  The exchange runs over gloo with host-memory buffers: with NCCL
(which cannot receive from any source) a gloo group is created for it.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field

import torch
from torch._utils import _flatten_dense_tensors

from ..comm.communicator import STAGE_PASSES
from ..families.gossip import add_weight_decay, local_sgd, local_step_ops_s
from ..protocol import Algorithm, StepContext
from ..comm.topology import BipartiteExponential
from ..comm import stepcost as sc
from . import register

#: the share of the workers that are active (send their model) at a time: bipartite pairs
ACTIVE_SHARE = 0.5
#: AD-PSGD's own op costs, in passes over the model (op-cost model), charged where they run:
#: ``x_i`` into the parameters (a copy), the parameters back into ``x_i`` (the flatten, the copy in)
TO_PARAMS, FROM_PARAMS = {"copy": 1}, {"copy": 2}
#: the pairwise average of an active worker (the copy out, the difference, the add) and of a
#: passive one (the copy out, the add, the halving)
ACTIVE_AVERAGE, PASSIVE_AVERAGE = {"copy": 1, "arith": 6}, {"copy": 1, "arith": 5}


@dataclass
class AdpsgdConfig:
    peer_selection: str = field(default="random", metadata={"choices": ("random", "cyclic")})
    timeout_s: float = field(default=300.0, metadata={"gt": 0})


@register("adpsgd")
class ADPSGD(Algorithm):
    Config = AdpsgdConfig
    step_schedule = "shared_epochs"
    timing_dependent = True  # who averages with whom, and how stale, follows the ranks' speeds

    @classmethod
    def closed_form_options(cls, spec) -> dict:
        """How an active worker picks its partner (``peer_selection``): random picks collide."""
        return {k: str(spec[k]) for k in ("peer_selection",) if k in spec}

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, peer_selection: str = "random", **opts) -> float:
        """Asynchronous pairwise averaging: a shared epoch's worker steps come at the workers'
        summed rate, ``T = n / sum_i 1/t_i`` a step of every worker.  A passive worker (half of
        them, :data:`ACTIVE_SHARE`) only computes (its background activity answers requests):
        ``t = C``; an active one waits for its average, a request and then the reply, each
        ``m(B)``, overlapped with its compute: ``t = max(C f, 2 m(B))``.  The straggler (``f =
        F``) is an active worker: the run's default straggler is the last rank, odd, and odd
        ranks are the active ones (:class:`~impls.comm.topology.BipartiteExponential`).

        Op costs, on the timeline that pays them: a worker's own step (``x_hat`` into the
        parameters, then under the lock ``x_i`` in, the local step and ``x_i`` back out:
        ``own``) follows its compute, so a passive ``t = C + own``; an active one reads ``x_hat``
        (a copy), then ``t = max(C f + own', exchange)``, where the exchange pays the staging of
        the request and of the reply before each leaves and both sides' averages
        (:data:`ACTIVE_AVERAGE`, :data:`PASSIVE_AVERAGE`; a receive's staging is slept while
        the receiver waits for the message, hidden).

        Collisions (``peer_selection: random``): a passive worker answers one request at a time
        and is held for a whole exchange ``E`` (its reply is a blocking send), so a request finds
        its passive busy with one of the other ``d - 1`` active neighbours (``d``: the graph's
        partners of an active worker) when that one picked it (``1/d``) and is in an exchange
        (``rho = E / t``, 1 when communication-bound), and waits for the rest of it (``E/2``):
        ``t = read + max(C f + own', E + (d-1)/d rho E/2)`` (4 nodes, ``d = 2``: ``1.25 E``;
        simulated at ``adpsgd_sim``'s nominal point: 2 of 6 exchanges waited a whole ``E``,
        ``1.30 E``).  ``cyclic`` partners at the same step are distinct: no wait."""
        n = p.nodes
        if n < 2:
            return p.compute_s * p.slow_factor
        read = sc.ops_s(p, **TO_PARAMS)
        own = sc.ops_s(p, **TO_PARAMS) + sc.ops_s(p, **FROM_PARAMS) + local_step_ops_s(p)
        exchange = (2 * sc.message_s(p, p.model_bytes, sc.pair_flows(p, ACTIVE_SHARE))
                    + sc.ops_s(p, stage=2 * STAGE_PASSES["send"]) + sc.ops_s(p, **ACTIVE_AVERAGE)
                    + sc.ops_s(p, **PASSIVE_AVERAGE))
        wait = 0.0
        if peer_selection == "random":
            d = len(BipartiteExponential(n).active_peers(1))
            rho = min(1.0, exchange / (read + max(p.compute_s + own, exchange)))
            wait = (d - 1) / d * rho * exchange / 2
        active = round(n * ACTIVE_SHARE)
        factors = [p.slow_factor] + [1.0] * (active - 1)
        rate = ((n - active) / (p.compute_s + read + own)
                + sum(1 / (read + max(p.compute_s * f + own, exchange + wait)) for f in factors))
        return n / rate
    optimizer_use = "local_then_mix"

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        self.graph = BipartiteExponential(ctx.world)  # ConfigError for an odd number of workers

    def setup(self, model):
        self.model = model
        self.optimizer, self.wd = local_sgd(self.ctx.optim, model.parameters(), self.comm.clock)  # L2 added at x_hat
        rank, world = self.ctx.rank, self.ctx.world
        self.broadcast_initial_state(model)
        if world > 1:  # passive ranks answer whoever asks first: a group that receives from any source
            self.comm.receive_from_any()  # (NCCL cannot: gloo beside it)
        self.active = self.graph.is_active(rank)
        self.peers = self.graph.active_peers(rank)
        self.params = list(self.optimizer.params)
        # the shared x_i, in host memory (exchanged over gloo; copied to / from the device)
        self.x = _flatten_dense_tensors([p.detach() for p in self.params]).to("cpu", copy=True)
        n = self.n = self.x.numel()
        self._out = torch.zeros(n + 2, dtype=self.x.dtype)  # [model, flag, sender]
        self._in = torch.zeros(n + 2, dtype=self.x.dtype)
        # the backend's synchronisation: threads on real ranks, simulated-time actors on simgrid
        backend = self.comm.backend
        self._lock = backend.lock()
        self._requests = backend.queue()
        self._done = backend.event()
        self._done.set()  # no average in flight
        self._thread = None  # the background activity (backend.start_background)
        self._error: BaseException | None = None
        self._rng = random.Random(self.ctx.seed * 1_000_003 + rank)
        self.averages = self._read_at = 0

    # -- x_i <-> module parameters (caller holds the lock or the thread is not running) --
    # AD-PSGD's own copies, charged where they run (op-cost model ``copy``): one pass out, two back
    @torch.no_grad()
    def _to_params(self) -> None:
        i = 0
        for p in self.params:
            p.copy_(self.x[i:i + p.numel()].view_as(p))
            i += p.numel()
        self.comm.clock.charge_op("copy", TO_PARAMS["copy"] * self.x.numel() * self.x.element_size())

    @torch.no_grad()
    def _from_params(self) -> None:
        self.x.copy_(_flatten_dense_tensors([p.detach() for p in self.params]))
        self.comm.clock.charge_op("copy", FROM_PARAMS["copy"] * self.x.numel() * self.x.element_size())

    # -- main thread -----------------------------------------------------------------
    @contextlib.contextmanager
    def computing(self, s: StepContext):
        self._start()
        with self._lock:  # 1. read x_hat
            self._to_params()
            self._read_at = self.averages
        if self.active and self.peers:  # 2. starts now, overlapping the gradient computation
            self._done.clear()
            self._requests.put(self._partner(s.step))
        yield

    def step(self, s: StepContext) -> dict[str, float]:
        # the L2 term at x_hat, where g was taken (params hold x_hat); charged by the helper
        add_weight_decay(self.model, self.wd, self.comm.clock)
        with self._lock:  # 3. x_i -= lr * d(g(x_hat)), on the current x_i
            staleness = self.averages - self._read_at
            self._to_params()
            self.set_lr(s.lr)
            self.optimizer.step()
            self._from_params()
        t0 = self.comm.clock.now()
        if self.active and self.peers:  # at most one average in flight: this step's must land
            self._wait(self._done.wait, "pairwise average")
        self._raise()
        return {"gossip/staleness": staleness, "gossip/steps_done": s.step + 1,
                "gossip/averages": self.averages, "gossip/wait_s": self.comm.clock.now() - t0}

    @contextlib.contextmanager
    def eval_params(self):
        with self._lock:
            self._to_params()
        yield self.model

    def close(self) -> None:
        self._start()  # a worker that took no step still answers / says done
        if self._thread is not None:
            if self.active:
                self._requests.put(None)
            self._wait(lambda t: (self._thread.join(t), not self._thread.is_alive())[1], "gossip thread to finish")
            self._raise()
        self._to_params()

    def load_state_dict(self, state) -> None:
        super().load_state_dict(state)
        self._from_params()  # the runtime loaded the model's parameters just before

    def _partner(self, step: int) -> int:
        if self.cfg.peer_selection == "random":
            return self._rng.choice(self.peers)
        return self.graph.partner(self.ctx.rank, step)

    def _start(self) -> None:
        if self._thread is None and self.peers:
            self._thread = self.comm.backend.start_background(self._run, "adpsgd-gossip")

    def _wait(self, wait, what: str) -> None:
        """Poll ``wait`` until it succeeds, the thread fails or ends, or ``timeout_s`` of the
        run's clock have passed since the first unanswered poll (the clock is read only then,
        so a wait that succeeds at once touches no clock)."""
        deadline = None
        while not wait(0.2):
            if self._error is not None or not self._thread.is_alive():
                break
            now = self.comm.clock.now()
            deadline = now + self.cfg.timeout_s if deadline is None else deadline
            if now > deadline:
                raise RuntimeError(f"adpsgd rank {self.ctx.rank}: waited over {self.cfg.timeout_s} s for {what}")

    def _raise(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"adpsgd rank {self.ctx.rank}: gossip thread failed") from self._error

    # -- background thread: all of this rank's point-to-point traffic ------------------
    def _run(self) -> None:
        try:
            self._active_loop() if self.active else self._passive_loop()
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            self._error = e
        finally:
            self._done.set()

    def _active_loop(self) -> None:
        n, me = self.n, float(self.ctx.rank)
        while (peer := self._requests.get()) is not None:
            with self._lock:
                self._out[:n].copy_(self.x)
            self._out[n], self._out[n + 1] = 1.0, me
            hs = self.comm.isend(self._out, peer)
            hr = self.comm.irecv(self._in[:n], peer)
            hs.wait()
            hr.wait()
            with self._lock:  # x_a += (x_p - x_a_sent) / 2: keeps gradient steps taken meanwhile
                self.x.add_(self._in[:n] - self._out[:n], alpha=0.5)
                self.averages += 1
                nb = n * self.x.element_size()  # AD-PSGD's own pairwise average: the copy out, the difference, the add
                for kind, passes in ACTIVE_AVERAGE.items():
                    self.comm.clock.charge_op(kind, passes * nb)
            self._done.set()
        self._out[n], self._out[n + 1] = 0.0, me
        for p in self.peers:
            self.comm.send(self._out, p)

    def _passive_loop(self) -> None:
        n, running = self.n, set(self.peers)
        while running:
            self.comm.irecv(self._in, None).wait()  # from any active neighbour
            src = int(self._in[n + 1])
            if self._in[n] == 0:
                running.discard(src)
                continue
            with self._lock:  # reply with x_p and average, atomically w.r.t. the main thread
                self._out[:n].copy_(self.x)
                self.x.add_(self._in[:n]).mul_(0.5)
                self.averages += 1
                nb = n * self.x.element_size()  # AD-PSGD's own pairwise average: the copy out, the add, the halving
                for kind, passes in PASSIVE_AVERAGE.items():
                    self.comm.clock.charge_op(kind, passes * nb)
            self.comm.send(self._out[:n], src)
