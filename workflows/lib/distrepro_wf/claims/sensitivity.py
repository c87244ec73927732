"""Sensitivity of every simulated speed verdict to the model's uncertain parameters.

A simulated speed verdict is a prediction of a model whose parameters are partly assumed
(:mod:`impls.sim.platforms`, :mod:`impls.sim.profiles`, :mod:`impls.sim.opcost`).  Each of them
gets a declared range with its reason (:data:`RANGES`); every simulated speed claim row is
re-evaluated over each range, one parameter at a time, the others at their nominal values:

1. the closed form (:mod:`distrepro_wf.claims.closedform`) gives the ratio ``r(p)`` of the two sides'
   step times at the perturbed point ``p`` and ``r0`` at the nominal point (for
   ``ratio_vs_control``: the ratio here over the ratio at the control setting);
2. the simulated result is scaled by ``r(p) / r0`` (the closed form scaled to agree with the
   simulation at the nominal point: op costs and contention the closed form lacks stay as
   simulated), its interval too, and judged again (:func:`distrepro_wf.claims.evaluate.verdict`);
   where the closed form does not model the setting (:func:`distrepro_wf.claims.closedform.unmodelled`:
   other jobs' bursts on racks), the factor at each range end is the simulator's own, from short
   runs there (:mod:`distrepro_wf.claims.simends`, rule ``sensitivity_points``), and the closed form
   only shapes the way between the nominal value and the end (:func:`scaling`);
3. where the verdict differs from the nominal one, the crossing is found by bisection:
   "flips when bandwidth efficiency passes 0.62".  A row whose verdict flips inside the ranges
   is shown at most **inconclusive** (never green, never a firm failure either), the reason says
   where it flips; a row that holds says "holds across the ranges".
4. the claim's mechanism gates that test a share of the step (``comm_share``,
   ``compute_share``, :mod:`distrepro_wf.claims.mechanisms`) go through the same ranges
   (:func:`gates`): a gate failing at the nominal point but passing inside the ranges makes the
   row inconclusive (not "not comparable"), one passing at the nominal point but failing inside
   makes it at most inconclusive, one failing throughout leaves it not comparable
   (:func:`distrepro_wf.claims.evaluate.gated`);
5. a time-to-target row without a simulated ratio (a side's runs did not all reach the target,
   :func:`distrepro_wf.claims.evaluate.censored_verdict`) has nothing to scale; where its verdict rests
   on how many runs reached the target, :func:`reach_text` says whether a timing parameter
   could move it.

Per-epoch factors that do not depend on the parameters (steps per epoch, epochs to the target)
cancel in ``r(p) / r0``; for a time-to-target claim this assumes the number of steps to the
target does not depend on timing (true of the synchronous methods; an asynchronous method's
staleness does depend on it).  The tornado figure (:func:`distrepro_wf.report.plots.tornado`) draws
each parameter's lowest and highest scaled ratio against the pass region.  Cheap: closed forms
only, milliseconds a claim, where the closed form models the setting (its agreement with the
simulator at every range end: ``tests/test_closedform_vs_sim_claims.py`` and the
``sensitivity_sweep`` benchmark, a ``studies`` target).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from impls.backends import is_simulated
from impls.sim.nominal import PARAMETERS, SCENARIO, UNCERTAINTY  # noqa: F401  (the kinds)

from . import closedform as cf

#: the uncertain parameters, one dict each (name, label, how, low, high, kind, nominal, reason, source):
#: the table of :mod:`impls.sim.nominal` (one nominal value, range, kind and source per parameter, read
#: by the simulator, the closed form's nominal point and the docs too).  ``how``: "scale" multiplies the
#: nominal value, "value" is absolute (the range is widened to include the nominal value).  ``kind``: an
#: ``uncertainty`` range has a ``source`` (what the paper's cluster could have been, by a measurement
#: someone published): a verdict that flips inside it is at most inconclusive.  A ``scenario`` axis has
#: none (no paper reports its cluster's background load, jitter, latency or staging path): it is a
#: property of *a* cluster, not an uncertainty about the paper's, and never demotes a verdict; the row
#: says whether the verdict holds or flips under it (``scenarios`` column, :attr:`Result.scenarios`).
RANGES: tuple[dict[str, Any], ...] = tuple(p.as_dict() for p in PARAMETERS)
#: metrics of the speed claims this analysis re-evaluates
SPEED_METRICS = {"time_per_epoch_s", "time_per_step_s", "time_to_target_s"}
#: points per range scanned for a flip before bisection
GRID = 33
HOLDS = "holds across the ranges"


def straggler_factor(straggler: str) -> float:
    """'slow1x4' -> 4.0 (one worker 4x slower); 'none' -> 1."""
    m = re.fullmatch(r"slow(\d+)x([\d.]+)", str(straggler))
    return float(m.group(2)) if m else 1.0


def nominal_point(config: dict[str, Any], experiment: str, nodes: int, straggler: str) -> cf.Point | None:
    """The closed form's nominal point of a simulated experiment's setting (platform preset and
    paper profile of its config), None where the profile's compute is not known in advance
    (``measured``) or the experiment is not simulated."""
    from impls.sim.platforms import PRESETS, alpha_beta, platform_config  # noqa: PLC0415
    from impls.sim.profiles import model_layout, profile_config  # noqa: PLC0415  (imports torch: only when needed)
    from impls.sim.opcost import FREE, TCP_MSG_US, given_opcost, paper_opcost  # noqa: PLC0415
    from impls.sim.profiles import PAPER  # noqa: PLC0415

    exp = (config.get("experiments") or {}).get(experiment)
    if not exp or not is_simulated(exp.get("backend")):
        return None
    plat = platform_config(exp.get("platform", "ethernet_10g"))
    prof = profile_config(exp.get("profile", "measured"))
    if prof.step_ms is None or prof.model_mb is None:
        return None
    alpha, beta = alpha_beta(plat, line_rate=True)  # the platform's msg_efficiency is the point's efficiency
    preset = PRESETS.get(plat.name, {})
    rack = int(plat.rack_size or 0)
    # the two op costs a parameter server's closed form keeps (the PS modes' step_cost, closedform): staging of a
    # payload and the apply (plain SGD: 3 x B for the weighted gradient, 5 x B for the update)
    ops = given_opcost(vars(prof), paper_opcost() if prof.name in PAPER else FREE)
    model_bytes = prof.model_mb * 1e6
    stage = ops.stage_gbps * 1e9 if ops.stage_gbps else math.inf
    apply_s = (3 + 5) * model_bytes / (ops.mem_gbps * 1e9) if ops.mem_gbps else 0.0
    uplink = (plat.uplink_gbps * 1e9 / 8 * beta / (plat.nic_gbps * 1e9 / 8)) if rack and plat.uplink_gbps else math.inf
    return cf.Point(compute_s=prof.step_ms * 1e-3, model_bytes=model_bytes, bandwidth=beta, latency_s=alpha,
                    nodes=int(nodes), allreduce_efficiency=float(getattr(plat, "allreduce_efficiency", 1.0)),
                    efficiency=float(plat.msg_efficiency),
                    msg_overhead_s=(prof.msg_us if prof.msg_us is not None else
                                    (TCP_MSG_US if prof.name != "fixed" else 0.0)) * 1e-6,
                    background=float(plat.background_load or 0.0) if "background_load" in preset or rack else 0.0,
                    jitter=prof.jitter, slow_factor=straggler_factor(straggler), uplink_bandwidth=uplink,
                    rack_size=rack, stage_bandwidth=stage, apply_s=apply_s,
                    # the op costs the closed forms count (impls.comm.stepcost.ops_s): the profile's, as simulated
                    mem_bandwidth=ops.mem_gbps * 1e9 if ops.mem_gbps else math.inf,
                    copy_bandwidth=ops.copy_gbps * 1e9 if ops.copy_gbps else math.inf,
                    compress_bandwidth=ops.compress_gbps * 1e9 if ops.compress_gbps else math.inf,
                    **_optimizer_terms(config, exp),
                    layout=model_layout(prof.model_layout) if prof.model_layout not in (None, "none") else ())


def _optimizer_terms(config: dict[str, Any], exp: dict[str, Any]) -> dict[str, Any]:
    """The point's local-optimizer terms from the experiment's workload: its step in passes
    (:func:`impls.optim.step_passes`) and whether it has a coupled weight decay (an L2 term a
    gossip method adds itself; a decoupled one stays in the optimizer's step); none where the config names no workload (a test's bare one)."""
    from impls.optim import OPTIMIZERS, optimizer_config, step_passes  # noqa: PLC0415

    wl = (config.get("workloads") or {}).get(exp.get("workload")) if isinstance(exp.get("workload"), str) \
        else exp.get("workload")
    if not isinstance(wl, dict):
        return {}
    cfg = optimizer_config(wl.get("optimizer"))
    coupled = bool(cfg.weight_decay) and not OPTIMIZERS.get(cfg.name).decoupled_weight_decay
    return {"optim_passes": float(step_passes(cfg)), "weight_decay": coupled}


def claim_nominal(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str) -> cf.Point | None:
    """The nominal point of a claim's setting, as its ranges' nominal values are shown: the
    experiment's (:func:`nominal_point`), the overlap its all-reducing side's own
    (:func:`distrepro_wf.claims.closedform.method_overlap`; each side's closed form uses its own)."""
    p = nominal_point(config, c["experiment"], nodes, straggler)
    if p is None:
        return None
    methods = config["experiments"][c["experiment"]].get("methods") or {}
    return p.with_(overlap=max(cf.method_overlap(methods.get(c[s]["method"]), c[s]["method"])
                               for s in ("a", "b") if s in c))


def _side(config: dict[str, Any], experiment: str, sel: dict[str, Any], nodes: int,
          straggler: str) -> tuple[cf.Point, str, int, dict[str, Any]] | None:
    """(nominal point, algorithm, peers, parameter-server options) of one side of a claim at one
    setting, or None."""
    n, st = int(sel.get("nodes", nodes)), str(sel.get("straggler", straggler))
    p = nominal_point(config, experiment, n, st)
    if p is None:
        return None
    methods = config["experiments"][experiment].get("methods") or {}
    p = p.with_(overlap=cf.method_overlap(methods.get(sel["method"]), sel["method"]))  # the method's own
    alg, peers = cf.method_algorithm(methods.get(sel["method"]), sel["method"])
    opts = cf.method_options(methods.get(sel["method"]))
    if opts is None:
        return None
    return (p, alg, peers, opts) if cf.step_s(alg, p, peers, **opts) is not None else None


def ratio_fn(c: dict[str, Any], config: dict[str, Any], nodes: int, straggler: str,
             control: tuple[str, int, str] | None = None) -> Callable[[Callable[[cf.Point], cf.Point]], float] | None:
    """``perturb -> closed-form statistic`` of a claim row (a/b; over the control's a/b for
    ``ratio_vs_control``), or None where a side has no closed form.  The nominal points are
    built once (platform and profile configs), each evaluation only perturbs them."""
    if "b" not in c or c["compare"] not in ("ratio", "ratio_vs_control"):
        return None
    settings = [(c["experiment"], nodes, straggler)]
    if c["compare"] == "ratio_vs_control":
        if control is None:
            return None
        settings.append(control)
    sides = [(_side(config, e, c["a"], n, st), _side(config, e, c["b"], n, st)) for e, n, st in settings]
    if any(a is None or b is None for a, b in sides):
        return None

    def ratio(a: tuple, b: tuple, f: Callable[[cf.Point], cf.Point]) -> float:
        return cf.step_s(a[1], f(a[0]), a[2], **a[3]) / cf.step_s(b[1], f(b[0]), b[2], **b[3])  # type: ignore[operator]

    if len(sides) == 1:
        return lambda f: ratio(*sides[0], f)
    return lambda f: ratio(*sides[0], f) / ratio(*sides[1], f)


def _setter(spec: dict[str, Any], nominal: cf.Point) -> tuple[Callable[[float], Callable[[cf.Point], cf.Point]],
                                                              float, float, float]:
    """(value -> perturbation, low, high, nominal value) of one range."""
    name = spec["name"]
    if spec["how"] == "scale":
        nom = 1.0
        return (lambda v: lambda p: p.with_(**{name: getattr(p, name) * v})), spec["low"], spec["high"], nom
    nom = float(getattr(nominal, name))
    return (lambda v: lambda p: p.with_(**{name: v})), min(spec["low"], nom), max(spec["high"], nom), nom


def is_scenario(spec: dict[str, Any]) -> bool:
    """Whether a range is a scenario axis (no source: reported, never demoting)."""
    return spec.get("kind") == SCENARIO


@dataclass
class Result:
    closed_form: float  # the closed-form statistic at the nominal point
    text: str  # over the sourced ranges: "holds across the ranges" / "flips when X passes v; ..."
    flips: bool  # the verdict flips inside a sourced (uncertainty) range
    tornado: list[dict[str, Any]]  # per parameter: low/high values and the scaled statistic there
    scenarios: str = ""  # "holds under every scenario (...)" / "flips to X under scenario Y above v; ..."


def _grid(spec: dict[str, Any], low: float, high: float) -> list[float]:
    """:data:`GRID` points of a range: geometric for a scale, linear for a value."""
    if spec["how"] == "scale":
        return [low * (high / low) ** (i / (GRID - 1)) for i in range(GRID)]
    return [low + (high - low) * i / (GRID - 1) for i in range(GRID)]


def crossings(grid: list[float], nom: float, changed: Callable[[float], bool]) -> list[tuple[float, int]]:
    """Where ``changed`` first becomes true walking outward from the nominal value ``nom``, in each
    direction (+1 above, -1 below): the first grid point where it does, then bisection between it and
    the point before to 40 halvings.  [(value, direction)]."""
    out = []
    for direction in (1, -1):
        path = sorted((v for v in grid if (v - nom) * direction > 0), key=lambda v: abs(v - nom))
        prev = nom
        for v in path:
            if changed(v):
                a, b = prev, v
                for _ in range(40):
                    mid = (a + b) / 2
                    if changed(mid):
                        b = mid
                    else:
                        a = mid
                out.append((b, direction))
                break
            prev = v
    return out


def analyse(row: dict[str, Any], c: dict[str, Any], config: dict[str, Any],
            judge: Callable[[float, float], str], control: tuple[str, int, str] | None = None,
            gate: "Gate | None" = None, ends: Any = None) -> Result | None:
    """Re-evaluate one claim row (``measured``, ``ci_low``, ``ci_high``, ``nodes``, ``straggler``)
    over :data:`RANGES`; ``judge(low, high)`` is the claim's verdict of an interval.  None where
    the row is not a simulated speed ratio with a closed form on both sides (or simulated ends).
    With the row's mechanism ``gate`` (:func:`gates`), each tornado entry also carries where the
    gate flips (``gate_at``) and the statistic there (``gate_statistic``).

    ``ends`` (:class:`distrepro_wf.claims.simends.Ends`, for a row the closed form does not model):
    the simulator's own statistic at each range end over the nominal one.  The scaled statistic is
    then exactly the simulation's at the ends; between the nominal value and an end it is the
    closed form's shape times a correction growing geometrically from 1 at the nominal value to
    the one that meets the simulation at the end (along the log of a "scale" range, linearly along
    a "value" one); a range the simulator has no knob for does not move the row."""
    if c["metric"] not in SPEED_METRICS:
        return None
    nodes, straggler = int(row["nodes"]), str(row["straggler"])
    fn = ratio_fn(c, config, nodes, straggler, control)
    if fn is None and ends is None:
        return None
    r0 = fn(lambda p: p) if fn is not None else math.nan
    nominal = claim_nominal(c, config, nodes, straggler)
    m, lo, hi = (float(row.get(k, math.nan)) for k in ("measured", "ci_low", "ci_high"))
    if not math.isfinite(m) or (fn is not None and r0 <= 0):
        return Result(r0, reach_text(row, c, config) or "not evaluated: no simulated value to scale", False, [])
    timing = timing_dependent_sides(c, config) if c["metric"] == "time_to_target_s" else []
    if timing:  # the closed form scales time per step; an asynchronous side's steps to the target move too
        return Result(r0, f"not evaluated: {' and '.join(timing)} {'is' if len(timing) == 1 else 'are'} "
                          f"asynchronous, so {'its' if len(timing) == 1 else 'their'} steps to the target depend on "
                          f"timing (staleness), which scaling the time per step by the closed form cannot say",
                      False, [])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo = hi = m
    base = judge(lo, hi)
    flips, tornado, scen = [], [], []
    missing = []
    for spec in RANGES:
        make, low, high, nom = _setter(spec, nominal)
        k = scaling(spec, fn, r0, make, low, high, nom, ends)
        if ends is not None:
            missing += [f"{spec['label']} {e}: {ends.missing[(spec['name'], e)]}" for e in ("low", "high")
                        if (spec["name"], e) in ends.missing and not ends.missing[(spec["name"], e)].startswith("not swept")]
        grid = _grid(spec, low, high)
        vals = [m * k(v) for v in grid]
        tornado.append({"parameter": spec["name"], "label": spec["label"], "low": low, "high": high, "nominal": nom,
                        "at_low": vals[0], "at_high": vals[-1], "min": min(vals), "max": max(vals),
                        "reason": spec["reason"], "kind": spec.get("kind", UNCERTAINTY), "flips_at": math.nan,
                        "gate_at": math.nan, "gate_statistic": math.nan})
        for b, direction in crossings(grid, nom, lambda v: judge(lo * k(v), hi * k(v)) != base):
            (scen if is_scenario(spec) else flips).append((spec, b, direction, judge(lo * k(b), hi * k(b))))
            if math.isnan(tornado[-1]["flips_at"]):
                tornado[-1]["flips_at"] = b
        at = gate.tornado.get(spec["name"], math.nan) if gate is not None else math.nan
        tornado[-1].update(gate_at=at, gate_statistic=m * k(at) if math.isfinite(at) else math.nan)
    scenarios = scenario_text([(s, v, d, f"flips to {to}") for s, v, d, to in scen], nominal)
    how = "" if ends is None else (f" (simulated at each range's ends, as the closed form does not model this "
                                   f"setting: {ends.why}" + (f"; not evaluated: {'; '.join(missing)}" if missing else "")
                                   + ")")
    if not flips:
        return Result(r0, HOLDS + how, False, tornado, scenarios)
    text = "; ".join(f"flips to {to} when {s['label']} passes {_fmt(s, v)} ({'above' if d > 0 else 'below'} "
                     f"nominal {_fmt(s, _setter(s, nominal)[3])})" for s, v, d, to in flips)
    return Result(r0, text + how, True, tornado, scenarios)


def scaling(spec: dict[str, Any], fn: Callable | None, r0: float, make: Callable, low: float, high: float,
            nom: float, ends: Any = None) -> Callable[[float], float]:
    """``v -> statistic(v) / statistic(nominal)`` along one range: the closed form's (``fn``), or
    with simulated ``ends`` (:func:`analyse`) the closed form's shape (flat without one) corrected to
    meet the simulation at each end; an end without a simulated number leaves that side flat."""
    shape = (lambda v: fn(make(v)) / r0) if fn is not None else (lambda v: 1.0)  # noqa: E731
    if ends is None:
        return shape
    g = (lambda v: math.log(v)) if spec["how"] == "scale" else (lambda v: v)  # noqa: E731
    corr = {}
    for end, e in (("low", low), ("high", high)):
        f = ends.factor.get((spec["name"], end))
        if f is not None and g(e) != g(nom):
            corr[end] = (e, f / shape(e))

    def k(v: float) -> float:
        side = "high" if v > nom else "low" if v < nom else None
        if side is None:
            return 1.0
        if side not in corr:
            return 1.0
        e, c = corr[side]
        return shape(v) * c ** ((g(v) - g(nom)) / (g(e) - g(nom)))
    return k


def scenario_text(changes: list[tuple[dict[str, Any], float, int, str]], nominal: cf.Point) -> str:
    """What the scenario axes (:func:`is_scenario`) do to a verdict or a gate, in words: "flips to
    inconclusive under scenario background load above 0.31 (nominal 0); holds under latency, compute
    jitter (CV), host/device staging bandwidth"; ``changes``: (range, value, direction, what)."""
    axes = [s for s in RANGES if is_scenario(s)]
    parts = [f"{what} under scenario {s['label']} {'above' if d > 0 else 'below'} {_fmt_abs(s, v, nominal)} "
             f"(nominal {_fmt_abs(s, _setter(s, nominal)[3], nominal)})" for s, v, d, what in changes]
    moved = {s["name"] for s, _, _, _ in changes}
    held = [s["label"] for s in axes if s["name"] not in moved]
    if not parts:
        return "holds under every scenario (" + ", ".join(held) + ")"
    return "; ".join(parts) + (f"; holds under {', '.join(held)}" if held else "")


# ------------------------------------------------------------------ the mechanism gates through the ranges

def share_s(check: str, algorithm: str, p: cf.Point, peers: int = 1, **opts: Any) -> float | None:
    """A mechanism gate's share of one step in closed form (:data:`distrepro_wf.claims.mechanisms.SHARES`):
    ``compute_share`` = ``C / T`` (the mean compute over the step time), ``comm_share`` = ``(T -
    T_free) / T`` with ``T_free`` the step on a free network (infinite bandwidth, no latency, no
    per-message overhead): the communication the step waits for, what is not hidden.  None without
    a closed form."""
    t = cf.step_s(algorithm, p, peers, **opts)
    if t is None or not t > 0:
        return None
    if check == "compute_share":
        return p.compute_s / t
    free = p.with_(bandwidth=math.inf, uplink_bandwidth=math.inf, latency_s=0.0, msg_overhead_s=0.0)
    t_free = cf.step_s(algorithm, free, peers, **opts)
    return None if t_free is None else max(0.0, t - t_free) / t


@dataclass
class Gate:
    """A simulated setting's share gates swept through :data:`RANGES` (:func:`gates`)."""

    nominal_pass: bool  # every share gate passes at the nominal point (as measured)
    flips: list[tuple[dict[str, Any], float, int]]  # (range, value, direction) where that changes
    text: str  # "the setting shows the mechanism only when ..." / "... stops showing ..." / "... nowhere ..."
    tornado: dict[str, float]  # parameter name -> the first value where the gates flip
    scenarios: str = ""  # where the gates change along a scenario axis (context, never demoting)


def _gate_share(c: dict[str, Any], config: dict[str, Any], o: Any, nodes: int
                ) -> tuple[Callable[[Callable[[cf.Point], cf.Point]], float], cf.Point, str] | None:
    """``perturb -> scaled share`` of one share outcome (:class:`distrepro_wf.claims.mechanisms.Outcome`),
    its nominal point and what it measures in words; None where its side has no closed form."""
    sel = {k: v for k, v in c[o.side].items() if k != "straggler"}
    side = _side(config, c["experiment"], sel, nodes, str(o.straggler))
    if side is None or not math.isfinite(o.share):
        return None
    p, alg, peers, opts = side
    s0 = share_s(o.check, alg, p, peers, **opts)
    if not s0 or s0 <= 0:  # nothing to scale (e.g. an exchange the closed form hides entirely)
        return None
    what = f"{sel['method']}'s {'compute' if o.check == 'compute_share' else 'communication'} share"
    return (lambda f: min(1.0, o.share * (share_s(o.check, alg, f(p), peers, **opts) or 0.0) / s0)), p, what


def gates(c: dict[str, Any], config: dict[str, Any], outcomes: list[Any], nodes: int) -> Gate | None:
    """The claim's share gates (``comm_share``, ``compute_share``) at one simulated setting,
    re-evaluated through :data:`RANGES` the way :func:`analyse` re-evaluates the verdict:

    1. each gate's measured share (``outcomes``: :func:`distrepro_wf.claims.mechanisms.outcomes`) is
       scaled by its closed form's change, ``m x s(p) / s0`` (:func:`share_s`; capped at 1), i.e.
       the measured compute (or communication) scaled by the closed form's over the measured step
       scaled by the closed form's;
    2. one parameter at a time, the others nominal, the ranges are walked outward from the nominal
       value; where "every gate passes" changes, the point is found by bisection (:func:`crossings`);
    3. the result (:class:`Gate`): a setting that fails at the nominal point but passes somewhere
       inside the ranges shows the mechanism only there; one that passes at the nominal point but
       fails somewhere stops showing it there; one that fails everywhere shows it nowhere.

    None where there is nothing to sweep: no share gate, a check that is not a share fails (the
    setting is refused whatever the parameters: e.g. no network, platform unknown), or a failing
    gate's side has no closed form (not simulated, a profile measured at run time, a method
    without one).  A passing gate without a closed form is taken to pass throughout."""
    from .mechanisms import SHARES  # noqa: PLC0415

    shares = [o for o in outcomes if o.check in SHARES and o.demotes]
    if not shares or any(o.reason for o in outcomes if o.check not in SHARES):
        return None
    swept = []
    for o in shares:
        g = _gate_share(c, config, o, nodes)
        if g is None:
            if o.reason:
                return None
            continue
        swept.append((o, *g))
    if not swept:
        return None
    nominal = swept[0][2]
    state = lambda f: tuple(fn(f) >= o.args["min"] for o, fn, _, _ in swept)  # noqa: E731
    base = all(not o.reason for o in shares)
    flips, first, best, scen = [], {}, {}, []
    for spec in RANGES:
        make, low, high, nom = _setter(spec, nominal)
        grid = _grid(spec, low, high)
        if is_scenario(spec):  # context: where the gates change along a scenario axis, never demoting
            scen += [(spec, b, d, "shows the mechanism" if not base else "stops showing the mechanism")
                     for b, d in crossings(grid, nom, lambda v: all(state(make(v))) != base)]
            continue
        for v in grid:  # the highest share each failing gate reaches, and where
            for o, fn, _, what in swept:
                x = fn(make(v))
                if o.reason and x > best.get(what, (-1.0,))[0]:
                    best[what] = (x, spec, v, o.args["min"])
        for b, direction in crossings(grid, nom, lambda v: all(state(make(v))) != base):
            flips.append((spec, b, direction))
            first.setdefault(spec["name"], b)
    scenarios = "the setting " + scenario_text(scen, nominal) if scen else ""
    if not flips:
        if base:
            return Gate(True, [], "the setting shows the mechanism across the ranges", {}, scenarios)
        parts = [f"{what} reaches at most {x:.0%} (at {s['label']} {_fmt_abs(s, v, nominal)}), below {lo:.0%}"
                 for what, (x, s, v, lo) in best.items()]
        return Gate(False, [], "the setting shows the mechanism nowhere in the sourced ranges (one parameter at a "
                    "time): " + "; ".join(parts), {}, scenarios)
    changed: dict[str, None] = {}  # the gates that change at some flip, in order

    def where(spec: dict[str, Any], v: float, d: int) -> str:
        make, low, high, nom = _setter(spec, nominal)
        for (o, _, _, what), was, now in zip(swept, state(lambda p: p), state(make(v))):
            if was != now:
                how = "derived" if o.threshold.startswith("derived") else "sourced"
                changed[f"{what} >= {o.args['min']:.0%}, {how}"] = None
        return (f"{spec['label']} passes {_fmt_abs(spec, v, nominal)} ({'above' if d > 0 else 'below'} nominal "
                f"{_fmt_abs(spec, nom, nominal)}; range {_fmt(spec, low)}-{_fmt(spec, high)})")

    places = " or ".join(where(*f) for f in flips)
    gate = f" ({' and '.join(changed)})" if changed else ""
    if base:
        return Gate(True, flips, f"the setting stops showing the mechanism{gate} when {places}", first, scenarios)
    return Gate(False, flips, f"the setting shows the mechanism{gate} only when {places}; at the nominal point it "
                "does not", first, scenarios)


def _fmt_abs(spec: dict[str, Any], v: float, nominal: cf.Point) -> str:
    """A range value with its absolute value where it is a scale: '3x = 269 ms'."""
    if spec["how"] != "scale":
        return _fmt(spec, v)
    unit = {"compute_s": (1e3, "ms"), "latency_s": (1e6, "us"), "stage_bandwidth": (1e-9, "GB/s")}.get(spec["name"])
    base = getattr(nominal, spec["name"], math.nan)
    if unit is None or not math.isfinite(base):
        return _fmt(spec, v)
    return f"{v:.3g}x = {v * base * unit[0]:.3g} {unit[1]}"


def timing_dependent_sides(c: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The methods of a two-sided claim whose trajectory (staleness, so steps to a target) depends
    on timing: their algorithm's class says so (``timing_dependent``); the rest take the same steps
    whatever the timing parameters (synchronous, or a fixed order: ps_cyclic)."""
    methods = (config.get("experiments") or {}).get(c["experiment"], {}).get("methods") or {}
    names = {s: c[s]["method"] for s in ("a", "b") if s in c}
    return sorted({m for m in names.values() if cf.timing_dependent(methods.get(m), m)})


def reach_text(row: dict[str, Any], c: dict[str, Any], config: dict[str, Any]) -> str | None:
    """The sensitivity of a time-to-target row without a simulated ratio (a side's runs did not
    all reach the target: :func:`distrepro_wf.claims.evaluate.censored_verdict`), or None.

    Where the verdict rests on how many runs reached the target (neither side's median is
    defined, or the side that must be sooner reaches it in a smaller share of its runs), a run
    lasts a fixed number of epochs and a synchronous method takes the same steps whatever the
    timing, so no parameter of the ranges moves the verdict: it holds.  An asynchronous side
    (:func:`timing_dependent_sides`) reaches the target with a staleness that depends on timing, which
    a closed form cannot say: not evaluated.  A verdict that rests on censored times (the log-rank
    test) is not evaluated either (scaling censored times is not done here)."""
    from .expect import pass_region  # noqa: PLC0415

    if c["metric"] != "time_to_target_s" or "b" not in c:
        return None
    try:
        ra, na, rb, nb = (int(row[k]) for k in ("tta_reached_a", "tta_runs_a", "tta_reached_b", "tta_runs_b"))
    except (KeyError, TypeError, ValueError):
        return None
    if not na or not nb:
        return None
    lo, _, hi, _ = pass_region(c["expect"])
    sooner = "a" if hi <= 1 else "b" if lo >= 1 else None
    share = {"a": ra / na, "b": rb / nb}
    other = {"a": "b", "b": "a"}
    neither = 2 * ra < na and 2 * rb < nb  # no Kaplan-Meier median on either side
    if not neither and (sooner is None or share[sooner] >= share[other[sooner]]):
        return "not evaluated: the verdict rests on censored times (a log-rank test), not a ratio to scale"
    names = {s: c[s]["method"] for s in ("a", "b")}
    counts = f"{names['a']} {ra} of {na}, {names['b']} {rb} of {nb}"
    timing = timing_dependent_sides(c, config)
    if timing:
        return (f"not evaluated: the verdict rests on how many runs reached the target ({counts}); "
                f"{' and '.join(timing)} {'is' if len(timing) == 1 else 'are'} asynchronous, so whether "
                f"{'it reaches' if len(timing) == 1 else 'they reach'} it depends on timing (staleness), which "
                f"a closed form cannot say")
    return (f"{HOLDS}: the verdict rests on how many runs reached the target ({counts}) in a fixed "
            f"number of epochs, which no timing parameter changes (both sides take the same steps whatever "
            f"the timing)")


def _fmt(spec: dict[str, Any], v: float) -> str:
    if spec["how"] == "scale":
        return f"{v:.3g}x"
    if spec["name"] == "msg_overhead_s":
        return f"{v * 1e6:.3g} us"
    return f"{v:.3g}"
