"""Collection and run bookkeeping on hand-written run directories (no launch, no Snakemake).

Runs are written in the real formats: metrics through ``impls.runtime.metrics.MetricsWriter``,
outcomes through ``distrepro_wf.pipeline.runs.ok_outcome``, the layout of ``distrepro_wf.pipeline.runs``.
Values are binary fractions, so aggregates are asserted exactly.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_config

from distrepro_wf.pipeline import runs

from distrepro_wf.pipeline import session
from distrepro_wf.pipeline.collect import KEYS, collect, failure_summary, summarize, write_atomic
from impls.runtime.metrics import MetricsWriter
from impls.runtime import trainer

STEPS = 4  # steps per epoch (runinfo.json)
# per (rank, epoch): the epoch record's measured values
EPOCHS = {
    (0, 0): {"loss/train": 1.0, "loss/val": 1.5, "acc/val": 0.5, "comm/bytes_sent": 100.0, "comm/bytes_recv": 100.0,
             "time/epoch_s": 2.0, "time/wall_s": 2.0, "time/comm_s": 0.5, "time/compute_s": 1.0,
             "time/straggler_delay_s": 0.0, "consensus/distance": 0.25},
    (1, 0): {"loss/train": 3.0, "loss/val": 2.5, "acc/val": 0.625, "comm/bytes_sent": 300.0, "comm/bytes_recv": 300.0,
             "time/epoch_s": 3.0, "time/wall_s": 3.5, "time/comm_s": 0.25, "time/compute_s": 2.0,
             "time/straggler_delay_s": 1.0, "consensus/distance": 0.75},
    (0, 1): {"loss/train": 0.5, "loss/val": 1.0, "acc/val": 0.75, "comm/bytes_sent": 200.0, "comm/bytes_recv": 200.0,
             "time/epoch_s": 1.0, "time/wall_s": 3.0, "time/comm_s": 0.5, "time/compute_s": 0.5,
             "time/straggler_delay_s": 0.0, "consensus/distance": 0.125},
    (1, 1): {"loss/train": 1.5, "loss/val": 2.0, "acc/val": 0.875, "comm/bytes_sent": 200.0, "comm/bytes_recv": 200.0,
             "time/epoch_s": 4.0, "time/wall_s": 7.5, "time/comm_s": 1.0, "time/compute_s": 2.0,
             "time/straggler_delay_s": 2.0, "consensus/distance": 0.125},
}


STEP_BYTES = {0: 25.0, 1: 50.0}  # per step: 37.5 for the mean rank; the rest of an epoch's bytes at its end


def run_cfg(seed: int, target_acc: float = 0.7) -> dict:
    return make_config("allreduce_sgd", 2, seed=seed, experiment="exp",
                       workload={"target": {"metric": "acc/val", "value": target_acc}})


def write_run(root: Path, seed: int, target_acc: float = 0.7, manifest: bool = True) -> Path:
    """A complete ok 2-rank, 2-epoch run of experiment ``exp`` under ``root``; its run directory
    (``manifest``: published with its checksum manifest, as runs are since issue 26)."""
    cfg = run_cfg(seed, target_acc)
    run_dir = root / "results/runs/exp/allreduce_sgd/n2/none" / f"seed{seed}"
    run = run_dir / "run"
    for rank in (0, 1):
        w = MetricsWriter(run / "metrics" / f"rank{rank}.jsonl", rank)
        for epoch in (0, 1):
            for s in range(STEPS):  # step records: only their bytes enter the tables (bytes to target)
                w.write("step", epoch, epoch * STEPS + s, {"loss/train": 9.0, "time/wall_s": 0.0,
                                                           "comm/bytes_sent": STEP_BYTES[rank]})
            w.write("epoch", epoch, (epoch + 1) * STEPS, EPOCHS[rank, epoch])
        w.close()
    (run / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    (run / "provenance.json").write_text(json.dumps({
        "config_hash": "abc", "git_commit": "0123abc", "host": "h", "started_at": "2026-01-01T00:00:00",
        "versions": {"torch": "2.14.1", "python": "3.11"}, "world": 2,
        "ranks": [{"rank": 0, "host": "h"}, {"rank": 1, "host": "h"}]}))
    (run / "runinfo.json").write_text(json.dumps({"world": 2, "steps_per_epoch": STEPS, "params": 10,
                                                  "resumed_from_epoch": None}))
    runs.write_run_configs({str(run_dir): cfg})
    if manifest:
        runs.write_checksums(run)  # as execute_group publishes a run
    (run_dir / "outcome.json").write_text(json.dumps(runs.ok_outcome(run, "results/logs/train/exp/n2.log")))
    return run_dir


@pytest.fixture
def tree(tmp_path):
    """Two good runs (seeds 1, 2) of one launch group; returns (launch json, run dirs)."""
    dirs = [write_run(tmp_path, s) for s in (1, 2)]
    launch = tmp_path / "results/launches/exp/n2.json"
    launch.parent.mkdir(parents=True)
    launch.write_text(json.dumps({"members": [{"run": str(d), "status": "ok", "reused": False} for d in dirs]}))
    return launch, dirs


def test_rank_aggregation_and_summary_exact(tree):
    launch, _ = tree
    ep, rn, fl, ev = collect([launch])
    assert fl.empty and len(rn) == 2
    e = ep[ep["seed"] == 1].set_index("epoch")
    # means over ranks: losses, accuracy, bytes, consensus; max over ranks: times; min: acc/val_min
    assert e.loc[0, "loss/train"] == 2.0 and e.loc[1, "loss/train"] == 1.0
    assert e.loc[0, "loss/val"] == 2.0 and e.loc[1, "loss/val"] == 1.5
    assert e.loc[0, "acc/val"] == 0.5625 and e.loc[1, "acc/val"] == 0.8125
    assert e.loc[0, "acc/val_min"] == 0.5 and e.loc[1, "acc/val_min"] == 0.75
    assert e.loc[0, "comm/bytes_sent"] == 200.0 and e.loc[1, "comm/bytes_sent"] == 200.0
    assert e.loc[0, "consensus/distance"] == 0.5 and e.loc[1, "consensus/distance"] == 0.125
    assert e.loc[0, "time/epoch_s"] == 3.0 and e.loc[1, "time/epoch_s"] == 4.0
    assert e.loc[0, "time/wall_s"] == 3.5 and e.loc[1, "time/wall_s"] == 7.5
    assert e.loc[0, "time/comm_s"] == 0.5 and e.loc[1, "time/straggler_delay_s"] == 2.0
    assert list(e["step"]) == [4, 8]
    r = rn[rn["seed"] == 1].iloc[0]
    assert r["final_acc"] == 0.8125 and r["best_acc"] == 0.8125
    assert r["final_train_loss"] == 1.0 and r["final_val_loss"] == 1.5
    assert r["time_per_epoch_s"] == 3.5 and r["wall_s"] == 7.5
    assert r["time_per_step_s"] == 3.5 / STEPS
    assert r["bytes_sent_per_epoch"] == 200.0 and r["bytes_per_step"] == 50.0
    assert r["comm_s_per_epoch"] == 0.75 and r["straggler_delay_s_per_epoch"] == 1.5
    assert r["final_consensus_distance"] == 0.125
    # target 0.7: mean accuracy 0.5625 after epoch 0 (step 4, 3.5 s), 0.8125 after epoch 1 (step 8,
    # 7.5 s) -> met 0.55 of the way: step 6.2, 5.7 s; bytes: epoch 0's 200, then 37.5 per step of epoch 1
    assert r["steps_to_target"] == pytest.approx(6.2) and r["time_to_target_s"] == pytest.approx(5.7)
    assert r["epochs_to_target"] == pytest.approx(6.2 / STEPS)
    assert r["bytes_to_target"] == pytest.approx(200.0 + 2.2 * 37.5)
    assert r["reached_target"] and not r["target_at_first_eval"] and r["tta_evals"] == 1
    assert r["steps_per_epoch"] == STEPS and r["git_commit"] == "0123abc" and r["status"] == "ok"
    # the breakdown: means over ranks (not EPOCH's maxima) and epochs; the rest is "other"
    assert (r["bd_compute_s"], r["bd_comm_s"], r["bd_straggler_s"]) == (1.375, 0.5625, 0.75)
    assert r["bd_other_s"] == 3.5 - 1.375 - 0.5625 - 0.75 and r["comm_share"] == 0.5625 / 3.5
    assert r["compute_share"] == 1.375 / 3.5 and r["network"] == "loopback (one host)" and r["hosts"] == 1
    # no eval records (evals_per_epoch 1): the evaluation series is the epoch ends
    v = ev[ev["seed"] == 1]
    assert list(v["step"]) == [4, 8] and list(v["epoch_f"]) == [1.0, 2.0] and list(v["time/wall_s"]) == [3.5, 7.5]
    assert list(v["acc/val"]) == [0.5625, 0.8125] and list(v["loss/val"]) == [2.0, 1.5]
    assert list(ev.columns[:5]) == KEYS and len(ev) == 4


def test_target_reached_in_first_epoch_and_never(tmp_path):
    first, never = write_run(tmp_path, 1, target_acc=0.5), write_run(tmp_path, 2, target_acc=0.9)
    launch = tmp_path / "n2.json"
    launch.write_text(json.dumps({"members": [{"run": str(first)}, {"run": str(never)}]}))
    rn = collect([launch])[1].set_index("seed")
    # met at the first evaluation point: no earlier one to interpolate from, so its values, marked
    assert rn.loc[1, "epochs_to_target"] == 1 and rn.loc[1, "time_to_target_s"] == 3.5
    assert rn.loc[1, "bytes_to_target"] == 200.0 and rn.loc[1, "target_at_first_eval"]
    assert rn.loc[2, ["epochs_to_target", "time_to_target_s", "bytes_to_target", "steps_to_target"]].isna().all()
    assert rn.loc[1, "reached_target"] and not rn.loc[2, "reached_target"]


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-40])


def _drop_epoch(p: Path, epoch: int) -> None:
    lines = [x for x in p.read_text().splitlines(keepends=True)
             if not (json.loads(x)["kind"] == "epoch" and json.loads(x)["epoch"] == epoch)]
    p.write_text("".join(lines))


# (id, damage to seed 2's run directory, expected reason in failed.csv)
DAMAGE = [
    ("metrics_rank_missing", lambda d: (d / "run/metrics/rank1.jsonl").unlink(), "damaged: metrics of rank 1 missing"),
    ("metrics_truncated", lambda d: _truncate(d / "run/metrics/rank0.jsonl"),
     "damaged: metrics of rank 0: line 10 unreadable (rank0.jsonl)"),
    ("metrics_epoch_missing", lambda d: _drop_epoch(d / "run/metrics/rank1.jsonl", 1),
     "damaged: metrics of rank 1: epochs [1] missing (logged [0] of 2)"),
    ("metrics_not_utf8", lambda d: (d / "run/metrics/rank1.jsonl").write_bytes(b"\xff\xfe\x00garbage\n"),
     "damaged: metrics of rank 1: line 1 unreadable (rank1.jsonl)"),
    ("outcome_corrupt", lambda d: (d / "outcome.json").write_text('{"status": "o'),
     "damaged: outcome.json unreadable (Unterminated string"),
    ("outcome_empty", lambda d: (d / "outcome.json").write_text(""), "damaged: outcome.json unreadable (Expecting"),
    ("run_json_corrupt", lambda d: (d / "run.json").write_text("{"), "damaged: run.json unreadable"),
    ("config_json_corrupt", lambda d: (d / "run/config.json").write_text("[1,"), "damaged: config.json unreadable"),
    ("config_json_missing", lambda d: (d / "run/config.json").unlink(), "damaged: config.json missing"),
    ("provenance_corrupt", lambda d: (d / "run/provenance.json").write_text("{'a': 1}"),
     "damaged: provenance.json unreadable"),
    ("runinfo_missing", lambda d: (d / "run/runinfo.json").unlink(), "damaged: runinfo.json missing"),
]


@pytest.mark.parametrize("damage,reason", [c[1:] for c in DAMAGE], ids=[c[0] for c in DAMAGE])
def test_damaged_run_is_a_failed_row_kept_and_retried(tree, damage, reason):
    check_damaged_run(tree, damage, reason)


def check_damaged_run(tree, damage, reason):
    """Seed 2's run damaged by ``damage``: a failed row naming ``reason``, kept, marked and retried."""
    launch, (good, bad) = tree
    ep0, rn0, _, _ = collect([launch])
    token0 = runs.launch_retry_token(launch)
    files_before = {p: p.read_bytes() for p in bad.rglob("*") if p.is_file()}
    damage(bad)
    left = {p for p in files_before if p.exists()}
    ep, rn, fl, _ = collect([launch])  # never raises
    # the damaged run: one failed row, kind damaged, naming the file
    assert list(fl["seed"]) == [2] and list(fl["kind"]) == ["damaged"], fl
    assert fl["reason"][0].startswith(reason), fl["reason"][0]
    # no bad row; the good run's rows unchanged
    assert list(rn["seed"]) == [1] and set(ep["seed"]) == {1}
    pd.testing.assert_frame_equal(rn, rn0[rn0["seed"] == 1].reset_index(drop=True))
    pd.testing.assert_frame_equal(ep.reset_index(drop=True), ep0[ep0["seed"] == 1].reset_index(drop=True))
    # nothing lost: every file of the damaged run that survived the damage is still there
    assert all(p.exists() for p in left - {bad / "outcome.json"})
    assert (bad / "run").is_dir() and not (good / "outcome.json").read_text().count("damaged")
    # marked for the next invocation: outcome says damaged, the group's retry token changed
    out = json.loads((bad / "outcome.json").read_text())
    assert out["status"] == "failed" and out["kind"] == "damaged" and out["reason"].startswith(reason)
    assert runs.launch_retry_token(launch) != token0
    if "outcome" in reason:  # the unreadable outcome.json is kept aside, not overwritten
        assert len(list(bad.glob("outcome.json.damaged-*"))) == 1
    # the mark is stable (the rerun trigger must not change again) ...
    token1 = runs.launch_retry_token(launch)
    collect([launch])
    assert runs.launch_retry_token(launch) == token1
    # ... and the next launch's planning recomputes a damaged run/, or reuses an intact one
    m = runs.plan_member(runs.write_run_configs({str(bad): run_cfg(2)})[0])
    intact = "run.json" in reason or "outcome" in reason
    assert m["skip"] is intact
    assert json.loads((bad / "outcome.json").read_text())["status"] == ("ok" if intact else "failed")


