"""`snakemake plan` (issue 33 item 1): the plan: section's checks, the ranking's logic, and a tiny
plan run for real through the workflow, its CSV and its page read back (parsed, no browser)."""

import copy
import math
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml

from distrepro_wf.plan import checks as plan_checks
from distrepro_wf.plan import config as wfplan
from distrepro_wf.plan import config as pconfig
from distrepro_wf.plan import table
from distrepro_wf.plan.published import accuracy_costs
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]

TINY = {
    "plan": {"name": "tiny", "model": {"model_mb": 100, "step_ms": 100, "batch": 32, "epoch_samples": 100000},
             "nodes": [4], "network": {"nic_gbps": [1, 10], "latency_us": 50}, "stragglers": ["none"],
             "methods": {"allreduce_sgd": {}, "sgp": {}}, "epochs_to_target": {"allreduce_sgd": 10},
             "steps": 3, "crossover": {"compute_ms": [50, 100], "nic_gbps": [1, 10]}},
    "stragglers": {"none": {"kind": "none"}},
}


def _with(path: str, value):
    cfg = copy.deepcopy(TINY)
    *head, last = path.split(".")
    node = cfg
    for k in head:
        node = node[k]
    node[last] = value
    return cfg


@pytest.mark.parametrize("path, value, key, says", [
    ("plan.network.topology", "ring", "plan.network.topology", "allowed values: star, fat_tree, racks"),
    ("plan.modle", {}, "plan.modle", "unknown key; allowed keys: crossover, epochs_to_target, methods, model"),
    ("plan.network.rack_size", 8, "plan.network.rack_size", "only topology 'racks' has 'rack_size'"),
    ("plan.model.profile", "resnet18", "plan.model.profile", "allowed values: resnet50_v100x8"),
    ("plan.model", {"model_mb": 100, "batch": 32, "epoch_samples": 10}, "plan.model.step_ms",
     "needed without a paper profile"),
    ("plan.stragglers", ["slow"], "plan.stragglers", "unknown straggler setting 'slow'; known (stragglers:): none"),
    ("plan.methods", {"gossip": {}}, "plan.methods.gossip", "unknown algorithm 'gossip'; known: adpsgd"),
    ("plan.methods", {"allreduce_sgd": {}, "serial_sgd": {}}, "plan.methods.serial_sgd", "does not apply: not at 4 nodes"),
    ("plan.epochs_to_target", {"osgp": 90}, "plan.epochs_to_target.osgp", "allowed: allreduce_sgd, sgp"),
    ("plan.network.nic_gbps", [], "plan.network.nic_gbps", "should be non-empty"),
])
def test_a_bad_plan_is_refused_naming_the_key(path, value, key, says):
    with pytest.raises(ConfigError) as e:
        plan_checks.validate(_with(path, value))
    assert e.value.key == key and says in str(e.value), str(e.value)


def test_a_good_plan_expands_into_points_and_a_plan_config_needs_no_experiments():
    assert plan_checks.validate(copy.deepcopy(TINY)) == []
    pts = pconfig.points(TINY)
    # 2 methods x 2 NICs at 100 ms (ranking) + the crossover's 50 ms column (100 ms is shared)
    assert len(pts) == 2 * 2 + 2 * 2 and len(set(pts)) == len(pts)
    cfg = pconfig.run_config(TINY, pts[0])
    assert cfg["backend"] == "simgrid" and cfg["platform"] == {"name": "star", "nic_gbps": 1.0, "latency_us": 50.0}
    assert cfg["profile"] == {"name": "fixed", "model_mb": 100, "step_ms": 100.0}
    assert cfg["workload"]["max_steps_per_epoch"] == 3
    racks = _with("plan.network", {"nic_gbps": [10], "topology": "racks", "uplink_gbps": 5})
    assert pconfig.platform(racks["plan"], 10) == {"name": "shared_hpc", "nic_gbps": 10.0, "latency_us": 50.0,
                                                   "rack_size": 8, "uplink_gbps": 5, "background_load": 0.0}
    # by default every registered method (its variants) that applies: serial_sgd (one worker) and d2
    # (plain SGD) do not
    why = pconfig.applicable(_with("plan.methods", None))
    assert why["allreduce_sgd"] is None and why["adpsgd"] is None
    assert why["sgp_1peer"] is None and why["sgp_2peer"] is None and "sgp" not in why  # SGP's variants
    assert why["serial_sgd"].startswith("not at 4 nodes") and why["d2"] is not None


