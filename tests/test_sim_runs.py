"""Training runs on the simulated platform: the same math as real ranks, deterministic
numbers (simulated times included), profiles recorded in provenance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sim_server
from conftest import ROOT, launch, make_config

EQUAL_TOL = 1e-6  # the bound; measured: 3e-8 (all-reduce: another summation order), 0 (gossip, server)
SYNC = {  # world size 4 each, so one real launch serves them all
    "allreduce_sgd": ("allreduce_sgd", 4),
    "sgp": ({"name": "sgp", "topology": {"name": "exponential", "peers": 1}}, 4),
    "ps_sync": ("ps_sync", 3),  # 3 workers + 1 server
    # three buckets of the tiny MLP ([last layer] [first bias] [first weight]), all-reduced during
    # backward (the default) or after it: the same parameters either way, on both backends
    "allreduce_sgd_3buckets": ({"name": "allreduce_sgd", "bucket_mb": 0.004, "first_bucket_mb": 0.0013}, 4),
    "allreduce_sgd_3buckets_after": ({"name": "allreduce_sgd", "bucket_mb": 0.004, "first_bucket_mb": 0.0013,
                                      "overlap_backward": False}, 4),
}


def simulate(cfg: dict, tmp: Path, calibration: Path | None = None, plain: bool = False,
             fault: str | None = None) -> Path:
    """One simulated run into ``tmp`` (out/, ckpt/): forked by the session's fork server
    (``tests/sim_server.py``, as the pipeline runs them), or with ``plain`` the one-process
    command ``python -m impls.sim --config ...``.  ``fault`` ("rank:step", plain command):
    that rank dies there, and the run must end with the runtime's fault exit code (17)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    if not plain and fault is None:
        log = tmp / "sim.log"
        rc = sim_server.run(tmp / "cfg.json", tmp / "out", tmp / "ckpt", calibration, log)
        assert rc == 0, log.read_text()[-3000:]
        return tmp
    cmd = [sys.executable, "-m", "impls.sim", "--config", str(tmp / "cfg.json"), "--out", str(tmp / "out"),
           "--checkpoint-dir", str(tmp / "ckpt")]
    if calibration is not None:
        cmd += ["--calibration", str(calibration)]
    env = {**os.environ, "DISTREPRO_FAULT": fault} if fault else None
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert p.returncode == (17 if fault else 0), p.stderr[-3000:]
    return tmp


#: ``ethernet_10g`` at line rate (``msg_efficiency`` 1): the overlap test's written-out constants
ETH = {"name": "ethernet_10g", "msg_efficiency": 1.0}


def sim_config(algo, nodes, **over):
    return make_config(algo, nodes, backend="simgrid", platform=over.pop("platform", "ethernet_10g"),
                       profile=over.pop("profile", {"name": "fixed", "step_ms": 10}), **over)


def test_a_simulated_run_never_imports_the_torch_backend(tmp_path):
    """A simulated run, server ranks and a subgroup included, asks the backend registry for its
    device and process layout: the torch backend (``impls.backends.torch_dist``, the module
    that joins torch.distributed's process group) is never imported (a fresh process)."""
    cfg = sim_config("ps_sync", 2, workload={"epochs": 1, "max_steps_per_epoch": 2})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    # through the one entry point of a run (impls.run), which hands a simulated config to its
    # backend's entry (impls.sim) without torchrun
    code = ("import json, sys; from impls.run import main; "
            "main(['--config', sys.argv[1], '--out', sys.argv[2]]); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('impls.backends'))))")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cfg.json"), str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == ["impls.backends", "impls.backends.sim"]
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert (prov["backend"], prov["runs_on"], len(prov["ranks"])) == ("simgrid", "simulated", 1)
    direct = simulate(cfg, tmp_path / "direct") / "out" / "metrics"  # the simulator's own entry: the same records
    for f in sorted(direct.glob("rank*.jsonl")):
        assert (tmp_path / "out" / "metrics" / f.name).read_text() == f.read_text(), f.name


@pytest.mark.spawn
def test_simulated_equals_real_ranks(tmp_path):
    """Synchronous methods: the simulated backend ends with the real ranks' parameters."""
    real, _ = launch([make_config(a, n) for a, n in SYNC.values()], tmp_path / "real")
    for (name, (algo, nodes)), res in zip(SYNC.items(), real):
        sim = simulate(sim_config(algo, nodes), tmp_path / name)
        for r in range(4):
            a = res.final_state(r)
            b = torch.load(sim / "ckpt" / f"rank{r}.pt", weights_only=False)["model"]
            diff = max((a[k] - b[k]).abs().max().item() for k in a)
            assert diff <= EQUAL_TOL, (name, r, diff)
        assert json.loads((sim / "out" / "provenance.json").read_text())["backend"] == "simgrid"
        if name.startswith("allreduce_sgd_3buckets"):  # every bucket left during backward, or none did
            lines = (sim / "out" / "metrics" / "rank1.jsonl").read_text().splitlines()
            for recs in (res.records(1, "step"), [r for r in map(json.loads, lines) if r["kind"] == "step"]):
                assert {r.get("overlap/buckets_in_backward") for r in recs} == ({None} if "after" in name else {3.0})
    runs = dict(zip(SYNC, real))
    for r in range(4):
        a, b = runs["allreduce_sgd_3buckets"].final_state(r), runs["allreduce_sgd_3buckets_after"].final_state(r)
        assert max((a[k] - b[k]).abs().max().item() for k in a) <= EQUAL_TOL


