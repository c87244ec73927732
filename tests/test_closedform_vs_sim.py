"""The closed form (:mod:`distrepro_wf.claims.closedform`, each algorithm's ``step_cost``) agrees
with short simulations within 10 % (issue 31, item 3), where the simulator's physics moved:

* a straggler slows its forward and backward passes ``factor`` times
  (:mod:`impls.runtime.straggler`), so an overlapped all-reduce's buckets leave when the slow
  rank's backward pass completes them;
* at a profile with the paper model's layout (``profile.model_layout``: ResNet-50), the
  overlapped all-reduce's buckets are ResNet-50's, spread over the backward pass, so it hides all
  but the last bucket's ring; on the stand-in's layout (85 % of its bytes in the bucket ready
  last) it hides little.

Each setting is simulated as the sensitivity sweep does (:mod:`distrepro_wf.claims.sweep`: the
run's time per epoch, over 2 short epochs, per step) and compared with the closed form at the
workflow's nominal point of the same platform and profile
(:func:`distrepro_wf.claims.sensitivity.nominal_point`), the overlap set as the method runs
(1 for AR-SGD with ``overlap_backward``, its default; 0 without).  4 nodes on ``ethernet_10g`` at
line rate (``msg_efficiency`` 1), 100 MB messages: every method communication-bound against 40 ms
of compute, so the overlap and the straggler both matter.  About 10 s of CPU.

At the preset's nominal efficiency (0.456) OSGP with a 4x straggler is communication-bound too
(a 190 ms exchange against 160 ms of compute), and there its closed form, ``max(C_2, m(B))``,
misses: the simulation takes 0.30 s a steady step (read as the sweep reads OSGP:
:func:`distrepro_wf.claims.sweep.epoch_time`; 0.27 over its 6-step epochs), 0.19 closed-form
(over the epochs: 1.21x at a 2x straggler, exact without one).  Kept as a strict xfail until
OSGP's closed form models it."""

from __future__ import annotations

import json

import pytest

import sim_server
from conftest import make_config
from distrepro_wf.claims import closedform as cf
from distrepro_wf.claims import sensitivity as sens
from distrepro_wf.claims.sweep import epoch_time

STEPS, EPOCHS = 6, 2
FIXED = {"name": "fixed", "step_ms": 40.0, "model_mb": 100.0}
#: ResNet-50's bytes on ResNet-50's layout, 60 ms of compute (a 4x straggler's 160 ms backward
#: pass is longer than the 133 ms ring: every bucket but the last hides behind it)
R50 = {"name": "fixed", "step_ms": 60.0, "model_mb": 102.228128, "model_layout": "resnet50"}
AR, AR_OFF = {"name": "allreduce_sgd"}, {"name": "allreduce_sgd", "overlap_backward": False}
GOSSIP1 = {"topology": {"name": "exponential", "peers": 1}}

SETTINGS = [  # (id, algorithm entry, nodes, profile, straggler factor)
    ("ar_overlap", AR, 4, FIXED, 1),
    ("ar_overlap_slow4", AR, 4, FIXED, 4),
    ("ar_no_overlap_slow4", AR_OFF, 4, FIXED, 4),
    ("sgp_slow4", {"name": "sgp", **GOSSIP1}, 4, FIXED, 4),
    ("osgp_slow4", {"name": "osgp", **GOSSIP1}, 4, FIXED, 4),
    ("dpsgd_slow4", {"name": "dpsgd"}, 4, FIXED, 4),
    ("adpsgd", {"name": "adpsgd"}, 4, FIXED, 1),
    ("adpsgd_slow4", {"name": "adpsgd"}, 4, FIXED, 4),  # the straggler's 160 ms hide behind its 173 ms exchange
    ("adpsgd_slow4_compute_bound", {"name": "adpsgd"}, 4, {**FIXED, "step_ms": 80.0}, 4),  # 320 ms: they do not
    ("ar_overlap_r50_layout", AR, 4, R50, 1),
    ("ar_overlap_r50_layout_slow4", AR, 4, R50, 4),
    ("ar_overlap_resnet50_v100x8", AR, 16, "resnet50_v100x8", 1),
]


ETH = {"name": "ethernet_10g", "msg_efficiency": 1.0}  # at line rate (the settings above)


def _straggler(f: float) -> str:
    return f"slow1x{f:g}" if f > 1 else "none"


def closed_form_step(algo: dict, nodes: int, profile, f: float, platform=ETH) -> float:
    """The closed form's step at the workflow's nominal point of the setting."""
    config = {"experiments": {"x": {"backend": "simgrid", "platform": platform, "profile": profile}}}
    p = sens.nominal_point(config, "x", nodes, _straggler(f))
    spec = {"algorithm": algo}
    name, peers = cf.method_algorithm(spec, algo["name"])
    overlap = 1.0 if name == "allreduce_sgd" and algo.get("overlap_backward", True) else 0.0
    return cf.step_s(name, p.with_(overlap=overlap), peers, **cf.method_options(spec))


def simulated_step(tmp, algo: dict, nodes: int, profile, f: float, platform=ETH) -> float:
    """The simulated time per epoch of a short run (as the sweep reads it) per step of every
    worker (the tiny workload's epoch at 16 nodes is 5 steps; AD-PSGD's shared epoch splits its
    steps unevenly between the workers)."""
    straggler = {"kind": "fixed", "ranks": [-1], "factor": f} if f > 1 else {"kind": "none"}
    cfg = make_config(algo, nodes, backend="simgrid", platform=platform, profile=profile,
                      workload={"epochs": EPOCHS, "evals_per_epoch": 1, "max_steps_per_epoch": STEPS},
                      straggler_name=_straggler(f), straggler=straggler)
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    rc = sim_server.run(tmp / "cfg.json", tmp / "out", tmp / "ckpt", None, tmp / "sim.log")
    assert rc == 0, (tmp / "sim.log").read_text()[-3000:]
    steps = sum(sum(json.loads(x)["kind"] == "step" for x in (tmp / "out" / "metrics" / f"rank{r}.jsonl")
                    .read_text().splitlines()) for r in range(nodes))  # an epoch: a step of every worker
    return epoch_time(tmp / "out") / (steps / (nodes * EPOCHS))


@pytest.mark.parametrize("algo,nodes,profile,f", [s[1:] for s in SETTINGS], ids=[s[0] for s in SETTINGS])
def test_closed_form_agrees_with_a_short_simulation(tmp_path, algo, nodes, profile, f):
    want = closed_form_step(algo, nodes, profile, f)
    got = simulated_step(tmp_path, algo, nodes, profile, f)
    assert got == pytest.approx(want, rel=0.10), (got, want)


@pytest.mark.xfail(strict=True, reason="OSGP's closed form max(C_2, m(B)) misses a straggler when the exchange "
                                       "is longer than the compute (module docstring)")
def test_osgp_communication_bound_with_a_straggler(tmp_path):
    algo = {"name": "osgp", **GOSSIP1}
    want = closed_form_step(algo, 4, FIXED, 4, "ethernet_10g")
    got = simulated_step(tmp_path, algo, 4, FIXED, 4, "ethernet_10g")
    assert got == pytest.approx(want, rel=0.10), (got, want)
