"""Does a setting exercise the mechanism a claim is about?  Checks run before a claim is judged.

A claim in ``config/published/claims.yaml`` names its ``mechanism``: a sentence saying what
the paper's effect comes from (a slow network, a slow worker, approximate averaging, skewed
labels, a shared network) and the checks a setting must pass for our numbers to be evidence
about it.  A setting that fails a check is "not comparable" with the reason, whatever its
numbers say: a speed-up measured where the network is a rounding error of the step is not a
network effect (issue 10 found exactly that on the old emulated network).

The checks (``mechanism.requires``, each ``{check: <name>, ...}``), read from the completed runs
of the claim's side at the setting (``side``: ``a``, ``b`` or ``both``) and the resolved run config.
``side: both`` gates the two sides of a comparison alike (like for like): e.g. "SGP is faster than
D-PSGD because D-PSGD exchanges with two neighbours" says nothing when our D-PSGD hides its
exchange behind its compute and SGP does not; ``comm_share`` on both sides refuses that setting
and names the side that fails:

``network``
    The communication crosses a network: the simulated platform, or real ranks on more than
    one host.  Real ranks of a local launch talk over one machine's loopback.
``comm_share`` (``side``, ``min``)
    The side spends at least ``min`` of its epoch communicating (mean over seeds of
    ``bd_comm_s / time_per_epoch_s``; ``comm_s_per_epoch`` where the breakdown is absent).
    E.g. SGP's speed-up over AR-SGD needs AR-SGD to wait on its all-reduce.
``compute_share`` (``side``, ``min``)
    Without straggler (the side's own runs at ``none``, same nodes), compute is at least
    ``min`` of the epoch: a k-times-slow worker adds ``(k-1) x compute`` per step, so when the
    step is mostly overhead a straggler cannot matter, and a straggler claim tests nothing.
``inexact_averaging`` (``side``)
    The side's final consensus distance is positive: its gossip does not average exactly.  At
    n=2 1-peer SGP *is* exact averaging, so "SGP's accuracy is close to AR-SGD's" holds by
    construction there.
``background_traffic``
    The simulated platform carries other jobs' traffic (``background_load`` > 0, e.g.
    ``shared_hpc``): the AD-PSGD paper's 4-8x is for a network-sharing cluster.
``label_skew`` (``side``)
    The side's data is partitioned by label (each worker sees a few classes), the setting where
    D^2 differs from D-PSGD.
``plateau`` (``side``, ``max_gain``)
    The side's runs have reached their plateau: the mean over seeds of the top-1 gained in
    the run's last quarter (``late_gain_acc``: the mean top-1 of the last quarter of its
    evaluations minus that of the quarter before) is at most ``max_gain``.  "Converges to the same accuracy" compares where two methods end, which a
    run cut short while still learning does not show.
``platform_sourced`` (``needs``: what the published effect would need, in words)
    Every parameter of the simulated platform that shapes its bandwidth has a published source
    (:func:`impls.sim.platforms.unsourced`).  A platform built on guesses cannot decide a claim
    about the paper's cluster: "platform unknown: shared_hpc's uplink_gbps = 10, background_load
    = 0.5, burst_mb = 64 have no source", followed by ``needs`` (the values that would give the
    published effect, from a sweep recorded beside the claim).

The two share checks (``comm_share``, ``compute_share``) measure a share of the step that the
model's uncertain parameters move.  On a simulated setting they are also swept through the
declared ranges (:func:`distrepro_wf.claims.sensitivity.gates`): :func:`outcomes` gives each
check's measured share for that.

**Gates with sources.**  A share check's ``min`` may demote a verdict (refuse the setting, or
make it inconclusive) only when the threshold has a source: ``source: "<where the number comes
from>"`` beside ``min``, or ``derived: true`` instead of ``min``: derived from the claim
(:func:`derived_min`), the communication share below which even a perfect method, one that removes
all communication, could not produce the claimed speed-up ``s``: ``1 - 1/s``.  A share check with
neither is the harness's choice: it is *context* (:attr:`Outcome.demotes` false), shown beside
the verdict with the share and the threshold (:func:`context`), never a demotion.  A harness
claim's (``harness: true``) share checks are context too: the harness check itself is the test.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import pandas as pd

from ..pipeline.config import Run, is_simulated, run_config

CHECKS: dict[str, Callable[..., str]] = {}
#: how a reason of the ``platform_sourced`` check begins (the claims table shows it as the reason)
PLATFORM_UNKNOWN = "platform unknown"


def _check(name: str) -> Callable:
    def deco(f: Callable[..., str]) -> Callable[..., str]:
        CHECKS[name] = f
        return f
    return deco


def _rows(table: pd.DataFrame, method: str, nodes: int, straggler: str) -> pd.DataFrame:
    if table is None or table.empty:
        return pd.DataFrame()
    return table[(table["method"] == method) & (table["nodes"] == nodes) & (table["straggler"] == straggler)]


def _share(rows: pd.DataFrame, part: str, fallback: str) -> float:
    col = part if part in rows and rows[part].notna().any() else fallback
    if col not in rows or "time_per_epoch_s" not in rows or rows.empty:
        return float("nan")
    return float((rows[col] / rows["time_per_epoch_s"]).mean())


def _raw(config: dict[str, Any], experiment: str, method: str, nodes: int, straggler: str) -> dict[str, Any]:
    return run_config(config, Run(experiment, method, nodes, straggler, 1))


@_check("network")
def _network(s: "Setting", **_: Any) -> str:
    raw = _raw(s.config, s.experiment, s.sel("a")["method"], s.nodes, s.straggler)
    if is_simulated(raw):
        return ""
    kinds = set(s.side_rows("a").get("network", pd.Series(dtype=str)).dropna())
    launcher = (s.config.get("launcher") or {}).get("kind", "local")
    if any("loopback" in k for k in kinds) or (not kinds and launcher == "local"):
        return ("no network: real ranks of a local launch communicate over this machine's loopback; "
                "judge this claim on the simulated platform (backend: simgrid) or on a cluster")
    return ""


def comm_share(s: "Setting", side: str) -> tuple[float, str]:
    """(the side's measured communication share of its epoch at the setting (NaN: no breakdown),
    the straggler setting it was measured at)."""
    return _share(s.side_rows(side), "bd_comm_s", "comm_s_per_epoch"), s.sel(side).get("straggler", s.straggler)


def _compute_rows(s: "Setting", side: str) -> tuple[pd.DataFrame, str]:
    sel = s.sel(side)
    rows = _rows(s.table, sel["method"], sel.get("nodes", s.nodes), "none")
    if rows.empty:
        return s.side_rows(side), "at this setting"
    return rows, "without straggler"


def compute_share(s: "Setting", side: str) -> tuple[float, str]:
    """(the side's measured compute share of its epoch without straggler (its runs at ``none``;
    at the setting where it has none there; NaN: no breakdown), the straggler setting it was
    measured at)."""
    rows, where = _compute_rows(s, side)
    at = "none" if where == "without straggler" else s.sel(side).get("straggler", s.straggler)
    return _share(rows, "bd_compute_s", "compute_s_per_epoch"), at


#: the checks that test a share of a side's step, with the function that measures it
SHARES: dict[str, Callable[["Setting", str], tuple[float, str]]] = {"comm_share": comm_share,
                                                                     "compute_share": compute_share}


@_check("comm_share")
def _comm_share(s: "Setting", side: str, min: float, **_: Any) -> str:  # noqa: A002  (the YAML key)
    share = comm_share(s, side)[0]
    if share != share:
        return f"no time breakdown for {s.sel(side)['method']}: cannot tell whether the network matters"
    if share < min:
        return (f"communication is {share:.0%} of {s.sel(side)['method']}'s epoch time (< {min:.0%}): "
                f"the network cannot decide this setting")
    return ""


@_check("compute_share")
def _compute_share(s: "Setting", side: str, min: float, **_: Any) -> str:  # noqa: A002
    sel = s.sel(side)
    rows, where = _compute_rows(s, side)
    share = _share(rows, "bd_compute_s", "compute_s_per_epoch")
    if share != share:
        return f"no time breakdown for {sel['method']}: cannot tell whether a straggler can matter"
    if share < min:
        return (f"compute is {share:.0%} of {sel['method']}'s epoch time {where} (< {min:.0%}): "
                f"a slow worker adds little to a step that is mostly overhead, a straggler cannot matter")
    return ""


@_check("inexact_averaging")
def _inexact(s: "Setting", side: str, **_: Any) -> str:
    rows = s.side_rows(side)
    if "final_consensus_distance" not in rows or rows["final_consensus_distance"].dropna().empty:
        return ""  # not recorded: nothing to refuse on
    if float(rows["final_consensus_distance"].abs().max()) <= 1e-9:
        return (f"{s.sel(side)['method']} averages exactly at n={s.nodes} (consensus distance 0; e.g. 1-peer SGP "
                f"at n=2): equal accuracy holds by construction, the setting tests nothing")
    return ""


@_check("plateau")
def _plateau(s: "Setting", side: str, max_gain: float, **_: Any) -> str:
    rows = s.side_rows(side)
    if "late_gain_acc" not in rows or rows["late_gain_acc"].dropna().empty:
        return f"no accuracy curve for {s.sel(side)['method']}: cannot tell whether it reached its plateau"
    gain = float(rows["late_gain_acc"].mean())
    if gain > max_gain:
        return (f"{s.sel(side)['method']} still learns: +{gain * 100:.1f} points of top-1 in the last quarter of "
                f"its run (> {max_gain * 100:.1f}): not at its plateau, the final accuracies do not compare")
    return ""


@_check("background_traffic")
def _background(s: "Setting", **_: Any) -> str:
    raw = _raw(s.config, s.experiment, s.sel("a")["method"], s.nodes, s.straggler)
    if not is_simulated(raw):
        return "no shared network: real ranks here carry no other jobs' traffic"
    from impls.sim.platforms import platform_config

    cfg = platform_config(raw["platform"])
    if not (cfg.background_load or 0) > 0:
        return f"platform {cfg.name!r} carries no background traffic (the paper's setting is a shared network)"
    return ""


@_check("platform_sourced")
def _platform_sourced(s: "Setting", needs: str = "", **_: Any) -> str:
    raw = _raw(s.config, s.experiment, s.sel("a")["method"], s.nodes, s.straggler)
    if not is_simulated(raw):
        return ""
    from impls.sim.platforms import platform_config, unsourced

    cfg = platform_config(raw["platform"])
    missing = unsourced(cfg)
    if not missing:
        return ""
    return (f"{PLATFORM_UNKNOWN}: {cfg.name}'s " + ", ".join(f"{k} = {getattr(cfg, k):g}" for k in missing)
            + f" {'has' if len(missing) == 1 else 'have'} no source" + (f"; {needs}" if needs else ""))


@_check("label_skew")
def _labels(s: "Setting", side: str, **_: Any) -> str:
    sel = s.sel(side)
    raw = _raw(s.config, s.experiment, sel["method"], s.nodes, sel.get("straggler", s.straggler))
    part = ((raw["workload"].get("dataset") or {}).get("partition") or {}).get("kind", "iid")
    if part != "labels":
        return f"{sel['method']}'s data is partitioned {part!r}, not by label: no data variance across workers"
    return ""


class Setting:
    """One setting (nodes x straggler) of a claim, with the completed runs of its experiment."""

    def __init__(self, claim: dict[str, Any], config: dict[str, Any], table: pd.DataFrame, nodes: int,
                 straggler: str):
        self.claim, self.config, self.table = claim, config, table
        self.experiment, self.nodes, self.straggler = claim["experiment"], nodes, straggler

    def sel(self, side: str) -> dict[str, Any]:
        return self.claim[side]

    def side_rows(self, side: str) -> pd.DataFrame:
        sel = self.sel(side)
        return _rows(self.table, sel["method"], sel.get("nodes", self.nodes), sel.get("straggler", self.straggler))


class Outcome(NamedTuple):
    """One check of one side at a setting."""

    check: str  # the check's name (CHECKS)
    side: str | None  # "a" / "b" (a check of both sides gives one outcome per side), None: the setting's
    args: dict[str, Any]  # the check's arguments from claims.yaml (min, ...; a derived min filled in)
    reason: str  # "" when it passes, else why the setting cannot show the mechanism
    share: float  # a share check's measured share (SHARES), NaN for the others
    straggler: str | None  # the straggler setting a share was measured at (compute: "none"), None for the others
    demotes: bool = True  # False: a share check without a sourced or derived threshold (context only)
    threshold: str = ""  # where a share check's min comes from, in words


#: the metrics whose claimed speed-up a communication share can bound (time per step, or per epoch at
#: equal steps an epoch); a time to the target also moves with the steps the target takes
STEP_TIME_METRICS = ("time_per_epoch_s", "time_per_step_s")


def claimed_speedup(claim: dict[str, Any]) -> tuple[float, str] | None:
    """(s, where it comes from): the speed-up a ratio claim states, ``s`` > 1: the size its pass
    region demands (``a/b <= 0.5``: 2; ``a/b in [4, 8]``: 4), else its published value's (0.724:
    1/0.724 = 1.38).  None where it states a direction only and publishes no value."""
    from .expect import pass_region  # noqa: PLC0415

    lo, _, hi, _ = pass_region(claim["expect"])
    if hi < 1:
        return 1 / hi, f"the claim's a/b <= {hi:g}"
    if lo > 1:
        return lo, f"the claim's a/b >= {lo:g}"
    v = (claim.get("published") or {}).get("value")
    if isinstance(v, (int, float)) and v > 0 and v != 1:
        return max(v, 1 / v), f"the published {v:g}x"
    return None


def derived_min(claim: dict[str, Any]) -> tuple[float, str] | None:
    """(threshold, how) of a ``derived`` communication-share gate: a method that removes all of the
    slower side's communication shortens its step by that share ``c`` at most, so a speed-up ``s``
    needs ``c >= 1 - 1/s``.  Only for a ratio of step (or epoch) times that states a speed-up
    (:func:`claimed_speedup`); None otherwise."""
    if claim["compare"] != "ratio" or claim["metric"] not in STEP_TIME_METRICS:
        return None
    got = claimed_speedup(claim)
    if got is None:
        return None
    s, where = got
    return 1 - 1 / s, (f"derived from {where}: a speed-up of {s:.3g}x needs a communication share of at least "
                       f"1 - 1/{s:.3g} = {1 - 1 / s:.0%}, even for a method without communication")


def threshold(claim: dict[str, Any], req: dict[str, Any]) -> tuple[float | None, bool, str]:
    """(min, demotes, where it comes from) of one share check of ``mechanism.requires``."""
    if req.get("derived"):
        got = derived_min(claim)
        if got is None:
            return None, False, "derived, but the claim states no speed-up of a step time to derive it from"
        return got[0], not claim.get("harness"), got[1]
    if req.get("source"):
        return req["min"], not claim.get("harness"), f"source: {req['source']}"
    return req.get("min"), False, "the harness's choice, without a source"


def outcomes(claim: dict[str, Any], config: dict[str, Any], table: pd.DataFrame, nodes: int,
             straggler: str) -> list[Outcome]:
    """Every check of the claim's ``mechanism.requires`` at one setting, one per side."""
    s = Setting(claim, config, table, nodes, straggler)
    out = []
    for r in (claim.get("mechanism") or {}).get("requires", []):
        args = {k: v for k, v in r.items() if k not in ("check", "source", "derived")}
        demotes, where = True, ""
        if r["check"] in SHARES:
            args["min"], demotes, where = threshold(claim, r)
            if args["min"] is None:  # a derived gate without a speed-up to derive from: nothing to check
                args["min"] = 0.0
        for side in (("a", "b") if args.get("side") == "both" else (args.get("side"),)):
            reason = CHECKS[r["check"]](s, **{**args, **({"side": side} if side else {})})
            if reason and demotes and where and r["check"] in SHARES:
                reason = f"{reason} (threshold {where})"
            share, at = SHARES[r["check"]](s, side) if r["check"] in SHARES else (float("nan"), None)
            out.append(Outcome(r["check"], side, args, reason if demotes else "", share, at, demotes, where))
    return out


