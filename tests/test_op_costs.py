"""Every op cost of every method, with the numbers written out (issue 31, item 2): what each
part charges the simulated clock for its own work (:mod:`impls.sim.opcost`, the parts'
:class:`impls.sim.charging.Charging`), on workers and server ranks, and that a server's
aggregation delays the workers waiting for its reply.

Every run: the tiny digits MLP (``D`` = 2,410 parameters), 2 workers (``serial_sgd``: 1), one
epoch of 3 steps on ``ethernet_10g`` at line rate (``msg_efficiency`` 1) under a ``fixed`` profile of 10 ms compute whose messages
and op bytes weigh a model of ``S`` = 1 MB (``model_mb: 1``) and whose op bandwidths are
1 GB/s (``mem_gbps``: ``arith``, ``optim``), 2 GB/s (``copy_gbps``) and 4 GB/s
(``compress_gbps``): one pass over the model costs 1 ms of ``arith`` or ``optim``, 0.5 ms of
``copy``, 0.25 ms of ``compress``.  A PushSum vector carries its weight too: ``(D + 1) / D``
of a pass.  The expected seconds below are passes x those costs, counted from what the code
does (a ``a.add_(b)`` reads two vectors and writes one: 3 passes; ``a * s``: 2; a copy: 1),
never read back from the code under test.  The tiny workload's optimizer is SGD with Nesterov
momentum 0.9 and weight decay 1e-4 (``optim``: 5 passes, SGD's ``bytes_touched``), except
where a method needs momentum or weight decay 0.  Steps 1 and 2 are pinned (step 0 pays what
a first step does once: no error-feedback memory yet, no momentum yet).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sim_server
from conftest import make_config
from distrepro_wf.pipeline.collect import _server_epochs
from impls.algorithms import ALGORITHMS
from impls.comm.stepcost import Point

S, D = 1e6, 2410  # model_mb: 1 -> 1e6 bytes; the stand-in MLP's parameters (64*32 + 32 + 32*10 + 10)
ARITH = OPTIM = S / 1e9  # one pass at mem_gbps 1
COPY = S / 2e9  # copy_gbps 2
COMP = S / 4e9  # compress_gbps 4
PW = (D + 1) / D  # a PushSum vector [x, w]: the parameters and the weight
PROFILE = {"name": "fixed", "step_ms": 10.0, "model_mb": 1.0, "mem_gbps": 1.0, "copy_gbps": 2.0,
           "compress_gbps": 4.0}
NO_OPS = {"name": "fixed", "step_ms": 10.0, "model_mb": 1.0}
KINDS = ("arith", "optim", "copy", "compress", "stage")
MOMENTUM0 = {"optimizer": {"lr": 0.01, "momentum": 0.0, "nesterov": False, "weight_decay": 1e-4}}
PLAIN = {"optimizer": {"lr": 0.01, "momentum": 0.0, "nesterov": False, "weight_decay": 0.0}}
SIGN_EF = {"name": "sign", "scale": "mean_abs", "error_feedback": True}
W = 2  # workers


def _run(tmp: Path, algo: dict, nodes: int = W, profile=PROFILE, workload=None) -> dict[int, list[dict]]:
    cfg = make_config(algo, nodes, backend="simgrid", platform={"name": "ethernet_10g", "msg_efficiency": 1.0},
                      profile=profile,
                      workload={"epochs": 1, "max_steps_per_epoch": 3, **(workload or {})})
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    rc = sim_server.run(tmp / "cfg.json", tmp / "out", tmp / "ckpt", None, tmp / "sim.log")
    assert rc == 0, (tmp / "sim.log").read_text()[-3000:]
    return {int(f.stem[4:]): [json.loads(x) for x in f.read_text().splitlines()]
            for f in (tmp / "out" / "metrics").glob("rank*.jsonl")}


def _steps(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r["kind"] == "step"]


def _costs(rec: dict) -> dict[str, float]:
    return {k: rec.get(f"time/{k}_s", 0.0) for k in KINDS}


def _want(**kinds: float) -> dict[str, float]:
    return {k: pytest.approx(kinds.get(k, 0.0), rel=1e-9, abs=1e-15) for k in KINDS}


#: per case: (algorithm, nodes, workload, rank 0's op seconds per step (steps 1 and 2),
#:            the server's op seconds over the epoch, or None when the method has no server)
WD = 3  # the L2 term added to the gradient: reads g and p, writes g
CASES = {
    # the optimizer's step alone: SGD with momentum reads p, g, m and writes p, m
    "serial_sgd": ({"name": "serial_sgd"}, 1, None, _want(optim=5 * OPTIM), None),
    "allreduce_sgd": ({"name": "allreduce_sgd"}, W, None, _want(optim=5 * OPTIM), None),
    # the L2 term; the share [x, w] / 2 (2), one in-peer's share added (3), z = x / w (2);
    # copies: the flatten, the cat with w, the clone of the own share (writing x or z into the model
    # makes the parameters views of it: no copy)
    "sgp": ({"name": "sgp"}, W, None,
            _want(arith=(WD + 2 * PW + 3 * PW + 2) * ARITH, optim=5 * OPTIM, copy=(1 + PW + PW) * COPY), None),
    # the same work, the round absorbed a step later (tau 1): its add and the kept share's copy
    "osgp": ({"name": "osgp"}, W, None,
             _want(arith=(WD + 2 * PW + 3 * PW + 2) * ARITH, optim=5 * OPTIM, copy=(1 + PW + PW) * COPY), None),
    # the L2 term, the share (2), one neighbour's share added (3); the flatten, the clone
    "dpsgd": ({"name": "dpsgd"}, W, None, _want(arith=(WD + 2 + 3) * ARITH, optim=5 * OPTIM, copy=2 * COPY), None),
    # the L2 term; u = lr g (2), h = 2x - x' - u + u' (2 + 3 + 3 + 3); the share (2), the add (3);
    # copies: flatten x and g, the clone
    "d2": ({"name": "d2"}, W, MOMENTUM0, _want(arith=(WD + 2 + 11 + 2 + 3) * ARITH, copy=3 * COPY), None),
    # the L2 term; one pairwise average a step: the passive rank 0 copies x out (1), adds (3) and
    # halves (2); x into the model twice (before the gradient, before the update), back once (2 copies)
    "adpsgd": ({"name": "adpsgd"}, W, None,
               _want(arith=(WD + 5) * ARITH, optim=5 * OPTIM, copy=(1 + 1 + 1 + 2) * COPY), None),
    # the flatten of the gradient; the momentum (2 + 3); sign + pack (1) | the vote's unpack (1) and
    # Signum's update u + wd p, p -= lr u (6).  Server, 3 rounds: the vote (2 unpacks + 1 pack, 2 counts
    # of 3 passes), then the same unpack and update on its copy of x
    "signum_mv": ({"name": "signum_mv"}, W, MOMENTUM0,
                  _want(arith=(5 + 6) * ARITH, copy=1 * COPY, compress=(1 + 1) * COMP),
                  _want(arith=3 * (3 * W + 6) * ARITH, compress=3 * (W + 1 + 1) * COMP)),
    # worker: flatten x and g (2 copies); the L2 term, the momentum (2 + 3), Nesterov (3),
    # the lr (2), x -= Delta~ (3); the compression with error feedback: e added (3), C (1), D (1), e
    # subtracted (3), and the reply's D (1).  Server, 3 rounds: W decompressions, their sum (3 W) and
    # mean (2), the compression with error feedback (the first round without e: 5 passes, then 8), the
    # reply's decompression and x -= Delta~ (3)
    "ef_blocksgdm": ({"name": "ef_blocksgdm"}, W, None,
                     _want(arith=(WD + 5 + 3 + 2 + 3) * ARITH, copy=2 * COPY, compress=(3 + 1 + 1 + 3 + 1) * COMP),
                     _want(arith=3 * (3 * W + 2 + 3) * ARITH, compress=(3 * (W + 1) + 5 + 8 + 8) * COMP)),
    # sign (mean_abs) with error feedback: e added (3), C (1), D (1), e subtracted (3), then the W
    # gathered messages' decompressions; the average (3 W + 2), its copy into the gradient; SGD
    "compressed_sgd": ({"name": "compressed_sgd", "compressor": SIGN_EF}, W, None,
                       _want(arith=(3 * W + 2) * ARITH, optim=5 * OPTIM, copy=1 * COPY,
                             compress=(3 + 1 + 1 + 3 + W) * COMP), None),
    # worker: the gradient flattened, the replies' cat (written into the model: no copy).  Server, 3
    # rounds: one apply of the averaged gradient a round, its weighting with the L2 term (6) and SGD's step (5)
    "ps_sync": ({"name": "ps_sync"}, W, None, _want(copy=2 * COPY), _want(arith=3 * 6 * ARITH, optim=3 * 5 * OPTIM)),
    # the asynchronous servers apply each of the 2 x 3 pushes: 6 and 5 passes each
    "ps_async": ({"name": "ps_async"}, W, None, _want(copy=2 * COPY), _want(arith=6 * 6 * ARITH, optim=6 * 5 * OPTIM)),
    "ps_ssp": ({"name": "ps_ssp"}, W, None, _want(copy=2 * COPY), _want(arith=6 * 6 * ARITH, optim=6 * 5 * OPTIM)),
    "ps_cyclic": ({"name": "ps_cyclic"}, W, None, _want(copy=2 * COPY),
                  _want(arith=6 * 6 * ARITH, optim=6 * 5 * OPTIM)),
    # a worker flattens its gradient each step (its accumulation is pushed at its turn); the server
    # applied 4 pushes in this run (each a sum of gradients): 6 and 5 passes each
    "ddcgu": ({"name": "ddcgu"}, W, None, _want(copy=1 * COPY), _want(arith=4 * 6 * ARITH, optim=4 * 5 * OPTIM)),
    # flatten grad f_I(x), x and grad f_I(y): 3 copies (y and x into the model: none); the difference
    # (3), the mean (2), + mu (3), x -= lr d (3), the running sum (3)
    "svrg": ({"name": "svrg"}, W, PLAIN, _want(arith=(3 + 2 + 3 + 3 + 3) * ARITH, copy=3 * COPY), None),
}


def test_every_registered_method_has_a_case():
    assert set(ALGORITHMS.names()) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_methods_op_costs_per_step_and_on_its_server(tmp_path, name):
    algo, nodes, workload, worker, server = CASES[name]
    ranks = _run(tmp_path, algo, nodes, workload=workload)
    steps = _steps(ranks[0])
    for r in steps[1:]:
        assert _costs(r) == worker, r["step"]
    if server is None:
        assert set(ranks) == set(range(nodes))
        return
    (epoch,) = [r for r in ranks[nodes] if r["kind"] == "epoch"]  # the server rank's record
    assert {f"time/{k}_s" for k in KINDS} <= set(epoch)  # it logs its op costs, as a worker does
    assert _costs(epoch) == server
    table = _server_epochs(tmp_path / "out", nodes)  # collect's server/<kind>_s columns
    assert {k: float(table[f"server/{k}_s"].iloc[0]) for k in KINDS} == server


def test_error_feedback_costs_exactly_its_passes(tmp_path):
    """compressed_sgd with the same compressor, with and without error feedback: EF's add of the
    residual (3 passes), the decompression that gives the residual (1) and its subtraction (3)
    are 7 passes of 0.25 ms more a step, in the op costs and in the step's time alike."""
    comp = {"name": "sign", "scale": "mean_abs"}
    on = _steps(_run(tmp_path / "on", {"name": "compressed_sgd", "compressor": {**comp, "error_feedback": True}})[0])
    off = _steps(_run(tmp_path / "off", {"name": "compressed_sgd", "compressor": comp})[0])
    for a, b in zip(on[1:], off[1:]):
        assert a["time/compress_s"] - b["time/compress_s"] == pytest.approx(7 * COMP, rel=1e-9)
        assert a["time/step_s"] - b["time/step_s"] == pytest.approx(7 * COMP, rel=1e-6)


