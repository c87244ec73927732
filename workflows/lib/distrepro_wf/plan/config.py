"""A plan's config section, checked and expanded into simulated points.

``plan:`` (schema: ``workflows/schemas/config.schema.yaml``, section ``plan``) describes a
cluster and a model; :func:`check` refuses what the schema cannot know (a profile or a
method the registries do not have, a straggler name missing from ``stragglers:``, a platform
the simulator cannot build) with :class:`~impls.errors.ConfigError` naming the key and the
allowed values, before any job.  :func:`points` expands the section into one short simulated
run per point (:class:`Point`):

* the **ranking**: every method x node count x NIC bandwidth x straggler setting, at the
  model's compute per step;
* the **crossover map** (``plan.crossover``): every method x crossover node count x compute
  per step x NIC bandwidth, with no straggler (a point the ranking has is shared, not rerun).

Each point's run config (:func:`run_config`) is a resolved run on ``backend: simgrid``: the
verdicts' stand-in workload (the digits MLP, whose real math runs while the profile charges
the described model's compute and scales every message to its size: :mod:`impls.sim.profiles`),
the platform preset of the described topology (:mod:`impls.sim.platforms`), ``plan.steps``
steps.  So a plan's times come from the same model of time as every simulated verdict.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple

from impls.errors import ConfigError

#: topology name in ``plan.network.topology`` -> the simulator's platform preset
TOPOLOGIES = {"star": "star", "fat_tree": "fat_tree", "racks": "shared_hpc"}
#: keys only ``racks`` takes (the shared_hpc preset's), with their defaults for a plan
RACK_DEFAULTS = {"rack_size": 8, "uplink_gbps": 10.0, "background_load": 0.0}
#: the stand-in workload whose math runs (the verdicts' digits MLP: config/config.yaml digits_mlp_sim);
#: batch 2 per worker gives 64 workers 11 steps of the digits' training split
STAND_IN = {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [64]}, "batch_size": 2, "epochs": 1,
            "eval_ranks": "zero",
            "optimizer": {"lr": 0.02, "momentum": 0.9, "nesterov": True, "weight_decay": 0.0001}}
#: crossover grid defaults: compute per step as factors of the model's, and NIC rates (Gbit/s)
#: spread around the plan's (:func:`crossover_axes`)
COMPUTE_FACTORS = (0.25, 0.5, 1.0, 2.0)
CROSS_GBPS = (1.0, 10.0, 25.0, 100.0)
DEFAULT_STEPS = 4
NO_STRAGGLER = "none"


class Point(NamedTuple):
    method: str
    nodes: int
    nic_gbps: float
    compute_ms: float
    straggler: str

    @property
    def path(self) -> str:
        """The point's run directory under ``results/plan/<name>/runs/`` (path-safe numbers)."""
        g, c = (f"{x:g}".replace(".", "p") for x in (self.nic_gbps, self.compute_ms))
        return f"{self.method}/n{self.nodes}/g{g}/c{c}/{self.straggler}"


@dataclass(frozen=True)
class Model:
    """The described model: its profile spec for the simulator, samples per node step, epoch size."""

    profile: dict[str, Any]
    step_ms: float
    batch: int
    epoch_samples: int


def model(plan: dict[str, Any]) -> Model:
    """The simulator's profile of ``plan.model``: a paper profile (its compute and size, either
    overridden by ``step_ms`` / ``model_mb``), or ``fixed`` with ``model_mb`` and ``step_ms``."""
    from impls.sim.profiles import DEVICE, PAPER, profile_config

    m = plan["model"]
    name = m.get("profile", "fixed")
    if name not in PAPER and name != "fixed":
        raise ConfigError("plan.model.profile", f"{name!r} is not allowed; allowed values: {', '.join(PAPER)} "
                                                "(or none: give model_mb and step_ms)")
    if name == "fixed":
        for k in ("model_mb", "step_ms"):
            if m.get(k) is None:
                raise ConfigError(f"plan.model.{k}", "needed without a paper profile (plan.model.profile: "
                                                     f"{', '.join(PAPER)}): give model_mb and step_ms")
    spec = {"name": name, **{k: m[k] for k in ("step_ms", "model_mb", "jitter", "backward_fraction", "msg_us")
                              if k in m}}
    cfg = profile_config(spec, "plan.model")
    batch = m.get("batch") or (DEVICE[name]["per_step"] if name in DEVICE else None)
    if batch is None:
        raise ConfigError("plan.model.batch", "samples per node step: needed without a paper profile")
    return Model(spec, float(cfg.step_ms), int(batch), int(m["epoch_samples"]))


