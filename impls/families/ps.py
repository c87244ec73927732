"""Server ranks: the one base of every method that has them, and the parameter servers' protocol.

:class:`ServerBase` is what every method with server ranks derives from (``ps_sync``,
``ps_async``, ``ps_ssp``, ``ps_cyclic``, ``ddcgu`` through :class:`ParameterServer`;
``signum_mv`` and ``ef_blocksgdm`` directly):

* **Roles.** ``nodes`` workers first, then ``server_ranks(cfg)`` server ranks
  (``Algorithm.roles``; ``cfg.servers`` unless the method says otherwise, e.g. 0 for
  ``signum_mv``'s all-gather mode).
* **The server's state** (:class:`ServerShard`): its range of the flat parameters ``x``,
  its ``version`` (updates applied), the workload's optimizer on ``x`` (momentum; none
  when the method owns the update, ``optimizer_use = "owns"``) and a server-side
  compressor (``compressor``: e.g. ``ef_blocksgdm``'s error-feedback memory).
* **One checkpoint form** for every server method, on every rank::

      {"server": {"params": x, "version": int, "optimizer": state | None, "compressor": state | None}
                 (None on a worker),
       "worker": the method's worker state (worker_state(); None on a server)}

  ``x`` is also written into the server's model at every epoch end (``commit``), so a
  server rank's checkpointed model holds its range.
* **Synchronous rounds** (:meth:`ServerBase.serve_rounds`, ``ps_sync``, ``signum_mv``,
  ``ef_blocksgdm``): each step the server receives one message from every worker, in rank
  order, aggregates them (the method's hook ``aggregate``: average and step, majority
  vote, decompress-average-recompress), sends the result to every worker, and updates its
  copy (``while_replying`` / ``after_replying``); workers use :meth:`ServerBase.exchange`.

Server ``j`` owns the contiguous range ``[j d / k, (j + 1) d / k)`` of the flat parameter
vector (``d`` parameters in ``model.parameters()`` order, ``k`` servers), as PS-Lite
splits keys by range and MXNet's kvstore splits big arrays over servers: equal shares,
whatever the layer sizes (whole-tensor shards would put a ResNet's or an MLP's largest
layer on one server).  Elementwise optimizers (SGD, Adam) are unchanged by the split; a
per-layer one (LARS) needs one server.

:class:`ParameterServer`'s messages (fp32, counted by ``ctx.comm``), for the asynchronous
modes and ``ps_cyclic``:

* push, worker -> server ``j``: the worker's (accumulated) gradient of ``j``'s tensors,
  then a 5-float header ``[worker, version, k, flag, seconds]``: the server version of
  the parameters the gradient was computed on, how many gradients it sums (``ddcgu``
  accumulates), ``flag`` = 0 for a push, 1 for "done" (the worker has taken its last
  step; the gradient part then holds its remaining accumulation, possibly ``k = 0``), and
  the worker's measured seconds per gradient (``ddcgu``'s speed estimate); ``flag`` = 2
  asks for the current parameters alone (``ps_cyclic``'s epoch end, ``k = 0``);
* reply, server ``j`` -> worker: ``j``'s parameters, then ``[version, staleness, gap, 0, 0]``
  (``staleness``: versions applied between the worker's read and this push's
  application; ``gap``: the worker's step lead over the slowest, ``ps_ssp``);
* grant (``ddcgu`` only), server 0 -> worker: a header alone ("your turn").

Every parameter server applies each gradient with weight ``1/W`` (``W`` workers) through the
workload's optimizer, so ``W`` pushes move the model as far as one synchronous step with
the averaged gradient at the same learning rate: every mode is run at ``ps_sync``'s rate.
The L2 term (coupled weight decay) is added once per gradient, at the server's current
parameters, so ``W`` pushes decay as much as one synchronous step.
With plain SGD the order of arrivals does not change their sum; momentum is kept per
applied push (the server's buffer sees ``W`` updates per round), as in an asynchronous
server, so with momentum only the synchronous modes equal ``ps_sync``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..sim.charging import Charging
from ..errors import ConfigError
from ..comm.flat import flat_grads, flat_params, write_params
from ..optim import build_optimizer
from ..protocol import Algorithm, ServeContext

HEADER = 5
PUSH, DONE, FETCH = 0.0, 1.0, 2.0


def shard_bounds(d: int, servers: int) -> list[tuple[int, int]]:
    """Server ``j``'s range of the flat parameter vector: equal shares, in order."""
    cuts = [round(j * d / servers) for j in range(servers + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


class Shards:
    """The flat parameter ranges of the servers, and the message buffers of both sides.

    ``first``: the rank of server 0 (= the number of workers)."""

    def __init__(self, model: nn.Module, servers: int, first: int, clock=None):
        self.model, self.servers, self.first = model, servers, first
        self.clock = clock  # the worker's flatten of its gradient and cat of the replies: a copy each
        self.d = sum(p.numel() for p in model.parameters())
        self.dtype = next(model.parameters()).dtype  # messages in the parameters' dtype (float64: finite_sum)
        self.bounds = shard_bounds(self.d, servers)
        self.sizes = [hi - lo for lo, hi in self.bounds]

    def rank(self, j: int) -> int:
        return self.first + j

    # -- worker side ---------------------------------------------------------------------
    def grads(self) -> list[torch.Tensor]:
        """This step's gradient, one part per server."""
        g = flat_grads(self.model, self.clock)
        return [g[lo:hi] for lo, hi in self.bounds]

    def message(self, j: int, body: torch.Tensor | None, header: list[float]) -> torch.Tensor:
        """``body`` (``None``: zeros) followed by the header."""
        out = torch.zeros(self.sizes[j] + HEADER, dtype=self.dtype)
        if body is not None:
            out[: self.sizes[j]] = body
        out[self.sizes[j]:] = torch.tensor(header, dtype=self.dtype)
        return out

    def buffer(self, j: int) -> torch.Tensor:
        return torch.empty(self.sizes[j] + HEADER, dtype=self.dtype)

    def empty(self, n: int) -> torch.Tensor:
        return torch.empty(n, dtype=self.dtype)

    def write(self, parts: list[torch.Tensor]) -> None:
        """Write every server's part of the parameters into the model."""
        vec = torch.cat(parts)
        if self.clock is not None:  # the cat is a copy (writing it into the model is not)
            self.clock.charge_op("copy", vec.numel() * vec.element_size())
        write_params(self.model, vec)


class ServerShard(Charging):
    """One server's state: its range of the parameters ``x`` (a view into the server's flat
    copy), its version (updates applied), the workload's optimizer on ``x`` (``optimizer``:
    False when the method owns the update) and a server-side compressor (``compressor``, set
    by the method: e.g. an error-feedback memory).  :meth:`state_dict` is the one form in
    which every server method checkpoints its server.

    Bound to the server rank's clock, it charges its own work (:class:`impls.sim.charging.Charging`):
    :meth:`apply`'s weighted gradient (``arith``; the optimizer's step charges ``optim``
    itself), :meth:`descend`'s subtraction."""

    def __init__(self, algo, shards: Shards, j: int, workers: int, optimizer: bool = True):
        self.shards, self.j, self.W = shards, j, workers
        self.lo, self.hi = shards.bounds[j]
        self.flat = flat_params(shards.model)
        self.x = nn.Parameter(self.flat[self.lo: self.hi])
        # the L2 term is added here, once per gradient a push sums: per-push servers must not
        # decay W times per round (a decoupled decay, AdamW's, stays in the optimizer)
        self.optimizer, self.wd = (build_optimizer(algo.ctx.optim, [self.x], l2_outside=True,
                                                   clock=algo.comm.clock) if optimizer else (None, 0.0))
        self.compressor = None
        self.version = 0
        self.bind_clock(algo.comm.clock)

    def apply(self, g: torch.Tensor, lr: float, weight: float, k: float = 1.0) -> None:
        """One optimizer step with gradient ``weight * (g + k wd x)``: ``g`` is this shard's
        part of a sum of ``k`` gradients (the L2 term at the current parameters)."""
        self.x.grad = (g + (k * self.wd) * self.x.detach()) * weight if self.wd else g * weight
        self.optimizer.lr = lr
        self.optimizer.step()
        self.version += 1
        # the weighted gradient (+ the L2 term): 3 (6) passes; the optimizer's step charged itself
        self.charge("arith", (6 if self.wd else 3) * g.numel() * g.element_size())

    @torch.no_grad()
    def descend(self, delta: torch.Tensor) -> None:
        """``x -= delta`` (a method that owns the update and sends its step, ``ef_blocksgdm``:
        the server's copy follows the replicas); one version more.  Charged: 3 passes (``arith``)."""
        self.x.detach().sub_(delta)
        self.version += 1
        self.charge("arith", 3 * delta.numel() * delta.element_size())

    def params(self) -> torch.Tensor:
        return self.x.detach().clone()

    def reply(self, header: list[float]) -> torch.Tensor:
        return torch.cat([self.x.detach(), torch.tensor(header, dtype=self.x.dtype)])

    def commit(self) -> None:
        """Write this shard into the server's model (its checkpoint; other shards' ranges
        keep their initial values there)."""
        write_params(self.shards.model, self.flat)

    def state_dict(self) -> dict:
        return {"params": self.params(), "version": self.version,
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
                "compressor": self.compressor.state_dict() if self.compressor is not None else None}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.x.copy_(state["params"])
        self.version = state["version"]
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.compressor is not None:
            self.compressor.load_state_dict(state["compressor"] or {})


def split(buf: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
    """A message's body and header."""
    return buf[:-HEADER], [float(v) for v in buf[-HEADER:]]


class ServerBase(Algorithm):
    """The base of every method with server ranks (module docstring): roles, the server's
    state and its checkpoint form, the synchronous rounds.

    A method supplies the worker's ``step`` and either ``serve`` or, for synchronous rounds
    (``serve = ServerBase.serve_rounds``), the hooks ``message_parts``, ``aggregate`` and
    ``while_replying`` / ``after_replying``; its worker state (momentum, a worker's
    compressor) through ``worker_state`` / ``load_worker_state``."""

    @classmethod
    def server_ranks(cls, cfg) -> int:
        return cfg.servers

    @classmethod
    def roles(cls, workers: int, cfg) -> list[str]:
        return ["worker"] * workers + ["server"] * cls.server_ranks(cfg)

    def setup(self, model: nn.Module) -> None:
        """Every rank, servers included, starts from rank 0's model; a server rank then takes
        its range of the parameters (:class:`ServerShard`)."""
        self.model = model
        self.broadcast_initial_state(model)
        n = self.server_ranks(self.cfg)
        self.shards = Shards(model, n, self.ctx.world, self.comm.clock) if n else None
        self.server = None if self.is_worker() else ServerShard(
            self, self.shards, self.ctx.rank - self.ctx.world, self.ctx.world, optimizer=self.optimizer_use != "owns")

    # -- synchronous rounds --------------------------------------------------------------
    def exchange(self, parts: list[list[torch.Tensor]], replies: list[list[torch.Tensor]]) -> None:
        """Worker: send server ``j`` the tensors ``parts[j]`` and receive its reply into
        ``replies[j]`` (the replies awaited first, then the sends)."""
        sends = [self.comm.isend(t, self.shards.rank(j)) for j, ts in enumerate(parts) for t in ts]
        recvs = [self.comm.irecv(b, self.shards.rank(j)) for j, bs in enumerate(replies) for b in bs]
        for h in recvs + sends:
            h.wait()

    def serve_rounds(self, sc: ServeContext) -> None:
        """A server answering every worker once per step, ``lr`` the schedule's at the step:

        1. receive every worker's message (buffers from ``message_parts()``), in rank order;
        2. ``reply = aggregate(messages, lr)``: the method's aggregation of the ``W`` messages;
        3. send ``reply`` to every worker; ``while_replying(reply, lr)`` runs while they
           travel, ``after_replying(reply, lr)`` once they have left;
        4. at each epoch end: ``x`` into the model, then the runtime's epoch end (checkpoint).
        """
        W = self.ctx.world
        msgs = [self.message_parts() for _ in range(W)]
        for epoch in range(sc.start_epoch, sc.epochs):
            for i in range(sc.steps_per_epoch):
                lr = sc.lr_at(epoch + i / sc.steps_per_epoch)
                for h in [self.comm.irecv(b, w) for w in range(W) for b in msgs[w]]:  # 1
                    h.wait()
                reply = self.aggregate(msgs, lr)  # 2
                sends = [self.comm.isend(t, w) for w in range(W) for t in reply]  # 3
                self.while_replying(reply, lr)
                for h in sends:
                    h.wait()
                self.after_replying(reply, lr)
            self.end_epoch(sc, epoch, {})  # 4

    def message_parts(self) -> list[torch.Tensor]:
        """Receive buffers for one worker's message."""
        raise NotImplementedError

    def aggregate(self, msgs: list[list[torch.Tensor]], lr: float) -> list[torch.Tensor]:
        """Every worker's message (rank order) -> the reply every worker receives."""
        raise NotImplementedError

    def while_replying(self, reply: list[torch.Tensor], lr: float) -> None:
        """The server's update that overlaps the replies' transfer (default: none)."""

    def after_replying(self, reply: list[torch.Tensor], lr: float) -> None:
        """The server's update once the replies have left (default: none)."""

    def end_epoch(self, sc: ServeContext, epoch: int, extra: dict[str, float]) -> None:
        self.server.commit()  # the checkpoint holds the shard
        sc.end_epoch(epoch, extra)

    # -- checkpoints: one form for every server method -------------------------------------
    def worker_state(self) -> dict:
        return {}

    def load_worker_state(self, state: dict) -> None:
        pass

    def state_dict(self) -> dict:
        return {"server": self.server.state_dict() if self.server is not None else None,
                "worker": self.worker_state() if self.server is None else None}

    def load_state_dict(self, state: dict) -> None:
        if set(state) != {"server", "worker"} or (self.server is not None and "params" not in (state["server"] or {})):
            raise ValueError(f"a checkpoint of another form than ServerBase's (keys {sorted(state)}), written before "
                             f"the servers shared one: delete the run's checkpoint directory to run it again")
        if self.server is not None:
            self.server.load_state_dict(state["server"])
        else:
            self.load_worker_state(state["worker"])


class ParameterServer(ServerBase):
    """What every parameter-server mode shares on top of :class:`ServerBase`: the
    worker's push and pull with headers, the server's replies and the arrival-order loop.

    A mode's file supplies ``step`` (when a worker pushes) and ``serve`` (the order in
    which a server applies pushes and releases replies); ``cfg.servers`` is read here."""

    #: the options of a mode's config its closed form reads (:meth:`step_cost`), with their defaults
    closed_form_keys = {"servers": 1, "staleness": 3, "inflight": 1}

    @classmethod
    def closed_form_options(cls, spec) -> dict:
        """``{algorithm: {name: ps_async, servers: 4}}`` -> ``{"servers": 4}``: the keys of
        :data:`closed_form_keys` the config sets.  A mode's :meth:`step_cost` is the time of one
        *round* (``n`` gradients applied; the derivations: ``distrepro_wf.claims.closedform``)."""
        return {k: int(spec[k]) for k in cls.closed_form_keys if k in spec}

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        if cfg.servers > 1 and getattr(ctx.optim, "name", "sgd") == "lars":
            raise ConfigError("algorithm.servers", "LARS scales each layer by its own norm, which a server holding "
                                                   "a range of the flat parameters cannot see: use servers: 1")

    def setup(self, model: nn.Module) -> None:
        super().setup(model)
        self.version = [0.0] * self.cfg.servers  # the server version of each shard this worker holds
        self.closed = False

    # -- worker --------------------------------------------------------------------------
    def push(self, bodies: list[torch.Tensor | None], k: float, flag: float = PUSH, seconds: float = 0.0) -> list:
        """Send every server its part (``None``: zeros) with the header; returns the handles."""
        return [self.comm.isend(self.shards.message(j, bodies[j], [self.ctx.rank, self.version[j], k, flag, seconds]),
                                self.shards.rank(j)) for j in range(self.cfg.servers)]

    def post_pull(self) -> tuple[list[torch.Tensor], list]:
        """Post the receives of every server's next reply (buffers, handles)."""
        bufs = [self.shards.buffer(j) for j in range(self.cfg.servers)]
        return bufs, [self.comm.irecv(b, self.shards.rank(j)) for j, b in enumerate(bufs)]

    def pull(self, posted: tuple[list[torch.Tensor], list] | None = None) -> list[float]:
        """Receive every server's reply (``posted``: by :meth:`post_pull`), write the
        parameters; returns server 0's header."""
        bufs, handles = posted if posted is not None else self.post_pull()
        for h in handles:
            h.wait()
        parts = [split(b) for b in bufs]
        self.shards.write([body for body, _ in parts])
        self.version = [head[0] for _, head in parts]
        return parts[0][1]

    def push_pull(self, bodies: list[torch.Tensor | None], k: float, flag: float = PUSH,
                  seconds: float = 0.0) -> list[float]:
        sends = self.push(bodies, k, flag, seconds)
        head = self.pull()
        for h in sends:
            h.wait()
        return head

    def fetch(self) -> list[float]:
        """Ask every server for its current parameters (no gradient) and install them."""
        sends = self.push([None] * self.cfg.servers, 0.0, FETCH)
        head = self.pull()
        for h in sends:
            h.wait()
        return head

    # -- server --------------------------------------------------------------------------
    def send_reply(self, w: int, header: list[float]) -> None:
        """Reply to worker ``w`` without waiting for the transfer: the server goes on
        receiving while replies travel (a worker has at most ``inflight`` replies in flight)."""
        inflight = [h for h in getattr(self, "_inflight", []) if not h.is_completed()]
        inflight.append(self.comm.isend(self.server.reply(header), w))
        self._inflight = inflight

    def drain_replies(self) -> None:
        for h in getattr(self, "_inflight", []):
            h.wait()
        self._inflight = []

    def serve_arrivals(self, sc: ServeContext, bound: int | None = None, staleness_lr: bool = False) -> None:
        """Apply pushes in the order they arrive (``ps_async``, ``ps_ssp``; simulated time
        orders them on the simulated platform, so a run is deterministic there).

        1. Receive the next push from any worker; apply it (weight ``1/W``, divided by its
           staleness if ``staleness_lr``); log it (a ``push`` record).
        2. Release every held reply the bound allows: a worker that has pushed ``c`` times
           gets the current parameters once ``c - min(live workers' pushes) <= bound``
           (``None``: at once).  A worker that is done no longer counts in the minimum.
        3. At every ``W * steps_per_epoch`` applied gradients an epoch ends; after every
           worker has said "done", all get the final parameters and the last epoch ends.
        """
        W, sh = self.ctx.world, self.server
        S = sc.steps_per_epoch * W
        applied, epoch, pushes = 0, sc.start_epoch, 0
        clock, done, held = [0] * W, [False] * W, []
        stale_epoch: list[float] = []
        checksum = 0.0
        buf = self.shards.buffer(sh.j)
        while not all(done):
            self.comm.irecv(buf, None).wait()  # 1
            g, (w, ver, k, flag, _) = split(buf)
            w = int(w)
            if flag == DONE:
                done[w] = True
            else:
                stale = sh.version - ver
                weight = 1.0 / W / (max(1.0, stale) if staleness_lr else 1.0)
                sh.apply(g, sc.lr_at(sc.start_epoch + applied / S), weight, k)
                applied += int(k)
                clock[w] += 1
                checksum += float(g.double().sum())
                stale_epoch.append(stale)
                held.append((w, stale))
                sc.log(epoch, pushes, {"ps/worker": w, "ps/staleness": stale, "ps/k": k, "ps/version": sh.version})
                pushes += 1
            live = [c for c, d in zip(clock, done) if not d]  # 2
            slowest = min(live) if live else clock[w]
            for w2, s2 in list(held):
                gap = clock[w2] - slowest
                if bound is None or gap <= bound:
                    held.remove((w2, s2))
                    self.send_reply(w2, [sh.version, s2, gap, 0.0, 0.0])
            while epoch < sc.epochs - 1 and applied >= (epoch + 1 - sc.start_epoch) * S:  # 3
                self.end_epoch(sc, epoch, {**staleness_stats(stale_epoch), "ps/applied_sum": checksum})
                stale_epoch, checksum, epoch = [], 0.0, epoch + 1
        for w in range(W):
            self.send_reply(w, [sh.version, 0.0, 0.0, 0.0, 0.0])
        self.drain_replies()
        self.end_epoch(sc, sc.epochs - 1, {**staleness_stats(stale_epoch), "ps/applied_sum": checksum})

    def finish(self) -> None:
        """A worker's close under a barrier-free mode: say "done" to every server, then
        receive the final parameters (sent once every worker is done)."""
        if self.closed or not self.is_worker():
            return
        self.closed = True
        sends = self.push([None] * self.cfg.servers, 0.0, DONE)
        self.pull()
        for h in sends:
            h.wait()

    def worker_state(self) -> dict:
        return {"version": list(self.version)}

    def load_worker_state(self, state: dict) -> None:
        self.version = list(state["version"])


def staleness_stats(values: list[float]) -> dict[str, float]:
    """An epoch's ``ps/pushes`` (applied), ``ps/staleness_mean`` and ``ps/staleness_max``
    (nan when nothing was applied)."""
    if not values:
        return {"ps/pushes": 0.0, "ps/staleness_mean": float("nan"), "ps/staleness_max": float("nan")}
    return {"ps/pushes": float(len(values)), "ps/staleness_mean": sum(values) / len(values),
            "ps/staleness_max": float(max(values))}
