"""The simulated platform's own behaviour: collectives compute the right values, cost
what the platform's flow model says (alpha-beta where nothing is shared, contention
where links are), point-to-point is gloo's rendezvous, deadlocks and bad input are reported.

Each scenario runs in a process of its own (``tests/sim_probe.py``: SimGrid's engine
runs once per process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from impls.errors import ConfigError
from impls.sim.measure import ring_allreduce_alpha_beta
from impls.sim.platforms import alpha_beta, platform_config

PROBE = Path(__file__).with_name("sim_probe.py")
COST_TOL = 0.05  # the bound: simulated ring all-reduce within 5 % of alpha-beta


def probe(scenario: str, **args):
    p = subprocess.run([sys.executable, str(PROBE), scenario, json.dumps(args)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("n", [4, 16, 64])
def test_ring_allreduce_costs_alpha_beta(n):
    """2 (n - 1) (alpha + S / (n beta)) within 5 %, from 1 KB to 100 MB, on 10 GbE."""
    sizes = [1e3, 1e5, 1e7, 1e8]
    cfg = platform_config("ethernet_10g")
    a, b = alpha_beta(cfg)
    for row in probe("ring_cost", platform={"name": "ethernet_10g"}, n=n, sizes=sizes):
        want = ring_allreduce_alpha_beta(row["bytes"], n, a, b)
        assert abs(row["seconds"] / want - 1) <= COST_TOL, (n, row, want)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "recursive_doubling"])
def test_collectives_values(algorithm):
    n = 5  # not a power of two: recursive doubling's extra rank, unequal ring chunks
    got = probe("collectives", n=n, algorithm=algorithm)
    x = [[float(i * (r + 1) + r) for i in range(7)] for r in range(n)]
    total = [float(sum(col)) for col in zip(*x)]
    for r, g in enumerate(got):
        assert g["all_reduce_sum"] == total
        assert g["all_reduce_async"] == total
        assert g["all_reduce_max"] == x[n - 1]
        assert g["all_reduce_min"] == x[0]
        assert g["broadcast"] == x[n - 1]
        assert g["reduce"] == (total if r == 1 else None)
        assert g["all_gather"] == x
        assert g["gather"] == (x if r == 0 else None)
        assert g["scatter"] == [float(10 * r + 2)] * 7
        assert g["reduce_scatter"] == [float(n * r + n * (n - 1) // 2)] * 3
        assert g["objects"] == [{"rank": i} for i in range(n)]
        assert g.get("subgroup") == ([2.0] if r in (0, 2) else None)


def test_incast_shares_the_receivers_link():
    """Two senders into one receiver: each transfer takes twice as long as alone, where
    the per-message alpha-beta model charges both the same as one."""
    out = probe("contention", platform={"name": "ethernet_10g"}, n=3, pairs=[[0, 2], [1, 2]], size=1e8)
    assert 1.9 <= out["together"] / out["lone"] <= 2.1, out


def test_rack_uplink_is_shared():
    """Two 10 Gbit/s flows across a 10 Gbit/s rack uplink get 5 Gbit/s each (2x)."""
    plat = {"name": "shared_hpc", "background_load": 0.0}
    out = probe("contention", platform=plat, n=12, pairs=[[0, 8], [1, 9]], size=1e8)
    assert 1.9 <= out["together"] / out["lone"] <= 2.1, out
    # the other jobs' traffic slows the same lone transfer, deterministically
    busy = {"name": "shared_hpc", "background_load": 0.5}
    a = probe("contention", platform=busy, n=12, pairs=[[0, 8]], size=1e8)
    b = probe("contention", platform=busy, n=12, pairs=[[0, 8]], size=1e8)
    assert a == b
    assert a["lone"] > 1.2 * out["lone"], (a, out)


def test_point_to_point_is_gloos_rendezvous():
    """gloo's isend/irecv (impls/backends/sim.py): the data leaves once both sides have posted,
    and a receive from any source takes the first sender announced, one at a time, at the
    link's full rate (an eager transport had both messages there when the receiver asked)."""
    size = 1e8
    a, b = alpha_beta(platform_config({"name": "ethernet_10g", "msg_efficiency": 1.0}))  # the probe's: line rate
    lone = a + size * 1.05 / b  # one direction only: no acknowledgments of a reverse flow
    receiver, one, two = probe("rendezvous", size=size)
    # the late sender (posts at t=1) is charged from its post, not from the receiver's
    assert receiver["first_received"] == pytest.approx(1.0 + lone, rel=0.01)
    assert one["first_send_done"] == pytest.approx(1.0 + lone, rel=0.01)
    # sends posted at t=2 (rank 2) and t=3 (rank 1) wait for the receives posted at t=5: rank 2's
    # first, alone on the link (as long as the lone first message), then rank 1's
    alone = receiver["first_received"] - 1.0
    assert (receiver["any1_value"], receiver["any2_value"]) == (3.0, 2.0)
    assert receiver["any1_wait"] == pytest.approx(alone, rel=1e-6)
    assert receiver["any2_wait"] == pytest.approx(alone, rel=1e-6)
    assert two["send_done"] == pytest.approx(5.0 + alone, rel=1e-6)
    assert one["send_done"] == pytest.approx(5.0 + 2 * alone, rel=1e-6)


