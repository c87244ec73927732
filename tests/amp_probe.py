"""fp16's agreed skip on 2 simulated ranks (one process: SimGrid's engine runs once per
process): ``python tests/amp_probe.py`` prints a JSON result.  Used by
``tests/test_precision.py``.

Each rank runs the runtime's pieces for real: a seeded model, ``allreduce_sgd`` over a
Communicator on a SimGrid backend, and :class:`impls.runtime.precision.MixedPrecision`
(fp16, agreeing through its own Communicator).  Step 0: rank 1's gradient overflows (an
infinite value written into it, as an fp16 overflow leaves it), rank 0's does not.
Step 1: no overflow.

Then the same through the runtime's own step (:func:`impls.runtime.loop.train_step`), once
with ``allreduce_sgd``'s default ``overlap_backward`` (the buckets carry the scaled gradients,
all-reduced during backward) and once without: at step 0 rank 1's input is 1e6, which
overflows fp16 in its forward pass (a real overflow: inf, then NaN gradients), both ranks skip
and stay put; at steps 1-2 both step, and both modes end with the same parameters.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from impls.algorithms import algorithm_config  # noqa: E402
from impls.backends.sim import SimBackend  # noqa: E402
from impls.comm.communicator import Communicator  # noqa: E402
from impls.optim import optimizer_config  # noqa: E402
from impls.protocol import Context, StepContext  # noqa: E402
from impls.runtime.precision import LossScaleConfig, MixedPrecision  # noqa: E402
from impls.sim.engine import run_actors  # noqa: E402
from impls.sim.platforms import platform_config  # noqa: E402


def main(rank, world):
    b = SimBackend(world, rank, [0, 1])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    cls, acfg = algorithm_config({"name": "allreduce_sgd"})
    algo = cls(acfg, Context(rank, 2, Communicator(b), optimizer_config({"lr": 0.1}), 0))
    algo.setup(model)
    prec = MixedPrecision("fp16", torch.device("cpu"), LossScaleConfig(init=1024.0), Communicator(b), agree=True)
    g = torch.Generator().manual_seed(rank)
    log = []
    for step in range(2):
        x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
        before = [p.detach().clone() for p in model.parameters()]
        algo.zero_grad()
        with prec.autocast():
            loss = F.cross_entropy(model(x), y)
        prec.backward(loss)
        if step == 0 and rank == 1:
            next(model.parameters()).grad[0, 0] = float("inf")  # this worker's fp16 overflow
        skipped = prec.check(model.parameters())
        if not skipped:
            algo.step(StepContext(lr=0.1, step=step, epoch=0.0, batch=(x, y), closure=lambda: loss))
        c = prec.counters(algo.comm.pop_counters())
        log.append({"skipped": skipped, "scale_after": prec.scale, "agree_messages": c.messages,
                    "moved": max((p - q).abs().max().item() for p, q in zip(model.parameters(), before)),
                    "params": [p.detach().flatten().tolist() for p in model.parameters()]})
    return {"probe": log, "overlap": {str(ov): runtime_steps(b, rank, ov) for ov in (True, False)}}


def runtime_steps(b, rank, overlap):
    from impls.runtime.loop import train_step
    from impls.runtime.straggler import StragglerModel, straggler_config

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    cls, acfg = algorithm_config({"name": "allreduce_sgd", "overlap_backward": overlap, "first_bucket_mb": 1e-4})
    comm = Communicator(b)
    algo = cls(acfg, Context(rank, 2, comm, optimizer_config({"lr": 0.1}), 0))
    algo.setup(model)
    prec = MixedPrecision("fp16", torch.device("cpu"), LossScaleConfig(init=1024.0), Communicator(b), agree=True)
    straggler = StragglerModel(straggler_config(None), rank, 2, 0)
    g = torch.Generator().manual_seed(rank)
    log = []
    for step in range(3):
        x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
        if step == 0 and rank == 1:
            x = x * 1e6  # beyond fp16's range (65504): this worker's forward pass overflows
        before = [p.detach().clone() for p in model.parameters()]
        s = StepContext(lr=0.1, step=step, epoch=0.0, batch=(x, y), closure=None)
        st = train_step(algo, model, lambda: F.cross_entropy(model(x), y), s, comm.clock, prec, straggler,
                        comm.clock.now())
        log.append({"skipped": st.skipped, "buckets_in_backward": st.extra.get("overlap/buckets_in_backward"),
                    "moved": max((p - q).abs().max().item() for p, q in zip(model.parameters(), before)),
                    "params": [p.detach().flatten().tolist() for p in model.parameters()]})
    return log


if __name__ == "__main__":
    out = run_actors(platform_config("ethernet_10g"), 2, main)
    print(json.dumps(out))