def test_ranking_ranks_each_cell_by_time_per_epoch():
    rows = [("a", 4, 1.0, 0.30), ("b", 4, 1.0, 0.20), ("c", 4, 1.0, 0.20), ("a", 4, 10.0, 0.10), ("b", 4, 10.0, 0.15),
            ("a", 8, 1.0, 0.5)]
    pts = pd.DataFrame([{"method": m, "nodes": n, "nic_gbps": g, "compute_ms": 100.0, "straggler": "none",
                         "step_s": s, "compute_s": 0.1, "bytes_per_step": 1e8, "comm_share": 1 - 0.1 / s,
                         "status": "ok"} for m, n, g, s in rows])
    r = table.ranking(pts, epoch_samples=1000, batch=32, step_ms=100.0, epochs_to_target={"a": 2})
    got = {(m, n, g): k for m, n, g, k in zip(r["method"], r["nodes"], r["nic_gbps"], r["rank"])}
    assert got == {("b", 4, 1.0): 1, ("c", 4, 1.0): 1, ("a", 4, 1.0): 3, ("a", 4, 10.0): 1, ("b", 4, 10.0): 2,
                   ("a", 8, 1.0): 1}
    a = r[(r["method"] == "a") & (r["nodes"] == 4) & (r["nic_gbps"] == 1.0)].iloc[0]
    assert a["steps_per_epoch"] == 8 and math.isclose(a["epoch_s"], 8 * 0.30)  # ceil(1000 / (4 x 32))
    assert math.isclose(a["time_to_target_s"], 2 * 8 * 0.30) and r[r["method"] == "b"]["time_to_target_s"].isna().all()
    # a crossover cell at the model's compute (here 100 Gbit/s) is no cell of the ranking
    extra = pts.iloc[:1].assign(nic_gbps=100.0)
    assert set(table.ranking(pd.concat([pts, extra]), 1000, 32, 100.0, nic_gbps=[1, 10])["nic_gbps"]) == {1.0, 10.0}
    grid = table.crossover(pts.assign(compute_ms=100.0), [4], [100.0], [1.0, 10.0])
    assert list(grid["fastest"]) == ["b", "a"] and math.isclose(grid["margin"].iloc[1], 0.5)
    sens = table.swaps(r, grid, 100.0)
    bw = sens[(sens["nic_gbps"] == 10.0) & (sens["parameter"] == "nic_gbps")].iloc[0]
    assert (bw["first"], bw["second"], bw["swaps_at"], bw["then_fastest"]) == ("a", "b", 1.0, "b")
    assert table.swaps(r, grid.iloc[0:0], 100.0).empty  # no crossover map: no sensitivity claimed


def test_accuracy_costs_are_the_published_rows():
    costs = accuracy_costs(pconfig.methods({"methods": {
        "allreduce_sgd": {}, "sgp_1peer": {"algorithm": {"name": "sgp", "topology": {"name": "exponential",
                                                                                       "peers": 1}}},
        "sgp_2peer": {"algorithm": {"name": "sgp", "topology": {"name": "exponential", "peers": 2}}},
        "osgp": {}, "dpsgd": {}}})).set_index("method")
    assert costs.loc["sgp_1peer", "cost_pp"] == -0.85 and costs.loc["osgp", "cost_pp"] == -1.04
    assert costs.loc["allreduce_sgd", "cost_pp"] == 0.0
    assert math.isnan(costs.loc["sgp_2peer", "cost_pp"]) and math.isnan(costs.loc["dpsgd", "cost_pp"])
    assert "SlowMo" in costs.loc["osgp", "source"] and "slowmo_t1_osgp_top1" in costs.loc["osgp", "source"]