def test_deadlock_names_the_blocked_rank():
    out = probe("deadlock")
    assert out["error"] == "SimulationDeadlock"
    assert "rank(s) [0]" in out["message"]


def test_bad_platform_and_profile_input():
    from conftest import make_config
    from impls.config.runconfig import resolve
    from impls.sim.engine import check_sim_config

    with pytest.raises(ConfigError, match=r"platform\.name.*allowed values: ethernet_10g"):
        resolve(make_config("allreduce_sgd", 4, backend="simgrid", platform="ethernet_1g"))
    with pytest.raises(ConfigError, match=r"profile\.step_ms.*needs step_ms"):
        resolve(make_config("allreduce_sgd", 4, backend="simgrid", profile={"name": "fixed"}))
    with pytest.raises(ConfigError, match=r"profile\.name.*allowed values: measured"):
        resolve(make_config("allreduce_sgd", 4, backend="simgrid", profile="resnet152"))
    with pytest.raises(ConfigError, match=r"platform\.max_hosts.*has 8 hosts; this run needs 9"):
        check_sim_config(make_config("ps_sync", 8, backend="simgrid", platform={"name": "ethernet_10g",
                                                                                "max_hosts": 8}))
    with pytest.raises(ConfigError, match=r"platform\.rack_size.*only platform 'shared_hpc'"):
        resolve(make_config("allreduce_sgd", 4, backend="simgrid", platform={"name": "fat_tree", "rack_size": 4}))
    with pytest.raises(ConfigError, match=r"^platform: only simulated runs"):
        resolve(make_config("allreduce_sgd", 4, platform="ethernet_10g"))


def test_profile_jitter_is_seeded_per_rank_and_has_mean_one():
    """jitter: lognormal step factors of mean 1 and the given coefficient of variation, the same
    sequence for the same (seed, rank), another for another seed or rank; 0 gives the exact time."""
    from impls.sim.profiles import Profile, profile_config

    exact = Profile(profile_config({"name": "fixed", "step_ms": 100.0}))
    assert [exact.step_time(1, 0)(None) for _ in range(3)] == [0.1] * 3
    p = Profile(profile_config({"name": "fixed", "step_ms": 100.0, "jitter": 0.05}))

    def draw(seed: int, rank: int, k: int = 4000) -> np.ndarray:
        step = p.step_time(seed, rank)
        return np.array([step(None) for _ in range(k)])
    a, b = draw(1, 0), draw(1, 0)
    assert np.array_equal(a, b) and not np.array_equal(a, draw(2, 0)) and not np.array_equal(a, draw(1, 1))
    assert a.mean() == pytest.approx(0.1, rel=0.005)  # 4000 draws: se of the mean 0.08 %
    assert a.std() / a.mean() == pytest.approx(0.05, rel=0.05)


#: a platform preset written as a contributor would, one file (the recipe of
#: impls/sim/platforms/__init__.py): a 1 Gbit/s star, 50 us per message
NEW_PLATFORM = '''"""``gige_test``: a 1 Gbit/s Ethernet cluster (a test's)."""

from impls.sim.platforms import register_platform, star_network

register_platform("gige_test", star_network, numbers={"nic_gbps": 1.0, "latency_us": 50.0, "max_hosts": 8},
                  sources={"nic_gbps": "the test's spec sheet", "latency_us": None})  # a typical TCP figure
'''
#: simulate one run with the package's path extended by argv[1] (where the new file lies)
RUN_ON_NEW_PLATFORM = '''import json, sys
import impls.sim.platforms as platforms
platforms.__path__.append(sys.argv[1])
from impls.sim.__main__ import run_one
run_one(sys.argv[2], sys.argv[3], None, None)
'''