@pytest.mark.parametrize("name, critical", [
    # worker before its message leaves: 2 copies, 13 arith, 8 compress passes; the server before its
    # reply leaves: 2 decompressions, the sum and mean (3 W + 2), the EF compression (8); the worker after
    # the reply: its decompression, x -= Delta~ (3)
    ("ef_blocksgdm", 2 * COPY + 13 * ARITH + 8 * COMP + (W + 8) * COMP + (3 * W + 2) * ARITH + COMP + 3 * ARITH),
    # worker: the flatten, the momentum (5), sign + pack (1); the server's vote: W unpacks, one pack, W
    # counts of 3 passes; the worker: the vote's unpack, the update (6)
    ("signum_mv", COPY + 5 * ARITH + COMP + (W + 1) * COMP + 3 * W * ARITH + COMP + 6 * ARITH),
])
def test_a_servers_aggregation_is_waited_for(tmp_path, name, critical):
    """The server's aggregation is charged before its replies leave, so a worker's step grows by its
    own op costs plus the server's aggregation (the server's update of its own copy overlaps the next
    round's compute and is not waited for): the same run with and without op costs.  The method's
    closed form (its ``step_cost`` with the op bandwidths) counts the same passes."""
    wl = MOMENTUM0 if name == "signum_mv" else None
    with_ops = _steps(_run(tmp_path / "ops", {"name": name}, workload=wl)[0])
    without = _steps(_run(tmp_path / "free", {"name": name}, profile=NO_OPS, workload=wl)[0])
    for a, b in zip(with_ops[1:], without[1:]):
        assert a["time/step_s"] - b["time/step_s"] == pytest.approx(critical, rel=1e-6)
    # the method's closed form counts the same work (impls.comm.stepcost.ops_s): compute, the server
    # round's two phases of n messages of S / 32 (ethernet_10g: alpha 50 us, beta written out), the ops
    beta = 0.97 * 10e9 / 8 / 1.05
    closed = 0.010 + 2 * (50e-6 + W * (S / 32) / beta) + critical
    assert closed == pytest.approx(0.010 + 0.2082e-3 + critical, rel=1e-4)
    p = Point(compute_s=0.010, model_bytes=S, bandwidth=beta, latency_s=50e-6, nodes=W,
              mem_bandwidth=1e9, copy_bandwidth=2e9, compress_bandwidth=4e9)
    assert ALGORITHMS.get(name).step_cost(p) == pytest.approx(closed, rel=1e-9)
    assert with_ops[1]["time/step_s"] == pytest.approx(closed, rel=1e-3)


