"""A claim's expected size derived from the setting's own measurements (``predicted:``).

Some claims state no published magnitude but a mechanism whose size follows from the setting
itself.  "One 4x-slow worker slows synchronous AR-SGD" is one: how much longer the step gets
depends on how much of it is compute (the straggler's is on the critical path) and how much of
the all-reduce its longer backward pass hides.  A fixed threshold ("ratio >= 2") tests the
harness's choice of setting, not the mechanism; a prediction made at the setting tests the
mechanism at every setting, on either backend.  A claim declares one with

``predicted: {by: <predictor>}``

and then gets, at each setting, the predicted statistic (``predicted`` column, with how in
``predicted_how``), against which its size verdict is judged
(:func:`distrepro_wf.claims.size.judge`, tolerance :data:`distrepro_wf.claims.size.TOLERANCE`
``"predicted"``) instead of a published value; its ``expect`` stays the direction.  A harness check
with a prediction passes only when both hold (:func:`distrepro_wf.claims.evaluate.harness_verdict`).

The predictors (:data:`PREDICTORS`):

``closed_form`` (a ratio of step or epoch times of one method whose sides differ only in their
straggler setting): the method's own closed form (its class's ``step_cost``,
:mod:`distrepro_wf.claims.closedform`) calibrated on the side without the slowdown, ``b``:

1. from ``b``'s completed runs at the setting: the mean rank's compute per step ``C``
   (``bd_compute_s / steps_per_epoch``, at the healthy speed) and the step ``T_b``
   (``time_per_epoch_s / steps_per_epoch``), means over seeds;
2. the point: a simulated experiment's nominal point (:func:`distrepro_wf.claims.sensitivity.nominal_point`:
   the platform's racks and background load, the profile's jitter and the paper model's layout);
   on real ranks (or under a profile measured at run time) a bare one: no latency, no jitter, the
   stand-in's gradient as one bucket (the runs do not record its layout; the harness's stand-ins
   are smaller than DDP's 1 MiB first bucket, so their one bucket leaves when the backward pass
   ends: exact there; for a larger model the prediction overstates the ratio, as more of its
   all-reduce would hide behind a slow backward pass); its compute ``C``; the method's own
   AR/backward overlap (:func:`distrepro_wf.claims.closedform.method_overlap`);
3. calibration: every communication term (bandwidths, latency, per-message overhead) scaled by one
   factor so that the closed form's step at ``b``'s straggler setting equals ``T_b`` (found by
   bisection; a step no longer than its compute leaves no communication);
4. the prediction: the closed form's step at ``a``'s straggler factor over that at ``b``'s
   (the stragglers' ``factor`` as configured; a ``random`` straggler or one with ``delay_s``
   has no single factor, so no prediction).

So the prediction is the claim's mechanism with the setting's own compute share and exposed
communication: ``1 + (F - 1) C / T_b`` where nothing more hides (one bucket), less where the
straggler's longer backward pass hides more of an overlapped all-reduce.  Everything the closed
form leaves out (op costs inside the step, contention beyond the rack uplinks, a sleep's
overshoot on real ranks) is what the tolerance covers.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import pandas as pd

from impls.errors import ConfigError

from . import closedform as cf


class Prediction(NamedTuple):
    value: float  # the predicted statistic (a/b)
    how: str  # in words: what it was derived from


#: predictor name -> (claim, config, runs table of its experiment, nodes, straggler) -> a
#: Prediction, or the reason there is none (a string)
PREDICTORS: dict[str, Callable[..., "Prediction | str"]] = {}
#: the metrics a step-time predictor predicts a ratio of (an epoch of a synchronous method is its steps)
STEP_TIME_METRICS = ("time_per_epoch_s", "time_per_step_s")


def _predictor(name: str) -> Callable:
    def deco(f: Callable[..., "Prediction | str"]) -> Callable[..., "Prediction | str"]:
        PREDICTORS[name] = f
        return f
    return deco


def check(c: dict[str, Any], where: str) -> None:
    """Validate a claim's ``predicted`` at load time (:func:`distrepro_wf.claims.published.load`):
    a known predictor, and a claim of the shape it predicts; a ConfigError naming the key."""
    spec = c.get("predicted")
    if spec is None:
        return
    by = spec.get("by")
    if by not in PREDICTORS:
        raise ConfigError(f"{where}.predicted.by", f"unknown predictor {by!r}; allowed: {', '.join(PREDICTORS)}")
    if by == "closed_form":
        a, b = c.get("a") or {}, c.get("b") or {}
        if c["compare"] != "ratio" or c["metric"] not in STEP_TIME_METRICS:
            raise ConfigError(f"{where}.predicted", f"predictor 'closed_form' predicts a ratio (compare: ratio) of "
                                                    f"{' or '.join(STEP_TIME_METRICS)}; this claim compares "
                                                    f"{c['metric']} by {c['compare']!r}")
        if a.get("method") != b.get("method") or a.get("nodes") != b.get("nodes") or \
                a.get("straggler") == b.get("straggler"):
            raise ConfigError(f"{where}.predicted", "predictor 'closed_form' predicts one method with and without "
                                                    "a slowdown: a and b name the same method (and nodes) and pin "
                                                    "different stragglers, e.g. a: {method: m, straggler: slow1x4}, "
                                                    "b: {method: m, straggler: none}")


def predict(c: dict[str, Any], config: dict[str, Any], table: pd.DataFrame | None, nodes: int,
            straggler: str) -> "Prediction | str":
    """The claim's predicted statistic at a setting (its ``predicted.by``), or why there is none."""
    return PREDICTORS[c["predicted"]["by"]](c, config, table, nodes, straggler)


