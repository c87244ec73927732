"""A small, well-formed results set in the report's input format (results/tables/<experiment>/
{epochs,runs,failed}.csv), built through the real ``collect.summarize``, and a config to go
with it.  Numbers are made up but shaped like real runs: it is the report's input, not a mock.

Experiments: ``baseline`` (no paper -> harness page), ``sgp`` and ``sgp_sim`` (the SGP
paper; the latter on the simulated platform, where the speed claims are judged), with
failed runs, a method that never reaches the target, and a configured method with no runs.
The SGP page's claims take every status the report shows: reproduced, not reproduced,
inconclusive (per-seed times whose interval straddles the boundary: :data:`SEED_FACTOR`),
provisional (OSGP on the simulated cluster: 2 completed seeds, the third failed) and not
comparable.
"""

from __future__ import annotations

import copy
import json
import re
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distrepro_wf.claims import evaluate as wfclaims
from distrepro_wf.claims import published as wfpublished
from distrepro_wf.pipeline.collect import KEYS, backend_columns, summarize, write_atomic
from distrepro_wf.pipeline.config import Run, run_config

WORKLOAD = {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]}, "batch_size": 16, "epochs": 4,
            "target": {"metric": "acc/val", "value": 0.8}}

#: the simulated experiments' 1-peer SGP, spelled out so the closed form knows its pattern
SGP_1PEER = {"name": "sgp", "topology": {"name": "exponential", "peers": 1}}
CONFIG: dict[str, Any] = {
    "experiments": {
        "baseline": {"title": "baseline", "paper": None, "workload": "digits_mlp",
                     "nodes": [1, 2], "stragglers": ["none", "slow1x4"], "seeds": [1, 2, 3],
                     "methods": {"allreduce_sgd": {}, "serial_sgd": {"nodes": [1]}}},
        "sgp": {"title": "SGP against AR-SGD", "paper": "SGP (Assran+ 2019)", "workload": "digits_mlp",
                "nodes": [4], "stragglers": ["none"], "seeds": [1, 2, 3],
                "methods": {"allreduce_sgd": {}, "dpsgd": {}, "sgp_1peer": {}, "sgp_2peer": {},
                            "osgp": {"seeds": [1, 2]}}},
        "sgp_sim": {"title": "SGP against AR-SGD on a simulated 10 GbE cluster", "paper": "SGP (Assran+ 2019)",
                    "workload": "digits_mlp", "backend": "simgrid", "platform": "ethernet_10g",
                    "profile": "resnet50_v100x8", "nodes": [4], "stragglers": ["none"], "seeds": [1, 2, 3],
                    "methods": {"allreduce_sgd": {}, "dpsgd": {}, "dpsgd_stm": {}, "sgp_1peer": {"algorithm": SGP_1PEER},
                                "osgp": {"seeds": [1, 2, 3], "algorithm": {**SGP_1PEER, "name": "osgp"}}}},
        # the fast-network control of sgp_sim (claims' `control`): SGP's advantage shrinks there
        "sgp_sim_fastnet": {"title": "Control: SGP against AR-SGD on simulated InfiniBand", "paper": "SGP (Assran+ 2019)",
                            "workload": "digits_mlp", "backend": "simgrid", "platform": "infiniband_100g",
                            "profile": "resnet50_v100x8", "nodes": [4], "stragglers": ["none"], "seeds": [1, 2, 3],
                            "methods": {"allreduce_sgd": {}, "sgp_1peer": {"algorithm": SGP_1PEER}},
                            "figures": ["to_target", "time_breakdown"]},  # a control: only what it controls
    },
    "workloads": {"digits_mlp": WORKLOAD},
    "stragglers": {"none": {"kind": "none"}, "slow1x4": {"kind": "fixed", "ranks": [-1], "factor": 4}},
}