class Ledger:
    """A clock that records what is charged to it (the seam's other side: ``charge_op``)."""

    def __init__(self):
        self.ops: list[tuple[str, float]] = []

    def charge_op(self, kind: str, nbytes: float) -> None:
        self.ops.append((kind, nbytes))


@pytest.mark.parametrize("spec, passes", [
    ({"name": "sgd", "lr": 0.1, "momentum": 0.9}, 5),  # reads p, g, m; writes p, m
    ({"name": "sgd", "lr": 0.1, "momentum": 0.0, "nesterov": False}, 3),  # reads p, g; writes p
    ({"name": "adam", "lr": 0.1}, 7),  # reads p, g, m, v; writes p, m, v
    ({"name": "adamw", "lr": 0.1}, 7),
    ({"name": "lars", "lr": 0.1}, 7),  # the two norms, then reads w, g, v; writes v, w
])
def test_an_optimizer_charges_its_own_step(spec, passes):
    """Built with the run's clock, each step charges ``optim`` once, its passes x its parameters'
    bytes (a 10 x 3 weight and a bias of 10: 40 floats, 160 bytes)."""
    import torch

    from impls.optim import build_optimizer, optimizer_config

    layer = torch.nn.Linear(3, 10)
    ledger = Ledger()
    opt, _ = build_optimizer(optimizer_config(spec), list(layer.parameters()), clock=ledger)
    layer(torch.ones(2, 3)).sum().backward()
    opt.step()
    opt.step()
    assert ledger.ops == [("optim", passes * 160)] * 2