def platform(plan: dict[str, Any], nic_gbps: float) -> dict[str, Any]:
    """The platform spec of ``plan.network`` at one NIC rate."""
    net = plan["network"]
    topo = net.get("topology", "star")
    spec = {"name": TOPOLOGIES[topo], "nic_gbps": float(nic_gbps), "latency_us": float(net.get("latency_us", 50.0))}
    if "collective_streams" in net:  # the transport's (a probe's); else the platform's: NCCL's 1
        spec["collective_streams"] = int(net["collective_streams"])
    for k, default in RACK_DEFAULTS.items():
        if k in net and topo != "racks":
            raise ConfigError(f"plan.network.{k}", f"only topology 'racks' has {k!r}, not {topo!r}")
        if topo == "racks":
            spec[k] = net.get(k, default)
    return spec


def _algorithm_classes() -> dict[str, Any]:
    from impls.algorithms import load_all

    reg = load_all()
    return {n: reg.get(n) for n in reg.names()}


def default_methods() -> dict[str, dict[str, Any]]:
    """Every registered algorithm under its own name, or its named ``variants`` (the protocol's
    ``Algorithm.variants``): ``{method: {"algorithm": {name, ...}}}``.  Which of them apply at the
    plan's node counts is :func:`applicable`'s to say."""
    out: dict[str, dict[str, Any]] = {}
    for name, cls in _algorithm_classes().items():
        variants = getattr(cls, "variants", None) or {name: {}}
        for vname, hyper in variants.items():
            out[vname] = {"algorithm": {"name": name, **copy.deepcopy(dict(hyper))}}
    return out