# (experiment, method, nodes, straggler) -> (time per epoch s, final accuracy, bytes per epoch)
SPEC = {
    ("baseline", "allreduce_sgd", 1, "none"): (0.10, 0.95, 0.0),
    ("baseline", "allreduce_sgd", 1, "slow1x4"): (0.40, 0.95, 0.0),
    ("baseline", "allreduce_sgd", 2, "none"): (0.12, 0.95, 2e5),
    ("baseline", "allreduce_sgd", 2, "slow1x4"): (0.30, 0.95, 2e5),
    ("baseline", "serial_sgd", 1, "none"): (0.10, 0.96, 0.0),
    ("baseline", "serial_sgd", 1, "slow1x4"): (0.40, 0.96, 0.0),
    ("sgp", "allreduce_sgd", 4, "none"): (0.50, 0.95, 4e5),
    ("sgp", "sgp_1peer", 4, "none"): (0.30, 0.945, 1e5),
    ("sgp", "sgp_2peer", 4, "none"): (0.35, 0.70, 2e5),  # never reaches the target 0.8
    ("sgp", "dpsgd", 4, "none"): (0.60, 0.94, 2e5),
    # sgp's osgp is configured (seeds 1, 2) but has no completed run: seed 1 failed, seed 2 is
    # in neither table (listed as missing)
    ("sgp_sim", "allreduce_sgd", 4, "none"): (0.50, 0.95, 4e5),  # SGP faster: "reproduced"
    ("sgp_sim", "sgp_1peer", 4, "none"): (0.30, 0.945, 1e5),
    ("sgp_sim", "dpsgd", 4, "none"): (0.60, 0.94, 2e5),  # per seed, see SEED_FACTOR: "inconclusive"
    ("sgp_sim", "dpsgd_stm", 4, "none"): (0.60, 0.94, 2e5),  # SGP's order (sgp_faster_than_dpsgd): "inconclusive"
    # seed 1 failed, seeds 2 and 3 faster than SGP: an interval inside the pass region on 2
    # seeds, so "provisional", never "reproduced"
    ("sgp_sim", "osgp", 4, "none"): (0.24, 0.945, 1e5),
    ("sgp_sim_fastnet", "allreduce_sgd", 4, "none"): (0.31, 0.95, 4e5),
    ("sgp_sim_fastnet", "sgp_1peer", 4, "none"): (0.29, 0.945, 1e5),
}
# (experiment, method, nodes, straggler) -> {seed: factor on the time per epoch}: D-PSGD's time
# differs so much between seeds that the SGP/D-PSGD ratios (0.91, 0.45, 0.63) straddle 1.05
SEED_FACTOR = {("sgp_sim", "dpsgd", 4, "none"): {1: 0.55, 2: 1.1, 3: 0.8},
               ("sgp_sim", "dpsgd_stm", 4, "none"): {1: 0.55, 2: 1.1, 3: 0.8}}
FAILED = [("sgp", "osgp", 4, "none", 1), ("sgp_sim", "osgp", 4, "none", 1)]


def _epochs(key: tuple, seed: int) -> pd.DataFrame:
    e, m, n, s = key
    t, acc, nbytes = SPEC[key]
    t *= SEED_FACTOR.get(key, {}).get(seed, 1.0)
    rng = np.random.default_rng(zlib.crc32(f"{e}/{m}/{n}/{s}/{seed}".encode()))
    k = WORKLOAD["epochs"]
    ep = np.arange(k)
    accs = acc * (1 - 0.5 ** (ep + 1)) + rng.normal(0, 0.002, k)
    times = t * (1 + rng.normal(0, 0.03, k))
    return pd.DataFrame({
        "epoch": ep, "loss/train": 2.0 * 0.5 ** ep + rng.uniform(0, 0.01, k), "loss/val": 2.1 * 0.5 ** ep,
        "acc/val": accs, "comm/bytes_sent": np.full(k, nbytes), "comm/bytes_recv": np.full(k, nbytes),
        "consensus/distance": np.zeros(k) if m in ("allreduce_sgd", "serial_sgd") else 0.01 * 0.5 ** ep,
        "time/epoch_s": times, "time/wall_s": np.cumsum(times), "time/compute_s": times * 0.35,
        "time/comm_s": times * 0.6, "time/straggler_delay_s": times * (0.5 if s != "none" else 0.0),
        "acc/val_min": accs - 0.01, "step": (ep + 1) * 10 - 1,
        "experiment": e, "method": m, "nodes": n, "straggler": s, "seed": seed,
    })


#: runs.csv columns of the collector's newer contract, added here where collect.summarize does
#: not write them yet (a column it writes is kept as written)
def _contract_run_columns(row: dict[str, Any], t: pd.DataFrame, exp: dict[str, Any]) -> dict[str, Any]:
    target = WORKLOAD["target"]["value"]
    hit = t[t["acc/val"] >= target]
    extra = {"reached_target": bool(len(hit)),
             "steps_to_target": float(hit["step"].iloc[0] + 1) if len(hit) else np.nan,
             "tta_evals": len(t)}
    per = float(t["time/epoch_s"].mean())
    comp, comm, strag = (float(t[k].mean()) for k in ("time/compute_s", "time/comm_s", "time/straggler_delay_s"))
    scale = per / max(comp + comm + strag, per)  # the parts sum to the time per epoch
    extra |= {"bd_compute_s": comp * scale, "bd_comm_s": comm * scale, "bd_straggler_s": strag * scale}
    extra["bd_other_s"] = per - extra["bd_compute_s"] - extra["bd_comm_s"] - extra["bd_straggler_s"]
    extra |= {"comm_share": extra["bd_comm_s"] / per, "compute_share": extra["bd_compute_s"] / per,
              "network": (f"simulated network ({exp.get('platform')})" if exp.get("backend") == "simgrid"
                          else "loopback (one host)")}
    return {k: v for k, v in extra.items() if k not in row} | row


