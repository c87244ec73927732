"""Bad input: every invalid setting is refused at validation, before any job, with the key
as the user wrote it and what is allowed; nothing is written.

The table below is the config half of the fault and bad-input suite (the reliability
issue's items 1, 4, 6 and 7): invalid hyperparameters (NaN, infinity, negative values
that would train "successfully" into garbage), unknown registry names and arguments,
dataset roots, partitions and sizes that used to fail only inside a job, keys defined
twice and YAML syntax errors, and (issue 26 row 9) a ``workload.target`` its metric can
never reach.  Each case names the key the error must point at and a piece of the message.

Issue 26 (second pass) adds: more ranks than the launcher can start (row 1: local per CPU,
Slurm's cap), a gossip method at 100,000 ranks refused by count and validated without an
n x n matrix, the simulator's host cap (row 2), ``launcher.backend: nccl`` where no GPU
can run it (row 10), alias bombs and self-referential YAML in every file read (row 12),
and a bad ``--configfile`` given to plain ``snakemake`` (row 13: the workflow profile
checks it before Snakemake's own reader).
"""

import copy
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from datafiles import write_cifar10
from distrepro_wf.pipeline.config import check_config_files, validate
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "experiments": {"smoke": {"workload": "tiny", "nodes": [1, 2], "stragglers": ["none"], "seeds": [1],
                              "methods": {"allreduce_sgd": {}, "sgp": {}}}},
    "workloads": {"tiny": {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]},
                           "batch_size": 16, "epochs": 2, "max_steps_per_epoch": 8,
                           "optimizer": {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4},
                           "schedule": {"milestones": [1], "gamma": 0.1}}},
    "stragglers": {"none": {"kind": "none"}},
    "launcher": {"kind": "local", "timeout_s": 300},
}
WL = "workloads.tiny"
M = "experiments.smoke.methods"


def _set(path, value):
    """A mutation that sets the dotted ``path`` of the config to ``value``."""
    def mutate(c, _root):
        *head, last = path.split(".")
        node = c
        for k in head:
            node = node.setdefault(k, {})
        node[last] = value(_root) if callable(value) else value
    return mutate


def _both(*mutations):
    def mutate(c, root):
        for m in mutations:
            m(c, root)
    return mutate


def _cifar_root(root):
    return str(write_cifar10(root / "cifar", n_train=20, n_test=10))


