"""Tier 3: the Snakemake workflow itself: lint, dry runs, bad config, a tiny end-to-end run."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.workflow
ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]

TINY = {
    "experiments": {
        "smoke": {
            "title": "smoke test", "workload": "tiny", "nodes": [1, 2], "stragglers": ["none"], "seeds": [1],
            "methods": {"allreduce_sgd": {}},
        }
    },
    "workloads": {
        "tiny": {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]}, "batch_size": 16,
                 "epochs": 2, "max_steps_per_epoch": 8, "optimizer": {"lr": 0.1},
                 "target": {"metric": "acc/val", "value": 0.2}},
    },
    "stragglers": {"none": {"kind": "none"}},
    "launcher": {"kind": "local", "timeout_s": 300},
}


def smk(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, "-d", str(workdir), "--cores", "2", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=900)


def write_config(tmp_path: Path, cfg: dict) -> str:
    p = tmp_path / "config.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return str(p)


def test_lint_has_only_the_deployment_lint():
    proc = subprocess.run([*SNAKEMAKE, "--lint"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    out = proc.stdout + proc.stderr
    assert "Error" not in out, out
    lints = [line.strip() for line in out.splitlines() if line.strip().startswith("* ")]
    # Deployment is a pinned virtualenv (scripts/setup.sh), not per-rule conda envs.
    assert lints and all(line.startswith("* Specify a conda environment or container") for line in lints), lints


def test_dry_run_of_the_default_config(tmp_path):
    proc = smk(tmp_path, "-n", "all", "bench")
    assert proc.returncode == 0, proc.stderr
    # the benchmarks too (rule bench: BENCH_TABLES)
    assert any(line.split() == ["bench_workload_throughput", "1"] for line in proc.stdout.splitlines()), proc.stdout
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    groups = {(e, n) for e, x in cfg["experiments"].items() for m, mm in x["methods"].items()
              for n in (mm or {}).get("nodes", x["nodes"])}
    assert any(line.split() == ["train", str(len(groups))] for line in proc.stdout.splitlines()), proc.stdout
    assert "sensitivity_sweep" not in proc.stdout  # ~320 simulations: target studies only


def test_dry_run_of_the_studies_target(tmp_path):
    """`snakemake --cores 2 studies` (issue 24): the default config and every study config in one
    run and one report; only dry-run here (the real run takes about an hour)."""
    proc = smk(tmp_path, "-n", "studies")
    assert proc.returncode == 0, proc.stderr
    groups = set()
    for f in ("config", "compression_survey", "ps_studies", "translation", "large_batch", "katyusha_x"):
        cfg = yaml.safe_load((ROOT / "config" / f"{f}.yaml").read_text())
        groups |= {(e, n) for e, x in cfg["experiments"].items() for m, mm in x["methods"].items()
                   for n in (mm or {}).get("nodes", x["nodes"])}
    counts = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines() if len(line.split()) == 2}
    assert counts.get("train") == str(len(groups)) and counts.get("studies") == "1" and counts.get("report") == "1"
    assert counts.get("sensitivity_sweep") == "1"  # the simulator re-run over the sensitivity ranges
    assert "reports/figures/katyusha_x/" in proc.stdout and "results/tables/translation_sim/runs.csv" in proc.stdout


def test_invalid_config_stops_before_any_job(tmp_path):
    bad = json.loads(json.dumps(TINY))
    bad["experiments"]["smoke"]["methods"]["sgdd"] = {}
    proc = smk(tmp_path, "--configfile", write_config(tmp_path, bad))
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "invalid configuration: experiments.smoke.methods.sgdd.algorithm.name: unknown algorithm 'sgdd'" in err
    assert "allreduce_sgd" in err
    assert not (tmp_path / "results" / "runs").exists()


def snapshot(run_dir: Path) -> dict:
    """What must not change if a finished run is reused: every file's inode, mtime and content."""
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(run_dir.rglob("*"))
            if p.is_file()}


def run_dir(tmp_path: Path, nodes: int, seed: int) -> Path:
    """The end-to-end test's runs: serial_sgd alone at 1 rank, allreduce_sgd with the straggler at 2."""
    method, straggler = ("serial_sgd", "none") if nodes == 1 else ("allreduce_sgd", "slow")
    return tmp_path / f"results/runs/smoke/{method}/n{nodes}/{straggler}/seed{seed}"


def resumed_from(d: Path):
    return json.loads((d / "run" / "runinfo.json").read_text())["resumed_from_epoch"]


