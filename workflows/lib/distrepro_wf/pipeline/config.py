"""Validate the pipeline config and expand it into runs.

``validate(config)`` raises :class:`impls.errors.ConfigError` with the key and the
allowed values for the first problem; it checks the JSON schema, then every name
that the schema cannot know (the figures an experiment draws, workloads, straggler
settings, registered algorithms,
their hyperparameters, dataset directories), by resolving each run's config exactly
as the runtime will, and a ``workload.target`` outside its metric's bounds in the metric
catalogue (:mod:`distrepro_wf.pipeline.catalogue`: ``acc/val`` 1.5 can never be reached).

Before any algorithm is built, each launch on real ranks must be one its launcher can
start (:func:`check_launch`): ``launcher.kind: local`` starts every rank on this machine,
at most ``launcher.max_ranks_per_cpu`` (default :data:`LOCAL_RANKS_PER_CPU`) per CPU, and
``backend: nccl`` only with a GPU per rank here; ``launcher.kind: slurm`` at most
``launcher.max_ranks`` (default :data:`SLURM_MAX_RANKS`; whether the partition has the
nodes is Slurm's to refuse).  Simulated runs are bounded by their platform's
``max_hosts`` (at most :data:`impls.sim.platforms.MAX_SIM_HOSTS`).  Validation builds
nothing of size n x n: an algorithm's set-up at n ranks costs O(n) here (a gossip graph's
spectral gap, an O(n^2)-memory metric, is computed when a run first reports it).
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import yaml
from jsonschema import Draft202012Validator

from impls.backends import DEFAULT as DEFAULT_BACKEND
from impls.backends import backend_of
from impls.backends import is_simulated as backend_is_simulated
from impls.errors import ConfigError

from .catalogue import unreachable_target
from .yamlio import load_yaml

WORKFLOW_DIR = Path(__file__).resolve().parents[3]
SCHEMA_PATH = WORKFLOW_DIR / "schemas" / "config.schema.yaml"
RUN_PATTERN = "{experiment}/{method}/n{nodes}/{straggler}/seed{seed}"
#: launcher.kind local: processes a launch may start per CPU of this machine (launcher.max_ranks_per_cpu).
#: Generous: 8 per CPU already only measures the operating system's scheduling (a warning
#: from 2 per CPU on, :func:`oversubscription_warnings`), but the runs are still correct
LOCAL_RANKS_PER_CPU = 16
#: launcher.kind slurm: processes of one launch (launcher.max_ranks; the schema allows up to 65536)
SLURM_MAX_RANKS = 4096


class Run(NamedTuple):
    experiment: str
    method: str
    nodes: int
    straggler: str
    seed: int

    @property
    def path(self) -> str:
        return RUN_PATTERN.format(**self._asdict())


def check_config_files(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Read each config file strictly (:mod:`distrepro_wf.pipeline.yamlio`): a YAML syntax error
    or a key defined twice is a :class:`ConfigError` naming the file, line and key."""
    docs = []
    for p in paths:
        doc = load_yaml(p)
        if not isinstance(doc, dict):
            raise ConfigError(str(p), f"expected a mapping of experiments, workloads, ...; got {type(doc).__name__}")
        docs.append(doc)
    return docs


def load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


@functools.lru_cache(maxsize=1)
def _report_default() -> dict[str, Any]:
    return load_schema()["properties"]["report"]["default"]


def report_settings(config: dict[str, Any] | None) -> dict[str, Any]:
    """The config's ``report`` section over the schema's default (its ``colours`` merged key
    by key, so a config may colour one new method and keep the house colours)."""
    default = _report_default()
    given = dict((config or {}).get("report") or {})
    return {**default, **given, "colours": {**default["colours"], **(given.get("colours") or {})}}


def _schema_at(schema: dict[str, Any], path: Iterable[Any]) -> dict[str, Any]:
    """Sub-schema describing the instance at ``path`` (enough for our schema's shapes)."""
    node = schema
    for p in path:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].split("/")[-1]]
        props = node.get("properties", {})
        if isinstance(p, str) and p in props:
            node = props[p]
        elif isinstance(p, int) and "items" in node:
            node = node["items"]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].split("/")[-1]]
    return node