def test_simulated_overlap_hides_the_closed_form_share(tmp_path):
    """allreduce_sgd on 2 simulated 10 GbE hosts (alpha 50 us per message, 1.154762 GB/s per
    direction: impls/sim/platforms.py), profile fixed at 100 ms per step with the messages scaled to
    a 100 MB model, backward 2/3 of the step.  The tiny MLP's 2410 parameters in two buckets, sized in
    the scaled bytes (first bucket 13.1 MiB, then 100 MiB): its last layer (330 parameters: 13.6929 MB
    scaled) and its first (2080: 86.3071 MB).  A 2-rank ring
    all-reduce of S bytes takes 2 alpha + S / beta.
    * overlap: bucket 0 is complete at 100 (1/3 + 2/3 x 330/2410) = 42.46 ms and all-reduced by
      54.42 ms, hidden; bucket 1 at 100 ms: the step is 100 + 0.1 + 74.7403 = 174.840 ms;
    * after backward: both at 100 ms, all-reduced one after the other on the rank's stream (NCCL's
      one: ``platform.collective_streams`` 1), each ring paying its own 2 alpha:
      100 + 2 x 0.1 + 100 MB / beta = 100 + 0.2 + 86.5979 = 186.798 ms (concurrent, sharing the
      links, they were 0.1 ms shorter: one ring's latency hidden behind the other's)."""
    want = {True: 0.174840, False: 0.186798}
    for overlap, step_s in want.items():
        algo = {"name": "allreduce_sgd", "first_bucket_mb": 13.1, "bucket_mb": 100, "overlap_backward": overlap}
        cfg = sim_config(algo, 2, platform=ETH, profile={"name": "fixed", "step_ms": 100, "model_mb": 100},
                         workload={"epochs": 1, "max_steps_per_epoch": 3})
        run = simulate(cfg, tmp_path / str(overlap))
        for r in range(2):
            steps = [json.loads(x) for x in (run / "out" / "metrics" / f"rank{r}.jsonl").read_text().splitlines()]
            steps = [x for x in steps if x["kind"] == "step"]
            assert len(steps) == 3
            for x in steps:
                assert x["time/compute_s"] == pytest.approx(0.1, rel=1e-9)
                assert x["time/step_s"] == pytest.approx(step_s, abs=2e-6), (overlap, x["time/step_s"])
    # a straggler (rank 1, factor 2: its forward and backward pass take 200 ms,
    # impls.runtime.straggler): with the overlap its bucket 1 is ready at 200 ms (the fast rank's
    # reduce-scatter chunk left when bucket 0's all-reduce ended, at 96.6 ms, and arrived by 132 ms:
    # the collectives' messages are eager), so its chunk
    # travels alone at 1.05 beta, then both all-gather chunks: every rank's step is
    # 200 + 0.1 + 86.3071 MB / 2 x (1 / 1.05 + 1) / beta = 273.061 ms (the overlap hides only
    # bucket 0, ready at 84.9 ms; tests/test_straggler_time.py has the closed forms);
    # after backward, both buckets follow the straggler's compute
    for overlap in (True, False):
        algo = {"name": "allreduce_sgd", "first_bucket_mb": 13.1, "bucket_mb": 100, "overlap_backward": overlap}
        cfg = sim_config(algo, 2, platform=ETH, profile={"name": "fixed", "step_ms": 100, "model_mb": 100},
                         workload={"epochs": 1, "max_steps_per_epoch": 4}, straggler_name="slow1x2",
                         straggler={"kind": "fixed", "ranks": [-1], "factor": 2.0})
        run = simulate(cfg, tmp_path / f"straggler{overlap}")
        steps = [[x["time/step_s"] for x in map(json.loads, (run / "out" / "metrics" / f"rank{r}.jsonl")
                                                .read_text().splitlines()) if x["kind"] == "step"] for r in range(2)]
        if overlap:
            assert steps[0] == steps[1] == pytest.approx([0.2730606] * 4, abs=2e-6)
        else:
            assert all(0.28 < t < 0.2867 for r in range(2) for t in steps[r]), steps


def _metrics(run: Path, ranks: int) -> list[str]:
    return [(run / "out" / "metrics" / f"rank{r}.jsonl").read_text() for r in range(ranks)]


