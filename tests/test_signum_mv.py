"""signum_mv: signSGD / Signum with majority vote (Bernstein et al. 2018, 2019), Byzantine workers.

* The vote equals ``sign(sum of signs)`` computed naively, ties ``+1`` (pure function).
* The algorithm's own step, driven in one process (``W`` worker threads, an in-process
  all-gather), equals a naive loop written from the papers: identical gradients on every
  honest worker give single-worker Signum / signSGD; mixed gradients with inverting or
  random adversaries give the naive vote over the mixed signs.
* Real ranks (torchrun, gloo): ``server`` and ``allgather`` give the same parameters, the
  bytes per step are ``ceil(d/8)`` per direction, and the simulated backend gives the real
  ranks' parameters; a run killed after its first epoch resumes to the uninterrupted result.
"""

from __future__ import annotations

import json
import math
import threading

import pytest
import torch
from torch import nn

from conftest import launch, make_config
from impls.backends import Clock
from impls.algorithms.signum_mv import SignumMV, SignumMVConfig, byzantine, majority_vote
from impls.compression import build, pack_bits, unpack_bits
from impls.errors import ConfigError
from impls.comm.flat import flat_params
from impls.optim import SGDConfig
from impls.protocol import Context, StepContext
from impls.config.runconfig import resolve
from test_sim_runs import sim_config, simulate

F32 = 4
OPT = {"lr": 0.01, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}


def naive_sign(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x >= 0, 1.0, -1.0)  # sign(0) = +1: the 1-bit wire has no 0


def test_majority_vote_is_the_sign_of_the_sum_ties_plus():
    sign = build({"name": "sign"})
    g = torch.Generator().manual_seed(0)
    ties = 0
    for n in range(1, 7):
        for numel in (1, 8, 37, 1000):
            xs = [torch.randn(numel, generator=g).round() for _ in range(n)]  # zeros included
            votes = majority_vote([sign.compress(x)[0] for x in xs], numel)
            total = sum(naive_sign(x) for x in xs)
            want = torch.where(total == 0, 1.0, torch.sign(total))
            assert votes.shape == (math.ceil(numel / 8),)
            assert torch.equal(unpack_bits(votes, numel).float() * 2 - 1, want), (n, numel)
            ties += int((total == 0).sum())
    assert ties > 100  # even n: ties are exercised


def test_adversaries_invert_or_flip_seeded_coins():
    bits = torch.rand(1001, generator=torch.Generator().manual_seed(1)) < 0.5
    packed = pack_bits(bits)
    assert torch.equal(unpack_bits(byzantine(packed, 1001, "invert", 1, 3, 5), 1001), ~bits)
    r = [unpack_bits(byzantine(packed, 1001, "random", *k), 1001) for k in ((1, 3, 5), (1, 3, 5), (1, 3, 6),
                                                                             (1, 2, 5), (2, 3, 5))]
    assert torch.equal(r[0], r[1]) and all(not torch.equal(r[0], x) for x in r[2:])
    assert 400 < int(r[0].sum()) < 600


# -- the algorithm's step, W workers in one process --------------------------------------------------

class _Group:
    """An in-process all-gather for W worker threads (the only collective the allgather mode uses
    after set-up; the replicas are seeded equal, so the set-up broadcast is a no-op here)."""

    def __init__(self, world: int):
        self.world, self.slots, self.barrier = world, [None] * world, threading.Barrier(world, timeout=20)

    def member(self, rank: int):
        group = self

        class Member:
            world = group.world
            clock = Clock()  # the wall clock: where the algorithm declares its local operations

            def broadcast(self, t, src, async_op=False):
                pass

            def pop_counters(self):
                pass

            def all_gather(self, out, t, async_op=False):
                group.slots[rank] = t.clone()
                group.barrier.wait()
                for o, s in zip(out, group.slots):
                    o.copy_(s)
                group.barrier.wait()

        return Member()


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(7, 5), nn.Tanh(), nn.Linear(5, 3))


