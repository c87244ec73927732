"""Float64 references for the training methods, written from the papers and the documented rules.

Nothing here imports the code under test (algorithms, topologies, gossip, optimizer,
sampler): every rule the methods must follow is written out again, from its paper or
from the docstring that documents it, so a change in the implementation cannot
silently change the reference too.  Only the workload's dataset and model builders
are shared (:func:`impls.data.build_dataset`, :func:`impls.models.build_model`): they
are the problem being solved, not the method solving it.

All replicas live in one process as the rows of an ``n x P`` matrix ``X`` (``P``
parameters), everything in float64.  Per step ``t`` (epoch ``e``, step ``k`` in it):

* **batches** (``impls/data/sampler.py``, iid split): each epoch one permutation
  ``perm = randperm(N)`` from a ``torch.Generator`` seeded ``seed * 100003 + e``; step
  ``k`` uses the global batch ``perm[k B:(k+1) B]``, ``B = n b``, and rank ``r`` its
  slice ``[r b:(r+1) b]``.
* **gradient**: ``G_r = grad CE(model(Z_r; batch_r)) + wd Z_r`` at the point ``Z_r``
  the rank trains (``X_r``, or SGP's de-biased ``X_r / w_r``); the L2 term is taken
  at the gradient's point.
* **local SGD direction** (``impls/optim.py``): ``U = G`` on the first step, then
  ``U = m U + G``; ``D = G + m U`` (Nesterov) or ``D = U``.
* **mixing matrices** ``P[dst, src]``: a rank with ``k`` out-peers keeps ``1/(k+1)``
  of its vector and sends ``1/(k+1)`` to each (:func:`mixing_matrix`).

Methods (``X_{t+1}`` from ``X_t``):

* ``serial_sgd`` / ``allreduce_sgd``: one model, ``G`` = mean over ranks of the
  local gradients (plus ``wd X``), ``X <- X - lr D``.
* ``sgp`` (Assran et al. 2019, Alg. 1): PushSum on the numerator ``X`` and weight
  ``w`` (initially 1): ``[X, w] <- P_t [X - lr D, w]``; the model is ``Z = X / w``.
* ``osgp`` (ibid., Sec. 3, delay ``tau``): the local share ``diag(P_t) [X - lr D, w]``
  is kept at once; the off-diagonal part of round ``s`` is added at step ``s + tau``,
  or at the end of its epoch if that comes first.
* ``dpsgd`` (Lian et al. 2017, Alg. 1, ``mix_then_step``): ``X <- W X - lr D``, the
  gradient taken at ``X`` before mixing; ring graph.
* ``d2`` (Tang et al. 2018, Alg. 1, plain SGD): ``X_1 = W (X_0 - lr G_0)``,
  ``X_{t+1} = W (2 X_t - X_{t-1} - lr G_t + lr G_{t-1})``; ``lazy`` uses ``(W + I)/2``.

``init_spread`` (every method's start-apart option): rank ``r`` adds
``spread * randn(shape)`` to each parameter in order, drawn from a generator seeded
``seed * 1000003 + r + 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from impls.data import build_dataset
from impls.models import build_model

F64 = torch.float64


# -- graphs ---------------------------------------------------------------------------------------------

def out_peers(topology: dict[str, Any], n: int, rank: int, itr: int) -> list[int]:
    """Whom ``rank`` sends to at iteration ``itr``.

    * ``exponential`` (SGP's time-varying directed exponential graph): the hop lengths
      ``2^0, 2^1, ..., 2^(m-1)`` (``m = ceil(log2 n)``) are used in turn, ``peers`` of
      them per iteration: iteration ``itr`` uses ``2^((itr * peers + j) mod m)``,
      ``j < peers``; rank ``i`` sends forward to ``i + hop (mod n)``.
    * ``ring``: the two neighbours ``i - 1`` and ``i + 1``.
    * ``complete``: everyone else.
    """
    name = topology["name"]
    if name == "exponential":
        m = math.ceil(math.log2(n))
        hops = {2 ** ((itr * topology.get("peers", 1) + j) % m) for j in range(topology.get("peers", 1))}
        return sorted((rank + h) % n for h in hops)
    if name == "ring":
        return sorted({(rank - 1) % n, (rank + 1) % n})
    if name == "complete":
        return [j for j in range(n) if j != rank]
    raise ValueError(f"no reference for topology {name!r}")


def mixing_matrix(topology: dict[str, Any], n: int, itr: int) -> torch.Tensor:
    """``P[dst, src]``: the share of ``src``'s vector in ``dst``'s new one (column-stochastic)."""
    P = torch.zeros(n, n, dtype=F64)
    for src in range(n):
        peers = out_peers(topology, n, src, itr)
        P[src, src] = 1.0 / (len(peers) + 1)
        for dst in peers:
            P[dst, src] = 1.0 / (len(peers) + 1)
    return P


# -- data, model, gradients -------------------------------------------------------------------------

def rank_batches(n_train: int, b: int, n: int, seed: int, epoch: int, steps: int) -> list[list[torch.Tensor]]:
    """``[step][rank]`` sample indices of one epoch under the iid rule (module docstring)."""
    perm = torch.randperm(n_train, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    B = n * b
    return [[perm[k * B + r * b:k * B + (r + 1) * b] for r in range(n)] for k in range(steps)]


class Problem:
    """The workload's training set and model, in float64, as functions of a flat vector."""

    def __init__(self, workload: dict[str, Any], seed: int):
        data = build_dataset(workload["dataset"])
        torch.manual_seed(seed)  # the trainer seeds torch with the run's seed, then builds the model
        self.model = build_model(workload["model"], data.input_shape, data.num_classes).to(F64)
        self.x, self.y = data.train.tensors[0].to(F64), data.train.tensors[1]
        self.names = [(k, p.shape, p.numel()) for k, p in self.model.named_parameters()]

    def initial(self, n: int, seed: int, spread: float) -> torch.Tensor:
        """``n x P``: the seeded model on every rank, plus each rank's ``init_spread`` noise."""
        rows = []
        for r in range(n):
            g = torch.Generator().manual_seed(seed * 1_000_003 + r + 1)
            parts = [p.detach().reshape(-1) + (spread * torch.randn(p.shape, generator=g, dtype=torch.float32)
                                                .to(F64).reshape(-1) if spread > 0 else 0)
                     for p in self.model.parameters()]
            rows.append(torch.cat(parts))
        return torch.stack(rows)

    def loss_grad(self, z: torch.Tensor, idx: torch.Tensor) -> tuple[float, torch.Tensor]:
        """Mean cross-entropy on the samples ``idx`` at parameters ``z`` and its gradient."""
        torch.nn.utils.vector_to_parameters(z.clone(), self.model.parameters())
        self.model.zero_grad()
        loss = F.cross_entropy(self.model(self.x[idx]), self.y[idx])
        loss.backward()
        return loss.item(), torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    def state(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """A flat vector as the model's named tensors."""
        out, i = {}, 0
        for k, shape, size in self.names:
            out[k] = z[i:i + size].reshape(shape)
            i += size
        return out


@dataclass
class Trace:
    """What the reference predicts for every rank: final parameters and per-step losses."""

    params: list[dict[str, torch.Tensor]]  # per rank, by parameter name
    losses: torch.Tensor  # steps x ranks
    weights: torch.Tensor  # steps x ranks: PushSum weight after each step (1 without PushSum)
    staleness: list[int]  # per step: age in steps of the oldest round absorbed in it (osgp), else 0


# -- the methods -------------------------------------------------------------------------------------

def simulate(algorithm: dict[str, Any], workload: dict[str, Any], nodes: int, seed: int = 1) -> Trace:
    """Run ``algorithm`` (a run config's ``algorithm`` section) on ``workload`` for
    ``epochs x max_steps_per_epoch`` steps of the iid split, all ranks at once."""
    method, n = algorithm["name"], nodes
    o = workload["optimizer"]
    lr, m, nesterov, wd = o["lr"], o["momentum"], o["nesterov"] and o["momentum"] > 0, o["weight_decay"]
    if workload.get("schedule") or workload["dataset"].get("partition", {"kind": "iid"})["kind"] != "iid":
        raise ValueError("the reference covers a constant lr on the iid split")
    prob = Problem(workload, seed)
    X = prob.initial(n, seed, algorithm.get("init_spread", 0.0))
    w = torch.ones(n, 1, dtype=F64)  # PushSum weights (sgp, osgp)
    U = torch.zeros_like(X)  # local momentum buffers
    prev: tuple[torch.Tensor, torch.Tensor] | None = None  # d2: (X_{t-1}, lr G_{t-1})
    inflight: list[tuple[int, torch.Tensor]] = []  # osgp: (sent at, off-diagonal part of [X, w])
    topo = algorithm.get("topology", {"name": "exponential", "peers": 1} if method in ("sgp", "osgp") else
                         {"name": "ring"})
    topo = {"name": topo} if isinstance(topo, str) else topo
    tau = algorithm.get("tau", 1)
    losses, weights, staleness, t = [], [], [], 0
    for epoch in range(workload["epochs"]):
        for idx in rank_batches(len(prob.y), workload["batch_size"], n, seed, epoch, workload["max_steps_per_epoch"]):
            Z = X / w
            lg = [prob.loss_grad(Z[r], idx[r]) for r in range(n)]
            losses.append([l for l, _ in lg])
            G = torch.stack([g for _, g in lg])
            if method in ("serial_sgd", "allreduce_sgd"):
                G = G.mean(0, keepdim=True).expand(n, -1)
            G = G + wd * Z
            U = G.clone() if t == 0 else m * U + G
            D = G + m * U if nesterov else U
            P = mixing_matrix(topo, n, t)
            age = 0
            if method in ("serial_sgd", "allreduce_sgd"):
                X = X - lr * D
            elif method == "sgp":
                X, w = P @ (X - lr * D), P @ w
            elif method == "osgp":
                H = torch.cat([X - lr * D, w], 1)
                own = torch.diag(P)[:, None] * H
                inflight.append((t, (P - torch.diag(torch.diag(P))) @ H))
                due = [f for f in inflight if f[0] <= t - tau]
                inflight = [f for f in inflight if f[0] > t - tau]
                own = own + sum(part for _, part in due)
                age = max([t - sent for sent, _ in due], default=0)
                X, w = own[:, :-1], own[:, -1:]
            elif method == "dpsgd":
                X = P @ X - lr * D
            elif method == "d2":
                W = (P + torch.eye(n, dtype=F64)) / 2 if algorithm.get("lazy") else P
                H = X - lr * G if prev is None else 2 * X - prev[0] - lr * G + prev[1]
                prev = (X, lr * G)
                X = W @ H
            else:
                raise ValueError(f"no reference for {method!r}")
            weights.append(w[:, 0].tolist())
            staleness.append(age)
            t += 1
        for _, part in inflight:  # osgp: every round still in flight is absorbed at the end of an epoch
            X, w = X + part[:, :-1], w + part[:, -1:]
        inflight = []
    Z = X / w
    return Trace([prob.state(Z[r]) for r in range(n)], torch.tensor(losses, dtype=F64),
                 torch.tensor(weights, dtype=F64), staleness)


def max_rel_error(params: list[dict[str, torch.Tensor]], ref: Trace) -> float:
    """Largest ``||got - ref|| / ||ref||`` over ranks and parameter tensors."""
    if len(params) != len(ref.params):
        raise AssertionError(f"{len(params)} ranks, the reference has {len(ref.params)}")
    worst = 0.0
    for got, want in zip(params, ref.params):
        if sorted(got) != sorted(want):
            raise AssertionError(f"parameters {sorted(got)} != reference {sorted(want)}")
        for k in want:
            worst = max(worst, float((got[k].to(F64) - want[k]).norm() / want[k].norm()))
    return worst
