"""Bad input stops before any job runs, with the key and the allowed values."""

import copy
from pathlib import Path

import pytest
import yaml

from distrepro_wf.pipeline.config import expand, run_config, validate
from impls.errors import ConfigError
from impls.config.runconfig import resolve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cfg():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_default_config_is_valid(cfg):
    runs = validate(cfg)
    assert len(runs) == len(set(runs)) and runs
    r = next(r for r in runs if r.experiment == "adpsgd" and r.nodes == 4 and r.straggler == "slow1x4")
    assert r.path == f"adpsgd/{r.method}/n4/slow1x4/seed{r.seed}"


@pytest.mark.parametrize("mutate,key,allowed", [
    (lambda c: c["experiments"]["baseline"]["methods"].update({"sgdd": {}}),
     "experiments.baseline.methods.sgdd.algorithm.name", "allreduce_sgd"),
    (lambda c: c["experiments"]["baseline"].__setitem__("nodes", [0, 2]),
     "experiments.baseline.nodes[0]", "minimum of 1"),
    (lambda c: c["stragglers"].__setitem__("slow1x4", {"kind": "slow"}),
     "stragglers.slow1x4.kind", "none, fixed, random"),
    (lambda c: c["stragglers"].__setitem__("slow1x4", {"kind": "fixed", "factor": 4}),
     "stragglers.slow1x4.ranks", "non-empty list"),
    (lambda c: c["experiments"]["baseline"].__setitem__("stragglers", ["none", "slow9"]),
     "experiments.baseline.stragglers", "known: none, slow1x10, slow1x2, slow1x4"),
    (lambda c: c["experiments"]["baseline"].__setitem__("workload", "imagenet"),
     "experiments.baseline.workload", "known: digits_cnn, digits_mlp"),
    (lambda c: c["experiments"]["baseline"].__setitem__("allreduce_algorithm", "butterfly"),
     "experiments.baseline.allreduce_algorithm", "ring, tree, recursive_doubling"),
    (lambda c: c["experiments"]["baseline"].__setitem__("nodez", [1]),
     "experiments.baseline.nodez", "allowed keys:"),
    (lambda c: c["workloads"]["digits_mlp"]["dataset"].update(name="cifar10", root="/no/such/dir"),
     "workloads.digits_mlp.dataset.root", "does not exist"),
    (lambda c: c["experiments"]["baseline"]["methods"]["allreduce_sgd"].__setitem__(
        "algorithm", {"bucket_size": 3}), "experiments.baseline.methods.allreduce_sgd.algorithm.bucket_size",
     "allowed keys: broadcast_buffers, bucket_mb"),
    (lambda c: c["workloads"]["digits_mlp"]["optimizer"].__setitem__("lr", "fast"),
     "workloads.digits_mlp.optimizer.lr", "expected a number"),
    (lambda c: c["workloads"]["digits_mlp"].__setitem__("evals_per_epoch", 0),
     "workloads.digits_mlp.evals_per_epoch", "minimum of 1"),
    (lambda c: c["launcher"].__setitem__("kind", "mpi"), "launcher.kind", "local, slurm"),
    # checked by constructing the algorithm at every configured node count (here: 2 ranks)
    (lambda c: c["experiments"]["baseline"]["methods"].update(
        {"sgp_2peer": {"algorithm": {"name": "sgp", "topology": {"name": "exponential", "peers": 2}}}}),
     "experiments.baseline.methods.sgp_2peer.algorithm.topology.peers", "must be between 1 and 1 for 2 ranks"),
    # the simulated platform: its keys set on the experiment or the method
    (lambda c: c["experiments"]["sgp_sim"].__setitem__("platform", "ethernet_1g"),
     "experiments.sgp_sim.platform.name", "allowed values: ethernet_10g, fat_tree, infiniband_100g, shared_hpc, star"),
    (lambda c: c["experiments"]["sgp_sim"]["methods"]["osgp"].__setitem__("profile", {"name": "fixed"}),
     "experiments.sgp_sim.methods.osgp.profile.step_ms", "needs step_ms"),
    (lambda c: c["experiments"]["sgp_sim"].__setitem__("platform", {"name": "ethernet_10g", "max_hosts": 16}),
     "experiments.sgp_sim.platform.max_hosts", "has 16 hosts; this run needs 32"),
    (lambda c: c["experiments"]["baseline"].__setitem__("platform", "ethernet_10g"),
     "experiments.baseline.platform", "only simulated runs (backend: simgrid)"),
    # real ranks take a profile only to charge their compute (fixed), never a paper's or a model size
    (lambda c: c["experiments"]["baseline"].__setitem__("profile", "resnet50_v100x8"),
     "experiments.baseline.profile", "take only a profile {name: fixed, step_ms: ..., jitter: ...}"),
    (lambda c: c["experiments"]["baseline"]["methods"]["allreduce_sgd"].__setitem__(
        "profile", {"name": "fixed", "step_ms": 50, "model_mb": 100}),
     "experiments.baseline.methods.allreduce_sgd.profile", "no model_mb"),
    (lambda c: c["experiments"]["sgp_sim"].__setitem__("backend", "mpi"),
     "experiments.sgp_sim.backend", "torch, simgrid"),
])
def test_invalid_config_names_key_and_allowed_values(cfg, mutate, key, allowed):
    bad = copy.deepcopy(cfg)
    mutate(bad)
    with pytest.raises(ConfigError) as e:
        validate(bad)
    assert e.value.key == key, str(e.value)
    assert allowed in str(e.value)