CHEAP = [  # damage the parameter-time check sees without reading the metrics (size manifest)
    ("metrics_rank_missing", lambda d: (d / "run/metrics/rank1.jsonl").unlink(), "damaged: metrics/rank1.jsonl missing"),
    ("metrics_truncated", lambda d: _truncate(d / "run/metrics/rank0.jsonl"),
     "damaged: metrics/rank0.jsonl changed size"),
    ("outcome_corrupt", lambda d: (d / "outcome.json").write_text("{"), "damaged: outcome.json unreadable"),
    ("run_dir_deleted", lambda d: shutil.rmtree(d), "damaged: outcome.json missing"),
]


@pytest.mark.parametrize("damage_id,damage,reason", CHEAP, ids=[c[0] for c in CHEAP])
def test_retry_token_sees_damage_without_collect(tree, damage_id, damage, reason):
    launch, (good, bad) = tree
    token0 = runs.launch_retry_token(launch)
    assert runs.launch_retry_token(launch) == token0  # nothing damaged: stable
    damage(bad)
    token1 = runs.launch_retry_token(launch)
    assert token1 != token0 and runs.launch_retry_token(launch) == token1
    assert json.loads((bad / "outcome.json").read_text())["reason"].startswith(reason)
    assert json.loads((good / "outcome.json").read_text())["status"] == "ok"
    # the group's next launch recomputes it (a run/ that is intact after all is reused)
    assert runs.plan_member(runs.write_run_configs({str(bad): run_cfg(2)})[0])["skip"] is ("outcome" in damage_id)


