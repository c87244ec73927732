"""The shaped-network tier (distrepro_wf.bench.netns): ranks as hosts in Linux network namespaces,
veth + bridge, tc tbf; its benchmark's table; the fixed profile charged on real ranks.

The launch tests need root (CI has it) and are skipped, saying why, without it."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pytest

from conftest import ROOT, make_config, needs_netns

LIB = ROOT / "workflows" / "lib"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(LIB), os.environ.get("PYTHONPATH", "")])}




def test_preflight_names_what_is_missing(monkeypatch):
    from distrepro_wf.bench import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None if tool == "tc" else "/usr/sbin/" + tool)
    with pytest.raises(netns.NetnsError, match=r"cannot be made here: needs root \(this process runs as uid "
                                               r"1000\), `tc` \(iproute2\)"):
        netns.preflight()


def test_star_platform_needs_bandwidth_and_latency():
    from impls.errors import ConfigError
    from impls.sim.platforms import alpha_beta, platform_config

    with pytest.raises(ConfigError, match=r"^platform\.nic_gbps: platform 'star' needs nic_gbps"):
        platform_config({"name": "star", "latency_us": 9})
    with pytest.raises(ConfigError, match=r"^platform\.latency_us: platform 'star' needs latency_us"):
        platform_config({"name": "star", "nic_gbps": 0.1})
    alpha, beta = alpha_beta(platform_config({"name": "star", "nic_gbps": 0.1, "latency_us": 9.0}))
    assert alpha == pytest.approx(9e-6)
    assert beta == pytest.approx(0.97 * 12.5e6 / 1.05)


def test_real_ranks_take_only_a_fixed_profile():
    from impls.errors import ConfigError
    from impls.config.runconfig import resolve

    resolve(make_config("allreduce_sgd", 2, backend="gloo", profile={"name": "fixed", "step_ms": 20}))
    for bad in ("measured", {"name": "fixed", "step_ms": 20, "model_mb": 100}, "resnet50_v100x8"):
        with pytest.raises(ConfigError, match=r"^profile: real ranks .* take only a profile \{name: fixed"):
            resolve(make_config("allreduce_sgd", 2, backend="gloo", profile=bad))


def test_charged_clock_sleeps_to_the_profile_time():
    """Compute shorter than step_ms lasts step_ms; longer keeps its real time."""
    from impls.backends import ChargedClock

    clock = ChargedClock(lambda batch: 0.03)
    for work, want in ((0.0, 0.03), (0.045, 0.045)):
        t0 = time.perf_counter()
        with clock.compute(None, None):
            time.sleep(work)
        assert want <= time.perf_counter() - t0 < want + 0.015


def test_sim_vs_netns_table_ratios_and_order():
    from distrepro_wf.bench import netnsbench as nb

    spec = nb.bench_spec(None)
    real = {("a", 2, 100.0): {"step": 100.0, "compute": 50.0, "comm": 40.0},
            ("b", 2, 100.0): {"step": 200.0, "compute": 50.0, "comm": 140.0},
            ("c", 2, 100.0): {"step": 150.0, "compute": 50.0, "comm": 90.0}}
    sim = {("a", 2, 100.0): {"step": 110.0, "compute": 50.0, "comm": 60.0},
           ("b", 2, 100.0): {"step": 140.0, "compute": 50.0, "comm": 90.0},
           ("c", 2, 100.0): {"step": 150.0, "compute": 50.0, "comm": 100.0},
           ("d", 2, 100.0): {"step": 1.0, "compute": 0.5, "comm": 0.5}}  # no real twin: no row
    t = nb.table(real, sim, {100.0: 9.0}, spec, {(2, 100.0): ["d (real: crashed)"]})
    assert list(t["method"]) == ["a", "c", "b"]  # fastest first (real)
    assert list(t["ratio"]) == [1.1, 1.0, 0.7]
    assert list(t["within_15pct"]) == [True, True, False]
    assert set(t["order_agrees"]) == {False}  # simulated: a < b < c
    assert t["order_sim"].iloc[0] == "a < b < c" and t["order_real"].iloc[0] == "a < c < b"
    assert set(t["missing"]) == {"d (real: crashed)"}
    # c and b: 150 < 200 real, 150 > 140 simulated, both by more than 5 %: discordant; a and c
    # agree; a and b: 100 < 200 real, 110 < 140 simulated
    assert set(t["order_agrees_beyond_margin"]) == {False}
    assert t["order_discordant"].iloc[0] == "c < b real, > simulated"
    near = nb.table({**real, ("b", 2, 100.0): {"step": 152.0, "compute": 50.0, "comm": 90.0}}, sim, {100.0: 9.0}, spec)
    assert set(near["order_agrees"]) == {False} and set(near["order_agrees_beyond_margin"]) == {True}
    assert list(t.columns[:7]) == ["method", "ranks", "bandwidth_mbit", "real_step_ms", "sim_step_ms", "ratio",
                                   "within_15pct"]
    with pytest.raises(Exception, match=r"benchmarks\.sim_vs_netns: unknown key\(s\) \['rate'\]"):
        nb.bench_spec({"rate": 1})
    assert set(t["sim_opcost"]) == {"none"}


def test_the_simulated_twin_charges_the_measured_op_costs_and_gloo_overhead():
    """The simulated side of sim_vs_netns charges what the real ranks spend besides compute and
    the wire: this machine's op costs and, per message, the gloo overhead the testbed measured
    (its one-way time beyond TCP's); 'none' charges nothing; a bad choice names the key."""
    from distrepro_wf.bench import netnsbench as nb
    from impls.sim.opcost import OpCost

    spec = nb.bench_spec(None)
    here = OpCost(mem_gbps=6.1234, copy_gbps=3.5, compress_gbps=1.25, msg_us=4.0, source="test")
    link = {"gloo_overhead_us": 36.5}
    ops = nb.sim_opcost(spec, here, link)
    assert ops == {"mem_gbps": 6.123, "copy_gbps": 3.5, "compress_gbps": 1.25, "msg_us": 36.5}
    assert nb.sim_opcost(spec, here, {"gloo_overhead_us": -3.0})["msg_us"] == 0.0  # noise below TCP: none
    assert nb.sim_opcost({**spec, "sim_opcost": "none"}, here, link) == {}
    cfg = nb.sim_config({"name": "sgp"}, 2, spec, 100.0, 9.0, ops)
    assert cfg["profile"] == {"name": "fixed", "step_ms": spec["step_ms"], **ops}
    t = nb.table({("a", 2, 100.0): {"step": 100.0, "compute": 50.0, "comm": 40.0}},
                 {("a", 2, 100.0): {"step": 101.0, "compute": 50.0, "comm": 41.0}}, {100.0: 9.0}, spec, None,
                 {100.0: ops})
    assert t["sim_opcost"].iloc[0] == "compress_gbps=1.25, copy_gbps=3.5, mem_gbps=6.123, msg_us=36.5"
    assert "charged as measured" in t["note"].iloc[0]
    with pytest.raises(Exception, match=r"benchmarks\.sim_vs_netns\.sim_opcost: 'x' is not allowed"):
        nb.bench_spec({"sim_opcost": "x"})


def test_launch_groups_put_server_ranks_on_hosts():
    from distrepro_wf.bench import netnsbench as nb

    g = nb.launch_groups(nb.bench_spec({"nodes": [2], "rates_mbit": [100]}))
    assert sorted(g) == [(100.0, 2), (100.0, 3)]  # ps_sync, ps_async, signum_mv: one server host more
    assert sorted(m for m, _ in g[(100.0, 3)]) == ["ps_async", "ps_sync", "signum_mv"]


def _ours(pid: int) -> list[str]:
    from distrepro_wf.bench import netns

    return [n for n in netns.namespaces() if n.startswith(f"drn-{pid}-")]


@needs_netns
def test_two_host_launch_is_shaped_and_leaves_nothing(tmp_path):
    """One torchrun per namespace, c10d on the first: the run finishes, each rank's compute is
    the fixed profile's, a step's all-reduce takes its bytes at the tbf rate, and no namespace
    is left.  Then a launcher killed with SIGKILL mid-launch: its watchdog deletes the
    namespaces and the ranks die with it."""
    rate_mbit, step_ms = 10.0, 30.0
    cfg = make_config("allreduce_sgd", 2, backend="gloo", profile={"name": "fixed", "step_ms": step_ms},
                      checkpoint=False, workload={"model": {"name": "mlp", "hidden": [256]}, "epochs": 1,
                                                  "max_steps_per_epoch": 6})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    cmd = [sys.executable, "-m", "distrepro_wf.bench.netns", "run", "--hosts", "2", "--rate-mbit", str(rate_mbit),
           "--config", str(tmp_path / "cfg.json"), "--out", str(tmp_path / "out"), "--log", str(tmp_path / "log"),
           "--timeout-s", "120"]
    p = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = p.communicate(timeout=180)[0]
    assert p.returncode == 0, text[-3000:] + (tmp_path / "log").read_text()[-3000:]
    assert _ours(p.pid) == []
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert prov["world"] == 2 and prov["time"]["kind"].startswith("wall clock, compute charged")
    steps = [json.loads(x) for x in (tmp_path / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s["kind"] == "step"][1:]  # after the first (connections are made there)
    compute = statistics.median(s["time/compute_s"] for s in steps)
    assert step_ms / 1e3 <= compute < step_ms / 1e3 + 0.010
    # 2 ranks: the ring sends the model once each way, 77 KB: 62 ms at 10 Mbit/s (tbf's 16 KB
    # burst passes at once); unshaped, a veth takes about 1 ms
    sent = statistics.median(s["comm/bytes_sent"] for s in steps)
    assert sent == pytest.approx(4 * (64 * 256 + 256 + 256 * 10 + 10), rel=0.01)
    line_s = sent * 8 / (rate_mbit * 1e6)
    comm = statistics.median(s["time/comm_s"] for s in steps)
    assert 0.7 * line_s < comm < 1.5 * line_s, (comm, line_s)

    # a launcher killed with SIGKILL while its ranks run
    killed = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    ranks: list[int] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not ranks:
        if _ours(killed.pid):
            ranks = [int(x) for x in subprocess.run(["ip", "netns", "pids", f"drn-{killed.pid}-0-h0"],
                                                    capture_output=True, text=True).stdout.split()]
        time.sleep(0.1)
    assert ranks, "the launch never started its ranks"
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_ours(killed.pid) or any(_exists(r) for r in ranks)):
        time.sleep(0.1)
    assert _ours(killed.pid) == []
    assert not [r for r in ranks if _exists(r)]


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    st = f"/proc/{pid}/stat"
    return not (os.path.exists(st) and open(st).read().split(")")[-1].split()[0] == "Z")


def _procs_in(workdir) -> dict[int, str]:
    """{pid: command line} of the live processes whose working directory is ``workdir``."""
    from pathlib import Path

    out = {}
    for p in Path("/proc").glob("[0-9]*"):
        try:
            cmd, cwd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(), os.readlink(p / "cwd")
        except OSError:
            continue
        if Path(cwd) == Path(workdir) and _exists(int(p.name)):
            out[int(p.name)] = cmd
    return out


@needs_netns
@pytest.mark.workflow
def test_the_namespace_benchmark_stops_with_its_killed_snakemake(tmp_path):
    """Issue 34, case 3: ``kill -9`` of Snakemake left ``bench_sim_vs_netns``'s script, its
    watchdog and its namespaces running (20 s later), beside the next invocation's testbed.
    Now the script watches the Snakemake that owns it, as launches do, and unwinds: the ranks
    and the watchdog end, the namespaces are deleted, and no table is written."""
    import yaml

    wl = {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [256]}, "batch_size": 16,
          "epochs": 50, "max_steps_per_epoch": 20, "optimizer": {"lr": 0.05}}
    cfg = {"experiments": {"smoke": {"workload": "tiny", "nodes": [1], "stragglers": ["none"], "seeds": [1],
                                     "methods": {"serial_sgd": {}}}},
           "workloads": {"tiny": {k: v for k, v in wl.items() if k != "epochs"} | {"epochs": 1}},
           "stragglers": {"none": {"kind": "none"}}, "launcher": {"kind": "local", "timeout_s": 300},
           "benchmarks": {"sim_vs_netns": {"nodes": [2], "rates_mbit": [10], "workload": wl, "sim_opcost": "none",
                                           "methods": {"allreduce_sgd": {"name": "allreduce_sgd"}},
                                           "timeout_s": 300}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    smk = subprocess.Popen([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                            "--cores", "2", "bench_sim_vs_netns", "--configfile", str(tmp_path / "c.yaml")],
                           cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    script, ranks, names = None, [], []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not ranks:
            assert smk.poll() is None, "snakemake ended before the benchmark's ranks started"
            script = next((p for p, c in _procs_in(tmp_path).items() if ".bench_sim_vs_netns.py" in c), None)
            names = _ours(script) if script else []
            if names:
                ranks = [int(x) for n in names for x in subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                                                        text=True).stdout.split()]
            time.sleep(0.2)
        assert ranks, "the benchmark never started its ranks"
        os.kill(smk.pid, signal.SIGKILL)
        smk.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (_ours(script) or _exists(script) or any(_exists(r) for r in ranks)):
            time.sleep(0.2)
        assert _ours(script) == [], "its namespaces outlived the workflow"
        assert not _exists(script), "its script outlived the workflow"
        assert not [r for r in ranks if _exists(r)], "its ranks outlived the workflow"
        assert not any("netns" in c for c in _procs_in(tmp_path).values())  # the watchdog too
        assert not (tmp_path / "results" / "bench" / "sim_vs_netns.csv").exists()
    finally:
        smk.kill()
        smk.wait()
        for p in _procs_in(tmp_path):
            with __import__("contextlib").suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        from distrepro_wf.bench import netns

        if script:
            netns.delete(_ours(script))
