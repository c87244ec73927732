"""signSGD / Signum with majority vote: 1 bit per coordinate each way, Byzantine workers optional.

Papers: Bernstein, Wang, Azizzadenesheli, Anandkumar, "signSGD: Compressed Optimisation for
Non-Convex Problems" (ICML 2018: signSGD, Signum, and the majority vote of worker signs) and
Bernstein, Zhao, Azizzadenesheli, Anandkumar, "signSGD with Majority Vote is Communication
Efficient and Fault Tolerant" (ICLR 2019, Algorithm 1: Signum with majority vote; Theorem 2:
it still converges when fewer than half of the workers are adversaries that may invert or
randomise their signs).  Reference code: jiaweizzhao/signSGD-with-Majority-Vote (the ICLR
paper's; jxbz/signSGD is the ICML paper's MXNet code).  With ``nodes: 1`` this is
single-machine signSGD (``beta: 0``) or Signum.

Communication per step, ``W`` workers, ``d`` parameters (``ceil(d/8)`` bytes of signs, packed
8 per byte by :mod:`impls.compression.sign`, against ``4 d`` for an fp32 gradient):

* ``aggregation: server`` (the papers' form; one server rank after the workers, as
  ``ps_sync``): each worker sends ``ceil(d/8)`` (its signs) to the server and receives
  ``ceil(d/8)`` (the vote).  The server receives and sends ``W ceil(d/8)``, counted apart.
  It is :class:`impls.families.ps.ServerBase`'s synchronous rounds with the vote as the aggregation
  (``aggregate``: step 4) and step 5 on the server's copy of ``x`` while the votes travel
  (``while_replying``); that copy and its step count are checkpointed in the servers' one
  form (``impls.families.ps``), the workers' momentum as the worker state.
* ``aggregation: allgather`` (no extra rank): an all-gather of the packed signs; each worker
  then votes locally.  Counted as a ring all-gather: ``(W-1) ceil(d/8)`` sent and received
  per worker, so it moves more than the server's 2 x ``ceil(d/8)`` from ``W = 3`` on, with
  no central link and no extra hop.

Both modes produce bit-identical parameters (the vote counts integers: no summation order).

Steps at iteration ``t`` (every worker):

1. ``g``: the gradient of this worker's batch (without weight decay).
2. ``m = beta m + (1 - beta) g`` (``m`` starts at 0; ``beta: 0``: ``m = g``): the momentum is
   taken on the worker, *before* the sign.
3. ``s = sign(m)`` packed to ``ceil(d/8)`` bytes, ``sign(0) = +1``.  A Byzantine worker sends
   instead the complement of ``s`` (``invert``) or fair coin flips seeded by (seed, rank, t)
   (``random``); it still keeps an honest ``m`` and applies the vote, so replicas stay equal.
4. Vote ``V = sign(sum_i s_i)``, a tie (``sum = 0``, even ``W``) giving ``+1``: on the server,
   which sends ``V`` to every worker (``server``), or on each worker after the all-gather.
5. ``x = x - lr (V + weight_decay x)`` on every rank (the server too, on its copy of ``x``, so
   its checkpointed copy equals the workers').

Hyperparameters (``algorithm``):

* ``beta`` (0.9, in ``[0, 1)``): the momentum; 0 is signSGD.  The reference uses 0.9 for
  ImageNet and 0.5 for its QRNN; momentum matters more the smaller and noisier the batch.
* ``aggregation`` (``server``): ``server`` or ``allgather`` (see above): the same numbers,
  different traffic.
* ``adversaries`` (0, at most ``nodes``): Byzantine workers, the *last* ranks.  The vote is
  expected to survive fewer than half; ``nodes / 2`` and more break it.
* ``adversary_mode`` (``invert``): ``invert`` (the paper's worst blind adversary) or ``random``.

From ``workload.optimizer`` (``sgd`` only, ``momentum: 0``: the momentum is ``beta``, on the
worker before the sign; a second momentum after the vote is not Signum): ``lr`` with its
schedule, and ``weight_decay``.  Every coordinate moves by ``lr`` each step whatever the
gradient's size, so tune ``lr`` like Adam's, not SGD's (the reference: 1e-4 on ImageNet,
1e-3 on QRNN).  Weight decay is added to the +-1 vote, so weigh it against 1 (1e-4 there).

Where this differs from the reference code: adversaries are the last ranks (it takes the
first: which ones does not matter, every replica applies the same vote; this way rank 0,
which writes the run's information, stays honest); ``invert`` complements the sent bits (it
negates the momentum, so a coordinate at exactly 0 stays +1 there); ``random`` flips seeded
coins (it draws a fresh Gaussian, unseeded); the vote runs on a server rank rather than on
worker 0.  The ICML paper's MXNet code mapped ``sign(0)`` to 0 and put weight decay inside the
momentum; this follows the ICLR paper's code: ``sign(0) = +1``, ties ``+1`` (a 1-bit reply
cannot say 0), weight decay added after the vote on every worker, uncompressed.  BatchNorm buffers
stay per worker (as in ``ps_sync``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..compression import build, pack_bits, unpack_bits
from ..errors import ConfigError
from ..comm.flat import flat_grads
from ..comm import stepcost as sc
from ..protocol import StepContext
from ..families.ps import ServerBase
from . import register


@dataclass
class SignumMVConfig:
    beta: float = field(default=0.9, metadata={"min": 0, "lt": 1})
    aggregation: str = field(default="server", metadata={"choices": ("server", "allgather")})
    adversaries: int = field(default=0, metadata={"min": 0})
    adversary_mode: str = field(default="invert", metadata={"choices": ("invert", "random")})


def majority_vote(signs: Sequence[torch.Tensor], numel: int, clock=None) -> torch.Tensor:
    """Packed signs of ``numel`` elements (bit 1 = ``+``) -> the packed vote, ties ``+``.

    ``clock``: the run's clock, charged the vote's work (op-cost model) where it happens, before
    the vote can leave: per message an unpack (``compress``, a pass over ``4 numel`` bytes, as
    a decompression) and a count (``arith``, 3 passes of the ``4 numel``-byte int32 counts),
    then one pack of the result (``compress``, ``4 numel``)."""
    plus = torch.zeros(numel, dtype=torch.int32, device=signs[0].device)
    for s in signs:
        plus += unpack_bits(s, numel).to(torch.int32)
    vote = pack_bits(2 * plus >= len(signs))  # sum of +-1 = 2 * plus - n >= 0
    if clock is not None:
        nb = numel * plus.element_size()
        clock.charge_op("compress", (len(signs) + 1) * nb)
        clock.charge_op("arith", 3 * len(signs) * nb)
    return vote


def byzantine(signs: torch.Tensor, numel: int, mode: str, seed: int, rank: int, step: int) -> torch.Tensor:
    """What an adversary sends instead of its packed ``signs`` (see the module docstring, step 3)."""
    if mode == "invert":
        return pack_bits(~unpack_bits(signs, numel))
    g = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, rank, step]).generate_state(1)[0]))
    return pack_bits(torch.rand(numel, generator=g) < 0.5).to(signs.device)


@register("signum_mv")
class SignumMV(ServerBase):
    Config = SignumMVConfig
    optimizer_use = "owns"
    sync_collective = True  # the vote needs every worker's signs
    #: the share of a model one message weighs: packed signs, 1 bit of 32
    wire_share = 1 / 32
    closed_form_variants = {"signum_mv_allgather": {"aggregation": "allgather"}}

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, aggregation: str = "server", **opts) -> float:
        """``aggregation: server``: ``C_n + 2 (alpha + o + n S / bw')``, the server's one NIC
        receiving then sending ``n`` messages of ``S = B/32``; ``allgather``: ``C_n + (n-1)
        m(B/32)``, a ring all-gather of the packed signs, each worker voting locally; both plus the
        local work every step waits for (:func:`impls.comm.stepcost.ops_s`, below)."""
        n = p.nodes  # + the local work every step waits for (impls.comm.stepcost.ops_s; beta > 0): the
        # flatten (1 copy), the momentum (5 arith), sign + pack (1 compress); the vote (n unpacks and a pack,
        # n counts of 3 passes); the vote's unpack (1 compress) and the update (6 arith)
        ops = sc.ops_s(p, arith=5 + 3 * n + 6, copy=1, compress=1 + (n + 1) + 1)
        if aggregation == "allgather":
            return sc.sync_compute(p, p.nodes) + (p.nodes - 1) * sc.message_s(
                p, p.model_bytes * cls.wire_share, 1.0 if p.rack_size else 0.0) + ops
        return sc.server_round_s(p, cls.wire_share) + ops
    supported_optimizers = {"sgd": {"momentum": 0.0}}  # the momentum is beta, before the sign
    serve = ServerBase.serve_rounds  # 4, 5 (aggregate, while_replying below)

    @classmethod
    def server_ranks(cls, cfg: SignumMVConfig) -> int:
        return 1 if cfg.aggregation == "server" else 0

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        if cfg.adversaries > ctx.world:
            raise ConfigError("algorithm.adversaries", f"{cfg.adversaries} adversaries but only {ctx.world} workers")
        self.byzantine = ctx.world - cfg.adversaries <= ctx.rank < ctx.world

    def setup(self, model):
        super().setup(model)  # every rank, the server included, starts from rank 0's model
        self.sizes = [p.numel() for p in model.parameters()]
        self.d = sum(self.sizes)
        self.sign = build({"name": "sign"}, key="algorithm", seed=self.ctx.seed, layout=self.sizes,
                          clock=self.comm.clock)  # it charges its own packing and unpacking
        self.wd = self.ctx.optim.weight_decay
        self.m: torch.Tensor | None = None
        # what step 5 updates: a worker's model, the server's copy x (ServerBase)
        self.params = list(model.parameters()) if self.server is None else self.server.x.detach().split(self.sizes)
        if self.server is not None:
            self.server.compressor = self.sign

    @torch.no_grad()
    def _apply(self, vote: torch.Tensor, lr: float) -> None:
        v = self.sign.decompress([vote], self.d)  # 5 (charged by the compressor)
        for p, u in zip(self.params, v.split(self.sizes)):
            p.sub_(u.view_as(p).add_(p, alpha=self.wd), alpha=lr)
        self.comm.clock.charge_op("arith", 6 * v.numel() * v.element_size())  # Signum's own: u + wd p, p -= lr u

    @torch.no_grad()
    def step(self, s: StepContext) -> dict[str, float]:
        g = flat_grads(self.model, self.comm.clock)  # 1 (a copy, charged by the helper)
        beta = self.cfg.beta
        if beta == 0:
            m = g
        else:  # 2; Signum's own arithmetic, charged here: the momentum, 5 passes (the first: 2)
            first = self.m is None
            self.m = g.mul_(1 - beta) if first else self.m.mul_(beta).add_(g, alpha=1 - beta)
            m = self.m
            self.comm.clock.charge_op("arith", (2 if first else 5) * m.numel() * m.element_size())
        (signs,) = self.sign.compress(m)  # 3 (sign and pack, charged by the compressor)
        if self.byzantine:
            signs = byzantine(signs, self.d, self.cfg.adversary_mode, self.ctx.seed, self.ctx.rank, s.step)
        if self.cfg.aggregation == "server":  # 4
            vote = self.message_parts()[0]
            self.exchange([[signs]], [[vote]])
        else:
            bufs = [self.sign.empty(self.d, self.ctx.device)[0] for _ in range(self.ctx.world)]
            self.comm.all_gather(bufs, signs)
            vote = majority_vote(bufs, self.d, self.comm.clock)
        self._apply(vote, s.lr)
        return {}

    # -- the server (ServerBase.serve_rounds) --------------------------------------------------
    def message_parts(self) -> list[torch.Tensor]:
        return self.sign.empty(self.d, self.ctx.device)

    def aggregate(self, msgs: list[list[torch.Tensor]], lr: float) -> list[torch.Tensor]:
        return [majority_vote([s for (s,) in msgs], self.d, self.comm.clock)]  # 4, charged before the vote leaves

    @torch.no_grad()
    def while_replying(self, reply: list[torch.Tensor], lr: float) -> None:
        self._apply(reply[0], lr)  # 5, while the votes travel
        self.server.version += 1

    def worker_state(self):
        return {"momentum": self.m, "compressor": self.sign.state_dict()}

    def load_worker_state(self, state):
        self.m = state["momentum"]
        self.sign.load_state_dict(state.get("compressor") or {})
