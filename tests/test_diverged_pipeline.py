"""The critical reliability case end to end: a diverging run through the real pipeline.

With ``lr: 1.0e6`` the all-reduce runs' losses go to NaN.  Before the fix every run was
"ok", runs.csv held NaN losses and a NaN model's accuracy, and claims came out
"reproduced".  Now the runtime fails the run on every rank ("diverged: rank r, step s
..."), the workflow lists it as kind ``diverged`` (and does not retry it while its config
is unchanged), it enters neither runs.csv nor epochs.csv, the claim that needs it is "not
comparable" naming the failure, and the report's failed list names it.

The same launch group (n=2) also holds ``ps_sync``, whose server rank makes it a 3-process
launch: the group runs one torchrun per world size, and the server's bytes reach the
tables apart from the workers'.
"""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.workflow
ROOT = Path(__file__).resolve().parents[1]

CONFIG = {
    "experiments": {"baseline": {
        "workload": "tiny", "nodes": [1, 2], "stragglers": ["none"], "seeds": [1],
        "methods": {"serial_sgd": {"nodes": [1]},
                    "allreduce_sgd": {"nodes": [2], "workload_overrides": {"optimizer": {"lr": 1.0e6}}},
                    "ps_sync": {"nodes": [2]}}}},
    "workloads": {"tiny": {"dataset": {"name": "digits"}, "model": {"name": "mlp", "hidden": [16]},
                           "batch_size": 16, "epochs": 2, "max_steps_per_epoch": 6,
                           "optimizer": {"lr": 0.1, "momentum": 0.9}}},
    "stragglers": {"none": {"kind": "none"}},
    "launcher": {"kind": "local", "timeout_s": 300},
}


def test_a_diverging_run_is_failed_listed_and_excluded_from_tables_and_claims(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "2",
           "--configfile", str(cfg)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    tables = tmp_path / "results" / "tables" / "baseline"
    runs, epochs, failed = (pd.read_csv(tables / f) for f in ("runs.csv", "epochs.csv", "failed.csv"))
    assert sorted(runs["method"]) == ["ps_sync", "serial_sgd"] and set(epochs["method"]) == {"ps_sync", "serial_sgd"}
    d = 64 * 16 + 16 + 16 * 10 + 10  # the MLP's parameters
    ps = runs.set_index("method").loc["ps_sync"]
    assert ps["bytes_sent_per_epoch"] == 6 * 4 * d  # a worker: its gradient up each step
    assert ps["server_bytes_sent_per_epoch"] == ps["server_bytes_recv_per_epoch"] == 2 * 6 * 4 * d
    assert runs[["final_train_loss", "final_acc"]].notna().all().all()
    assert list(failed["method"]) == ["allreduce_sgd"] and list(failed["kind"]) == ["diverged"]
    assert failed["reason"][0].startswith("diverged: rank ") and "loss/train = nan" in failed["reason"][0]
    assert "allreduce_sgd" in out and "diverged" in out  # the console summary names it
    claims = pd.read_csv(tmp_path / "results" / "tables" / "claims.csv")
    c = claims[claims["claim"] == "ar_matches_serial_top1"]
    assert len(c) == 1 and c["status"].iloc[0] == "not comparable", c.to_dict("records")
    assert "every run failed" in c["reason"].iloc[0] and "diverged" in c["reason"].iloc[0]
    assert not (claims["status"] == "reproduced").any()  # nothing here can support a verdict
    html = (tmp_path / "reports" / "index.html").read_text()
    assert "diverged: rank" in html and "1 run(s) failed" in html
    # deterministic: the next invocation does not rerun it while the config is unchanged
    proc = subprocess.run(cmd + ["-n"], capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in proc.stdout + proc.stderr