def methods(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``plan.methods`` as ``{method: {"algorithm": {name, ...}}}`` (a method's algorithm name
    defaults to its key, as in experiments); none given: :func:`default_methods`."""
    given = plan.get("methods")
    if not given:
        return default_methods()
    out = {}
    for m, spec in given.items():
        algo = dict((spec or {}).get("algorithm") or {})
        algo.setdefault("name", m)
        out[m] = {"algorithm": algo}
    return out


def run_config(config: dict[str, Any], p: Point, seed: int = 1) -> dict[str, Any]:
    """The resolved simulated run of point ``p`` (module docstring)."""
    plan = config["plan"]
    mdl = model(plan)
    wl = copy.deepcopy(STAND_IN)
    wl["max_steps_per_epoch"] = int(plan.get("steps", DEFAULT_STEPS))
    return {"experiment": f"plan_{plan['name']}", "method": p.method, "nodes": p.nodes, "seed": seed,
            "algorithm": copy.deepcopy(methods(plan)[p.method]["algorithm"]), "workload": wl,
            "straggler_name": p.straggler,
            "straggler": copy.deepcopy(config.get("stragglers", {}).get(p.straggler, {"kind": "none"})),
            "allreduce_algorithm": "ring", "threads_per_rank": 1, "backend": "simgrid",
            "platform": platform(plan, p.nic_gbps), "profile": {**mdl.profile, "step_ms": p.compute_ms}}


def crossover_axes(plan: dict[str, Any]) -> tuple[list[int], list[float], list[float]]:
    """(node counts, compute per step in ms, NIC Gbit/s) of the crossover map; ``plan.crossover``
    may give each (``nodes``, ``compute_ms``, ``nic_gbps``); ``nodes: []`` draws none."""
    cross = plan.get("crossover") or {}
    step = model(plan).step_ms
    nodes = [int(n) for n in cross.get("nodes", plan["nodes"])]
    compute = [float(c) for c in cross.get("compute_ms", [round(step * f, 3) for f in COMPUTE_FACTORS])]
    gbps = [float(g) for g in cross.get("nic_gbps", CROSS_GBPS)]
    return nodes, sorted(set(compute)), sorted(set(gbps))


def ranking_points(plan: dict[str, Any], names: Iterable[str]) -> list[Point]:
    step = model(plan).step_ms
    return [Point(m, int(n), float(g), step, s) for m in names for n in plan["nodes"]
            for g in plan["network"]["nic_gbps"] for s in plan["stragglers"]]


def crossover_points(plan: dict[str, Any], names: Iterable[str]) -> list[Point]:
    nodes, compute, gbps = crossover_axes(plan)
    return [Point(m, n, g, c, NO_STRAGGLER) for m in names for n in nodes for c in compute for g in gbps]


def points(config: dict[str, Any]) -> list[Point]:
    """Every distinct point of the plan (ranking first, then the crossover's new ones), for the
    methods that apply (:func:`applicable`)."""
    plan = config["plan"]
    names = [m for m, why in applicable(config).items() if why is None]
    out = ranking_points(plan, names)
    seen = set(out)
    for p in crossover_points(plan, names):
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def applicable(config: dict[str, Any]) -> dict[str, str | None]:
    """``{method: None if it applies, else why not}``: a method applies if its algorithm builds
    at every node count of the plan (and of its crossover) with the plan's optimizer, as the
    runtime would build it (its own checks, e.g. ``serial_sgd``: one worker; ``d2``: plain SGD),
    and the platform has its hosts (servers included)."""
    from impls.comm.communicator import Communicator
    from impls.config.runconfig import resolve
    from impls.protocol import Context
    from impls.sim.engine import check_sim_config

    plan = config["plan"]
    nodes = sorted({int(n) for n in plan["nodes"]} | set(crossover_axes(plan)[0]))
    out: dict[str, str | None] = {}
    for m in methods(plan):
        out[m] = None
        for n in nodes:
            p = Point(m, n, float(plan["network"]["nic_gbps"][0]), model(plan).step_ms, NO_STRAGGLER)
            try:
                raw = run_config(config, p)
                res = resolve(raw)
                check_sim_config(raw)
                res.algorithm_cls(res.algorithm, Context(0, n, Communicator(), res.optim, 1))
            except ConfigError as e:
                out[m] = f"not at {n} nodes: {e}"
                break
    return out


def with_probe(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` with a probe's numbers filled in (``plan.probe``: a ``results/probe/<cluster>.yaml``
    of :mod:`distrepro_wf.plan.probe`): the model's ``step_ms``, ``model_mb`` and ``batch``, its
    ``msg_us`` (the probe's per-message overhead, charged to each message's sender) and the
    network's ``nic_gbps`` (one rate), ``latency_us`` (the measured latency less that overhead, so
    a small message costs what was measured) and ``topology``, where the plan does not give them.  A missing or foreign file is a ConfigError naming ``plan.probe``; without a probe, a
    network without ``nic_gbps`` is one naming ``plan.network.nic_gbps``."""
    out = copy.deepcopy(plan)
    if out.get("probe"):
        from .probe import load

        doc = load(out["probe"], "plan.probe")
        for k, v in doc["profile"].items():
            out["model"].setdefault(k, v)
        net = out.setdefault("network", {})
        net.setdefault("nic_gbps", [doc["platform"]["nic_gbps"]])
        # the measured fixed cost of a message, split as the simulator charges it: the per-message
        # overhead (the fit's intercept) to the sender (the profile's msg_us), the rest of the
        # latency to the wire; so a small message's simulated one-way time is the measured latency
        overhead = float(doc["platform"].get("overhead_us") or 0.0)
        if "msg_us" not in out["model"] and overhead > 0:
            out["model"]["msg_us"] = overhead
            net.setdefault("latency_us", float(f"{max(0.0, doc['platform']['latency_us'] - overhead):.6g}"))
        net.setdefault("latency_us", doc["platform"]["latency_us"])
        net.setdefault("topology", doc["platform"].get("topology", "star"))
        if "collective_streams" in doc["platform"]:  # the probed transport's (gloo 2, NCCL 1)
            net.setdefault("collective_streams", doc["platform"]["collective_streams"])
    if not (out.get("network") or {}).get("nic_gbps"):
        raise ConfigError("plan.network.nic_gbps", "needed without plan.probe: the NIC rates (Gbit/s) to rank at")
    return out


def check(config: dict[str, Any]) -> None:
    """Refuse (ConfigError naming the key) what the schema cannot check; see the module docstring.
    A method named in ``plan.methods`` that does not apply is an error; a default one is left out
    (the page says why).  A ``plan.probe``'s numbers are filled into ``config["plan"]`` here
    (:func:`with_probe`), so everything after validation reads them as if written in the plan."""
    from impls.algorithms import load_all
    from impls.runtime.straggler import StragglerModel, straggler_config
    from impls.sim.platforms import platform_config

    config["plan"] = plan = with_probe(config["plan"])
    model(plan)
    for g in plan["network"]["nic_gbps"]:
        platform_config(platform(plan, g), "plan.network")
    known = sorted(config.get("stragglers") or {})
    for s in plan["stragglers"]:
        if s not in known:
            raise ConfigError("plan.stragglers", f"unknown straggler setting {s!r}; known (stragglers:): "
                                                 f"{', '.join(known) or 'none defined'}")
        for n in plan["nodes"]:
            StragglerModel(straggler_config(config["stragglers"][s], f"stragglers.{s}"), 0, int(n), 1)
    names = load_all().names()
    for m, spec in methods(plan).items():
        if spec["algorithm"]["name"] not in names:
            raise ConfigError(f"plan.methods.{m}", f"unknown algorithm {spec['algorithm']['name']!r}; "
                                                   f"known: {', '.join(names)}")
    for m in (plan.get("epochs_to_target") or {}):
        if m not in methods(plan):
            raise ConfigError(f"plan.epochs_to_target.{m}", f"not a method of the plan; allowed: "
                                                            f"{', '.join(methods(plan))}")
    why = applicable(config)
    if plan.get("methods"):
        for m, w in why.items():
            if w is not None:
                raise ConfigError(f"plan.methods.{m}", f"does not apply: {w}")
    if not any(w is None for w in why.values()):
        raise ConfigError("plan.methods", "no method applies: " + "; ".join(f"{m}: {w}" for m, w in why.items()))


def command(config_files: Iterable[str]) -> str:
    """The command that makes the plan, its config files as a user names them (relative to the
    working directory where they are inside it)."""
    import os

    files = [os.path.relpath(f) if not os.path.relpath(f).startswith("..") else str(f) for f in config_files]
    return " ".join(["snakemake --cores 2 plan", *(f"--configfile {f}" for f in files)])
