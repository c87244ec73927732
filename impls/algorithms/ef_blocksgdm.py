"""dist-EF-blockSGDM: Nesterov momentum SGD with blockwise 1-bit compression and error feedback, both ways.

Paper: Zheng, Huang, Kwok, "Communication-Efficient Distributed Blockwise Momentum SGD with
Error-Feedback", NeurIPS 2019 (arXiv 1905.10936).  Its distributed algorithm (dist-EF-SGDM, for
any compressor ``C``) becomes dist-EF-blockSGDM with the blockwise compressor: the vector is cut
into blocks ``G_1..G_B`` (sizes ``d_b``) and block ``b`` is sent as its signs plus one scale,
``C(v)_b = (||v_b||_1 / d_b) sign(v_b)``.  ``block: tensor`` (one block) is dist-EF-SGDM, the
paper's ``ef_sgdm`` baseline; ``block: layer`` (default) is the blockwise method.
``nodes`` counts the workers; one server rank is added after them (``roles``), as ``ps_sync``:
:class:`impls.families.ps.ServerBase`'s synchronous rounds, whose aggregation is steps 5-6 (``aggregate``)
and whose server then applies ``Delta~`` to its own copy of ``x`` (``after_replying``); that copy,
its step count and ``e~`` are checkpointed in the servers' one form (``impls.families.ps``), a worker's
momentum and ``e_i`` as the worker state.

Communication per step (``W`` workers, ``d`` parameters, ``B`` blocks), all point to point:

* each worker -> server: ``Delta_i``: ``ceil(d / 8)`` bytes of packed signs + ``4 B`` bytes of
  fp32 scales (two messages);
* server -> each worker: ``Delta~``, the same ``ceil(d / 8) + 4 B`` bytes.

So a worker moves about ``d / 8`` bytes each way against ``4 d`` for ``ps_sync`` (32x less, minus
the scales); the server receives and sends ``W`` times that (its own records, ``server_*``).

Steps at iteration ``t`` (symbols of the paper's algorithm; ``eta_t`` the schedule's lr)::

    worker i:  1. g_i = grad f_i(x_t) + wd x_t            (the workload's coupled L2, at x_t)
               2. m_i = mu m_i + g_i                       (m_{-1} = 0)
               3. p_i = eta_t (mu m_i + g_i) + e_i          (Nesterov; heavy ball: eta_t m_i)
               4. Delta_i = C(p_i), sent;  e_i = p_i - Delta_i          (worker error feedback)
    server:    5. p~ = (1/W) sum_i Delta_i + e~             (summed in rank order)
               6. Delta~ = C(p~), sent to every worker;  e~ = p~ - Delta~  (server error feedback)
    worker i:  7. x_{t+1} = x_t - Delta~                    (every replica applies the same Delta~)

Steps 1-4 are the worker half of the paper's algorithm (momentum, ``p_{t,i}``, ``Delta_{t,i} =
C(p_{t,i})``, ``e_{t+1,i} = p_{t,i} - Delta_{t,i}``), 5-6 the server half (``p~_t = (1/M) sum_i
Delta_{t,i} + e~_t``, ``Delta~_t = C(p~_t)``, ``e~_{t+1} = p~_t - Delta~_t``), 7 the worker's
update ``x_{t+1} = x_t - Delta~_t``; dist-EF-blockSGDM is that algorithm with the blockwise ``C``.
(The paper's PDF was not at hand when this was written: the line and equation numbers of its
algorithm box are not quoted here, only its symbols.)

The learning rate multiplies *before* compression (step 3, as in the paper's ``p = eta (...) + e``
and EF-SGD's ``p = gamma g + e``), so the memories hold residuals of already-scaled steps: after a
learning-rate decay the old, larger residuals are still paid out (the paper analyses a constant
``eta`` and says nothing about schedules; we keep its equations unchanged).  With a constant lr
the placement is immaterial (``C(eta v) = eta C(v)`` and the memories just scale by ``eta``); it
matters only when the lr changes, which the tests cover with a step decay.  The server needs no
learning rate.  Error feedback is :class:`impls.compression.ErrorFeedback` around the ``sign``
compressor (``scale: mean_abs``), one instance per call site (each worker's and the server's).

Hyperparameters:

* ``block`` (``layer``): ``layer``: one block per parameter tensor (a layer's weight and bias are
  two blocks), the per-layer partition as we read the paper's experiments; ``tensor``: one scale for the whole model
  (dist-EF-SGDM); ``size``: fixed blocks of ``block_size`` elements.  Smaller blocks follow the
  magnitudes of the layers better (layers' gradients differ by orders of magnitude) at 4 bytes
  per block; ``tensor`` lets large layers swamp small ones and may need a smaller lr.
* ``block_size`` (0): elements per block with ``block: size`` (e.g. 4096-65536: overhead
  ``32 / block_size`` of the payload).
* ``servers`` (1): server ranks; only 1 (no sharding of the parameters).
* momentum ``mu``, ``nesterov`` and ``weight_decay`` come from ``workload.optimizer`` (``sgd``
  only; the method owns the update).  Tuning hint: start from the full-precision SGDM recipe
  (Nesterov, ``mu = 0.9``, its lr schedule); error feedback repays what compression drops.

Ambiguities and choices: the sign of an exact zero is sent as ``+`` (1 bit carries no zero; the
paper's ``sign(0) = 0``), so a zero element decompresses to ``+scale`` and its error feedback
repays it the next step.  Weight decay is not in the paper; it is added to the gradient at
``x_t`` (step 1), so it goes through momentum and compression like the loss gradient.

Differences from public code: no code by the authors was found.  A third-party PyTorch version
(``DEFSGDM_worker`` / ``DEFSGDM_server``, "SSP compatible") compresses the momentum direction
*without* the lr, multiplies the lr in at the server and rescales the worker error by
``lr_{t-1} / lr_t`` (so its error is in gradient units under a schedule), adds weight decay as
``wd / (1 - mu) x`` after the momentum, and keeps one server error per worker (for its
stale-synchronous mode); as far as we read it, with a constant lr, no weight decay and synchronous
steps it reduces to steps 1-7 (not run side by side).

Tested (``tests/test_ef_blocksgdm.py``): real ranks (2 and 3 workers + server, ``layer`` and
``tensor``, lr x0.1 after epoch 1) against a naive float64 reference of steps 1-7: parameters
within 3.5e-8 at 2 workers (bound 1e-6); dropping the server's error feedback, heavy ball for
Nesterov or the lr after decompression move the reference by 4e-3 to 2e-2.  Bytes per worker and step: exactly
``ceil(d / 8) + 4 B`` each way (318 for the tiny MLP's 2,410 parameters in 4 blocks, against
9,640 in fp32).  The simulated backend gives the real ranks' parameters; a killed run resumes
to the uninterrupted run's parameters, bit for bit (worker momentum and both memories restored).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..compression import Compressor, build
from ..errors import ConfigError
from ..comm.flat import flat_grads, flat_params, write_params
from ..comm import stepcost as sc
from ..protocol import StepContext
from ..families.ps import ServerBase
from . import register


@dataclass
class EFBlockSGDMConfig:
    block: str = field(default="layer", metadata={"choices": ("layer", "tensor", "size")})
    block_size: int = field(default=0, metadata={"min": 0})
    servers: int = field(default=1, metadata={"min": 1, "max": 1})

    def validate(self, key: str) -> None:
        if self.block == "size" and self.block_size < 1:
            raise ConfigError(f"{key}.block_size", "block 'size' needs block_size >= 1")


def make_compressor(cfg: EFBlockSGDMConfig, layout: Sequence[int], seed: int = 0, clock=None) -> Compressor:
    """The blockwise scaled-sign compressor with error feedback (one per call site), charging
    its work (compression, decompression, the residual's add and subtract) to ``clock``."""
    return build({"name": "sign", "scale": "mean_abs", "block": cfg.block, "block_size": cfg.block_size,
                  "error_feedback": True}, key="algorithm", seed=seed, layout=layout, clock=clock)


@register("ef_blocksgdm")
class EFBlockSGDM(ServerBase):
    Config = EFBlockSGDMConfig
    optimizer_use = "owns"
    sync_collective = True  # a synchronous server round
    #: the share of a model one message weighs: packed signs (its per-block scales are negligible)
    wire_share = 1 / 32

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, **opts) -> float:
        """``C_n + 2 (alpha + o + n S / bw') + ops``: the server's one NIC receives and sends ``n``
        messages of ``S = B/32`` (packed signs), one phase after the other; ``ops``: the local work
        every round waits for (:func:`impls.comm.stepcost.ops_s`, passes over the model, with the
        L2 term and Nesterov): the worker's before its message leaves (flatten x and g: 2 copies;
        L2, momentum, Nesterov, lr: 13 arith; compression with error feedback: 8 compress), the
        server's aggregation before its reply leaves (``n`` decompressions and an EF compression:
        ``n + 8`` compress; the sum and mean: ``3n + 2`` arith), the worker's after the reply (its
        decompression and ``x -= Delta~``: 1 compress, 3 arith)."""
        n = p.nodes
        ops = sc.ops_s(p, arith=13 + (3 * n + 2) + 3, copy=2, compress=8 + (n + 8) + 1)
        return sc.server_round_s(p, cls.wire_share) + ops
    supported_optimizers = {"sgd": {}}  # momentum, nesterov and weight decay are read, any value
    serve = ServerBase.serve_rounds  # 5, 6 (aggregate, after_replying below)

    def __init__(self, cfg, ctx):
        super().__init__(cfg, ctx)
        o = ctx.optim
        self.mu, self.wd = float(o.momentum), float(o.weight_decay)
        self.nesterov = bool(o.nesterov) and self.mu > 0

    def setup(self, model):
        super().setup(model)  # every rank, the server included, starts from rank 0's model
        layout = [p.numel() for p in model.parameters()]
        self.d = sum(layout)
        self.ef = make_compressor(self.cfg, layout, self.ctx.seed, self.comm.clock)  # worker: e_i; server: e~
        self.m = torch.zeros(self.d, device=self.ctx.device) if self.is_worker() else None
        if self.server is not None:
            self.server.compressor = self.ef  # e~ is checkpointed with the server's x

    @torch.no_grad()
    def step(self, s: StepContext) -> dict[str, float]:
        clock = self.comm.clock  # the flat helpers and self.ef charge their own work (op-cost model)
        x = flat_params(self.model, clock)
        g = flat_grads(self.model, clock)
        nb = x.numel() * x.element_size()
        # the method's own arithmetic, charged before the message leaves: the L2 term (3 passes),
        # the momentum (2 + 3), the Nesterov step (3; heavy ball: a copy), the lr (2)
        clock.charge_op("arith", ((3 if self.wd else 0) + 5 + (3 if self.nesterov else 0) + 2) * nb)
        if not self.nesterov:
            clock.charge_op("copy", nb)
        if self.wd:
            g.add_(x, alpha=self.wd)  # 1
        self.m.mul_(self.mu).add_(g)  # 2
        p = g.add(self.m, alpha=self.mu) if self.nesterov else self.m.clone()
        bufs = self.message_parts()
        self.exchange([self.ef.compress(p.mul_(s.lr))], [bufs])  # 3, 4 (e_i kept by self.ef)
        write_params(self.model, x.sub_(self.ef.decompress(bufs, self.d)))  # 7
        clock.charge_op("arith", 3 * nb)  # the method's own x -= Delta~
        return {}

    # -- the server (ServerBase.serve_rounds) --------------------------------------------------
    def message_parts(self) -> list[torch.Tensor]:
        return self.ef.empty(self.d, device=self.ctx.device)

    @torch.no_grad()
    def aggregate(self, msgs: list[list[torch.Tensor]], lr: float) -> list[torch.Tensor]:
        total = torch.zeros(self.d, device=self.ctx.device)  # 5
        for parts in msgs:
            total.add_(self.ef.decompress(parts, self.d))
        # the method's own arithmetic (its sum: 3 passes per message, the mean: 2), charged here,
        # before the replies leave (so are self.ef's decompressions and its compression below)
        self.comm.clock.charge_op("arith", (3 * len(msgs) + 2) * total.numel() * total.element_size())
        return self.ef.compress(total.div_(self.ctx.world))  # 6 (e~ kept by self.ef)

    @torch.no_grad()
    def after_replying(self, reply: list[torch.Tensor], lr: float) -> None:
        self.server.descend(self.ef.decompress(reply, self.d))  # the server's copy follows the replicas

    def worker_state(self) -> dict[str, Any]:
        return {"momentum": self.m.clone(), "compressor": self.ef.state_dict()}

    def load_worker_state(self, state: dict[str, Any]) -> None:
        self.m = state["momentum"].clone()
        self.ef.load_state_dict(state["compressor"])