def run_step(grads, lr=0.01, wd=0.05, seed=7, **cfg) -> list[torch.Tensor]:
    """``grads[t][r]``: worker ``r``'s flat gradient at step ``t``; each worker's final parameters."""
    W = len(grads[0])
    group, algos, errors = _Group(W), [], []
    for r in range(W):
        a = SignumMV(SignumMVConfig(aggregation="allgather", **cfg),
                     Context(r, W, group.member(r), SGDConfig(lr=lr, momentum=0.0, weight_decay=wd), seed))
        a.setup(_model())
        algos.append(a)

    def work(r: int) -> None:
        try:
            params = list(algos[r].model.parameters())
            for t, gt in enumerate(grads):
                for p, v in zip(params, gt[r].split([p.numel() for p in params])):
                    p.grad = v.view_as(p).clone()
                algos[r].step(StepContext(lr=lr, step=t, epoch=0.0, batch=None, closure=None))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
            group.barrier.abort()

    threads = [threading.Thread(target=work, args=(r,)) for r in range(W)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return [flat_params(a.model) for a in algos]


def naive(grads, beta=0.9, lr=0.01, wd=0.05, adversaries=0, mode="invert", seed=7) -> torch.Tensor:
    """The papers' loop: m = beta m + (1 - beta) g on each worker, V = sign(sum sign(m)) (ties +1),
    x = x - lr (V + wd x); the last ``adversaries`` workers send -sign(m) or seeded coins."""
    W = len(grads[0])
    x, m = flat_params(_model()), [torch.zeros_like(grads[0][0]) for _ in range(W)]
    for t, gt in enumerate(grads):
        total = torch.zeros_like(x)
        for r in range(W):
            m[r] = beta * m[r] + (1 - beta) * gt[r]
            s = naive_sign(m[r])
            if r >= W - adversaries:
                if mode == "invert":
                    s = -s
                else:
                    s = unpack_bits(byzantine(pack_bits(s > 0), x.numel(), "random", seed, r, t), x.numel()) * 2.0 - 1
            total += s
        x = x - lr * (naive_sign(total) + wd * x)
    return x


def _grads(steps: int, W: int, identical: bool, seed: int = 3) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    d = sum(p.numel() for p in _model().parameters())
    out = []
    for _ in range(steps):
        one = torch.randn(d, generator=g)
        out.append([one.clone() if identical else torch.randn(d, generator=g) for _ in range(W)])
    return out


@pytest.mark.parametrize("beta", [0.0, 0.9])
def test_identical_gradients_give_single_worker_signum(beta):
    """Every honest worker with the same gradient: the vote is that worker's sign, so W workers
    (with or without a minority of inverters) take single-machine Signum / signSGD's steps."""
    grads = _grads(6, 4, identical=True)
    single = naive([[gt[0]] for gt in grads], beta=beta)
    assert not torch.allclose(single, flat_params(_model()))  # it moved
    assert torch.allclose(run_step([[gt[0]] for gt in grads], beta=beta)[0], single, atol=1e-6)  # n = 1
    for k in (0, 1):  # 4 honest; 3 honest + 1 inverting: the same vote
        for x in run_step(grads, beta=beta, adversaries=k):
            assert torch.allclose(x, single, atol=1e-6), k
    two = run_step(grads, beta=beta, adversaries=2)  # 2 against 2: every coordinate ties, +1
    assert not torch.allclose(two[0], single, atol=1e-3)
    assert torch.allclose(two[0], naive(grads, beta=beta, adversaries=2), atol=1e-6)


@pytest.mark.parametrize("adversaries,mode", [(0, "invert"), (1, "invert"), (2, "invert"), (1, "random"),
                                              (3, "random")])
def test_mixed_gradients_and_adversaries_give_the_naive_vote(adversaries, mode):
    grads = _grads(6, 4, identical=False)
    want = naive(grads, adversaries=adversaries, mode=mode)
    honest = naive(grads)
    if adversaries:
        assert not torch.allclose(want, honest, atol=1e-3)  # the adversaries change the vote
    for x in run_step(grads, adversaries=adversaries, adversary_mode=mode):
        assert torch.allclose(x, want, atol=1e-6)


def test_config_checks():
    cfg = make_config({"name": "signum_mv", "adversaries": 3}, 2, workload={"optimizer": OPT})
    res = resolve(cfg)
    with pytest.raises(ConfigError, match="algorithm.adversaries"):
        res.algorithm_cls(res.algorithm, Context(0, 2, None, res.optim, 1))
    with pytest.raises(ConfigError, match=r"workload\.optimizer\.momentum.*signum_mv needs sgd with momentum: 0"):
        resolve(make_config("signum_mv", 2))  # the tiny workload's momentum 0.9: the momentum is beta
    with pytest.raises(ConfigError, match="algorithm.beta"):
        resolve(make_config({"name": "signum_mv", "beta": 1.0}, 2, workload={"optimizer": OPT}))
    assert SignumMV.roles(3, SignumMVConfig()) == ["worker"] * 3 + ["server"]
    assert SignumMV.roles(3, SignumMVConfig(aggregation="allgather")) == ["worker"] * 3


# -- real ranks and the simulated backend --------------------------------------------------------------

W = 3
ALGOS = {"plain": {}, "invert1": {"adversaries": 1}}


def _cfg(aggregation: str, extra: dict, **over) -> dict:
    return make_config({"name": "signum_mv", "aggregation": aggregation, **extra}, W, workload={"optimizer": OPT},
                       **over)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("signum_real")
    out = {}
    for agg in ("allgather", "server"):  # world 3, then 3 workers + 1 server
        results, _ = launch([_cfg(agg, a) for a in ALGOS.values()], tmp / agg)
        out.update({(agg, k): r for k, r in zip(ALGOS, results)})
    return out


def _diff(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.mark.spawn
def test_real_ranks_both_aggregations_agree_at_one_bit_per_coordinate(real):
    srv, ag = real["server", "plain"], real["allgather", "plain"]
    assert json.loads((srv.out / "provenance.json").read_text())["roles"] == ["worker"] * W + ["server"]
    for k in ALGOS:
        for r in range(W):
            assert _diff(real["server", k].final_state(r), real["allgather", k].final_state(r)) <= 1e-6, (k, r)
            assert _diff(real["server", k].final_state(r), real["server", k].final_state(0)) == 0  # replicas equal
        assert _diff(real["server", k].final_state(W), real["server", k].final_state(0)) == 0  # the server's copy
    assert _diff(real["server", "invert1"].final_state(0), srv.final_state(0)) > 1e-3  # the adversary mattered
    loss = [e["loss/train"] for e in srv.records(0, "epoch")]
    assert loss[1] < loss[0] < 2.2  # it trains

    d = sum(v.numel() for v in srv.final_state(0).values())
    S = math.ceil(d / 8)
    for s in srv.records(0, "step") + srv.records(W - 1, "step"):  # a worker: its signs up, the vote down
        assert s["comm/bytes_sent"] == s["comm/bytes_recv"] == S
        assert abs(s["comm/bytes_sent"] - d / 8) <= 0.05 * d / 8 and F32 * d / s["comm/bytes_sent"] > 31
    for e in srv.records(W, "epoch"):  # the server: W signs in, W votes out per step, 10 steps
        assert e["comm/bytes_recv"] == e["comm/bytes_sent"] == 10 * W * S
    for s in ag.records(0, "step"):  # a ring all-gather of the packed signs
        assert s["comm/bytes_sent"] == s["comm/bytes_recv"] == (W - 1) * S
        assert abs(s["comm/bytes_sent"] - (W - 1) * d / 8) <= 0.05 * (W - 1) * d / 8
    print(f"\nd = {d}: per worker per step, server mode {S} B each way, allgather {(W - 1) * S} B each way; "
          f"fp32: {F32 * d} B")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("signum_sim")
    return {agg: simulate(_cfg(agg, {}, backend="simgrid", platform="ethernet_10g",
                                   profile={"name": "fixed", "step_ms": 10}), tmp / agg)
            for agg in ("allgather", "server")}


def _records(run, rank: int) -> list[dict]:
    return [json.loads(x) for x in (run / "out" / "metrics" / f"rank{rank}.jsonl").read_text().splitlines()]


def _sim_state(run, rank: int) -> dict:
    return torch.load(run / "ckpt" / f"rank{rank}.pt", weights_only=False)["model"]


@pytest.mark.spawn
def test_simulated_backend_equals_real_ranks(real, simulated):
    for agg, run in simulated.items():
        for r in range(W + (agg == "server")):
            assert _diff(real[agg, "plain"].final_state(r), _sim_state(run, r)) <= 1e-6, (agg, r)
        assert json.loads((run / "out" / "provenance.json").read_text())["backend"] == "simgrid"


@pytest.mark.spawn
def test_resume_after_a_kill_equals_the_uninterrupted_run(simulated, tmp_path):
    """Killed in epoch 1 (rank 1, step 15): every rank, the server included, resumes from its epoch-0
    checkpoint (the workers' momentum with it) and ends where the uninterrupted run ends."""
    cfg = sim_config({"name": "signum_mv", "aggregation": "server"}, W, workload={"optimizer": OPT})
    simulate(cfg, tmp_path, fault="1:15")  # killed there
    m = torch.load(tmp_path / "ckpt" / "rank0.pt", weights_only=False)["algo"]["worker"]["momentum"]
    assert m is not None and float(m.abs().max()) > 0
    simulate(cfg, tmp_path)
    assert json.loads((tmp_path / "out" / "runinfo.json").read_text())["resumed_from_epoch"] == 0
    for r in range(W + 1):
        a, b = _sim_state(tmp_path, r), _sim_state(simulated["server"], r)
        assert all(torch.equal(a[k], b[k]) for k in b), r
        # every record, simulated times included, the uninterrupted run's exactly (it was 1e-4 s
        # off from the resumed epoch on: the checkpoint's time missed the epoch's agreement)
        got, want = (_records(run, r) for run in (tmp_path, simulated["server"]))
        assert len(got) == len(want) and all(x == y for x, y in zip(got, want)), r