def _evals(ep: pd.DataFrame) -> pd.DataFrame:
    """evals.csv of a run: two evaluation points per epoch (mid-epoch and end), as collect writes
    when the runtime evaluates more often than once per epoch: the evaluation metrics only
    (collect.SERIES_COLS and catalogue.EVAL_KEYS; no training loss, no time kind)."""
    rows = []
    for _, r in ep.iterrows():
        for half in (0.5, 1.0):
            rows.append({k: r[k] for k in KEYS} | {
                "step": int((r["epoch"] + half) * 10) - 1, "epoch_f": r["epoch"] + half,
                "time/wall_s": r["time/wall_s"] - (1 - half) * r["time/epoch_s"],
                "acc/val": r["acc/val"] - (1 - half) * 0.05})
    return pd.DataFrame(rows)


#: experiments whose collector wrote evals.csv (the curves read it instead of epochs.csv)
EVALS = ("sgp_sim",)


def build_tables(tables_dir: Path, config: dict[str, Any] = CONFIG) -> None:
    """Write results/tables/<experiment>/{epochs,runs,failed}.csv for every experiment of ``config``."""
    for e, exp in config["experiments"].items():
        epochs, runs = [], []
        for key in SPEC:
            if key[0] != e:
                continue
            for seed in (exp["methods"][key[1]] or {}).get("seeds", exp["seeds"]):
                if (*key, seed) in FAILED:
                    continue
                t = _epochs(key, seed)
                epochs.append(t)
                info = dict(zip(KEYS, (e, key[1], key[2], key[3], seed))) | {
                    "status": "ok", "algorithm": key[1], "target_metric": "acc/val",
                    "target_value": WORKLOAD["target"]["value"],
                    "epochs": WORKLOAD["epochs"], "config_hash": f"{seed:016x}", "git_commit": "abc1234",
                    "host": "fixture-host", "torch": "2.14.1", "python": "3.11.7",
                    "started_at": "2026-01-01T00:00:00+0000", "steps_per_epoch": 10, "params": 1234,
                    "cpu_count": 2, "platform": "Linux-fixture", "device": "cpu"} | backend_columns(
                        {"backend": exp.get("backend"), "platform": exp.get("platform"),
                         "profile": exp.get("profile")})
                runs.append(_contract_run_columns(summarize(info, t), t, exp))
                run_dir = Path(tables_dir).parent / "runs" / e / key[1] / f"n{key[2]}" / key[3] / f"seed{seed}"
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / "run.json").write_text(json.dumps(run_config(config, Run(e, key[1], key[2], key[3], seed))))
        ep = pd.concat(epochs, ignore_index=True)
        ep = ep[KEYS + [c for c in ep.columns if c not in KEYS]]
        failed = pd.DataFrame([dict(zip(KEYS, f)) | {"reason": "rank 2 exited with code 17", "returncode": 17,
                                                     "log": f"results/logs/train/{f[0]}/{f[1]}/n{f[2]}.log",
                                                     "attempt_dir": ""} for f in FAILED if f[0] == e],
                              columns=KEYS + ["reason", "returncode", "log", "attempt_dir"])
        d = Path(tables_dir) / e
        write_atomic(ep, d / "epochs.csv")
        write_atomic(pd.DataFrame(runs), d / "runs.csv")
        write_atomic(failed, d / "failed.csv")
        if e in EVALS:
            write_atomic(_evals(ep), d / "evals.csv")


#: claims.csv columns of the claims rule's newer contract, added where claims.evaluate does not
#: write them yet: a control setting for SGP/AR-SGD (the same ratio on the fast network) and a
#: published value, so the forest plot draws every kind of marker
CONTROL = {"sgp_epoch_faster_than_ar": ("SGP / AR-SGD on the fast network (fixture)", 0.97, 0.93, 1.01)}


