"""SVRG and Katyusha X: variance-reduced SGD in epochs, with Katyusha X's one momentum line.

Papers: Johnson & Zhang, "Accelerating Stochastic Gradient Descent using Predictive
Variance Reduction", NeurIPS 2013 (SVRG); Z. Allen-Zhu, "Katyusha X: Practical Momentum
Method for Stochastic Sum-of-Nonconvex Optimization", ICML 2018 (arXiv:1802.03866).  The
setting: ``F(x) = 1/n sum_i f_i(x)`` convex while the ``f_i`` need not be (the finite-sum
task's sum of nonconvex quadratics).  One algorithm: Katyusha X *is* SVRG plus one line
on the epochs' outputs, and with ``tau = 1/2`` that line is the identity (below), so
``svrg`` with the default ``tau: 0.5`` is plain SVRG and ``tau < 1/2`` is Katyusha X
(a method key ``katyusha_x: {algorithm: {name: svrg, tau: 0.2}}``).

The paper's algorithm, epoch ``k = 0, 1, ...`` (``y_0 = x~_0 = x_0``; one epoch of SVRG,
``SVRG1ep``, started at ``y_k`` with ``m`` steps of size ``eta``)::

    mu      = grad F(y_k)                                          (full gradient, snapshot y_k)
    x_0     = y_k;  x_{t+1} = x_t - eta (grad f_I(x_t) - grad f_I(y_k) + mu),  t < m
    x~_{k+1} = (x_1 + ... + x_m) / m                               (snapshot: average)
    y_{k+1} = (3/2 x~_{k+1} + 1/2 y_k - (1 - tau) x~_k) / (1 + tau)   (the one extra line)

computed here as ``x~_{k+1} + ((1 - tau)(x~_{k+1} - x~_k) + 1/2 (y_k - x~_{k+1})) / (1 + tau)``,
the same number, which with ``tau = 1/2`` and ``y_k = x~_k`` adds an exact zero: every
``y_k = x~_k`` and this is SVRG bit for bit.  The method's output (what is evaluated) is
``x~_k``; ``I`` is a mini-batch of ``b`` components (the paper's mini-batch version: the
same steps with ``grad f_I`` the mean over ``I``).

Mini-batch parallel, per worker (each holds a shard; the runtime's sampler gives worker
``r`` its slice of each global batch of ``B = world x batch_size`` components):

1. ``epoch_start``: the momentum line (epochs ``k >= 1``), write ``y_k`` into the model;
   the gradient over this worker's shard at ``y_k`` (``full_pass``), summed, and its
   sample count: **one all-reduce** of ``dim + 1`` numbers gives every worker ``mu``.
2. ``step``: the runtime's backward gave ``grad f_{I_r}(x_t)``; the closure recomputes
   ``grad f_{I_r}(y_k)`` on the same batch (the snapshot's parameters swapped in);
   **one all-reduce** of the difference, divided by the world size (equal local batches:
   the mean over the global batch ``I``); every worker takes the same step, so replicas
   stay equal, and adds ``x_{t+1}`` to the epoch's running sum.
3. ``eval_params``: the model holding ``x~`` (the running average; at an epoch's end
   ``x~_{k+1}``).

Metric ``opt/grad_evals`` (epoch records): component gradients ``grad f_i`` this worker
computed in the epoch, the paper's complexity measure: its shard for ``mu``, plus
``2 b`` per step (the tables sum it over workers: the total work; per worker it is the
parallel time).  On the simulated platform the extra gradients are charged like the
runtime's own (``clock.compute`` per batch).

Hyperparameters:

* ``workload.optimizer``: ``sgd`` with ``momentum: 0`` and ``weight_decay: 0`` (the
  method owns its update); ``lr`` is the step ``eta``: about ``1 / (2 L)`` with ``L`` the
  components' smoothness (the finite-sum quadratic: ``max_i ||A_i||``, ~1.3 for
  ``spread: 0.3``); with mini-batches of ``B`` the paper lets ``eta`` grow with ``B``
  (up to ``1/L``), which is what makes the parallel speed-up linear: ``m eta`` stays
  fixed while rounds fall as ``1/B``.
* ``tau`` (default 0.5 = SVRG), in ``(0, 1/2]``: less is more momentum.  The paper's
  theory sets it from ``m``, ``eta`` and the strong convexity ``sigma`` of ``F``, about
  ``sqrt(m sigma eta) / 2`` capped at 1/2 (as we recall it, see below); e.g. ``n = 512``,
  ``B = 16`` (``m = 32``), ``eta = 0.5``, ``sigma = 1/100``: 0.2.
* ``snapshot`` (default ``average``): the epoch output ``x~``; ``last`` takes ``x_m``
  (what public re-implementations do; often faster for SVRG in practice).

Where the paper leaves a choice, or we could not check it: the epoch length ``m`` is
the runtime's epoch, one pass of ``n / B`` steps (``workload.max_steps_per_epoch``
shortens it); mini-batches are drawn as the runtime draws them, a fresh permutation per
epoch without replacement, not i.i.d. with replacement as in the analysis; ``mu`` is the
mean over the epoch's pass, i.e. all ``n`` components when ``B`` divides ``n`` (the
sampler drops the last incomplete global batch otherwise).  Only the abstract of the
paper was readable to us; the momentum line agrees with two independent public
re-implementations (one notes that ``tau = 1/2`` gives SVRG, shown above), and the averaged
epoch output and the ``tau`` formula are as we recall Algorithm 1 and its theorem (both
re-implementations take the last iterate: ``snapshot: last``).  The
non-strongly-convex variant (a ``k``-dependent line) is not implemented.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ..comm.flat import flat_grads, flat_params, write_params
from ..protocol import Algorithm, StepContext
from . import register


@dataclass
class SVRGConfig:
    tau: float = field(default=0.5, metadata={"gt": 0, "max": 0.5})  # 0.5: plain SVRG; < 0.5: Katyusha X
    snapshot: str = field(default="average", metadata={"choices": ("average", "last")})


def _rows(batch) -> int:
    return int(batch[0].shape[0])


@register("svrg")
class SVRG(Algorithm):
    Config = SVRGConfig
    optimizer_use = "owns"
    sync_collective = True  # its gradients are all-reduced every step
    # SVRG's own step: no momentum buffer, no L2 term (the paper's unregularised objective)
    supported_optimizers = {"sgd": {"momentum": 0.0, "weight_decay": 0.0}}

    def setup(self, model):
        self.model = model
        self.broadcast_initial_state(model)
        x0 = flat_params(model)
        self.y, self.x_tilde = x0.clone(), x0.clone()  # y_0 = x~_0 = x_0
        self.total = torch.zeros_like(x0)  # this epoch's x_1 + ... + x_t
        self.t = 0  # steps taken in this epoch
        self.mu = torch.zeros_like(x0)
        self.evals = 0  # component gradients this worker computed in this epoch

    def _output(self) -> torch.Tensor:
        return self.total / self.t if self.cfg.snapshot == "average" else flat_params(self.model)

    @torch.no_grad()
    def epoch_start(self, epoch, full_pass):
        if self.t > 0:  # an epoch ran: x~_{k+1}, then the momentum line
            out, tau = self._output(), self.cfg.tau
            self.y = out + ((1 - tau) * (out - self.x_tilde) + 0.5 * (self.y - out)) / (1 + tau)
            self.x_tilde = out
        write_params(self.model, self.y)
        self.total.zero_()
        self.t, self.evals = 0, 0
        acc = torch.zeros(self.y.numel() + 1, dtype=self.y.dtype, device=self.y.device)  # 1
        for batch, closure in full_pass():
            with torch.enable_grad(), self.comm.clock.compute(self.model, batch):
                closure()
            k = _rows(batch)
            g = flat_grads(self.model, self.comm.clock)  # a copy, charged by the helper
            acc[:-1].add_(g, alpha=k)
            self.comm.clock.charge_op("arith", 3 * g.numel() * g.element_size())  # SVRG's own: the sum
            acc[-1] += k
            self.evals += k
        self.comm.all_reduce(acc)
        self.mu = acc[:-1] / acc[-1]

    def step(self, s: StepContext) -> dict[str, float]:
        clock = self.comm.clock  # the flat helpers charge their copies (op-cost model)
        g_x = flat_grads(self.model, clock)  # 2: grad f_I(x_t), from the runtime's backward
        x = flat_params(self.model, clock)
        write_params(self.model, self.y)
        with clock.compute(self.model, s.batch):
            s.closure()  # grad f_I(y_k) on the same batch
        d = g_x.sub_(flat_grads(self.model, clock))
        nb = d.numel() * d.element_size()
        clock.charge_op("arith", 3 * nb)  # SVRG's own arithmetic: the difference, before it is sent
        self.comm.all_reduce(d)
        if self.ctx.world > 1:
            d.div_(self.ctx.world)
        x.sub_(d.add_(self.mu), alpha=s.lr)
        write_params(self.model, x)
        self.total.add_(x)
        # SVRG's own arithmetic after the all-reduce: the mean (2 passes), + mu (3), x -= lr d (3), the sum (3)
        clock.charge_op("arith", ((2 if self.ctx.world > 1 else 0) + 9) * nb)
        self.t += 1
        self.evals += 2 * _rows(s.batch)
        return {}

    @contextlib.contextmanager
    def eval_params(self):
        if self.t == 0:  # before the first step: the model holds x_0 = x~_0
            yield self.model
            return
        x = flat_params(self.model)
        write_params(self.model, self._output())  # 3
        try:
            yield self.model
        finally:
            write_params(self.model, x)

    def epoch_end(self, epoch: int) -> dict[str, float]:
        return {"opt/grad_evals": float(self.evals)}

    def state_dict(self):
        return {"y": self.y, "x_tilde": self.x_tilde, "total": self.total, "t": self.t}

    def load_state_dict(self, state):
        self.y, self.x_tilde, self.total, self.t = state["y"], state["x_tilde"], state["total"], state["t"]