# (id, files of a hand-written attempt, rc, timed out, earlier failed) -> (kind, reason)
ATTEMPTS = [
    ("config", {"STARTED": "", "ERROR.txt": "invalid configuration: x: bad\n",
                "error.json": '{"kind": "config", "message": "invalid configuration: x: bad"}'}, 0, False, False,
     ("config", "invalid configuration: x: bad")),
    ("config_legacy", {"STARTED": "", "ERROR.txt": "invalid configuration: y\n"}, 0, False, False,
     ("config", "invalid configuration: y")),
    ("diverged", {"STARTED": "", "ERROR.txt": "d\n", "error.json": json.dumps(
        {"kind": "diverged", "message": "diverged: rank 2, step 13 (epoch 1): loss/train = nan"})}, 0, False, False,
     ("diverged", "diverged: rank 2, step 13 (epoch 1): loss/train = nan")),
    ("crashed", {"STARTED": ""}, 17, False, False, ("crashed", "torchrun exited with code 17: config.json missing")),
    ("timeout", {"STARTED": ""}, -9, True, False,
     ("timeout", "timed out after 30 s (launcher.timeout_s, per run): config.json missing")),
    ("timeout_in_start_up", {}, -15, True, False,
     ("timeout", "timed out after 30 s (launcher.timeout_s, per run): the launch's start-up did not reach it")),
    ("not_started_after_failure", {}, 17, False, True, ("not_started", "not started: an earlier run of the launch failed")),
    ("not_started_launch_failed", {}, 1, False, False, ("not_started", "not started: the launch failed (exit code 1)")),
]


