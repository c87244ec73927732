"""`snakemake probe` (issue 33 item 2): the aggregation's math on hand-made timings (nccl-tests'
bus bandwidth, the latency / bandwidth / per-message overhead fit), a plan that takes its
platform and profile from a probe's file, and one real 2-rank probe over gloo on loopback."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from distrepro_wf.plan import checks as plan_checks
from distrepro_wf.plan import config as wfplan
from distrepro_wf.plan import probe
from impls.errors import ConfigError
from impls.sim.platforms import BANDWIDTH_FACTOR

from conftest import needs_netns

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]

#: a 1 Gbit/s link (125 MB/s) with 30 us of per-message overhead and no other cost
OVERHEAD_S, RATE = 30e-6, 125e6
SIZES = [1e3, 1e5, 1e6, 1e7]
PLAN = {"plan": {"name": "probed", "model": {"epoch_samples": 100000}, "nodes": [4], "stragglers": ["none"],
                 "methods": {"allreduce_sgd": {}}, "steps": 3, "crossover": {"nodes": []}},
        "stragglers": {"none": {"kind": "none"}}}


def _rows(n=4):
    """Raw rows as impls.bench.probe writes them: ring all-reduces and ping-pongs on the link above."""
    rows = []
    for s in SIZES:
        for rep, noise in enumerate((1.0, 1.2, 0.9)):  # the median is the middle repetition
            ar = 2 * (n - 1) / n * s / RATE  # a ring all-reduce's bytes on each link
            rows.append({"kind": "all_reduce", "bytes": str(s), "peer": "", "rep": str(rep), "seconds": str(ar * noise)})
            for peer in range(1, n):
                rtt = 2 * (OVERHEAD_S + s / RATE)
                rows.append({"kind": "p2p", "bytes": str(s), "peer": str(peer), "rep": str(rep),
                             "seconds": str(rtt * noise)})
    rows += [{"kind": "step", "bytes": "", "peer": str(r), "rep": "0", "seconds": str(ms / 1e3)}
             for r, ms in enumerate((100, 110, 120, 400))]
    return rows


META = {"hosts": ["a", "b", "c", "d"], "world": 4, "backend": "gloo", "device": "cpu",
        "date": "2026-11-27T23:00:00+00:00", "model_mb": 97.5, "batch": 32}


def test_bus_bandwidth_is_nccl_tests_all_reduce_factor():
    assert probe.bus_bandwidth(10.0, 2) == 10.0
    assert probe.bus_bandwidth(10.0, 4) == 15.0
    assert probe.bus_bandwidth(8.0, 8) == 14.0


def test_the_fit_recovers_latency_bandwidth_and_overhead():
    t = [OVERHEAD_S + s / RATE for s in SIZES]
    fit = probe.fit_p2p(SIZES, t)
    assert fit["overhead_s"] == pytest.approx(OVERHEAD_S, rel=1e-6)
    assert fit["slope_bandwidth_Bps"] == pytest.approx(RATE, rel=1e-6)
    assert fit["latency_s"] == pytest.approx(OVERHEAD_S + 1e3 / RATE)  # the smallest message, end to end
    assert fit["bandwidth_Bps"] == pytest.approx(1e7 / (OVERHEAD_S + 1e7 / RATE))  # the largest message's
    with pytest.raises(ValueError, match="two message sizes"):
        probe.fit_p2p([1e3], [1e-3])


def test_summarize_gives_the_platform_and_profile_of_the_timings():
    doc = probe.summarize(_rows(), META, "lab")
    ar = {a["bytes"]: a for a in doc["measured"]["all_reduce"]}
    # a ring's busbw is the link's rate (the median repetition, noise 1.0)
    assert ar[1e7]["busbw_gbps"] == pytest.approx(1.0, rel=1e-5)
    assert ar[1e7]["algbw_gbps"] == pytest.approx(1.0 / 1.5, rel=1e-5)
    plat = doc["platform"]
    assert plat["topology"] == "star" and plat["overhead_us"] == pytest.approx(30, rel=1e-4)
    assert plat["latency_us"] == pytest.approx(38, rel=1e-4)
    bw_gbps = 1e7 / (OVERHEAD_S + 1e7 / RATE) * 8 / 1e9
    assert plat["nic_gbps"] == pytest.approx(bw_gbps / BANDWIDTH_FACTOR, rel=1e-5)
    assert set(doc["measured"]["p2p"]) == {"0-1", "0-2", "0-3"}
    assert doc["profile"] == {"step_ms": 115.0, "model_mb": 97.5, "batch": 32}  # median over ranks
    assert doc["provenance"]["hosts"] == META["hosts"] and doc["provenance"]["backend"] == "gloo"
    # where each rank ran (impls.runtime.provenance.rank_map): under Slurm, its job and task
    ranks = [{"rank": r, "host": h, "slurm": {"job_id": 7, "task": r}} for r, h in enumerate(META["hosts"])]
    assert probe.summarize(_rows(), {**META, "ranks": ranks}, "lab")["provenance"]["ranks"] == ranks


def test_the_nic_rate_is_what_the_links_carried_when_every_rank_communicated():
    """A cluster whose all-reduce moves each link's bytes at half the point-to-point rate (hosts
    that cannot drive every link at once): the plan's NIC is the all-reduce's bus bandwidth."""
    rows = [dict(r, seconds=str(float(r["seconds"]) * 2)) if r["kind"] == "all_reduce" else r for r in _rows()]
    doc = probe.summarize(rows, META, "lab")
    assert doc["measured"]["nic_from"] == "all_reduce"
    assert doc["platform"]["nic_gbps"] == pytest.approx(0.5 / BANDWIDTH_FACTOR, rel=1e-5)
    assert probe.summarize(_rows(), META, "lab")["measured"]["nic_from"] == "p2p"


def _probe_file(tmp_path):
    csv = tmp_path / "lab.csv"
    import csv as csvmod
    import json

    with open(csv, "w", newline="") as f:
        w = csvmod.DictWriter(f, fieldnames=["kind", "bytes", "peer", "rep", "seconds"])
        w.writeheader()
        w.writerows(_rows())
    (tmp_path / "lab.json").write_text(json.dumps(META))
    out = tmp_path / "probe" / "lab.yaml"
    return out, probe.write(csv, tmp_path / "lab.json", out, "lab")


def test_a_plan_takes_its_platform_and_profile_from_a_probe(tmp_path):
    out, doc = _probe_file(tmp_path)
    cfg = copy.deepcopy(PLAN)
    cfg["plan"]["probe"] = str(out)
    plan_checks.validate(cfg)
    plan = cfg["plan"]
    # the per-message overhead (30 us) is charged to each message's sender, the rest of the 38 us to the wire
    # a gloo probe's plan simulates gloo's 2 collectives at once (impls.backends.TorchSpec.collective_streams)
    assert META["backend"] == "gloo" and doc["platform"]["collective_streams"] == 2
    assert plan["network"] == {"nic_gbps": [doc["platform"]["nic_gbps"]], "latency_us": pytest.approx(8.0),
                               "topology": "star", "collective_streams": 2}
    assert plan["model"]["step_ms"] == 115.0 and plan["model"]["model_mb"] == 97.5 and plan["model"]["batch"] == 32
    assert plan["model"]["msg_us"] == pytest.approx(30.0)
    run = wfplan.run_config(cfg, wfplan.points(cfg)[0])
    assert run["profile"]["msg_us"] == pytest.approx(30.0) and run["platform"]["latency_us"] == pytest.approx(8.0)
    assert run["platform"]["collective_streams"] == 2
    # what the plan gives wins over the probe
    cfg = copy.deepcopy(PLAN)
    cfg["plan"].update(probe=str(out), network={"nic_gbps": [10, 25]})
    cfg["plan"]["model"]["step_ms"] = 180
    plan_checks.validate(cfg)
    assert cfg["plan"]["network"]["nic_gbps"] == [10, 25] and cfg["plan"]["model"]["step_ms"] == 180


@pytest.mark.parametrize("change, key, says", [
    ({"probe": "results/probe/nowhere.yaml"}, "plan.probe", "no probe file 'results/probe/nowhere.yaml'"),
    ({}, "plan.network.nic_gbps", "needed without plan.probe"),
])
def test_a_missing_probe_or_network_is_refused_naming_the_key(change, key, says):
    cfg = copy.deepcopy(PLAN)
    cfg["plan"].update(change)
    with pytest.raises(ConfigError) as e:
        plan_checks.validate(cfg)
    assert e.value.key == key and says in str(e.value), str(e.value)


def test_a_bad_probe_section_is_refused_naming_the_key():
    bad = {"probe": {"cluster": "lab", "workload": {"dataset": {"name": "digits"}, "modle": {}}}}
    with pytest.raises(ConfigError) as e:
        plan_checks.validate(bad)
    assert e.value.key.startswith("probe.workload"), str(e.value)


@pytest.mark.workflow
def test_a_real_two_rank_probe_writes_a_file_a_plan_validates_with(tmp_path):
    cfg = tmp_path / "probe.yaml"
    cfg.write_text(yaml.safe_dump({
        "probe": {"cluster": "loop", "nodes": 2, "reps": 2, "sizes_mb": [0.001, 0.1],
                  "p2p_sizes_mb": [0.001, 0.1, 1], "workload": {"dataset": {"name": "digits"},
                                                                "model": {"name": "mlp", "hidden": [16]}}},
        "launcher": {"kind": "local", "backend": "gloo", "timeout_s": 120}}))
    proc = subprocess.run([*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", "probe", "--configfile", str(cfg)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "results/probe/loop.yaml"
    doc = yaml.safe_load(out.read_text())
    assert doc["provenance"]["world"] == 2 and doc["provenance"]["backend"] == "gloo"
    assert len(doc["provenance"]["hosts"]) == 2 and (tmp_path / "results/probe/loop.csv").is_file()
    # where each rank ran, as a run's provenance.json has it (locally: no Slurm job)
    ranks = doc["provenance"]["ranks"]
    assert [(r["rank"], r["local_rank"], r["local_world_size"]) for r in ranks] == [(0, 0, 2), (1, 1, 2)]
    assert not any("slurm" in r for r in ranks)
    assert doc["platform"]["nic_gbps"] > 0 and doc["platform"]["latency_us"] > 0 and doc["profile"]["step_ms"] > 0
    assert [a["bytes"] for a in doc["measured"]["all_reduce"]] == [1000.0, 100000.0]
    plan = copy.deepcopy(PLAN)
    plan["plan"]["probe"] = str(out)
    plan_checks.validate(plan)
    assert plan["plan"]["network"]["nic_gbps"] == [doc["platform"]["nic_gbps"]]
    # and the plan runs on it, as the user writes it (the probe's path relative to the working directory)
    plan = copy.deepcopy(PLAN)
    plan["plan"].update(probe="results/probe/loop.yaml", nodes=[2])
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    proc = subprocess.run([*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", "plan", "--configfile",
                           str(tmp_path / "plan.yaml")], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import pandas as pd

    r = pd.read_csv(tmp_path / "results/plan/probed.csv")
    assert r["nic_gbps"].tolist() == [doc["platform"]["nic_gbps"]]
    assert r["compute_ms"].tolist() == [doc["profile"]["step_ms"]] and (r["step_ms"] > r["compute_ms"]).all()


@pytest.mark.workflow
@needs_netns
def test_a_probe_of_two_namespace_hosts_measures_their_shaped_link(tmp_path):
    """Two hosts of the namespace testbed behind 100 Mbit/s tbf links, the probe launched on them
    as a multi-host torchrun (the Slurm path's rendezvous): the measured point-to-point bandwidth
    is the link's within 15 %, and the all-reduce's bus bandwidth does not exceed it."""
    from distrepro_wf.bench import netns

    rate_mbit = 100.0
    spec = {"cluster": "ns", "nodes": 2, "reps": 2, "sizes_mb": [0.001, 2], "p2p_sizes_mb": [0.001, 0.5, 4],
            "workload": {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]}}}
    csv = tmp_path / "ns.csv"
    with netns.testbed(2, rate_mbit) as tb:
        rc = netns.launch(tb, probe.entry(spec, {"backend": "gloo"}, str(csv)), log=tmp_path / "log",
                          timeout_s=120, cwd=ROOT)
    assert rc == 0, (tmp_path / "log").read_text()[-3000:]
    doc = probe.write(csv, tmp_path / "ns.json", tmp_path / "ns.yaml", "ns")
    measured = doc["measured"]["p2p_bandwidth_gbps"] * 1e3
    assert measured == pytest.approx(rate_mbit, rel=0.15), doc["measured"]
    assert doc["measured"]["all_reduce"][-1]["busbw_gbps"] * 1e3 < 1.15 * rate_mbit
    assert doc["provenance"]["world"] == 2