def test_a_real_rank_method_with_a_fixed_profile_is_charged(cfg):
    """adpsgd's allreduce_sgd_charged (claim ar_slowed_by_straggler_real): real ranks whose compute a
    fixed profile charges; its run config carries the profile, the backend's clock charges it."""
    run = next(r for r in expand(cfg) if r.method == "allreduce_sgd_charged")
    raw = run_config(cfg, run)
    assert raw["profile"] == {"name": "fixed", "step_ms": 50} and "platform" not in raw
    assert resolve(raw).run.parsed["profile"].step_ms == 50  # what the trainer's ChargedClock charges


def test_method_overrides_and_run_config(cfg):
    runs = expand(cfg)
    serial = [r for r in runs if r.method == "serial_sgd"]
    assert {r.nodes for r in serial} == {1}
    rc = run_config(cfg, serial[0])
    assert rc["algorithm"] == {"name": "serial_sgd"} and rc["workload"]["batch_size"] == 32


NETWORK_REMOVED = ("network emulation on real ranks was removed: real ranks measure this machine's network; "
                   "use `backend: simgrid` with a `platform:` to study a network (see docs/simulated-platform.md)")


@pytest.mark.parametrize("network", ["none", "resnet50_10gbe", {"kind": "absolute", "bandwidth_gbps": 10}])
def test_an_experiment_with_a_network_is_refused(cfg, network):
    bad = copy.deepcopy(cfg)
    bad["experiments"]["sgp"]["network"] = network
    with pytest.raises(ConfigError) as e:
        validate(bad)
    assert e.value.key == "experiments.sgp.network"
    assert str(e.value) == f"experiments.sgp.network: {NETWORK_REMOVED}"


def test_a_run_config_with_a_network_is_refused(cfg):
    raw = run_config(cfg, expand(cfg)[0])
    assert "network" not in raw and raw["allreduce_algorithm"] == "ring"
    resolve(raw)
    with pytest.raises(ConfigError) as e:
        resolve({**raw, "network": "none"})
    assert e.value.key == "network" and str(e.value) == f"network: {NETWORK_REMOVED}"


def test_allreduce_algorithm_reaches_the_run_config(cfg):
    cfg["experiments"]["baseline"]["allreduce_algorithm"] = "tree"
    runs = validate(cfg)
    got = {r.experiment: run_config(cfg, r)["allreduce_algorithm"] for r in runs}
    assert got["baseline"] == "tree" and got["sgp"] == "ring"
    assert resolve(run_config(cfg, runs[0])).run.allreduce_algorithm == "tree"


def test_simulated_experiment_run_config(cfg):
    """backend/platform/profile reach the run config (a method's override wins); real-rank
    runs keep the launcher's process-group backend; simulated runs are not warned about
    oversubscription (one process each)."""
    from distrepro_wf.pipeline.config import oversubscription_warnings

    c = copy.deepcopy(cfg)
    c["experiments"]["sgp_sim"]["methods"]["osgp"]["profile"] = {"name": "fixed", "step_ms": 5}
    runs = validate(c)
    sim = next(r for r in runs if r.experiment == "sgp_sim" and r.method == "osgp")
    raw = run_config(c, sim)
    assert (raw["backend"], raw["platform"], raw["profile"]) == ("simgrid", "ethernet_10g",
                                                                 {"name": "fixed", "step_ms": 5})
    raw = run_config(c, next(r for r in runs if r.experiment == "sgp_sim" and r.method == "sgp_1peer"))
    assert raw["profile"] == {"name": "resnet50_v100x8", "jitter": 0.03}
    real = run_config(c, next(r for r in runs if r.experiment == "baseline"))
    assert real["backend"] == "auto" and "platform" not in real
    assert not any("sgp_sim" in w or "adpsgd_sim" in w for w in oversubscription_warnings(runs, 2, config=c))
    assert any("sgp_sim" in w for w in oversubscription_warnings(runs, 2))  # without config: by node count
