"""The backend seam: all process-group work of impls/ goes through impls.backends.

* No module of ``impls/`` but ``impls/backends/torch_dist.py`` imports ``torch.distributed``
  (checked on the source, so a new direct use fails here, not on the simulated platform).
* The single-process backend's collectives are identities and its counter counts.
* Every collective the seam offers works on real gloo ranks through the Communicator, with
  the values and the counted bytes of the cost model (exact).
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from impls.backends import BACKENDS, Backend, Clock, backend_of, is_simulated, run_values
from impls.comm.costmodel import collective_cost
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {ROOT / "impls" / "backends" / "torch_dist.py"}


def _uses_torch_distributed(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.startswith("torch.distributed") for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("torch.distributed")
                or (node.module == "torch" and any(a.name == "distributed" for a in node.names))):
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "distributed" and isinstance(node.value, ast.Name) \
                and node.value.id == "torch":
            lines.append(node.lineno)
    return lines


def test_only_the_torch_backend_imports_torch_distributed():
    files = sorted((ROOT / "impls").rglob("*.py"))
    assert len(files) > 30
    offenders = {str(p.relative_to(ROOT)): ln for p in files if p not in ALLOWED and (ln := _uses_torch_distributed(p))}
    assert offenders == {}
    assert _uses_torch_distributed(next(iter(ALLOWED)))  # the check itself sees an import


def test_the_single_process_backend():
    b = Backend()
    t = torch.arange(3.0)
    assert b.all_reduce(t) is None and t.tolist() == [0.0, 1.0, 2.0]
    outs = [torch.empty(3)]
    b.gather(t, outs, dst=0)
    assert outs[0].tolist() == t.tolist()
    assert [b.counter_add("k"), b.counter_add("k", 2), b.counter_add("other")] == [1, 3, 1]
    assert b.all_gather_object({"a": 1}) == [{"a": 1}]
    with pytest.raises(RuntimeError, match="no peer"):
        b.isend(t, 1)


def test_backends_are_registered_components():
    """Callers ask a backend's spec what they used to decide by its name."""
    assert BACKENDS.names() == ["simgrid", "torch"]
    sim, real = backend_of("simgrid"), backend_of("torch")
    assert (sim.runs_on, sim.time_kind, sim.one_process, sim.entry_module) == \
        ("simulated", "simulated", True, "impls.sim")
    assert (real.runs_on, real.time_kind, real.one_process, real.entry_module) == \
        ("real", "wall clock", False, "impls.run")
    assert [backend_of(v).name for v in ("auto", "gloo", "nccl", None, float("nan"))] == ["torch"] * 5
    assert [is_simulated(v) for v in ("simgrid", "torch", "gloo", None)] == [True, False, False, False]
    assert run_values() == ("auto", "gloo", "nccl", "simgrid")  # a run config's `backend` choices
    assert str(sim.device("simgrid")) == "cpu" and str(real.device("gloo")) == "cpu"
    assert real.use_cuda("nccl") and not real.use_cuda("gloo") and not sim.use_cuda("simgrid")
    assert Backend().spec.name == "torch"
    assert sim.provenance(Backend()) == {"backend": "none", "runs_on": "simulated"}
    with pytest.raises(ConfigError, match=r"^backend: unknown backend 'mpi'; allowed: auto, gloo, nccl, simgrid, "
                                          r"torch$"):
        backend_of("mpi")


def test_the_torch_backend_owns_its_process_groups(monkeypatch):
    """What the workflow once decided by comparing ``gloo`` / ``nccl`` / ``auto``: the process
    group a request resolves to, whether it cannot run without a GPU per rank (a local launch
    checks the machine), whether a launch asks the scheduler for GPUs; the values the launcher's
    ``--backend`` takes and the schema's ``launcher.backend`` enum are the spec's."""
    import yaml

    from impls import run as entry
    from impls.backends import DEFAULT

    real, sim = backend_of("torch"), backend_of("simgrid")
    assert DEFAULT == real.default_value == "auto"
    assert [real.process_group(v, gpu=False) for v in real.run_values] == ["gloo", "gloo", "nccl"]
    assert [real.process_group(v, gpu=True) for v in real.run_values] == ["nccl", "gloo", "nccl"]
    assert [real.needs_gpu(v) for v in real.run_values] == [False, False, True]
    assert [real.may_use_gpu(v) for v in real.run_values] == [True, False, True]
    assert real.cpu_values() == ("auto", "gloo")
    assert (sim.process_group("simgrid"), sim.needs_gpu("simgrid"), sim.may_use_gpu("simgrid")) == \
        ("simgrid", False, False)
    with pytest.raises(ConfigError, match=r"^backend: unknown process group 'mpi'; allowed: auto, gloo, nccl$"):
        real.process_group("mpi")
    schema = yaml.safe_load((ROOT / "workflows/schemas/config.schema.yaml").read_text())
    assert tuple(schema["properties"]["launcher"]["properties"]["backend"]["enum"]) == real.run_values
    # impls.run's --backend: the values of the backends torchrun runs (a new one is a choice at once)
    assert entry.parser().parse_args(["--plan", "p"]).backend == "auto"
    monkeypatch.setattr(type(real), "run_values", (*real.run_values, "ucc"))
    assert entry.parser().parse_args(["--plan", "p", "--backend", "ucc"]).backend == "ucc"