@pytest.mark.parametrize("name", ["cast", "dgc", "onebit", "qsgd", "randomk", "sign", "terngrad", "topk"])
def test_a_compressor_charges_its_own_work_and_error_feedback_its_passes(name):
    """Every registered compressor charges one ``compress`` pass over the fp32 vector (100 floats,
    400 bytes) per compress and per decompress; with error feedback: the first compression adds
    the decompression that gives the residual (1) and its subtraction (3 passes), later ones the
    residual's add (3) too.  Unbound (no clock) it charges nothing and computes the same."""
    import torch

    from impls.compression import build, load_all

    assert name in load_all().names()
    x = torch.linspace(-1, 1, 100)
    ledger = Ledger()
    c = build({"name": name}, seed=3, layout=[100], clock=ledger)
    parts = c.compress(x)
    c.decompress(parts, 100)
    assert ledger.ops == [("compress", 400)] * 2
    ef_ledger = Ledger()
    ef = build({"name": name, "error_feedback": True}, seed=3, layout=[100], clock=ef_ledger)
    ef.compress(x)
    assert sum(n for _, n in ef_ledger.ops) == (1 + 1 + 3) * 400
    ef.compress(x)
    assert sum(n for _, n in ef_ledger.ops) == (1 + 1 + 3) * 400 + (3 + 1 + 1 + 3) * 400
    assert {k for k, _ in ef_ledger.ops} == {"compress"}
    plain = build({"name": name}, seed=3, layout=[100])
    assert all(torch.equal(a, b) for a, b in zip(plain.compress(x), parts))