def test_asynchronous_run_is_deterministic(tmp_path):
    """AD-PSGD on the network-sharing cluster with a straggler: the same seed gives the same
    metrics, byte for byte (simulated times included); another seed does not."""
    cfg = sim_config("adpsgd", 8, platform={"name": "shared_hpc", "rack_size": 4}, profile="resnet50_v100x8",
                     straggler={"kind": "fixed", "ranks": [-1], "factor": 3.0}, straggler_name="slow1x3",
                     workload={"epochs": 1})
    a = _metrics(simulate(cfg, tmp_path / "a"), 8)
    b = _metrics(simulate(cfg, tmp_path / "b"), 8)
    assert a == b
    c = _metrics(simulate({**cfg, "seed": 2}, tmp_path / "c"), 8)
    assert c != a
    recs = [json.loads(x) for x in a[7].splitlines()]
    steps = [r for r in recs if r["kind"] == "step"]
    # the straggler's step: 3 x the profile's compute (256 images at 2855 images/s), in simulated
    # seconds, plus AD-PSGD's copy of x_hat into the model as its step begins (charged by the
    # algorithm where it runs, issue 31 item 2: ResNet-50's 102.228128 MB at the paper profile's
    # 360 GB/s copy bandwidth, impls/sim/opcost.py), which a real rank's compute time holds too
    copy_s = 102.228128e6 / 360e9
    assert steps[0]["time/compute_s"] + steps[0]["time/straggler_delay_s"] == pytest.approx(3 * 0.089667 + copy_s,
                                                                                             rel=1e-5)
    prov = json.loads((tmp_path / "a" / "out" / "provenance.json").read_text())
    assert prov["time"]["profile"] == "resnet50_v100x8" and prov["time"]["platform"]["name"] == "shared_hpc"
    # each message weighed the paper model's bytes: the scale the report shows bytes at (issue 24)
    info = json.loads((tmp_path / "a" / "out" / "runinfo.json").read_text())
    assert prov["time"]["wire_scale"] == pytest.approx(prov["time"]["model_mb"] * 1e6 / (4 * info["params"]), rel=1e-12)


def test_measured_profile_is_calibrated_once(tmp_path):
    """The 'measured' profile times this machine once per workload; later runs reuse it."""
    cal = tmp_path / "calibration.json"
    cfg = sim_config("allreduce_sgd", 2, profile="measured", workload={"epochs": 1, "max_steps_per_epoch": 3})
    simulate(cfg, tmp_path / "a", cal)
    table = json.loads(cal.read_text())
    assert len(table) == 1
    (entry,) = table.values()
    simulate(cfg, tmp_path / "b", cal)
    assert json.loads(cal.read_text()) == table  # not measured again
    for run in ("a", "b"):
        t = json.loads((tmp_path / run / "out" / "provenance.json").read_text())["time"]
        assert t["profile"] == "measured" and t["sample_us"] == pytest.approx(entry["sample_s"] * 1e6)
        step = json.loads((tmp_path / run / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()[0])
        assert step["time/compute_s"] == pytest.approx(entry["sample_s"] * 16, rel=1e-9)  # batch 16


def test_a_launch_group_forks_its_simulations_from_one_server(tmp_path):
    """Simulated members of a launch group are forked by one ``impls.sim --serve`` process:
    each is still its own process with its own outcome (ok, refused by the runtime, killed by
    the per-run timeout, never reached), and the ok run's metrics equal those of the plain
    one-process command."""
    from distrepro_wf.pipeline import runs
    from distrepro_wf.pipeline.runs import execute_group, write_run_configs

    cfgs = {"ok": sim_config("allreduce_sgd", 2), "config": sim_config("allreduce_sgd", 2, workload={"epochs": 0}),
            "slow": sim_config("allreduce_sgd", 2, workload={"epochs": 5000}),
            "after": sim_config("allreduce_sgd", 2, seed=2)}
    dirs = {k: tmp_path / "runs" / k for k in cfgs}
    paths = write_run_configs({str(dirs[k]): c for k, c in cfgs.items()})
    log = tmp_path / "n2.log"
    launch = execute_group(paths, tmp_path / "launches" / "n2.json", log, {"kind": "local", "timeout_s": 8})
    out = {k: json.loads((d / "outcome.json").read_text()) for k, d in dirs.items()}
    assert [m["status"] for m in launch["members"]] == ["ok", "failed", "failed", "ok"], out
    assert out["config"]["kind"] == "config" and out["slow"]["kind"] == "timeout"
    assert 8 <= out["slow"]["killed_after_s"] < 30
    assert log.read_text().count("(forked by python -m impls.sim --serve)") == 4
    # each published run carries its checksum manifest (verified at collect), listed in its outcome
    for k in ("ok", "after"):
        assert runs.has_checksums(out[k]) and runs.verify_checksums(dirs[k] / "run", required=True) is None
    plain = simulate(cfgs["ok"], tmp_path / "plain", plain=True)
    assert _metrics(plain, 2) == [(dirs["ok"] / "run" / "metrics" / f"rank{r}.jsonl").read_text() for r in range(2)]