class _Ticking(Clock):
    """A clock one second further on at every reading (as a simulated clock runs ahead of the
    wall clock): a deadline counted on it passes after a few readings, whatever the real time."""

    def __init__(self):
        self.t = 0.0

    def now(self) -> float:
        self.t += 1.0
        return self.t


def test_adpsgd_waits_on_the_run_clock_and_asks_the_seam_for_its_group():
    """AD-PSGD's deadline is ``timeout_s`` seconds of ``comm.clock`` (simulated time on the
    simulated platform), not of the machine's clock; its any-source group comes from the
    backend through the Communicator, not from swapping the communicator's backend by hand."""
    from impls.algorithms import algorithm_config
    from impls.comm.communicator import Communicator
    from impls.optim import optimizer_config
    from impls.protocol import Context

    cls, cfg = algorithm_config({"name": "adpsgd", "timeout_s": 5}, "algorithm")
    comm = Communicator(Backend(), _Ticking())
    algo = cls(cfg, Context(0, 2, comm, optimizer_config(None), 1, roles=("worker", "worker")))
    release = comm.backend.event()
    algo._error, algo._thread = None, comm.backend.start_background(release.wait, "partner")
    polls = []

    def never(timeout):  # an average whose partner never answers
        polls.append(timeout)
        assert len(polls) < 50, "the deadline never passed: the wait ignores the run's clock"
        return False

    try:
        with pytest.raises(RuntimeError, match=r"waited over 5(\.0)? s for pairwise average"):
            algo._wait(never, "pairwise average")
    finally:
        release.set()
    assert len(polls) == 7  # the deadline is set at the first unanswered poll (t = 1), passed at t = 7
    comm.receive_from_any()  # one process: the gloo side group is itself
    assert comm.backend.any_source_group() is comm.backend


@pytest.mark.parametrize("op,n,S,sent,steps", [
    ("reduce", 4, 1000, 750.0, 2), ("gather", 4, 1000, 750.0, 2), ("scatter", 8, 800, 700.0, 3),
    ("reduce_scatter", 4, 1000, 750.0, 3), ("all_reduce", 4, 1000, 1500.0, 6), ("broadcast", 1, 1000, 0.0, 0),
])
def test_cost_model_of_the_collectives(op, n, S, sent, steps):
    c = collective_cost(op, S, n)
    assert (c.bytes_sent, c.steps) == (sent, steps)


@pytest.mark.spawn
def test_every_collective_on_real_gloo_ranks(tmp_path):
    n = 3
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                           str(ROOT / "tests" / "spawn_collectives.py"), str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(n)]
    assert all(g["all_reduce_max"] == [3.0] * 4 for g in got)
    assert got[0]["reduce_on_root"] == [6.0] * 4
    assert got[1]["gather_on_1"] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    assert [g["scatter"] for g in got] == [[0.0] * 3, [10.0] * 3, [20.0] * 3]
    # rank k receives the sum over ranks r of (r * 100 + k)
    assert [g["reduce_scatter"] for g in got] == [[300.0 + 3 * k] * 2 for k in range(n)]
    assert sorted(g["counter"] for g in got) == [1, 2, 3]
    assert all(g["objects"] == [{"rank": r} for r in range(n)] for g in got)
    want = sum(collective_cost(op, size, n).bytes_sent for op, size in (
        ("all_reduce", 16), ("reduce", 16), ("gather", 8), ("scatter", 12), ("reduce_scatter", 8 * n)))
    assert all(g["bytes_sent"] == pytest.approx(want, rel=1e-12) and g["messages"] == 5 for g in got)