CASES = [
    # 1. hyperparameters that would train into garbage (or NaN) and still be "ok"
    ("lr_nan", _set(f"{WL}.optimizer.lr", math.nan), f"{WL}.optimizer.lr", "must be a finite number"),
    ("lr_inf", _set(f"{WL}.optimizer.lr", math.inf), f"{WL}.optimizer.lr", "must be a finite number"),
    ("lr_negative", _set(f"{WL}.optimizer.lr", -0.1), f"{WL}.optimizer.lr", "must be >= 0, got -0.1"),
    ("lr_yaml11_text", _set(f"{WL}.optimizer.lr", "1e6"), f"{WL}.optimizer.lr", "write 1.0e-4"),
    ("momentum_negative", _set(f"{WL}.optimizer.momentum", -0.5), f"{WL}.optimizer.momentum", ">= 0 and < 1"),
    ("momentum_one", _set(f"{WL}.optimizer.momentum", 1.0), f"{WL}.optimizer.momentum", ">= 0 and < 1"),
    ("weight_decay_negative", _set(f"{WL}.optimizer.weight_decay", -1e-4), f"{WL}.optimizer.weight_decay",
     "must be >= 0"),
    ("gamma_negative", _set(f"{WL}.schedule.gamma", -0.1), f"{WL}.schedule.gamma", "must be > 0"),
    ("warmup_negative", _set(f"{WL}.schedule.warmup_epochs", -1), f"{WL}.schedule.warmup_epochs", ">= 0"),
    ("milestone_negative", _set(f"{WL}.schedule.milestones", [2, -1]), f"{WL}.schedule.milestones", ">= 0"),
    ("bucket_zero", _set(f"{M}.allreduce_sgd.algorithm", {"bucket_mb": 0}),
     f"{M}.allreduce_sgd.algorithm.bucket_mb", "must be > 0"),
    ("init_spread_negative", _set(f"{M}.sgp.algorithm", {"init_spread": -1.0}),
     f"{M}.sgp.algorithm.init_spread", ">= 0"),
    ("straggler_factor_below_one", _set("stragglers.none", {"kind": "fixed", "ranks": [-1], "factor": 0.5}),
     "stragglers.none.factor", "must be >= 1"),
    ("straggler_prob_zero", _set("stragglers.none", {"kind": "random", "mean_fraction": 1.0, "prob": 0.0}),
     "stragglers.none.prob", "must be > 0 and <= 1"),
    ("straggler_delay_negative", _set("stragglers.none", {"kind": "fixed", "ranks": [-1], "delay_s": -1e-6}),
     "stragglers.none.delay_s", "must be >= 0"),
    ("straggler_delay_nan", _set("stragglers.none", {"kind": "fixed", "ranks": [-1], "delay_s": math.nan}),
     "stragglers.none.delay_s", "finite"),
    # a removed key: why, and what to use instead
    ("network_removed", _set("experiments.smoke.network", "10gbe"), "experiments.smoke.network",
     "network emulation on real ranks was removed: real ranks measure this machine's network; use `backend: "
     "simgrid` with a `platform:` to study a network (see docs/simulated-platform.md)"),
    # 4. names, arguments, paths and sizes that used to fail only inside a job
    ("dataset_unknown", _set(f"{WL}.dataset", {"name": "mnist"}), f"{WL}.dataset.name",
     "unknown dataset 'mnist'; known: cifar10, cifar100, digits, imagefolder"),
    ("dataset_argument_unknown", _set(f"{WL}.dataset", {"name": "digits", "val_frac": 0.2}),
     f"{WL}.dataset.val_frac", "allowed keys: name, val_fraction, flatten, split_seed"),
    ("model_unknown", _set(f"{WL}.model", {"name": "vgg99"}), f"{WL}.model.name", "known: cnn, mlp, resnet18"),
    ("model_argument_unknown", _set(f"{WL}.model", {"name": "mlp", "width": 3}), f"{WL}.model.width",
     "allowed keys: name, hidden"),
    ("model_argument_bad_value", _set(f"{WL}.model", {"name": "mlp", "hidden": "wide"}), f"{WL}.model",
     "cannot build model 'mlp'"),
    ("cifar_without_root", _set(f"{WL}.dataset", {"name": "cifar10"}), f"{WL}.dataset.root", "missing: set it"),
    ("cifar_empty_root", _set(f"{WL}.dataset", {"name": "cifar10", "root": ""}), f"{WL}.dataset.root",
     "missing: set it"),
    ("cifar_root_without_files", _set(f"{WL}.dataset", lambda r: {"name": "cifar10", "root": str(r)}),
     f"{WL}.dataset.root", "nothing is downloaded"),
    ("cifar_batch_larger_than_data", _set(f"{WL}.dataset", lambda r: {"name": "cifar10", "root": _cifar_root(r),
                                                                      "verify_md5": False}),
     f"{WL}.batch_size", "the training set has 20 samples, fewer than one global batch (16 per worker x 2"),
    ("imagefolder_without_class_folders",
     _set(f"{WL}.dataset", lambda r: (Path(r, "in", "train").mkdir(parents=True), Path(r, "in", "val").mkdir(),
                                      {"name": "imagefolder", "root": str(Path(r, "in"))})[-1]),
     f"{WL}.dataset.root", "has no class folders"),
    ("partition_kind_unknown", _set(f"{WL}.dataset", {"name": "digits", "partition": {"kind": "dirichlet"}}),
     f"{WL}.dataset.partition.kind", "allowed values: iid, labels"),
    ("partition_key_unknown", _set(f"{WL}.dataset", {"name": "digits", "partition": {"kind": "labels",
                                                                                     "classes": 2}}),
     f"{WL}.dataset.partition.classes", "allowed keys: kind, classes_per_worker"),
    ("partition_too_few_classes", _set(f"{WL}.dataset", {"name": "digits", "partition": {"kind": "labels",
                                                                                         "classes_per_worker": 1}}),
     f"{WL}.dataset.partition.classes_per_worker", "covers fewer than the 10 classes"),
    ("batch_larger_than_dataset", _set(f"{WL}.batch_size", 1000), f"{WL}.batch_size",
     "fewer than one global batch (1000 per worker x 2 workers)"),
    ("max_steps_zero", _set(f"{WL}.max_steps_per_epoch", 0), f"{WL}.max_steps_per_epoch", "must be >= 1"),
    ("target_metric_not_the_tasks", _set(f"{WL}.target", {"metric": "opt/gap", "value": 1e-4}),
     f"{WL}.target.metric", "'opt/gap' is not a metric of task Classification; allowed: acc/val, loss/val"),
    ("target_value_nan", _set(f"{WL}.target", {"metric": "acc/val", "value": math.nan}), f"{WL}.target.value",
     "must be a finite number"),
    # issue 26 row 9: a target its metric can never reach (the catalogue's bounds: acc/val in [0, 1])
    ("target_value_unreachable", _set(f"{WL}.target", {"metric": "acc/val", "value": 1.5}), f"{WL}.target.value",
     "1.5 can never be reached: acc/val is always in [0, 1]"),
    ("target_value_unreachable_in_override", _set(f"{M}.sgp.workload_overrides", {"target": {"metric": "loss/val",
                                                                                              "value": -0.1}}),
     f"{M}.sgp.workload_overrides.target.value", "-0.1 can never be reached: loss/val is always >= 0"),
    ("loader_workers_negative", _set(f"{WL}.loader_workers", -1), f"{WL}.loader_workers", "must be >= 0"),
    # 7. an error in a method's workload_overrides points at the override, not at workloads.
    ("override_typo", _set(f"{M}.sgp.workload_overrides", {"optimizer": {"lrr": 0.1}}),
     f"{M}.sgp.workload_overrides.optimizer.lrr", "unknown key; allowed keys: lr, momentum"),
    ("override_bad_value", _set(f"{M}.sgp.workload_overrides", {"optimizer": {"lr": -1.0}}),
     f"{M}.sgp.workload_overrides.optimizer.lr", "must be >= 0"),
    # issue 26 row 1: more ranks than the launcher can start, refused before any job
    ("ranks_beyond_this_machine", _set("experiments.smoke.nodes", [100000]), "experiments.smoke.nodes",
     "a launch of 100000 ranks exceeds what launcher.kind: local starts on this machine: "
     "launcher.max_ranks_per_cpu (16) x "),
    ("method_ranks_beyond_this_machine", _set(f"{M}.allreduce_sgd.nodes", [100000]), f"{M}.allreduce_sgd.nodes",
     "allowed: 1.."),
    ("slurm_ranks_beyond_the_cap", _both(_set("launcher.kind", "slurm"), _set("experiments.smoke.nodes", [100000])),
     "experiments.smoke.nodes", "a launch of 100000 ranks exceeds launcher.max_ranks (4096); allowed: 1..4096 ranks "
                                "per launch (raise launcher.max_ranks, at most 65536"),
    ("slurm_cap_beyond_its_range", _set("launcher.max_ranks", 100000), "launcher.max_ranks",
     "100000 is greater than the maximum of 65536"),
    ("local_factor_beyond_its_range", _set("launcher.max_ranks_per_cpu", 0), "launcher.max_ranks_per_cpu",
     "0 is less than the minimum of 1"),
    # issue 26 row 2: sgp at 100000 ranks is refused by count, not by an 80 GB mixing matrix; the
    # simulated platform hosts at most 1024 ranks (fat_tree: its 256)
    ("sgp_ranks_beyond_this_machine", _both(_set(M, {"sgp": {}}), _set("experiments.smoke.nodes", [100000])),
     "experiments.smoke.nodes", "launcher.max_ranks_per_cpu (16) x "),
    ("sim_hosts_beyond_the_simulator",
     _both(_set("experiments.smoke.backend", "simgrid"), _set("experiments.smoke.nodes", [100000]),
           _set("experiments.smoke.platform", {"name": "ethernet_10g", "max_hosts": 100000})),
     "experiments.smoke.platform.max_hosts", "must be >= 1 and <= 1024, got 100000"),
    ("fat_tree_hosts_beyond_its_switches",
     _both(_set("experiments.smoke.backend", "simgrid"), _set("experiments.smoke.nodes", [300]),
           _set("experiments.smoke.platform", {"name": "fat_tree", "max_hosts": 300})),
     "experiments.smoke.platform.max_hosts", "fat_tree is built with 256 hosts (16 leaf switches of 16); "
                                             "allowed: 1..256, got 300"),
]