def context(claim: dict[str, Any], outs: list[Outcome]) -> str:
    """The share checks without a sourced or derived threshold, in words, shown beside the verdict
    (never a demotion): "allreduce_sgd's communication share 12% (below 25%, the harness's choice,
    without a source)"."""
    parts = []
    for o in outs:
        if o.demotes or o.check not in SHARES:
            continue
        what = "communication" if o.check == "comm_share" else "compute"
        share = "unknown (no time breakdown)" if o.share != o.share else f"{o.share:.0%}"
        where = ("" if o.check == "comm_share" and o.straggler in (None, "none") else
                 " without straggler" if o.straggler == "none" else f" at {o.straggler}")
        side = claim[o.side]["method"] if o.side in ("a", "b") else "the setting"
        rel = ("" if o.share != o.share else "at or above" if o.share >= o.args["min"] else "below")
        parts.append(f"{side}'s {what} share{where} {share} ({rel + ' ' if rel else ''}{o.args['min']:.0%}, "
                     f"{o.threshold}: not a demotion)")
    return "; ".join(parts)


def check(claim: dict[str, Any], config: dict[str, Any], table: pd.DataFrame, nodes: int, straggler: str) -> str:
    """'' when the setting exercises the claim's mechanism, else every failed check's reason."""
    return "; ".join(o.reason for o in outcomes(claim, config, table, nodes, straggler) if o.reason)
