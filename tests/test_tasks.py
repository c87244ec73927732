"""Tasks: the finite-sum objective (its data, optimum and metrics) and training it through
the same runtime and algorithms as classification.

The issue's acceptance: ``serial_sgd`` and ``allreduce_sgd`` train the finite-sum task to
``opt/gap <= 1e-4``; in float64 the 2-rank all-reduce run equals the serial run on the
global batch to 1e-10 (the same arithmetic, summed in another order).
"""

import pytest
import torch

from conftest import make_config
from impls.errors import ConfigError
from impls.config.runconfig import WorkloadConfig
from impls.tasks import build_task

QUAD = {"name": "finite_sum", "problem": "quadratic", "n": 512, "dim": 10, "condition": 5.0, "spread": 0.3}


def _task(spec):
    t = build_task(WorkloadConfig(task=spec))
    t.build_data()
    return t


def test_quadratic_sum_is_nonconvex_per_component_and_strongly_convex_on_average():
    t = _task(QUAD)
    eig = torch.linalg.eigvalsh(t.A)
    assert int((eig[:, 0] < 0).sum()) > 50  # many f_i are indefinite
    mean_eig = torch.linalg.eigvalsh(t.A.mean(0))
    assert float(mean_eig[0]) == pytest.approx(1 / 5, rel=1e-9) and float(mean_eig[-1]) == pytest.approx(1, rel=1e-9)
    # x* is the stationary point of F: the full gradient vanishes there, and F is higher elsewhere
    x = t.x_star.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(t._objective(x, torch.arange(512)), x)
    assert float(g.abs().max()) < 1e-12
    for seed in range(5):
        y = t.x_star + 0.1 * torch.randn(10, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        assert float(t._objective(y, torch.arange(512))) > t.f_star
    assert torch.equal(_task(QUAD).A, t.A) and not torch.equal(_task({**QUAD, "data_seed": 1}).A, t.A)


def test_least_squares_optimum_solves_the_normal_equations():
    t = _task({"name": "finite_sum", "problem": "least_squares", "n": 64, "dim": 5})
    a, y = t.a, t.y
    assert torch.allclose(a.T @ a @ t.x_star, a.T @ y, atol=1e-10)
    m = build_task(WorkloadConfig(task={"name": "finite_sum", "problem": "least_squares", "n": 64, "dim": 5}))
    m.build_data()
    model = m.build_model()
    with torch.no_grad():
        model.x.copy_(t.x_star)
    ev = m.evaluate(model)
    assert ev["opt/gap"] == pytest.approx(0.0, abs=1e-14) and ev["loss/objective"] == pytest.approx(m.f_star)


def test_task_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"workload.task.problem: 'lasso' is not allowed; allowed values: "
                                          r"quadratic, least_squares"):
        build_task(WorkloadConfig(task={"name": "finite_sum", "problem": "lasso"}))
    with pytest.raises(ConfigError, match=r"workload.task.name: unknown task 'ranking'; known: classification, "
                                          r"finite_sum"):
        build_task(WorkloadConfig(task={"name": "ranking"}))
    with pytest.raises(ConfigError, match=r"workload.dataset.name: missing \(classification needs"):
        build_task(WorkloadConfig()).build_data()


FINITE_SUM_WORKLOAD = {"task": QUAD, "dataset": {}, "model": {}, "epochs": 20,
                       "optimizer": {"lr": 0.2, "momentum": 0.9, "nesterov": True, "weight_decay": 0.0},
                       "schedule": {"milestones": [8, 14, 18], "gamma": 0.1}}


@pytest.mark.spawn
def test_serial_and_allreduce_sgd_reach_the_optimum_and_agree(run_torchrun):
    serial = make_config("serial_sgd", 1, workload={**FINITE_SUM_WORKLOAD, "batch_size": 32})
    serial["workload"].pop("max_steps_per_epoch")
    ar = make_config("allreduce_sgd", 2, workload={**FINITE_SUM_WORKLOAD, "batch_size": 16})
    ar["workload"].pop("max_steps_per_epoch")
    (s,), _ = run_torchrun([serial])
    (a,), _ = run_torchrun([ar])
    for r, ranks in ((s, 1), (a, 2)):
        for rank in range(ranks):
            epochs = r.records(rank, "epoch")
            assert len(epochs) == 20 and "acc/val" not in epochs[-1]
            assert 0 <= epochs[-1]["opt/gap"] <= 1e-4, epochs[-1]
            assert epochs[0]["opt/gap"] > 100 * epochs[-1]["opt/gap"]
    xs, xa = s.final_state(0)["x"], a.final_state(0)["x"]
    assert xs.dtype == torch.float64 and float((xs - xa).abs().max()) < 1e-10
    assert torch.equal(a.final_state(0)["x"], a.final_state(1)["x"])