def _dotted(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<config>"


def check_removed_keys(config: dict[str, Any]) -> None:
    """Refuse keys that were removed, with why and what to use instead (before the schema,
    which would only call them unknown)."""
    from impls.config.runconfig import NETWORK_REMOVED

    experiments = config.get("experiments")
    for e, exp in (experiments.items() if isinstance(experiments, dict) else ()):
        if isinstance(exp, dict) and "network" in exp:
            raise ConfigError(f"experiments.{e}.network", NETWORK_REMOVED)


def check_schema(config: dict[str, Any]) -> None:
    check_removed_keys(config)
    schema = load_schema()
    errors = sorted(Draft202012Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return
    e = errors[0]
    path = list(e.absolute_path)
    if e.validator == "additionalProperties":
        allowed = sorted(_schema_at(schema, path).get("properties", {}))
        extra = sorted(set(e.instance) - set(allowed))
        raise ConfigError(_dotted(path + extra[:1]), f"unknown key; allowed keys: {', '.join(allowed)}")
    if e.validator == "enum":
        raise ConfigError(_dotted(path), f"{e.instance!r} is not allowed; allowed values: "
                                         f"{', '.join(map(str, e.validator_value))}")
    if e.validator == "required":
        raise ConfigError(_dotted(path), e.message)
    raise ConfigError(_dotted(path), e.message)


def method_algorithm(method: str, mspec: dict[str, Any]) -> dict[str, Any]:
    algo = dict(mspec.get("algorithm") or {})
    algo.setdefault("name", method)
    return algo


def expand(config: dict[str, Any], experiments: Iterable[str] | None = None) -> list[Run]:
    runs = []
    for ename, exp in config["experiments"].items():
        if experiments is not None and ename not in experiments:
            continue
        for mname, m in exp["methods"].items():
            m = m or {}
            for n in m.get("nodes", exp["nodes"]):
                for s in m.get("stragglers", exp["stragglers"]):
                    for seed in m.get("seeds", exp["seeds"]):
                        runs.append(Run(ename, mname, int(n), s, int(seed)))
    return runs


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``workload_overrides`` applied to a workload: mappings merge key by key, except a
    section whose ``name`` changes (another optimizer, schedule, model or dataset), which
    replaces the workload's section: the old one's hyperparameters mean nothing to it."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        old = out.get(k)
        renamed = isinstance(v, dict) and isinstance(old, dict) and v.get("name", old.get("name")) != old.get("name")
        out[k] = _merge(old, v) if isinstance(v, dict) and isinstance(old, dict) and not renamed else copy.deepcopy(v)
    return out


def run_config(config: dict[str, Any], run: Run) -> dict[str, Any]:
    """The resolved JSON document the runtime receives for ``run``."""
    exp = config["experiments"][run.experiment]
    m = exp["methods"][run.method] or {}
    launcher = config.get("launcher", {})
    wname = exp["workload"]
    if wname not in config["workloads"]:
        raise ConfigError(f"experiments.{run.experiment}.workload",
                          f"unknown workload {wname!r}; known: {', '.join(sorted(config['workloads']))}")
    if run.straggler not in config["stragglers"]:
        raise ConfigError(f"experiments.{run.experiment}.stragglers",
                          f"unknown straggler setting {run.straggler!r}; known: {', '.join(sorted(config['stragglers']))}")
    return {
        "experiment": run.experiment,
        "method": run.method,
        "nodes": run.nodes,
        "seed": run.seed,
        "algorithm": method_algorithm(run.method, m),
        "workload": _merge(config["workloads"][wname], m.get("workload_overrides", {})),
        "straggler_name": run.straggler,
        "straggler": config["stragglers"][run.straggler],
        "allreduce_algorithm": exp.get("allreduce_algorithm", "ring"),
        "threads_per_rank": launcher.get("threads_per_rank", 1),
        **backend_keys(exp, m, launcher),
    }


def backend_keys(exp: dict[str, Any], m: dict[str, Any], launcher: dict[str, Any]) -> dict[str, Any]:
    """Where a run runs: real ranks (``torch``, the launcher's process-group backend) or the
    simulated platform (``simgrid``, with its platform and profile); a method's keys
    override its experiment's.  Real ranks take no platform, and a profile only to charge
    their compute as a sleep (``{name: fixed, step_ms, jitter}``: :class:`impls.backends.ChargedClock`,
    so a step's compute, and a straggler's, is the profile's whatever this machine's load; the
    backend refuses any other profile, :func:`validate` before any job)."""
    def pick(key: str, default: Any) -> Any:
        return m.get(key, exp.get(key, default))

    if backend_is_simulated(pick("backend", "torch")):
        return {"backend": pick("backend", "torch"), "platform": pick("platform", "ethernet_10g"),
                "profile": pick("profile", "measured")}
    if pick("platform", None) is not None:
        raise ConfigError("platform", "only simulated runs (backend: simgrid) have one; this one runs on real ranks")
    profile = pick("profile", None)
    return {"backend": launcher.get("backend", DEFAULT_BACKEND),
            **({"profile": profile} if profile is not None else {})}


def is_simulated(raw: dict[str, Any]) -> bool:
    return backend_is_simulated(raw.get("backend"))


def oversubscription_warnings(runs: Iterable[Run], cores: int, factor: int = 2,
                               config: dict[str, Any] | None = None) -> list[str]:
    """One line per experiment whose launches start more than ``factor`` ranks per core.

    Such runs are correct, but their time metrics measure the operating system sharing
    cores among processes rather than the method (a Slurm profile, or the simulated
    platform, is where their speed can be judged).  With ``config``, simulated runs (one
    process each, simulated time) are left out.
    """
    worst: dict[str, int] = {}
    for r in runs:
        if config is not None and is_simulated(run_config(config, r)):
            continue
        worst[r.experiment] = max(worst.get(r.experiment, 0), r.nodes)
    return [f"experiment {e!r} starts {n} ranks on {cores} core(s) ({n / cores:g} per core): its time "
            f"metrics measure oversubscription of this machine, not the method"
            for e, n in sorted(worst.items()) if n > factor * cores]


def machine_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a container's or ``taskset``'s share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def check_launch(world: int, launcher: dict[str, Any], backend: str) -> None:
    """Refuse (ConfigError) a launch of ``world`` processes on real ranks that ``launcher``
    cannot start: see the module docstring.  ``backend``: the run's ``backend`` value (the
    launcher's process-group request: whether it needs a GPU per rank is its spec's to say)."""
    kind = launcher.get("kind", "local")
    if kind == "slurm":
        cap = int(launcher.get("max_ranks", SLURM_MAX_RANKS))
        if world > cap:
            raise ConfigError("nodes", f"a launch of {world} ranks exceeds launcher.max_ranks ({cap}); allowed: "
                                       f"1..{cap} ranks per launch (raise launcher.max_ranks, at most 65536, for a "
                                       "larger cluster, or use the simulated platform: backend: simgrid)")
        return
    per_cpu = int(launcher.get("max_ranks_per_cpu", LOCAL_RANKS_PER_CPU))
    cpus = machine_cpus()
    if world > per_cpu * cpus:
        raise ConfigError("nodes", f"a launch of {world} ranks exceeds what launcher.kind: local starts on this "
                                   f"machine: launcher.max_ranks_per_cpu ({per_cpu}) x {cpus} CPU(s) = "
                                   f"{per_cpu * cpus}; allowed: 1..{per_cpu * cpus} ranks per launch (raise "
                                   "launcher.max_ranks_per_cpu, at most 256, or use launcher.kind: slurm or the "
                                   "simulated platform: backend: simgrid)")
    spec = backend_of(backend)
    if spec.needs_gpu(backend):
        gpus = spec.gpus_here(backend)
        if gpus < world:
            group = spec.process_group(backend)
            raise ConfigError("launcher.backend", f"{backend!r} cannot run here: a local launch of {world} rank(s) "
                                                  f"needs one CUDA GPU per rank, this machine has {gpus} usable "
                                                  f"by {group.upper()}; allowed values here: "
                                                  f"{', '.join(spec.cpu_values())} ({backend} runs where the "
                                                  "GPUs are: launcher.kind: slurm)")


def _error_key(config: dict[str, Any], run: Run, key: str) -> str:
    """Where in the user's YAML the runtime key ``key`` (``workload.model.hidden``, ...) was set."""
    if key.split(".")[0] in ("experiments", "workloads", "stragglers", "launcher"):
        return key  # already a key of the user's YAML
    exp = config["experiments"][run.experiment]
    method = f"experiments.{run.experiment}.methods.{run.method}"
    head, rest = key.split(".")[0].split("[")[0], key[len(key.split(".")[0].split("[")[0]):]
    if head == "workload":  # a method's workload_overrides, if the key was set there
        node = (exp["methods"][run.method] or {}).get("workload_overrides", {})
        for part in rest.strip(".").split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return f"{method}.workload_overrides{rest}"
    mspec = exp["methods"][run.method] or {}
    where = {"algorithm": f"{method}.algorithm", "workload": f"workloads.{exp['workload']}",
             "straggler": f"stragglers.{run.straggler}",
             "nodes": f"{method}.nodes" if "nodes" in mspec else f"experiments.{run.experiment}.nodes",
             "seed": f"experiments.{run.experiment}.seeds"}
    for k in ("platform", "profile", "backend"):  # set on the method, or else on the experiment
        where[k] = f"{method}.{k}" if k in (exp["methods"][run.method] or {}) else f"experiments.{run.experiment}.{k}"
    return where[head] + rest if head in where else f"{method}: {key}"


def validate(config: dict[str, Any]) -> list[Run]:
    """Check everything of the experiments before any job runs; return the expanded runs (none
    for a config without experiments).  The sections of the layers above are theirs to check:
    ``plan`` and ``probe`` by :func:`distrepro_wf.plan.checks.validate` (which calls this first),
    an experiment's ``figures`` by the report's registry,
    :func:`distrepro_wf.report.plots.experiment_figures`; the Snakefile asks both,
    ``workflows/rules/common.smk``."""
    check_schema(config)
    if "experiments" not in config:
        return []
    from impls.comm.communicator import Communicator
    from impls.protocol import Context
    from impls.config.runconfig import check_workload, resolve
    from impls.runtime.straggler import StragglerModel

    runs = expand(config)
    datasets: dict[str, Any] = {}
    checked: set[str] = set()
    for run in runs:
        try:
            raw = run_config(config, run)
            res = resolve(raw)
            if not is_simulated(raw):  # a launch its launcher can start, before anything is built at n ranks
                check_launch(len(res.algorithm_cls.roles(run.nodes, res.algorithm)), config.get("launcher", {}),
                             raw["backend"])
            if is_simulated(raw):  # the platform has the hosts (workers and servers) the run needs
                from impls.sim.engine import check_sim_config

                check_sim_config(raw, res)  # the platform and profile parsed by resolve, once
            StragglerModel(res.straggler, 0, run.nodes, run.seed)
            # the algorithm's own checks at this node count (its __init__ never communicates)
            res.algorithm_cls(res.algorithm, Context(0, run.nodes, Communicator(), res.optim, run.seed))
            wkey = json.dumps([raw["workload"], run.nodes], sort_keys=True)
            if wkey not in checked:  # data, model and batches, once per workload and node count
                check_workload(res.workload, run.nodes, run.seed, datasets)
                checked.add(wkey)
            target = raw["workload"].get("target")
            why = target and unreachable_target(target["metric"], target["value"])
            if why:  # e.g. acc/val 1.5: every run would "never reach" it (the metric catalogue's bounds)
                raise ConfigError("workload.target.value", why)
        except ConfigError as e:
            raise ConfigError(_error_key(config, run, e.key), str(e)[len(e.key) + 2:]) from None
    return runs