class _Page(HTMLParser):
    """Every element's id and data-* attributes, and each table's cells (by table id)."""

    def __init__(self):
        super().__init__()
        self.ids, self.cells, self.text, self._table = set(), {}, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table":
            self._table = a.get("id")
        if tag == "td" and self._table:
            self.cells.setdefault(self._table, []).append({k[5:]: v for k, v in a.items() if k.startswith("data-")})

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.workflow
def test_a_tiny_plan_runs_for_real_into_its_csv_and_page(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    proc = subprocess.run([*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", "plan", "--configfile", str(cfg)],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = pd.read_csv(tmp_path / "results/plan/tiny.csv")
    assert len(r) == 4 and set(r["method"]) == {"allreduce_sgd", "sgp"}
    for _, cell in r.groupby(["nodes", "nic_gbps", "straggler"]):
        assert sorted(cell["rank"]) == [1, 2]
        assert cell.sort_values("epoch_s")["rank"].tolist() == [1, 2]
    # the described model's bytes: a ring all-reduce sends 2 (n - 1) / n of 100 MB, 1-peer SGP ~100 MB
    ar, sgp = r[r["method"] == "allreduce_sgd"], r[r["method"] == "sgp"]
    assert ar["bytes_per_step_mb"].round(3).eq(150.0).all() and sgp["bytes_per_step_mb"].between(99, 101).all()
    # a slower NIC only adds time; the communication share is what the compute is not
    assert (ar.sort_values("nic_gbps")["step_ms"].diff().dropna() < 0).all()
    assert (r["step_ms"] > 100).all() and r["comm_share"].between(0, 1).all()
    assert (r["steps_per_epoch"] == 782).all() and (r["epoch_s"] - r["step_ms"] * 782 / 1e3).abs().max() < 1e-6
    assert (ar["time_to_target_s"] - 10 * ar["epoch_s"]).abs().max() < 1e-6 and sgp["time_to_target_s"].isna().all()
    grid = pd.read_csv(tmp_path / "results/plan/tiny/crossover.csv")
    assert len(grid) == 4 and set(grid["compute_ms"]) == {50.0, 100.0}
    # the page, parsed
    page = _Page()
    page.feed((tmp_path / "reports/plan/tiny.html").read_text())
    text = " ".join(page.text)
    assert {"ranking", "ranking-n4", "crossover-n4", "sensitivity", "accuracy-cost", "not-captured",
            "time-to-target"} <= page.ids
    shown = {(c["method"], float(c["nic"])): int(c["rank"]) for c in page.cells["ranking-n4"] if c}
    assert shown == {(m, g): k for m, g, k in zip(r["method"], r["nic_gbps"], r["rank"])}
    cross = [c for c in page.cells["crossover-n4"] if c]
    assert len(cross) == 4 and {(float(c["compute-ms"]), float(c["nic"])) for c in cross if c.get("user")} == {
        (100.0, 1.0), (100.0, 10.0)}
    fastest = {(float(c["compute-ms"]), float(c["nic"])): c["method"] for c in cross}
    assert fastest == {(c, g): m for c, g, m in zip(grid["compute_ms"], grid["nic_gbps"], grid["fastest"])}
    costs = {c["method"]: c["cost-pp"] for c in page.cells["accuracy-cost"] if c}
    assert costs["sgp"] == "-0.85" and costs["allreduce_sgd"] == "0.0"
    assert "published, not measured here" in text and "What this model does not capture" in text


def _synthetic_page(tmp_path: Path) -> Path:
    """A plan page rendered from a synthetic points table (no simulation)."""
    from distrepro_wf.plan.page import render

    rows = [(m, g, c, s) for m, f in (("allreduce_sgd", 1.0), ("sgp", 0.9)) for g in (1.0, 10.0) for c in (50.0, 100.0)
            for s in [c / 1e3 + f * 1.0 / g]]
    pts = pd.DataFrame([{"method": m, "nodes": 4, "nic_gbps": g, "compute_ms": c, "straggler": "none", "step_s": s,
                         "compute_s": c / 1e3, "bytes_per_step": 1e8, "comm_share": 1 - c / 1e3 / s, "status": "ok"}
                        for m, g, c, s in rows])
    plan = TINY["plan"]
    rank = table.ranking(pts, 100000, 32, 100.0, plan["epochs_to_target"])
    grid = table.crossover(pts, [4], [50.0, 100.0], [1.0, 10.0])
    page = render(plan, rank, grid, table.swaps(rank, grid, 100.0), accuracy_costs(pconfig.methods(plan)), {},
                  lambda m: "#1f77b4", "snakemake --cores 2 plan --configfile tiny.yaml")
    out = tmp_path / "tiny.html"
    out.write_text(page)
    return out


@pytest.mark.skipif(os.environ.get("DISTREPRO_NO_BROWSER") == "1", reason="DISTREPRO_NO_BROWSER=1")
def test_the_plan_page_in_a_browser(tmp_path):
    """The page as a person sees it (headless Chromium, as tests/test_report_browser.py): no console
    error, the ranking and crossover tables with their rows, the user's points outlined."""
    from test_report_browser import CHROME_ARGS, _browser_or_fail, inspect

    webdriver, Service, chromium, driver = _browser_or_fail()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in [*CHROME_ARGS, f"--user-data-dir={tmp_path / 'profile'}"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
    try:
        r = inspect(drv, _synthetic_page(tmp_path))
        assert r["errors"] == [] and r["title"] == "Plan: tiny"
        rows = dict(r["tables"])
        assert rows["ranking"] == 3 and rows["crossover"] == 3  # a header and two rows each
        user = drv.find_elements("css selector", "#crossover-n4 td.user")
        assert len(user) == 2 and all(u.value_of_css_property("outline-style") == "solid" for u in user)
        assert "published, not measured here" in drv.find_element("id", "accuracy").text
        assert drv.find_element("id", "not-captured").is_displayed()
    finally:
        drv.quit()