@pytest.mark.parametrize("files,rc,timed_out,earlier,expected", [c[1:] for c in ATTEMPTS], ids=[c[0] for c in ATTEMPTS])
def test_failure_kinds(tmp_path, files, rc, timed_out, earlier, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert runs.classify_failure(tmp_path, rc, timed_out, earlier, 30) == expected


def test_started_marker_is_the_runtimes():
    assert runs.STARTED == trainer.STARTED


def test_deterministic_failure_is_not_retried_until_its_config_changes(tmp_path):
    cfg = make_config("allreduce_sgd", 2, experiment="exp")
    d = tmp_path / "results/runs/exp/allreduce_sgd/n2/none/seed1"
    (p,) = runs.write_run_configs({str(d): cfg})
    for kind, skip in (("diverged", True), ("config", True), ("crashed", False), ("timeout", False),
                       ("not_started", False)):
        (d / "outcome.json").write_text(json.dumps({"status": "failed", "kind": kind, "reason": "r",
                                                    "config_sha": runs.config_sha(cfg)}))
        assert runs.plan_member(p)["skip"] is skip, kind
    changed = {**cfg, "seed": 2}
    (p,) = runs.write_run_configs({str(d): changed})
    assert runs.plan_member(p)["skip"] is False


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_attempts_and_plans_are_removed_live_ones_kept(tmp_path):
    host, dead, live = socket.gethostname(), _dead_pid(), os.getpid()
    names = {f".attempt-{host}-{dead}": False, f".attempt-{dead}": False, f".old-{host}-{dead}": False,
             f".attempt-{host}-{live}": True, f".attempt-otherhost-{dead}": True, "run": True, "failed-20260101": True}
    for n in names:
        (tmp_path / n).mkdir()
        (tmp_path / n / "f").write_text("x")
    (tmp_path / f".plan-{host}-{dead}.json").write_text("[]")
    (tmp_path / f".plan-{host}-{live}.json").write_text("[]")
    removed = runs.remove_stale([tmp_path, tmp_path / "absent"])
    assert sorted(p.name for p in removed) == sorted([n for n, keep in names.items() if not keep]
                                                     + [f".plan-{host}-{dead}.json"])
    assert all((tmp_path / n).exists() == keep for n, keep in names.items())
    assert (tmp_path / f".plan-{host}-{live}.json").exists()


def test_stale_lock_is_cleared_only_without_a_live_owner(tmp_path):
    locks, owners = tmp_path / session.LOCKS, tmp_path / session.OWNERS
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/x\n")
    owners.mkdir()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (owners / f"{socket.gethostname()}-{live.pid}").touch()
        (owners / f"{socket.gethostname()}-{_dead_pid()}").touch()
        assert session.clear_stale_lock(tmp_path) is False and (locks / "0.output.lock").exists()
        assert len(list(owners.iterdir())) == 1  # the dead owner's record is dropped
    finally:
        live.kill()
        live.wait()
    assert session.clear_stale_lock(tmp_path) is True and not locks.exists()
    assert session.clear_stale_lock(tmp_path) is False


def test_failure_summary(tmp_path):
    rows = pd.DataFrame([
        {"experiment": "exp", "method": "sgp", "nodes": 4, "straggler": "none", "seed": 1, "kind": "diverged",
         "reason": "diverged: rank 2, step 13 (epoch 1): loss/train = nan", "returncode": 0, "log": "L4",
         "attempt_dir": "failed-1"},
        {"experiment": "exp", "method": "sgp", "nodes": 8, "straggler": "none", "seed": 1, "kind": "not_started",
         "reason": "not started: an earlier run of the launch failed", "returncode": 17, "log": "L8",
         "attempt_dir": None}])
    write_atomic(rows, tmp_path / "exp" / "failed.csv")
    write_atomic(rows.iloc[0:0], tmp_path / "ok" / "failed.csv")
    assert failure_summary(tmp_path, ["exp", "ok", "absent"]) == (
        "2 run(s) failed (results/tables/<experiment>/failed.csv):\n"
        "  exp/sgp/n4/none/seed1  [diverged, not retried until its config changes]  "
        "diverged: rank 2, step 13 (epoch 1): loss/train = nan  (log: L4)\n"
        "  exp/sgp/n8/none/seed1  [not_started, retried next time]  "
        "not started: an earlier run of the launch failed  (log: L8)")
    assert failure_summary(tmp_path, ["ok"]) == ""


def test_a_target_on_a_lower_is_better_metric_is_reached_from_above():
    """A finite-sum run's target names opt/gap: met between the last epoch whose gap is above
    it and the first at or below it (no evaluation series: the epoch ends are its points)."""
    t = pd.DataFrame({"epoch": [0, 1, 2, 3], "opt/gap": [0.5, 0.375, 0.125, 0.0625], "loss/train": [1.0, 0.5, 0.4, 0.3],
                      "loss/objective": [2.0, 1.9, 1.8, 1.8], "time/wall_s": [1.0, 2.0, 3.0, 4.0],
                      "time/epoch_s": [1.0] * 4, "comm/bytes_sent": [10.0, 20.0, 30.0, 40.0]})
    info = {"target_metric": "opt/gap", "target_value": 0.25, "steps_per_epoch": 5}
    row = summarize(info, t)
    # halfway from epoch 2's end (gap 0.375: step 10, 2 s, 30 B) to epoch 3's (0.125: step 15, 3 s, 60 B)
    assert (row["epochs_to_target"], row["time_to_target_s"], row["bytes_to_target"]) == (2.5, 2.5, 45.0)
    assert row["steps_to_target"] == 12.5 and row["tta_evals"] == 1
    assert row["final_gap"] == 0.0625 and row["final_objective"] == 1.8 and pd.isna(row["final_acc"])
    never = summarize({**info, "target_value": 1e-6}, t)
    assert pd.isna(never["epochs_to_target"]) and pd.isna(never["time_to_target_s"]) and not never["reached_target"]


def test_breakdown_takes_the_simulated_op_costs_out_of_the_sync_part():
    """A simulated run's op costs (time/arith_s, ...) are parts of its sync time: the breakdown
    shows them apart and still adds up to the epoch; where a background activity paid more
    than the worker's sync time (AD-PSGD's gossip), they are scaled down to fit it; a run
    without them (real ranks) has NaN parts and its communication untouched."""
    from distrepro_wf.pipeline.collect import breakdown

    t = pd.DataFrame({"time/compute_s_mean": [1.0], "time/sync_s_mean": [0.5], "time/straggler_delay_s_mean": [0.0],
                      "time/arith_s_mean": [0.1], "time/optim_s_mean": [0.05], "time/copy_s_mean": [0.05],
                      "time/stage_s_mean": [0.1], "time/compress_s_mean": [0.0]})
    b = breakdown(t, 2.0)
    assert b["bd_comm_s"] == pytest.approx(0.2) and b["bd_arith_s"] == pytest.approx(0.1)
    assert b["bd_stage_s"] == pytest.approx(0.1) and b["bd_other_s"] == pytest.approx(0.5)
    parts = [b[k] for k in ("bd_compute_s", "bd_comm_s", "bd_straggler_s", "bd_other_s", "bd_arith_s",
                            "bd_optim_s", "bd_copy_s", "bd_stage_s", "bd_compress_s")]
    assert sum(parts) == pytest.approx(2.0) and b["comm_share"] == pytest.approx(0.1)
    bg = breakdown(t.assign(**{"time/sync_s_mean": [0.15]}), 2.0)  # ops 0.3 > sync 0.15: halved
    assert bg["bd_comm_s"] == pytest.approx(0.0) and bg["bd_arith_s"] == pytest.approx(0.05)
    real = breakdown(t[["time/compute_s_mean", "time/sync_s_mean", "time/straggler_delay_s_mean"]], 2.0)
    assert real["bd_comm_s"] == 0.5 and all(pd.isna(real[k]) for k in ("bd_arith_s", "bd_stage_s"))


def test_collective_wait_counts_only_steps_no_rank_ended_before_the_last_arrived():
    """Issue 24: a fast rank's wait inside a synchronous collective for the last rank is straggler
    wait.  Step 1 (an all-reduce: both end after rank 1 arrives at 1.25): rank 0 waited 0.25 s;
    step 2 (gossip-like: rank 0 ended at 2.0 before rank 1 arrived at 2.5): nothing; the breakdown
    moves the mean rank's wait from communication to straggler wait, the parts still adding up."""
    from distrepro_wf.pipeline.collect import breakdown, collective_wait

    def step(rank, s, wall, sync):
        return {"kind": "step", "epoch": 0, "step": s, "rank": rank, "time/wall_s": wall, "time/sync_s": sync}

    recs = [step(0, 1, 1.5, 0.5), step(1, 1, 1.5, 0.25), step(0, 2, 2.0, 0.25), step(1, 2, 3.0, 0.5)]
    w = collective_wait(recs, simulated=True, algorithm="allreduce_sgd")
    assert w.to_dict("records") == [{"epoch": 0, "time/collective_wait_s_mean": 0.125}]
    assert collective_wait(recs, simulated=True, algorithm="sgp").empty  # gossip: waits for its peers only
    t = pd.DataFrame({"time/compute_s_mean": [1.0], "time/sync_s_mean": [0.75], "time/straggler_delay_s_mean": [0.5],
                      "time/collective_wait_s_mean": [0.125]})
    bd = breakdown(t, 3.0)
    assert (bd["bd_compute_s"], bd["bd_comm_s"], bd["bd_straggler_s"], bd["bd_other_s"]) == (1.0, 0.625, 0.625, 0.75)


def test_bytes_at_the_model_size_the_times_use():
    """Under a paper profile the simulated network carries the paper model's bytes: runs.csv gets
    the bytes at that size (wire_scale from the provenance; older runs: model_mb / fp32 params)."""
    from distrepro_wf.pipeline.collect import model_size

    sim = {"time": {"kind": "simulated (SimGrid)", "model_mb": 102.0, "wire_scale": 4.0}}
    assert model_size(sim, {"params": 10}) == {"wire_scale": 4.0, "model_mb": 102.0}
    old = {"time": {"kind": "simulated (SimGrid)", "model_mb": 0.0004}}
    assert model_size(old, {"params": 10}) == {"wire_scale": 10.0, "model_mb": 0.0004}
    real = model_size({"time": {"kind": "wall clock", "wire_scale": 1.0}}, {"params": 10})
    assert real["wire_scale"] == 1.0 and math.isnan(real["model_mb"])
    row = summarize({"steps_per_epoch": 4, "wire_scale": 4.0, "target_metric": None, "target_value": None},
                    pd.DataFrame({"epoch": [0], "step": [4], "time/wall_s": [1.0], "time/epoch_s": [1.0],
                                  "comm/bytes_sent": [100.0]}))
    assert row["bytes_sent_per_epoch"] == 100.0 and row["bytes_sent_per_epoch_model"] == 400.0


def test_an_asynchronous_methods_epoch_is_the_jobs_time_per_epoch_of_data():
    """Issue 31: AD-PSGD's workers share an epoch's 2 x 9 = 18 steps.  Rank 0 takes 15 of them at
    0.1 s (10 steps/s), rank 1 takes 3 at 0.5 s (2 steps/s) and its own epoch, with its last step's
    straddle and its wait for a ticket, lasts 1.9 s: the job took the epoch's 18 steps at 12
    steps/s, 1.5 s, not the slowest rank's 1.9 s; the spread of the ranks' own epochs (1.5 and
    1.9 s) is its own column.  A synchronous method keeps its slowest rank's epoch.  The question
    is asked of the algorithm's step schedule, not of its name."""
    from distrepro_wf.pipeline.collect import epoch_time, is_asynchronous

    assert is_asynchronous("adpsgd") and is_asynchronous("ps_async") and is_asynchronous("ddcgu")
    assert not is_asynchronous("allreduce_sgd") and not is_asynchronous("osgp")
    ep = pd.DataFrame([{"epoch": 0, "rank": 0, "time/epoch_s": 1.5}, {"epoch": 0, "rank": 1, "time/epoch_s": 1.9}])
    table = pd.DataFrame({"epoch": [0], "time/epoch_s": [1.9]})
    records = [{"kind": "step", "epoch": 0, "rank": 0, "time/step_s": 0.1} for _ in range(15)] + \
              [{"kind": "step", "epoch": 0, "rank": 1, "time/step_s": 0.5} for _ in range(3)]
    a = epoch_time(table, ep, records, "adpsgd")
    assert a.loc[0, "time/epoch_s"] == pytest.approx(1.5) and a.loc[0, "time/epoch_s_rank_spread"] == pytest.approx(0.4)
    s = epoch_time(table, ep, records, "allreduce_sgd")
    assert s.loc[0, "time/epoch_s"] == 1.9 and s.loc[0, "time/epoch_s_rank_spread"] == pytest.approx(0.4)
    from distrepro_wf.pipeline.catalogue import METRICS  # runs.csv: the mean over epochs of each

    assert METRICS["time_per_epoch_s"].source == ("time/epoch_s", "mean")
    assert METRICS["time_per_epoch_rank_spread_s"].source == ("time/epoch_s_rank_spread", "mean")
