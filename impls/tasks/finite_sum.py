"""A finite-sum objective with a known optimum: ``min_x F(x) = 1/n sum_i f_i(x)``.

The setting of the variance-reduced methods (SVRG, Katyusha X: Allen-Zhu, ICML 2018,
"Katyusha X: Practical Momentum Method for Stochastic Sum-of-Nonconvex Optimization"),
and an exact test bed for every distributed method: the suboptimality ``opt/gap =
F(x) - F(x*)`` is measured against the closed-form minimiser, so "converged" means
something to 1e-8.  The data are generated deterministically from ``data_seed`` (float64):

* ``quadratic`` (sum of nonconvex quadratics): ``f_i(x) = 1/2 x^T A_i x + b_i^T x`` with
  ``A_i = A + S_i``, ``A = Q diag(lambda) Q^T`` positive definite (eigenvalues spread
  evenly over ``[1/condition, 1]``) and symmetric perturbations ``S_i`` of size
  ``spread`` that sum to zero, so each ``f_i`` is indefinite (nonconvex) for
  ``spread`` of order 1 while ``F = 1/2 x^T A x + b^T x`` is strongly convex;
  ``b_i = b + spread * N(0, I / dim)``; ``x* = -A^{-1} b``.  ``spread`` thus also sets
  the gradient noise at the optimum, i.e. how far plain SGD's constant step stalls.
* ``least_squares``: ``f_i(x) = 1/2 (a_i^T x - y_i)^2`` with ``a_i ~ N(0, I)`` and
  ``y_i = a_i^T x_true + noise * N(0, 1)``; ``x*`` from the normal equations.

The model is the vector ``x`` (a module with one float64 parameter of ``dim`` entries,
initialised N(0, 1) from the run's seed); a batch is a tensor of component indices.
Tuning: ``condition`` sets how hard the problem is (iterations scale with it); the
largest stable constant step size is about ``1 / max_i ||A_i||``, larger with ``spread``.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from functools import lru_cache

import torch
from torch import nn
from torch.utils.data import TensorDataset

from . import TASKS, Task


@dataclass
class FiniteSumConfig:
    name: str = "finite_sum"
    problem: str = field(default="quadratic", metadata={"choices": ("quadratic", "least_squares")})
    n: int = field(default=512, metadata={"min": 2})  # components f_i
    dim: int = field(default=20, metadata={"min": 1})
    condition: float = field(default=10.0, metadata={"min": 1})  # quadratic: L / mu of the mean
    spread: float = field(default=1.0, metadata={"min": 0})  # quadratic: size of the indefinite parts
    noise: float = field(default=0.1, metadata={"min": 0})  # least squares: label noise
    data_seed: int = field(default=0, metadata={"min": 0})


class Vector(nn.Module):
    """The optimisation variable ``x`` as a module (so every algorithm can train it)."""

    def __init__(self, dim: int):
        super().__init__()
        self.x = nn.Parameter(torch.randn(dim, dtype=torch.float64))


@TASKS.register("finite_sum")
class FiniteSum(Task):
    Config = FiniteSumConfig
    primary_metric = "opt/gap"
    higher_is_better = False
    metrics = ("opt/gap", "loss/objective")

    def build_data(self, probe: bool = False) -> None:
        data = _problem(*astuple(self.cfg))  # the same numbers for every rank: built once a process
        for name, t in data.items():
            setattr(self, name, t.to(self.device) if isinstance(t, torch.Tensor) else t)
        idx = torch.arange(self.cfg.n)
        self.train = self.val = TensorDataset(idx)

    def _objective(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        if self.cfg.problem == "quadratic":
            A, b = self.A[idx], self.b[idx]
            return (0.5 * torch.einsum("i,nij,j->n", x, A, x) + b @ x).mean()
        return (0.5 * (self.a[idx] @ x - self.y[idx]) ** 2).mean()

    def build_model(self) -> nn.Module:
        return Vector(self.cfg.dim).to(self.device)

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        return self._objective(model.x, batch[0])

    @torch.no_grad()
    def evaluate(self, model: nn.Module, workers: int = 0) -> dict[str, float]:
        f = float(self._objective(model.x, torch.arange(self.cfg.n, device=self.device)))
        return {"loss/objective": f, "opt/gap": f - self.f_star}


@lru_cache(maxsize=4)
def _problem(*fields) -> dict:
    """The problem's numbers (module docstring) from the config's fields, in their order: ``A``
    and ``b`` or ``a`` and ``y``, ``x_star`` and ``f_star``.  Cached: the simulator runs every rank
    in one process, and 16 ranks each building a 4096-component quadratic took 40 % of a short
    16-node simulation.  Read-only: no rank writes into them."""
    c = FiniteSumConfig(*fields)
    g = torch.Generator().manual_seed(c.data_seed)
    rand = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    out: dict = {}
    if c.problem == "quadratic":
        q, _ = torch.linalg.qr(rand(c.dim, c.dim))
        lam = torch.linspace(1.0 / c.condition, 1.0, c.dim, dtype=torch.float64)
        a_mean = q @ torch.diag(lam) @ q.T
        s = rand(c.n, c.dim, c.dim) * (c.spread / c.dim ** 0.5)
        s = (s + s.transpose(1, 2)) / 2
        s -= s.mean(0)  # the perturbations cancel: the mean Hessian is exactly A
        out["A"], out["b"] = a_mean + s, rand(c.dim) + rand(c.n, c.dim) * (c.spread / c.dim ** 0.5)
        x_star = -torch.linalg.solve(a_mean, out["b"].mean(0))
        f_star = (0.5 * torch.einsum("i,nij,j->n", x_star, out["A"], x_star) + out["b"] @ x_star).mean()
    else:
        out["a"] = rand(c.n, c.dim)
        out["y"] = out["a"] @ rand(c.dim) + c.noise * rand(c.n)
        x_star = torch.linalg.lstsq(out["a"], out["y"].unsqueeze(1)).solution.squeeze(1)
        f_star = (0.5 * (out["a"] @ x_star - out["y"]) ** 2).mean()
    out["x_star"], out["f_star"] = x_star, float(f_star)
    return out