def straggler_factor(config: dict[str, Any], name: str) -> float | str:
    """A straggler setting's one compute factor, as the setting says
    (:meth:`impls.runtime.straggler.StragglerConfig.compute_factor`), or why it has none."""
    from impls.runtime.straggler import straggler_config  # noqa: PLC0415

    spec = (config.get("stragglers") or {}).get(name)
    if spec is None:
        return f"straggler setting {name!r} is not in this config"
    factor = straggler_config(spec, f"stragglers.{name}").compute_factor()
    if factor is None:
        return (f"straggler {name!r} ({spec.get('kind')}{', delay_s' if spec.get('delay_s') else ''}) has no single "
                f"compute factor")
    return factor


def _comm_scaled(p: cf.Point, k: float) -> cf.Point:
    """``p`` with every communication term ``k`` times faster (``k`` = inf: a free network)."""
    return p.with_(bandwidth=p.bandwidth * k, uplink_bandwidth=p.uplink_bandwidth * k, latency_s=p.latency_s / k,
                   msg_overhead_s=p.msg_overhead_s / k)


def calibrate(step: Callable[[cf.Point], float], p: cf.Point, target_s: float) -> tuple[cf.Point, float]:
    """(``p`` with its communication scaled so that ``step(p) == target_s``, the factor): bisection
    on the log of the factor; a target no longer than the step on a free network leaves no
    communication (factor inf)."""
    if step(_comm_scaled(p, math.inf)) >= target_s:
        return _comm_scaled(p, math.inf), math.inf
    lo, hi = 1e-9, 1e9
    for _ in range(120):
        k = math.sqrt(lo * hi)
        if step(_comm_scaled(p, k)) > target_s:
            lo = k
        else:
            hi = k
    k = math.sqrt(lo * hi)
    return _comm_scaled(p, k), k


def _per_step(rows: pd.DataFrame, col: str) -> float:
    if col not in rows or "steps_per_epoch" not in rows:
        return math.nan
    return float((pd.to_numeric(rows[col], errors="coerce") / pd.to_numeric(rows["steps_per_epoch"],
                                                                           errors="coerce")).mean())


@_predictor("closed_form")
def _closed_form(c: dict[str, Any], config: dict[str, Any], table: pd.DataFrame | None, nodes: int,
                 straggler: str) -> "Prediction | str":
    """The module docstring's ``closed_form``."""
    from . import sensitivity  # noqa: PLC0415  (the nominal point of a simulated experiment)

    e, a, b = c["experiment"], c["a"], c["b"]
    method, n = b["method"], int(b.get("nodes", nodes))
    st_a, st_b = a.get("straggler", straggler), b.get("straggler", straggler)
    factors = [straggler_factor(config, s) for s in (st_a, st_b)]
    bad = [f for f in factors if isinstance(f, str)]
    if bad:
        return bad[0]
    spec = (config["experiments"][e].get("methods") or {}).get(method)
    alg, peers = cf.method_algorithm(spec, method)
    opts = cf.method_options(spec)
    rows = pd.DataFrame() if table is None or table.empty else \
        table[(table["method"] == method) & (table["nodes"] == n) & (table["straggler"] == st_b)]
    t_b, comp = _per_step(rows, "time_per_epoch_s"), _per_step(rows, "bd_compute_s")
    if not (t_b > 0 and comp > 0):
        return f"no time breakdown of {method} at n={n}, {st_b} (compute and steps per epoch) to predict from"
    p = sensitivity.nominal_point(config, e, n, st_b)
    where = "the experiment's nominal point (simulated)"
    if p is None:
        mb = pd.to_numeric(rows["model_mb"], errors="coerce").mean() if "model_mb" in rows else math.nan
        nbytes = float(mb) * 1e6 if mb > 0 else 1.0
        p = cf.Point(compute_s=comp, model_bytes=nbytes, bandwidth=1.0, latency_s=0.0, nodes=n, layout=(int(nbytes),))
        where = "a bare point (no latency, no jitter, the gradient in one bucket)"
    p = p.with_(compute_s=comp, overlap=cf.method_overlap(spec, method), slow_factor=factors[1])
    step = lambda q: cf.step_s(alg, q, peers, **(opts or {}))  # noqa: E731
    if opts is None or step(p) is None:
        return f"{method} has no closed form ({alg})"
    q, _ = calibrate(step, p, t_b)
    t_a = step(q.with_(slow_factor=factors[0]))
    return Prediction(t_a / step(q), f"{alg}'s closed form at {where}, calibrated on {method} at {st_b} (measured "
                                     f"compute {comp * 1e3:.3g} ms, step {t_b * 1e3:.3g} ms): {t_a * 1e3:.3g} ms a "
                                     f"step at {st_a} (compute factor {factors[0]:g})")
