"""Tier 1: the local optimizers and learning-rate schedules against naive references.

Each optimizer (float32, in place, as the ranks run it) is compared over several steps
with a float64 reference written from the paper's equations (tolerance 1e-6), and Adam /
AdamW also with ``torch.optim`` (same operation order: equal to float32 rounding).
Schedules are compared with their closed forms.
"""

import math

import pytest
import torch

from impls.errors import ConfigError
from impls.optim import build_optimizer, optimizer_config
from impls.optim.schedules import schedule_config

STEPS = 6


def _problem(seed=0):
    """A weight matrix, a bias and a (zero-initialised) layer, with a gradient sequence each."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(5, 4), (5,), (3, 2)]
    params = [torch.randn(s, generator=g) for s in shapes[:2]] + [torch.zeros(shapes[2])]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(STEPS)]
    return params, grads


def _run_ours(spec, params, grads, l2_outside=False):
    ps = [torch.nn.Parameter(p.clone()) for p in params]
    opt, wd = build_optimizer(optimizer_config(spec), ps, l2_outside=l2_outside)
    for step in grads:
        for p, gr in zip(ps, step):
            p.grad = gr.clone() + wd * p.detach()  # what a gossip method adds itself when l2_outside
        opt.step()
    return [p.detach() for p in ps]


def _adam_reference(params, grads, lr, b1, b2, eps, wd, decoupled):
    ps = [p.double().clone() for p in params]
    m = [torch.zeros_like(p) for p in ps]
    v = [torch.zeros_like(p) for p in ps]
    for t, step in enumerate(grads, start=1):
        for i, g in enumerate(step):
            g = g.double()
            if decoupled:
                ps[i] = ps[i] * (1 - lr * wd)
            else:
                g = g + wd * ps[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)
            ps[i] = ps[i] - lr * m_hat / (v_hat.sqrt() + eps)
    return ps


def _lars_reference(params, grads, lr, momentum, wd, eta, eps, exclude_1d=True):
    ps = [p.double().clone() for p in params]
    vel = [torch.zeros_like(p) for p in ps]
    for step in grads:
        for i, g in enumerate(step):
            g, w = g.double(), ps[i]
            one_d = exclude_1d and w.dim() <= 1
            decay = 0.0 if one_d else wd
            wn, gn = w.norm().item(), g.norm().item()
            local = 1.0 if one_d or wn == 0 or gn == 0 else eta * wn / (gn + decay * wn + eps)
            vel[i] = momentum * vel[i] + lr * local * (g + decay * w)
            ps[i] = w - vel[i]
    return ps


def _sgd_reference(params, grads, lr, momentum, nesterov, wd):
    ps = [p.double().clone() for p in params]
    buf = [None] * len(ps)
    for step in grads:
        for i, g in enumerate(step):
            d = g.double() + wd * ps[i]
            buf[i] = d if buf[i] is None else momentum * buf[i] + d
            ps[i] = ps[i] - lr * (d + momentum * buf[i] if nesterov else buf[i])
    return ps


def _close(ours, ref, tol=1e-6):
    err = max(float((o.double() - r).abs().max()) for o, r in zip(ours, ref))
    assert err <= tol, err
    return err


@pytest.mark.parametrize("name,decoupled", [("adam", False), ("adamw", True)])
@pytest.mark.parametrize("wd", [0.0, 0.05])
def test_adam_and_adamw_match_the_papers_update(name, decoupled, wd):
    params, grads = _problem()
    spec = {"name": name, "lr": 0.01, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": wd}
    ours = _run_ours(spec, params, grads)
    _close(ours, _adam_reference(params, grads, 0.01, 0.8, 0.95, 1e-6, wd, decoupled))
    # and torch.optim's implementation of the same optimizer, step for step
    ps = [torch.nn.Parameter(p.clone()) for p in params]
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    ref = cls(ps, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=wd, foreach=False)
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = g.clone()
        ref.step()
    assert all(torch.equal(o, p.detach()) for o, p in zip(ours, ps))


def test_adamw_decay_is_decoupled_and_stays_in_the_optimizer():
    cfg = optimizer_config({"name": "adamw", "weight_decay": 0.1})
    p = torch.nn.Parameter(torch.ones(3))
    opt, left = build_optimizer(cfg, [p], l2_outside=True)
    assert left == 0.0 and opt.weight_decay == 0.1  # a gossip method must not add it to the gradient
    sgd, left = build_optimizer(optimizer_config({"weight_decay": 0.1}), [p], l2_outside=True)
    assert left == 0.1 and sgd.weight_decay == 0.0  # coupled L2 goes to the gradient's point


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_sgd_matches_its_reference_also_with_l2_outside(momentum, nesterov):
    params, grads = _problem(1)
    spec = {"lr": 0.05, "momentum": momentum, "nesterov": nesterov, "weight_decay": 1e-2}
    ref = _sgd_reference(params, grads, 0.05, momentum, nesterov and momentum > 0, 1e-2)
    _close(_run_ours(spec, params, grads), ref)
    _close(_run_ours(spec, params, grads, l2_outside=True), ref)  # same math, L2 added by the caller


@pytest.mark.parametrize("exclude_1d", [True, False])
def test_lars_matches_you_et_al_algorithm_1(exclude_1d):
    params, grads = _problem(2)
    spec = {"name": "lars", "lr": 0.5, "momentum": 0.9, "weight_decay": 5e-4, "trust_coefficient": 0.02,
            "exclude_1d": exclude_1d}
    ours = _run_ours(spec, params, grads)
    _close(ours, _lars_reference(params, grads, 0.5, 0.9, 5e-4, 0.02, 1e-9, exclude_1d))
    # the layer-wise rate matters: plain momentum SGD at the same lr ends elsewhere
    sgd = _sgd_reference(params, grads, 0.5, 0.9, False, 5e-4)
    assert float((ours[0].double() - sgd[0]).abs().max()) > 1e-2


def test_optimizer_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"workload.optimizer.name: unknown optimizer 'rmsprop'; known: adam, "
                                          r"adamw, lars, sgd"):
        optimizer_config({"name": "rmsprop"})
    with pytest.raises(ConfigError, match=r"workload.optimizer.momentum: unknown key; allowed keys: betas, eps"):
        optimizer_config({"name": "adam", "momentum": 0.9})
    with pytest.raises(ConfigError, match=r"workload.optimizer.betas: must be >= 0 and < 1, got 1.5"):
        optimizer_config({"name": "adam", "betas": [0.9, 1.5]})
    with pytest.raises(ConfigError, match=r"workload.optimizer.betas: expected \[beta1, beta2\]"):
        optimizer_config({"name": "adamw", "betas": [0.9]})
    assert optimizer_config(None).name == "sgd"


def test_step_schedule_linear_scaling_warmup_and_milestones():
    sch = schedule_config({"lr_scaling": "linear", "warmup_epochs": 5, "milestones": [30, 60], "gamma": 0.1})
    assert sch.name == "step"
    assert sch.lr(0.1, 8, 0.0, 90) == pytest.approx(0.1, rel=1e-12)
    assert sch.lr(0.1, 8, 2.5, 90) == pytest.approx(0.1 + 0.7 * 0.5, rel=1e-12)
    assert sch.lr(0.1, 8, 5.0, 90) == pytest.approx(0.8, rel=1e-12)
    assert sch.lr(0.1, 8, 30.0, 90) == pytest.approx(0.08, rel=1e-12)
    assert sch.lr(0.1, 8, 61.0, 90) == pytest.approx(0.008, rel=1e-12)
    assert schedule_config(None).lr(0.1, 8, 3.0, 90) == 0.1
    # the expression the runtime always used (golden losses depend on its exact rounding)
    for e in (0.3, 1.7, 4.99):
        assert sch.lr(0.05, 4, e, 90) == 0.05 + (0.05 * 4 - 0.05) * e / 5


@pytest.mark.parametrize("warmup,eta_min", [(0.0, 0.0), (2.0, 0.001)])
def test_cosine_schedule_closed_form(warmup, eta_min):
    sch = schedule_config({"name": "cosine", "lr_scaling": "linear", "warmup_epochs": warmup, "eta_min": eta_min})
    peak, E = 0.1 * 4, 10
    for e in [0.0, 0.5, 1.0, 2.0, 3.3, 6.0, 9.99, 10.0]:
        if e < warmup:
            want = 0.1 + (peak - 0.1) * e / warmup
        else:
            want = eta_min + (peak - eta_min) * 0.5 * (1 + math.cos(math.pi * (e - warmup) / (E - warmup)))
        assert sch.lr(0.1, 4, e, E) == pytest.approx(want, rel=1e-12, abs=1e-15), e
    assert sch.lr(0.1, 4, E, E) == pytest.approx(eta_min, abs=1e-15)


def test_inverse_sqrt_schedule_is_fairseqs():
    # fairseq: lr = peak * sqrt(warmup_updates / num_updates) after a linear warmup from warmup_init_lr
    sch = schedule_config({"name": "inverse_sqrt", "warmup_epochs": 0.5, "warmup_from": 0.0})
    steps_per_epoch, peak = 1000, 5e-4
    for upd in [0, 100, 499, 500, 501, 2000, 40_000]:
        e = upd / steps_per_epoch
        want = peak * upd / 500 if upd < 500 else peak * math.sqrt(500 / upd)
        assert sch.lr(peak, 8, e, 40) == pytest.approx(want, rel=1e-12, abs=1e-18), upd
    with pytest.raises(ConfigError, match="workload.schedule.warmup_epochs: inverse_sqrt decays from the end"):
        schedule_config({"name": "inverse_sqrt"})
    with pytest.raises(ConfigError, match="unknown schedule 'poly'; known: cosine, inverse_sqrt, step"):
        schedule_config({"name": "poly"})
