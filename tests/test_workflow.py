"""Tier 3: the Snakemake workflow itself: lint, dry runs, bad config, a tiny end-to-end run."""

import json
import os
import subprocess
import sys
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
                 "epochs": 2, "max_steps_per_epoch": 8, "optimizer": {"lr": 0.1}, "target_acc": 0.2},
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
    proc = smk(tmp_path, "-n")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    groups = {(e, n) for e, x in cfg["experiments"].items() for m, mm in x["methods"].items()
              for n in (mm or {}).get("nodes", x["nodes"])}
    assert any(line.split() == ["train", str(len(groups))] for line in proc.stdout.splitlines()), proc.stdout


def test_invalid_config_stops_before_any_job(tmp_path):
    bad = json.loads(json.dumps(TINY))
    bad["experiments"]["smoke"]["methods"]["sgdd"] = {}
    proc = smk(tmp_path, "--configfile", write_config(tmp_path, bad))
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "invalid configuration: experiments.smoke.methods.sgdd.algorithm.name: unknown algorithm 'sgdd'" in err
    assert "allreduce_sgd" in err
    assert not (tmp_path / "results" / "runs").exists()


def test_end_to_end_failure_retry_and_no_recompute(tmp_path):
    cfgfile = write_config(tmp_path, TINY)
    tables = tmp_path / "results" / "tables" / "smoke"
    # 1. rank 1 dies at step 3: the 2-rank run fails, the 1-rank run succeeds
    proc = smk(tmp_path, "--configfile", cfgfile, env={"DISTREPRO_FAULT": "1:3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs, failed = pd.read_csv(tables / "runs.csv"), pd.read_csv(tables / "failed.csv")
    assert list(runs["nodes"]) == [1]
    assert list(failed["nodes"]) == [2] and "exited with code" in failed["reason"][0]
    n2 = tmp_path / "results/runs/smoke/allreduce_sgd/n2/none/seed1"
    assert json.loads((n2 / "outcome.json").read_text())["status"] == "failed"
    assert not (n2 / "run").exists() and list(n2.glob("failed-*"))
    epochs = pd.read_csv(tables / "epochs.csv")
    assert set(epochs["nodes"]) == {1}
    html = (tmp_path / "reports" / "index.html").read_text()
    assert "1 run(s) failed" in html
    # 2. the next invocation retries only the failed group, which now succeeds
    proc = smk(tmp_path, "--configfile", cfgfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs, failed = pd.read_csv(tables / "runs.csv"), pd.read_csv(tables / "failed.csv")
    assert sorted(runs["nodes"]) == [1, 2] and failed.empty
    assert (n2 / "run" / "metrics" / "rank1.jsonl").exists()
    for col in ("config_hash", "git_commit", "torch", "host", "seed", "final_acc", "time_per_epoch_s",
                "time_to_target_s", "bytes_sent_per_epoch"):
        assert runs[col].notna().all(), col
    assert runs.loc[runs["nodes"] == 2, "bytes_sent_per_epoch"].iloc[0] > 0
    html = (tmp_path / "reports" / "index.html").read_text()
    assert "All runs completed" in html
    for img in ("loss_vs_epoch", "acc_vs_wall", "epoch_time_vs_nodes"):
        assert (tmp_path / "reports" / "figures" / "smoke" / f"{img}.png").stat().st_size > 1000
    # Snakemake's native report of the same figures and tables
    proc = subprocess.run([*SNAKEMAKE, "-d", str(tmp_path), "--configfile", cfgfile, "--report",
                           str(tmp_path / "report.html")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "report.html").stat().st_size > 10_000
    # 3. after success nothing is recomputed
    proc = smk(tmp_path, "--configfile", cfgfile, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    # 4. a changed config whose rerun fails leaves the previous good result in place
    changed = json.loads(json.dumps(TINY))
    changed["workloads"]["tiny"]["epochs"] = 3
    proc = smk(tmp_path, "--configfile", write_config(tmp_path, changed), env={"DISTREPRO_FAULT": "1:3"})
    assert proc.returncode == 0
    assert json.loads((n2 / "outcome.json").read_text())["status"] == "failed"
    assert json.loads((n2 / "run" / "config.json").read_text())["workload"]["epochs"] == 2  # untouched
    assert list(pd.read_csv(tables / "runs.csv")["nodes"]) == [1]