def wait_for(cond, proc: subprocess.Popen | None = None, timeout: float = 300) -> None:
    """Poll ``cond`` until true; fail if ``proc`` ended first or on timeout."""
    t0 = time.time()
    while not cond():
        assert proc is None or proc.poll() is None, "the invocation ended before the condition held"
        assert time.time() - t0 < timeout, "timed out waiting"
        time.sleep(0.2)


def launch_processes(workdir: Path) -> list[str]:
    """Command lines of live processes running a plan of ``workdir`` (torchrun and its ranks)."""
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            cmd, cwd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(), os.readlink(p / "cwd")
        except OSError:
            continue
        if "--plan" in cmd and Path(cwd) == workdir:
            out.append(cmd)
    return out


VALUES = ["nodes", "seed", "final_acc", "final_train_loss", "final_val_loss", "bytes_sent_per_epoch"]


def test_end_to_end_failure_retry_resume_damage_and_no_recompute(tmp_path):
    cfg = json.loads(json.dumps(TINY))
    cfg["experiments"]["smoke"]["seeds"] = [1, 2]  # groups n1 and n2, two runs each
    # >= 0.5 s per step of the 2-rank runs (the last worker sleeps that long; rank 0 waits for it
    # in the all-reduce): time to kill an invocation mid-run.  The 1-rank group (serial_sgd)
    # needs no such time: it runs without a straggler, at full speed
    cfg["stragglers"]["slow"] = {"kind": "fixed", "ranks": [-1], "delay_s": 0.5}
    cfg["experiments"]["smoke"]["stragglers"] = ["slow"]
    cfg["experiments"]["smoke"]["methods"] = {"allreduce_sgd": {"nodes": [2]},
                                              "serial_sgd": {"nodes": [1], "stragglers": ["none"]}}
    drawn = ["loss_vs_epoch", "acc_vs_wall", "epoch_time_vs_nodes", "to_target"]
    cfg["experiments"]["smoke"]["figures"] = drawn  # the figures it draws (default: every registered one)
    cfgfile = write_config(tmp_path, cfg)
    tables = tmp_path / "results" / "tables" / "smoke"
    n1 = [run_dir(tmp_path, 1, s) for s in (1, 2)]
    n2 = [run_dir(tmp_path, 2, s) for s in (1, 2)]
    # 1. rank 1 dies at step 12 (epoch 1, after epoch 0's checkpoint) of the first 2-rank run:
    #    that run crashed, the second of its launch never started, the 1-rank group is fine
    proc = smk(tmp_path, "--configfile", cfgfile, env={"DISTREPRO_FAULT": "1:12"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs, failed = pd.read_csv(tables / "runs.csv"), pd.read_csv(tables / "failed.csv")
    assert sorted(runs["nodes"]) == [1, 1] and set(pd.read_csv(tables / "epochs.csv")["nodes"]) == {1}
    failed = failed.set_index("seed")
    assert list(failed["nodes"]) == [2, 2] and list(failed["kind"]) == ["crashed", "not_started"]
    assert failed.loc[1, "reason"].startswith("torchrun exited with code 1: metrics of rank 0: epochs [1] missing")
    assert failed.loc[2, "reason"] == "not started: an earlier run of the launch failed"
    log = "results/logs/train/smoke/n2.log"
    assert (tmp_path / log).exists()
    # the console says so at the end of the invocation
    assert "2 run(s) failed" in proc.stderr
    assert (f"smoke/allreduce_sgd/n2/slow/seed2  [not_started, retried next time]  not started: an earlier run "
            f"of the launch failed  (log: {log})") in proc.stderr
    assert "2 run(s) failed" in (tmp_path / "reports" / "index.html").read_text()
    assert not (n2[0] / "run").exists() and list(n2[0].glob("failed-*")) and (n2[0] / "checkpoint").is_dir()
    assert not list(tmp_path.glob("results/**/.attempt-*")) and not list(tmp_path.glob("results/**/.plan-*"))
    kept_n1 = {d: snapshot(d) for d in n1}
    n1_launch = snapshot(tmp_path / "results/launches/smoke")  # n1.json (and n2's, which must change)
    # 2. the retry (A) is killed with kill -9 while the second 2-rank run is in epoch 1; a
    #    concurrent invocation (B) started while A lives is refused; A's launch stops with it
    a = subprocess.Popen([*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", "--configfile", cfgfile],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: list((tmp_path / ".snakemake/locks").glob("*.lock")), a)
        b = subprocess.Popen([*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", "--configfile", cfgfile],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: len(list((tmp_path / ".snakemake/distrepro-owners").iterdir())) == 2, a)
        wait_for(lambda: all((n2[1] / "checkpoint" / f"rank{r}.pt").exists() for r in (0, 1)), a)
        os.kill(a.pid, signal.SIGKILL)
        assert b.wait(300) != 0 and "Directory cannot be locked" in b.stdout.read()
        b.stdout.close()
    finally:
        a.kill()
        a.wait()
    wait_for(lambda: not launch_processes(tmp_path))  # the launch of a dead Snakemake is stopped
    # 3. the plain command recovers (stale lock, incomplete output) and retries only the failed
    #    group: both 2-rank runs resume from their checkpoints, the 1-rank runs are reused untouched
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "removed a stale lock of a killed invocation" in proc.stderr
    # rerun-incomplete comes from the workflow profile next to the Snakefile (no flag given)
    assert "Using workflow specific profile profiles/default" in proc.stderr
    assert "run(s) failed" not in proc.stderr
    assert all(snapshot(d) == kept_n1[d] for d in n1)
    launch_n1 = tmp_path / "results/launches/smoke/n1.json"
    assert snapshot(launch_n1.parent)[launch_n1] == n1_launch[launch_n1]
    assert resumed_from(n2[0]) == 1 and resumed_from(n2[1]) == 0
    assert not list(tmp_path.glob("results/**/.attempt-*")) and not list(tmp_path.glob("results/**/.plan-*"))
    runs, failed = pd.read_csv(tables / "runs.csv"), pd.read_csv(tables / "failed.csv")
    assert sorted(runs["nodes"]) == [1, 1, 2, 2] and failed.empty
    for col in ("config_hash", "git_commit", "torch", "host", "seed", "final_acc", "time_per_epoch_s",
                "time_to_target_s", "bytes_sent_per_epoch"):
        assert runs[col].notna().all(), col
    assert (runs.loc[runs["nodes"] == 2, "bytes_sent_per_epoch"] > 0).all()
    html = (tmp_path / "reports" / "index.html").read_text()
    assert "All runs completed" in html
    for img in ("loss_vs_epoch", "acc_vs_wall", "epoch_time_vs_nodes"):
        assert (tmp_path / "reports" / "figures" / "smoke" / f"{img}.png").stat().st_size > 1000
    # experiments.smoke.figures: those drawn (rule plot_smoke), and the only ones its page shows
    assert sorted(p.stem for p in (tmp_path / "reports" / "figures" / "smoke").glob("*.png")) == sorted(drawn)
    page = (tmp_path / "reports" / "papers" / "harness.html").read_text()
    assert sorted(set(re.findall(r'id="(?:no)?fig-smoke-(\w+)"', page))) == sorted(drawn)
    # Snakemake's native report of the same figures and tables
    proc = subprocess.run([*SNAKEMAKE, "-d", str(tmp_path), "--configfile", cfgfile, "--report",
                           str(tmp_path / "report.html")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "report.html").stat().st_size > 10_000
    # 4. damage two finished runs (one rank's metrics deleted, another's truncated): the
    #    plain invocation sees it, recomputes just those two and keeps the damaged copies
    good = runs.sort_values(["nodes", "seed"])[VALUES].reset_index(drop=True)
    kept = {d: snapshot(d) for d in (n1[1], n2[0])}
    (n2[1] / "run/metrics/rank1.jsonl").unlink()
    rank0 = n1[0] / "run/metrics/rank0.jsonl"
    truncated = rank0.read_bytes()[:-30]
    rank0.write_bytes(truncated)
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(snapshot(d) == kept[d] for d in kept)
    (damaged_n2,) = n2[1].glob("damaged-*")
    assert (damaged_n2 / "metrics/rank0.jsonl").exists() and not (damaged_n2 / "metrics/rank1.jsonl").exists()
    (damaged_n1,) = n1[0].glob("damaged-*")
    assert (damaged_n1 / "metrics/rank0.jsonl").read_bytes() == truncated
    assert (n2[1] / "run/metrics/rank1.jsonl").exists() and rank0.stat().st_size > len(truncated)
    runs = pd.read_csv(tables / "runs.csv")
    assert pd.read_csv(tables / "failed.csv").empty
    # same seed, same numbers: the recomputed runs give the rows the damaged ones had
    pd.testing.assert_frame_equal(runs.sort_values(["nodes", "seed"])[VALUES].reset_index(drop=True), good)
    # 5. after the repair nothing is recomputed
    proc = smk(tmp_path, "--configfile", cfgfile, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    kept_now = {d: snapshot(d) for d in n1}
    # 5b. tables cut in half in place are not trusted: the next invocation sets them aside and
    #    rebuilds them (collect's params token), and the claims and the report from them; a dry
    #    run only says so and changes nothing on disk (issue 34)
    for t in ("runs.csv", "evals.csv"):
        (tables / t).write_bytes((tables / t).read_bytes()[: (tables / t).stat().st_size // 2])
    before = _tree_digest(tmp_path)
    proc = smk(tmp_path, "--configfile", cfgfile, "-n")
    assert "runs.csv fails its check" in proc.stderr and "evals.csv fails its check" in proc.stderr
    plan = [line.split() for line in proc.stdout.splitlines()]
    assert ["collect", "1"] in plan and ["compare", "1"] in plan and ["report", "1"] in plan, proc.stdout
    assert _tree_digest(tmp_path) == before  # nothing set aside by a dry run
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list(tables.glob("runs.csv.damaged-*"))) == len(list(tables.glob("evals.csv.damaged-*"))) == 1
    pd.testing.assert_frame_equal(pd.read_csv(tables / "runs.csv").sort_values(["nodes", "seed"])[VALUES]
                                  .reset_index(drop=True), good)
    # 5c. the claims tables likewise (issue 34): claims.csv cut mid-row and claims_summary.csv at a row
    #    boundary are set aside before any job and rebuilt; the report is rebuilt from the good ones,
    #    never deleted for a bad one
    derived = tmp_path / "results" / "tables"
    claims_rows = len(pd.read_csv(derived / "claims.csv"))
    report_html = (tmp_path / "reports" / "index.html").read_text()
    c = derived / "claims.csv"
    c.write_bytes(c.read_bytes()[: c.stat().st_size // 2])
    summ = derived / "claims_summary.csv"
    summ.write_text("".join(summ.read_text().splitlines(keepends=True)[:-1]))
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "claims.csv fails its check" in proc.stderr and "claims_summary.csv fails its check" in proc.stderr
    assert len(pd.read_csv(derived / "claims.csv")) == claims_rows
    assert len(list(derived.glob("claims.csv.damaged-*"))) == len(list(derived.glob("claims_summary.csv.damaged-*"))) == 1
    assert (tmp_path / "reports" / "index.html").read_text().count("<tr") == report_html.count("<tr")
    # 6. a changed config whose rerun fails leaves the previous good result in place: only the
    #    2-rank runs' straggler changes (nothing to kill any more: the reruns need not be slow),
    #    so only their group reruns, and rank 1 dies in it
    changed = json.loads(json.dumps(cfg))
    changed["stragglers"]["slow"]["delay_s"] = 0.0
    proc = smk(tmp_path, "--configfile", write_config(tmp_path, changed), env={"DISTREPRO_FAULT": "1:3"})
    assert proc.returncode == 0
    assert json.loads((n2[0] / "outcome.json").read_text())["kind"] == "crashed"
    assert json.loads((n2[0] / "run" / "config.json").read_text())["straggler"]["delay_s"] == 0.5  # untouched
    assert all(snapshot(d) == kept_now[d] for d in n1)  # the 1-rank group was not rerun
    assert sorted(pd.read_csv(tables / "runs.csv")["nodes"]) == [1, 1]
    assert set(pd.read_csv(tables / "epochs.csv")["nodes"]) == {1}


@pytest.mark.timeout(1200)  # three invocations, the first a whole (tiny) pipeline
def test_damaged_claims_tables_are_rebuilt_and_a_dry_run_changes_nothing(tmp_path):
    """Issue 34, cases 1, 2 and 6 through the plain command.  claims.csv cut at a row boundary was
    consumed silently (a report of fewer claims); cut mid-row it killed the report rule, whose
    outputs Snakemake deleted, on every later run; a dry run renamed damaged tables.  Now a dry
    run names them and changes nothing, and the next run sets them aside before any job,
    rebuilds them (rule compare) and the report from them."""
    cfg = json.loads(json.dumps(TINY))
    cfg["experiments"]["smoke"].update(nodes=[1], methods={"serial_sgd": {}}, figures=["loss_vs_epoch"])
    cfgfile = write_config(tmp_path, cfg)
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tables, index = tmp_path / "results" / "tables", tmp_path / "reports" / "index.html"
    full = len(pd.read_csv(tables / "claims.csv"))
    rows = index.read_text().count("<tr")
    assert full > 3
    # a half row in claims.csv (the report rule died on it), a row-boundary cut of claims_summary.csv
    # (consumed silently); test_faults_data.py cuts each table both ways
    claims, summ = tables / "claims.csv", tables / "claims_summary.csv"
    claims.write_bytes(claims.read_bytes()[: claims.stat().st_size // 2])
    summ.write_text("".join(summ.read_text().splitlines(keepends=True)[:2]))
    before = _tree_digest(tmp_path)
    proc = smk(tmp_path, "--configfile", cfgfile, "-n")
    assert "claims.csv fails its check" in proc.stderr and "claims_summary.csv fails its check" in proc.stderr
    plan = [line.split() for line in proc.stdout.splitlines()]
    assert ["compare", "1"] in plan and ["report", "1"] in plan, proc.stdout
    assert _tree_digest(tmp_path) == before  # the dry run set nothing aside
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # rebuilt, and the report from them (never started on the half row, so never deleted)
    assert len(pd.read_csv(claims)) == full and index.read_text().count("<tr") == rows
    assert len(list(tables.glob("claims.csv.damaged-*"))) == len(list(tables.glob("claims_summary.csv.damaged-*"))) == 1


def _tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root/results and root/reports."""
    import hashlib

    return {str(q.relative_to(root)): hashlib.sha256(q.read_bytes()).hexdigest()
            for sub in ("results", "reports") for q in sorted((root / sub).rglob("*")) if q.is_file()}


def test_timeout_is_per_run_and_failure_kinds_of_one_launch(tmp_path):
    """One real launch of four runs: ok, refused by the runtime, too slow, never reached."""
    from conftest import make_config

    from distrepro_wf.pipeline.runs import execute_group, launch_retry_token, plan_member, write_run_configs

    # the per-run limit: well above what the launch's start-up (process start, import torch,
    # rendezvous: under 10 s on a loaded 2-core machine) and the ok run (20 tiny steps) take
    timeout_s = 25
    slow = {"kind": "fixed", "ranks": [-1], "delay_s": 10.0}  # >= 10 s per step
    cfgs = {"ok": make_config("allreduce_sgd", 2), "config": make_config("allreduce_sgd", 2, workload={"epochs": 0}),
            "slow": make_config("allreduce_sgd", 2, straggler_name="slow", straggler=slow),
            "after": make_config("allreduce_sgd", 2, seed=2)}
    dirs = {k: tmp_path / "runs" / k for k in cfgs}
    paths = write_run_configs({str(dirs[k]): c for k, c in cfgs.items()})
    launch_path, log = tmp_path / "launches" / "n2.json", tmp_path / "n2.log"
    launch = execute_group(paths, launch_path, log, {"kind": "local", "timeout_s": timeout_s})
    out = {k: json.loads((d / "outcome.json").read_text()) for k, d in dirs.items()}
    assert [m["status"] for m in launch["members"]] == ["ok", "failed", "failed", "failed"]
    assert out["ok"]["status"] == "ok" and (dirs["ok"] / "run" / "metrics" / "rank1.jsonl").exists()
    assert (out["config"]["kind"], out["config"]["reason"]) == (
        "config", "invalid configuration: workload.epochs: must be >= 1, got 0")
    assert out["slow"]["kind"] == "timeout"
    assert out["slow"]["reason"].startswith(f"timed out after {timeout_s} s (launcher.timeout_s, per run): ")
    assert (dirs["slow"] / out["slow"]["attempt_dir"] / "STARTED").exists()
    # killed once *it* had run timeout_s (not when the group had used 4 x timeout_s); the upper
    # bound only allows for the polling and the kill
    assert timeout_s <= out["slow"]["killed_after_s"] < 2 * timeout_s
    assert (out["after"]["kind"], out["after"]["reason"]) == (
        "not_started", "not started: an earlier run of the launch failed")
    assert not launch_processes(Path.cwd()) and not list(tmp_path.rglob(".attempt-*"))
    # the next launch: the ok run is reused, the config failure is not retried (same config),
    # the timed-out and the never-started runs are; the retry token says so
    assert launch_retry_token(launch_path) != ""
    assert [plan_member(p)["skip"] for p in paths] == [True, True, False, False]