def add_claim_columns(results: pd.DataFrame, published: Any) -> pd.DataFrame:
    from distrepro_wf.report.evidence import claim_frame

    framed = claim_frame(results, published.claims, published.papers)
    out = results.copy()
    for col in ("page", "mechanism", "pass_low", "pass_high", "scale", "control", "control_measured", "control_low",
                "control_high", "setting"):
        if col not in out:
            out[col] = framed[col]
    for cid, (name, m, lo, hi) in CONTROL.items():
        sel = (out["claim"] == cid) & (out["status"] != wfclaims.NOT_COMPARABLE) & (out["control"].fillna("") == "")
        out.loc[sel, ["control", "control_measured", "control_low", "control_high"]] = [name, m, lo, hi]
    sel = (out["mechanism"].fillna("") == "") & (out["claim"] == "sgp_epoch_faster_than_ar")
    out.loc[sel, "mechanism"] = "communication-bound steps: the network, not compute, sets AR-SGD's step time"
    return out


def render(root: Path, config: dict[str, Any] | None = None) -> list[Path]:
    """Tables -> figures -> claims -> report under ``root`` (results/ and reports/), as the pipeline does."""
    from distrepro_wf.report.evidence import claim_frame, plotted
    from distrepro_wf.report.plots import FOREST_PAGES, draw, experiment_figures, forest, read_tables, tornado
    from distrepro_wf.report.build import build

    config = copy.deepcopy(config or CONFIG)
    tables = root / "results" / "tables"
    build_tables(tables, config)
    experiments = sorted(config["experiments"])
    for e in experiments:
        t = read_tables(tables / e)
        for name in experiment_figures(config, e):  # rule plot: the figures the experiment asks for
            draw(name, t, root / "reports" / "figures" / e / f"{name}.png", config)
    published = wfpublished.load(config)
    runs, failed = wfclaims.read_tables(tables, experiments)
    results = add_claim_columns(wfclaims.evaluate(published, config, runs, failed), published)
    write_atomic(results, tables / "claims.csv")
    frame = claim_frame(pd.read_csv(tables / "claims.csv"), published.claims, published.papers)
    for page in FOREST_PAGES:
        forest(plotted(frame, page), root / "reports" / "figures" / f"forest_{page}.png")
    for claim, g in wfclaims.sensitivity_table(published, config, results).groupby("claim"):  # rule tornado
        tornado(g, root / "reports" / "figures" / "tornado" / f"{claim}.png")
    return build(experiments, config, tables, root / "reports" / "index.html",
                 sorted((root / "results" / "bench").glob("*.csv")), [],
                 published, pd.read_csv(tables / "claims.csv"))


class _Tables(HTMLParser):
    """The body rows of every table of a page, keyed by the id of the heading before it."""

    def __init__(self) -> None:
        super().__init__()
        self.heading, self.tables, self.classes = "", {}, {}
        self.rows: list[list[str]] | None = None
        self.cls: list[list[str]] = []
        self.in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3") and dict(attrs).get("id"):
            self.heading = dict(attrs)["id"]
        elif tag == "table":
            self.rows, self.cls = [], []
        elif tag == "tbody":
            self.in_body = True
        elif self.rows is not None and self.in_body and tag == "tr":
            self.rows.append([])
            self.cls.append([])
        elif self.rows is not None and self.in_body and tag in ("td", "th"):
            self.rows[-1].append("")
            self.cls[-1].append(dict(attrs).get("class") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self.in_body = False
        elif tag == "table" and self.rows is not None:
            self.tables.setdefault(self.heading, [[re.sub(r"\s+", " ", c).strip() for c in r] for r in self.rows])
            self.classes.setdefault(self.heading, [[set(c.split()) for c in r] for r in self.cls])
            self.rows = None

    def handle_data(self, data: str) -> None:
        if self.rows and self.in_body and self.rows[-1]:
            self.rows[-1][-1] += " " + data


def html_tables(path: Path) -> dict[str, list[list[str]]]:
    """Cell texts of the first table after each heading with an id (``claims``, ``failed``, ...) of a
    rendered report page, body rows only; a cell's parts (a status and its reason) joined by a space."""
    p = _Tables()
    p.feed(Path(path).read_text())
    return p.tables


def html_classes(path: Path) -> dict[str, list[list[set[str]]]]:
    """The class names of each body cell of the tables :func:`html_tables` reads (same keys,
    same shape): what colours a status and marks a row real or simulated, read without a browser."""
    p = _Tables()
    p.feed(Path(path).read_text())
    return p.classes