@pytest.mark.parametrize("mutate,key,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_setting_is_refused_naming_the_key(tmp_path, mutate, key, message):
    cfg = copy.deepcopy(TINY)
    mutate(cfg, tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert e.value.key == key, str(e.value)
    assert message in str(e.value), str(e.value)
    assert "download=True" not in str(e.value)  # the project never downloads
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # validation wrote nothing


def test_the_tiny_config_itself_is_valid():
    assert len(validate(copy.deepcopy(TINY))) == 4


# a "billion laughs" document: 9 levels of 9 aliases expand 32 written nodes into 4.4e9
ALIAS_BOMB = "benchmarks:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))

@pytest.mark.parametrize("methods", [
    {"sgp": {}},
    {"d2": {"workload_overrides": {"optimizer": {"momentum": 0.0, "nesterov": False}}}},  # its eigenvalue check
], ids=["sgp", "d2"])
def test_validation_builds_no_n_by_n_state(methods):
    """Issue 26 row 2: a gossip method at 65536 ranks (allowed under a raised Slurm cap) is
    validated in O(n): its graph's spectral gap, from a 34 GB mixing matrix there, waits for
    the run's set-up, and D^2's smallest eigenvalue of a ring is closed-form, so validation
    reaches the workload's checks."""
    cfg = copy.deepcopy(TINY)
    cfg["launcher"].update(kind="slurm", max_ranks=65536)
    cfg["experiments"]["smoke"].update(nodes=[65536], methods=methods)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert e.value.key == f"{WL}.batch_size" and "x 65536 workers" in str(e.value), str(e.value)


def test_nccl_is_refused_where_it_cannot_run():
    """Issue 26 row 10: launcher.backend: nccl on local ranks needs a CUDA GPU per rank here
    (else every launch fails not_started, on every invocation); under Slurm the ranks run on
    the cluster's GPU nodes, so the submitting machine's GPUs do not matter."""
    import torch
    import torch.distributed as dist

    gpus = torch.cuda.device_count() if dist.is_nccl_available() else 0
    cfg = copy.deepcopy(TINY)
    cfg["launcher"]["backend"] = "nccl"
    if gpus >= 2:  # TINY's largest launch: 2 ranks
        assert len(validate(cfg)) == 4
    else:
        with pytest.raises(ConfigError) as e:
            validate(cfg)
        assert e.value.key == "launcher.backend", str(e.value)
        assert (f"'nccl' cannot run here: a local launch of {1 if gpus == 0 else 2} rank(s) needs one CUDA GPU "
                f"per rank, this machine has {gpus} usable by NCCL; allowed values here: auto, gloo") in str(e.value)
    cfg["launcher"].update(kind="slurm", gpus_per_node=8)
    assert len(validate(cfg)) == 4


DUPLICATES = [
    ("experiment_twice", "experiments:\n  a: {workload: w}\n  b: {}\n  a: {workload: v}\n",
     "line 4: duplicate key 'experiments.a' (first defined on line 2)"),
    ("method_twice", "experiments:\n  a:\n    methods:\n      sgp: {}\n      sgp: {nodes: [4]}\n",
     "line 5: duplicate key 'experiments.a.methods.sgp' (first defined on line 4)"),
    ("workload_key_twice", "workloads:\n  w:\n    epochs: 2\n    epochs: 3\n",
     "line 4: duplicate key 'workloads.w.epochs' (first defined on line 3)"),
    ("yaml_syntax", "experiments:\n  a: [1, 2\n", "YAML syntax error: line 3, column 1"),
    ("yaml_tab_indent", "experiments:\n\ta: 1\n", "YAML syntax error: line 2, column 1"),
    ("not_a_mapping", "- a\n- b\n", "expected a mapping of experiments"),
    # issue 26 row 12: alias expansion is bounded before anything is built (or copied to a job)
    ("alias_bomb", ALIAS_BOMB, "line 6, column 7: YAML aliases expand this document from 32 to 4412961518 nodes"),
    ("self_referential_mapping", "experiments: &e\n  a: *e\n", "line 1, column 14: an alias refers to its own"),
    ("self_referential_list", "stragglers: &s [*s]\n", "line 1, column 13: an alias refers to its own anchor"),
]


@pytest.mark.parametrize("text,message", [c[1:] for c in DUPLICATES], ids=[c[0] for c in DUPLICATES])
def test_config_files_are_read_strictly(tmp_path, text, message):
    p = tmp_path / "my.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        check_config_files([p])
    assert e.value.key == str(p) and message in str(e.value), str(e.value)


def test_aliases_within_the_bound_still_load(tmp_path):
    from distrepro_wf.pipeline.yamlio import MAX_ALIAS_NODES, loads_yaml

    doc = loads_yaml("w: &w {lr: 0.1, milestones: [1, 2]}\nv: *w\nu: {<<: *w, gamma: 0.2}\n", "c.yaml")
    assert doc == {"w": {"lr": 0.1, "milestones": [1, 2]}, "v": {"lr": 0.1, "milestones": [1, 2]},
                   "u": {"lr": 0.1, "milestones": [1, 2], "gamma": 0.2}}
    anchor = "a: &a [" + ", ".join(["1"] * 1000) + "]\n"  # 1001 nodes, each alias adds them again
    refs = "".join(f"b{i}: *a\n" for i in range(9))
    assert MAX_ALIAS_NODES == 10_000 and len(loads_yaml(anchor + refs, "c.yaml")) == 10  # 9009 added: allowed
    with pytest.raises(ConfigError, match="from 1013 to 11023 nodes .past 10000 here.; at most 10000 may come"):
        loads_yaml(anchor + refs + "c: *a\n", "c.yaml")  # 10010 added


def test_a_binary_config_file_is_a_clear_error(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_bytes(b"experiments:\n  \xff\xfe\x00bad\n")
    with pytest.raises(ConfigError, match=r"c.yaml: not a text \(UTF-8\) file: byte 15 cannot be decoded"):
        check_config_files([p])


def test_the_shipped_configs_have_no_duplicate_keys():
    files = [ROOT / "config" / "config.yaml", *sorted((ROOT / "config" / "full").glob("*.yaml"))]
    assert len(check_config_files(files)) == len(files) >= 4


@pytest.mark.workflow
@pytest.mark.parametrize("case,message", [
    ("duplicate", "duplicate key 'experiments.smoke.methods.sgp' (first defined on line "),
    ("lr_nan", "workloads.tiny.optimizer.lr: must be a finite number, got nan"),
    # issue 26 row 13: Snakemake reads a --configfile before the Snakefile; the workflow profile
    # (profiles/default) checks it first: file, line and column, no traceback
    ("self_referential", "c.yaml: line 1, column 14: an alias refers to its own anchor"),
    ("yaml_syntax", "c.yaml: YAML syntax error: line 3, column 1: while parsing a flow sequence"),
    # issue 34, case 5: a benchmark's setting is checked with the config, not inside its job
    ("sweep_steps_negative", "benchmarks.sensitivity_sweep.steps: expected an integer in [1, 1000], got -3"),
])
def test_the_pipeline_stops_before_any_job_and_keeps_earlier_results(tmp_path, case, message):
    text = yaml.safe_dump(TINY, sort_keys=False)
    if case == "self_referential":
        text = "experiments: &e\n  a: *e\n"
    elif case == "yaml_syntax":
        text = "experiments:\n  a: [1, 2\n"
    elif case == "sweep_steps_negative":
        text += "benchmarks:\n  sensitivity_sweep: {steps: -3}\n"
    elif case == "duplicate":
        text = text.replace("    methods:\n      allreduce_sgd: {}\n      sgp: {}\n",
                            "    methods:\n      allreduce_sgd: {}\n      sgp: {}\n      sgp: {nodes: [2]}\n")
    else:
        text = text.replace("lr: 0.1", "lr: .nan")
    (tmp_path / "c.yaml").write_text(text)
    table = tmp_path / "results" / "tables" / "smoke" / "runs.csv"
    table.parent.mkdir(parents=True)
    table.write_text("earlier,results\n1,2\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                           "--cores", "1", "--configfile", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "invalid configuration: " in out and message in out, out[-2000:]
    assert "Traceback" not in out
    assert table.read_text() == "earlier,results\n1,2\n"
    assert not (tmp_path / "results" / "runs").exists() and not (tmp_path / "results" / "launches").exists()


# issue 34, cases 5 and 7: (benchmark, settings, key, words of the message)
BENCH_CASES = [
    ("sensitivity_sweep", {"steps": -3}, "steps", "expected an integer in [1, 1000], got -3"),
    ("sensitivity_sweep", {"steps": 0}, "steps", "expected an integer in [1, 1000], got 0"),
    ("sensitivity_sweep", {"steps": float("nan")}, "steps", "got nan"),
    ("sensitivity_sweep", {"steps": "three"}, "steps", "got 'three'"),
    ("sensitivity_sweep", {"steps": 2.5}, "steps", "expected an integer"),
    ("sensitivity_sweep", {"epochs": 1_000_000_000}, "epochs", "expected an integer in [1, 100], got 1000000000"),
    ("sensitivity_sweep", {"claims": "sgp_epoch_faster_than_ar"}, "claims",
     "expected a list of names ([] for all), got 'sgp_epoch_faster_than_ar'"),
    ("sensitivity_sweep", {"timeout_s": float("inf")}, "timeout_s", "expected a finite number in (0, 604800]"),
    ("sim_scale", {"nodes": [16, -64]}, "nodes", "expected a non-empty list of integers in [2, 1024]"),
    ("sim_scale", {"nodes": 16}, "nodes", "expected a non-empty list of integers"),
    ("sim_cost_model", {"sizes": [1e3, -1.0]}, "sizes", "in (0, 1e+12]"),
    ("sim_vs_netns", {"rates_mbit": [-1]}, "rates_mbit", "expected a non-empty list of finite numbers in (0, 100000], got [-1]"),
    ("sim_vs_netns", {"rates_mbit": [100, float("inf")]}, "rates_mbit", "got [100, inf]"),
    ("sim_vs_netns", {"rates_mbit": [0]}, "rates_mbit", "(0, 100000]"),
    ("sim_vs_netns", {"step_ms": -150.0}, "step_ms", "expected a finite number in (0, 600000]"),
    ("sim_vs_netns", {"nodes": [1]}, "nodes", "[2, 64]"),
]


@pytest.mark.parametrize("bench,given,key,words", BENCH_CASES,
                         ids=[f"{b}-{k}-{v!r}" for b, g, k, _ in BENCH_CASES for v in [g[k]]])
def test_a_benchmark_setting_out_of_range_is_refused_naming_key_and_range(bench, given, key, words):
    """Issue 34: the sweep's ``steps: -3``, ``0``, NaN, ``"three"`` failed inside the job (two as
    bare tracebacks), ``epochs: 1e9`` was accepted (26 CPU-hours), a claim list given as a string
    was read letter by letter, and a negative bandwidth reached ``tc``.  Each benchmark's
    ``bench_spec`` (which bench.smk calls for every benchmark when it reads the config) refuses
    them, naming the key and the allowed range."""
    from distrepro_wf.bench import netnsbench, simbench

    with pytest.raises(ConfigError) as e:
        netnsbench.bench_spec(given) if bench == "sim_vs_netns" else simbench.bench_spec(bench, given)
    assert e.value.key == f"benchmarks.{bench}.{key}", str(e.value)
    assert words in str(e.value), str(e.value)


def test_the_default_benchmark_settings_are_in_range():
    from distrepro_wf.bench import netnsbench, simbench

    for name in simbench.DEFAULTS:
        simbench.bench_spec(name, None)
    netnsbench.bench_spec(None)
    for cfg in [ROOT / "config" / "config.yaml", *sorted((ROOT / "config").glob("*.yaml"))]:
        given = (yaml.safe_load(cfg.read_text()) or {}).get("benchmarks") or {}
        for name in simbench.DEFAULTS:
            simbench.bench_spec(name, given.get(name))
        netnsbench.bench_spec(given.get("sim_vs_netns"))


@pytest.mark.parametrize("rate", [-1, 0, float("nan"), float("inf"), "100"])
def test_a_testbed_refuses_a_rate_that_is_not_a_positive_finite_number(rate):
    """A negative Mbit/s reached ``tc``, which wraps it to an unshaped link (issue 34, case 7)."""
    from distrepro_wf.bench.netns import Testbed

    with pytest.raises(ValueError, match="rate_mbit: expected a positive finite number of Mbit/s"):
        Testbed(1, 0, 2, rate)


def test_the_reproduce_precheck_names_the_file_and_line_of_a_yaml_syntax_error(tmp_path):
    from distrepro_wf.pipeline.precheck import config_files, main

    assert config_files(["--cores", "2", "--configfile", "a.yaml", "b.yaml", "-n"]) == ["a.yaml", "b.yaml"]
    assert config_files(["--configfiles=c.yaml", "--configfile", "d.yaml"]) == ["c.yaml", "d.yaml"]
    assert config_files(["--cores", "2"]) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text("experiments:\n  a: [1, 2\n")
    proc = subprocess.run([sys.executable, "-m", "distrepro_wf.pipeline.precheck", "--cores", "2", "--configfile", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith(f"invalid configuration: {bad}: YAML syntax error: line 3, column 1")
    assert main(["--cores", "2"]) == 0


def test_ranks_far_beyond_the_cores_are_warned_about():
    from distrepro_wf.pipeline.config import Run, oversubscription_warnings

    runs = [Run("a", "m", 8, "none", 1), Run("a", "m", 2, "none", 1), Run("b", "m", 4, "none", 1)]
    assert oversubscription_warnings(runs, cores=2) == [
        "experiment 'a' starts 8 ranks on 2 core(s) (4 per core): its time metrics measure oversubscription "
        "of this machine, not the method"]
    assert oversubscription_warnings(runs, cores=4) == []