def test_a_platform_is_one_new_file(tmp_path):
    """Adding a platform is one new file in the platforms package: no other edit, and a run on it
    costs what its numbers say.  AR-SGD (one all-reduce after backward) on 2 nodes, 10 ms of
    compute, a 1 MB model: beta = 0.97 x 1 Gbit/s / 8 / 1.05 = 115.47619e6 bytes/s, the ring
    2 x (50 us + 1e6 / (2 beta)) = 8.760124 ms, a step 18.760124 ms."""
    from conftest import make_config

    pkg = tmp_path / "more_platforms"
    pkg.mkdir()
    (pkg / "gige_test.py").write_text(NEW_PLATFORM)
    cfg = make_config({"name": "allreduce_sgd", "overlap_backward": False}, 2, backend="simgrid",
                      platform={"name": "gige_test"}, profile={"name": "fixed", "step_ms": 10.0, "model_mb": 1.0},
                      workload={"epochs": 1, "max_steps_per_epoch": 3})
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    p = subprocess.run([sys.executable, "-c", RUN_ON_NEW_PLATFORM, str(pkg), str(tmp_path / "cfg.json"),
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not (tmp_path / "out" / "error.json").exists(), (tmp_path / "out" / "error.json").read_text()
    recs = [json.loads(x) for x in (tmp_path / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    steps = [r for r in recs if r["kind"] == "step"][1:]
    assert steps and steps[-1]["time/step_s"] == pytest.approx(0.018760124, rel=2e-3)
    # and it is listed where a config's platform.name is checked (the registry, not a frozen list)
    p = subprocess.run([sys.executable, "-c", "import sys; import impls.sim.platforms as P; P.__path__.append("
                        "sys.argv[1]); print(','.join(P.PRESETS), P.unsourced(P.platform_config('gige_test')))",
                        str(pkg)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["ethernet_10g,fat_tree,gige_test,infiniband_100g,shared_hpc,star", "[]"]


def test_a_platform_without_sources_is_refused_when_its_file_is_imported(tmp_path):
    """A number without a source entry is refused at registration (the file's import), naming the
    platform and the number, not later when a claim is judged on it; an explicit None (unsourced,
    with why) is accepted.  Nothing is registered by the refused file."""
    import importlib.util

    from impls.sim.platforms import PLATFORMS, register_platform, star_network

    bad = tmp_path / "nosource_test.py"
    bad.write_text(NEW_PLATFORM.replace("gige_test", "nosource_test").replace(
        ', "latency_us": None})  # a typical TCP figure', "})"))
    spec = importlib.util.spec_from_file_location("impls.sim.platforms.nosource_test", bad)
    with pytest.raises(ValueError, match=r"platform 'nosource_test' has no source for latency_us: give each "
                                         r"number's published source in sources=, or None"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert "nosource_test" not in PLATFORMS
    with pytest.raises(ValueError, match=r"sources for numbers it does not have: rack_size"):
        register_platform("extra_test", star_network, numbers={"nic_gbps": 1.0, "latency_us": 1.0, "max_hosts": 2},
                          sources={"nic_gbps": None, "latency_us": None, "rack_size": None})
    with pytest.raises(ValueError, match=r"unknown numbers \['nic_mbps'\]"):
        register_platform("typo_test", star_network, numbers={"nic_mbps": 1.0, "max_hosts": 2},
                          sources={"nic_mbps": None})
    assert "extra_test" not in PLATFORMS and "typo_test" not in PLATFORMS


def test_every_shipped_platform_is_a_file_with_its_sources():
    """One file per preset in impls/sim/platforms/, each registering the preset named after it,
    every number with a source entry (the registry refuses one without)."""
    from impls.sim.platforms import PLATFORMS, SOURCES

    files = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "impls" / "sim" / "platforms").glob("*.py")
                   if not p.stem.startswith("_"))
    assert files == PLATFORMS.names() == ["ethernet_10g", "fat_tree", "infiniband_100g", "shared_hpc", "star"]
    assert SOURCES["ethernet_10g"]["nic_gbps"].startswith("SGP (Assran+ 2019)")


#: count the platform's and the profile's parses (one ``validate`` per ``from_dict``) in one
#: simulated run of argv[2] ranks, written to argv[1]
COUNT_PARSES = '''import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from conftest import make_config
import impls.sim.platforms as P, impls.sim.profiles as R
count = {"platform": 0, "profile": 0}
for cls, k in ((P.PlatformConfig, "platform"), (R.ProfileConfig, "profile")):
    def counted(self, key, orig=cls.validate, k=k):
        count[k] += 1
        return orig(self, key)
    cls.validate = counted
d = Path(sys.argv[1])
cfg = make_config("allreduce_sgd", int(sys.argv[2]), backend="simgrid", platform="ethernet_10g",
                  profile={"name": "fixed", "step_ms": 10.0, "model_mb": 1.0},
                  workload={"epochs": 1, "max_steps_per_epoch": 2})
(d / "cfg.json").write_text(json.dumps(cfg))
from impls.sim.__main__ import run_one
run_one(str(d / "cfg.json"), str(d / "out"), None, None)
print(json.dumps(count))
'''


def test_a_simulated_run_parses_its_platform_and_profile_once(tmp_path):
    """Resolved once, passed along: the engine resolves the run config, and every rank gets a copy
    of that (before: 2 + n parses of each in an n-rank run's process, one per rank's resolve)."""
    p = subprocess.run([sys.executable, "-c", COUNT_PARSES, str(tmp_path), "4", str(Path(__file__).parent)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert not (tmp_path / "out" / "error.json").exists()
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"platform": 1, "profile": 1}


def test_the_workflow_check_parses_a_simulated_runs_platform_once(monkeypatch):
    """The config check resolves each run once and hands that to the simulated run's host check
    (before: 3 parses per simulated run: resolve, then check_sim_config's resolve and its own)."""
    from conftest import make_config
    from impls.config.runconfig import resolve
    from impls.sim.engine import check_sim_config
    from impls.sim.platforms import PlatformConfig

    calls = []
    orig = PlatformConfig.validate
    monkeypatch.setattr(PlatformConfig, "validate", lambda self, key: (calls.append(key), orig(self, key))[1])
    raw = make_config("ps_sync", 4, backend="simgrid", platform={"name": "ethernet_10g"}, profile="measured")
    res = resolve(raw)
    pcfg, prof, hosts = check_sim_config(raw, res)
    assert len(calls) == 1 and pcfg is res.run.parsed["platform"] and prof is res.run.parsed["profile"]
    assert (pcfg.nic_gbps, hosts) == (10.0, 5)  # 4 workers and the server


def test_a_ranks_collectives_queue_on_its_stream():
    """All-reduces a rank issues at once run ``platform.collective_streams`` at a time, in the order
    issued (NCCL's one stream per communicator: 1, the default; gloo's 2 worker threads: 2), and a
    synchronous one waits behind them.  4 ranks, 3 asynchronous all-reduces of 8 MB then a synchronous
    one, 10 GbE at line rate: a ring is ``T = 2 (n - 1) (alpha + S / (n beta))`` = 10.692 ms (within
    0.1 % here; 5 % in general, :func:`test_ring_allreduce_costs_alpha_beta`).  One stream: they
    end at T, 2T, 3T, 4T (measured 10.69, 21.38, 32.08, 42.77 ms); two: the first two share the links and end together near 2T
    (21.08 ms: one ring's latency hidden behind the other's), the third alone T later, the
    synchronous one (issued once they are waited for) T after that; the values are the same."""
    n, size = 4, 8e6
    # ethernet_10g at line rate, written out: alpha 50 us, beta = 0.97 x 10 Gbit/s / 8 / 1.05
    ring = 2 * (n - 1) * (50e-6 + size / (n * 0.97 * 10e9 / 8 / 1.05))
    assert ring == pytest.approx(0.01069175, rel=1e-6)
    one = probe("streams", n=n, k=3, size=size, streams=1)
    assert one["ends"] == pytest.approx([ring, 2 * ring, 3 * ring, 4 * ring], rel=1e-3)
    # one after another: each ring the same time, to the last digit but the float sums
    gaps = [y - x for x, y in zip([0.0] + one["ends"], one["ends"])]
    assert max(gaps) - min(gaps) < 1e-9 * ring
    two = probe("streams", n=n, k=3, size=size, streams=2)
    assert two["ends"][0] == pytest.approx(two["ends"][1], rel=1e-3) and two["ends"][1] > 1.5 * ring
    assert two["ends"][3] == pytest.approx(one["ends"][3], rel=0.02)  # the same bytes over the same links
    assert two["ends"][3] > two["ends"][2] > 1.01 * two["ends"][1]
    assert one["sums"] == two["sums"] == [float(n)] * 4  # ones, summed over the ranks
