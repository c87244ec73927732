"""Data half of the fault suite (reliability issue 26, rows 3, 4, 5 and 11): damaged files
the pipeline wrote itself (a calibration cache, a published run, a derived table) and a resume.

====  ============================================================  =====  ==========================
row   case                                                          cases  test
====  ============================================================  =====  ==========================
3     ``results/calibration/measured.json`` truncated, not a            3  ``test_a_damaged_calibration_...``
      mapping, or an entry without a positive ``sample_s``: set
      aside (``.unreadable-<time>``), warned, measured again
4     a published run's metrics with an epoch record twice, epochs      7  ``test_a_published_run_...``,
      out of order, a step record repeated, a same-size change,          +1  ``test_a_run_published_before_...``
      another rank's records, a file added, the manifest deleted:
      ``damaged`` (kept aside and recomputed); a run published
      before checksum manifests: collected, noted, still checked
5     ``runs.csv`` and ``evals.csv`` cut in half in place, a row        7  ``test_a_table_that_fails_...``
      boundary cut of ``runs``, ``evals`` (one point, one run) and       +1  ``test_workflow.py`` step 5b
      ``epochs``, ``failed`` unparsable, ``staleness`` not UTF-8: set
      aside and rebuilt with what was made from them
11    a simulated run resumed from a checkpoint: every record,          1  ``test_signum_mv.py::test_resume_after_a_``
      simulated times included, equals the uninterrupted run's             ``kill_equals_the_uninterrupted_run``
====  ============================================================  =====  ==========================

Row 11 extends the resume test of ``test_signum_mv.py`` (workers and a server rank), whose
uninterrupted simulation is already there; row 5's plain invocation is a step of
``test_workflow.py``'s end-to-end run.  Both would cost a launch each here.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_collect import check_damaged_run, collect, tree, write_atomic, write_run  # noqa: F401  (tree: fixture)
from test_sim_runs import sim_config

from distrepro_wf.pipeline import runs
from distrepro_wf.pipeline.collect import (DERIVED, DERIVED_MANIFEST, TABLES, derived_problems, derived_token,
                                           rebuild_token, staleness_table, table_problems, write_derived)
from impls.sim.calibration import build_profile
from impls.sim.profiles import profile_config

# -- 3 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ['{"{\\"workload', '[1, 2]', '{"k": {"sample_s": -1, "measured_at": "x"}}'],
                         ids=["truncated", "not_a_mapping", "bad_entry"])
def test_a_damaged_calibration_is_set_aside_and_measured_again(tmp_path, capfd, damage):
    """A damaged ``measured`` cache failed every measured run until deleted by hand: it is kept
    aside as ``<name>.unreadable-<time>``, with a warning, and measured again."""
    cal = tmp_path / "calibration" / "measured.json"
    cal.parent.mkdir()
    cal.write_text(damage)
    cfg = sim_config("allreduce_sgd", 2, profile="measured")
    prof = build_profile(profile_config("measured"), cfg, cal)
    (aside,) = cal.parent.glob("measured.json.unreadable-*")
    assert aside.read_text() == damage  # nothing lost
    assert "WARNING: calibration" in capfd.readouterr().err and prof.calibration["damaged_kept_as"] == aside.name
    (entry,) = json.loads(cal.read_text()).values()
    assert prof.sample_s == entry["sample_s"] > 0
    again = build_profile(profile_config("measured"), cfg, cal)  # the new cache is read, not measured again
    assert again.sample_s == prof.sample_s and "damaged_kept_as" not in again.calibration


# -- 4 -----------------------------------------------------------------------------------------


def _duplicate_epoch(p: Path, epoch: int) -> None:
    """An epoch record appended again (a record repeated at the end of the file)."""
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("".join(lines) + next(x for x in lines if json.loads(x)["kind"] == "epoch"
                                       and json.loads(x)["epoch"] == epoch))


def _swap_epochs(p: Path) -> None:
    """The two epochs' records in the other order (each epoch's steps with it)."""
    lines = p.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    p.write_text("".join(lines[half:] + lines[:half]))


def _repeat_step(p: Path) -> None:
    """A step record in place of the next one (same size: only the step index differs by one digit)."""
    lines = p.read_text().splitlines(keepends=True)
    lines[2] = lines[1]
    p.write_text("".join(lines))


def _tamper_same_size(p: Path) -> None:
    """The last epoch's accuracy changed in place, the file's size kept (0.875 -> 0.975)."""
    text = p.read_text()
    assert text.count('"acc/val": 0.875') == 1
    p.write_text(text.replace('"acc/val": 0.875', '"acc/val": 0.975'))


# (id, damage to seed 2's run directory, expected reason in failed.csv): each passed the run's
# completeness check and changed runs.csv
PUBLISHED_DAMAGE = [
    ("metrics_epoch_duplicated", lambda d: _duplicate_epoch(d / "run/metrics/rank1.jsonl", 1),
     "damaged: metrics of rank 1: epoch records [1] logged more than once (rank1.jsonl)"),
    ("metrics_epochs_out_of_order", lambda d: _swap_epochs(d / "run/metrics/rank1.jsonl"),
     "damaged: metrics of rank 1: line 6: step record (epoch 0, step 0) out of order (rank1.jsonl)"),
    ("metrics_step_repeated", lambda d: _repeat_step(d / "run/metrics/rank0.jsonl"),
     "damaged: metrics of rank 0: line 3: step record (epoch 0, step 1) repeated (rank0.jsonl)"),
    ("metrics_tampered_same_size", lambda d: _tamper_same_size(d / "run/metrics/rank1.jsonl"),
     "damaged: metrics/rank1.jsonl changed since the run was published"),
    ("metrics_other_ranks_copy", lambda d: shutil.copy(d / "run/metrics/rank0.jsonl", d / "run/metrics/rank1.jsonl"),
     "damaged: metrics of rank 1: line 1 is a record of rank 0 (rank1.jsonl)"),
    ("file_added", lambda d: (d / "run/metrics/rank7.jsonl").write_text(""),
     "damaged: metrics/rank7.jsonl added since the run was published"),
    ("manifest_deleted", lambda d: (d / "run/SHA256SUMS").unlink(), "damaged: SHA256SUMS missing"),
]


@pytest.mark.parametrize("damage,reason", [c[1:] for c in PUBLISHED_DAMAGE], ids=[c[0] for c in PUBLISHED_DAMAGE])
def test_a_published_run_with_records_repeated_reordered_or_changed_is_damaged(tree, damage, reason):
    """A failed row naming the file, no row in the tables, kept aside and recomputed by the next
    launch (``test_collect.check_damaged_run``: the damaged-run handling every damage gets)."""
    check_damaged_run(tree, damage, reason)


def test_a_run_published_before_manifests_is_checked_without_one(tmp_path, caplog):
    """A run published before checksum manifests existed (the decision): complete and in order,
    it is collected, with a note in the collect log; its records are still checked."""
    d = write_run(tmp_path, 1, manifest=False)
    launch = tmp_path / "n2.json"
    launch.write_text(json.dumps({"members": [{"run": str(d)}]}))
    assert not runs.has_checksums(json.loads((d / "outcome.json").read_text()))
    with caplog.at_level(logging.INFO, logger="distrepro_wf.pipeline.collect"):
        _, rn, fl, _ = collect([launch])
    assert list(rn["seed"]) == [1] and fl.empty
    assert "no checksum manifest (published before manifests existed)" in caplog.text
    _duplicate_epoch(d / "run/metrics/rank0.jsonl", 0)
    fl = collect([launch])[2]
    assert list(fl["kind"]) == ["damaged"] and "epoch records [0] logged more than once" in fl["reason"][0]


# -- 5 -----------------------------------------------------------------------------------------


def _cut_half(p: Path) -> None:
    """Cut in place in the middle of a row (as an interrupted copy or a full disk leaves it)."""
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _drop_last_rows(p: Path, n: int = 1) -> None:
    """Cut in place at a row boundary: the last ``n`` rows gone, every row left whole."""
    p.write_text("".join(p.read_text().splitlines(keepends=True)[:-n]))


# (id, damage to the tables directory, {table: start of the reason})
TABLE_DAMAGE = [
    ("runs_and_evals_cut_in_half", lambda t: (_cut_half(t / "runs.csv"), _cut_half(t / "evals.csv")),
     {"runs": "its last row is cut short", "evals": "its last row is cut short"}),
    ("runs_last_row_dropped", lambda t: _drop_last_rows(t / "runs.csv"),
     {"runs": "1 run rows and 0 failed rows for the 2 runs on disk",
      "failed": "1 run rows and 0 failed rows for the 2 runs on disk"}),
    ("evals_last_row_dropped", lambda t: _drop_last_rows(t / "evals.csv"),
     {"evals": "run exp|allreduce_sgd|2|none|2: evaluation series up to step 4, its last epoch ends at step 8"}),
    ("evals_last_run_dropped", lambda t: _drop_last_rows(t / "evals.csv", 2), {"evals": "run exp|allreduce_sgd|2|none|2"}),
    ("epochs_last_row_dropped", lambda t: _drop_last_rows(t / "epochs.csv"),
     {"epochs": "1 epoch rows for run exp|allreduce_sgd|2|none|2, which has 2 epochs"}),
    ("failed_not_a_table", lambda t: (t / "failed.csv").write_text('kind,reason\n"damaged,x\n'), {"failed": "unparsable"}),
    ("staleness_not_utf8", lambda t: (t / "staleness.csv").write_bytes(b"\xff\xfe\n"), {"staleness": "unreadable"}),
]


def _good_tables(launch: Path) -> Path:
    """Collect's tables of ``launch``, written intact; their folder."""
    tables = launch.parent.parent.parent / "tables" / "exp"
    good = dict(zip(("epochs", "runs", "failed", "evals"), collect([launch])))
    good["staleness"] = staleness_table([launch])
    for t in TABLES:
        write_atomic(good[t], tables / f"{t}.csv")
    return tables


@pytest.mark.parametrize("damage,problems", [c[1:] for c in TABLE_DAMAGE], ids=[c[0] for c in TABLE_DAMAGE])
def test_a_table_that_fails_its_check_is_set_aside_to_be_rebuilt(tree, damage, problems):
    """A collect table cut in place is never trusted: it fails its own check against the runs on
    disk and is set aside, and collect's rerun token changes, so that Snakemake rebuilds it from
    the runs (the plain invocation: ``test_workflow.py``, step 5b)."""
    launch, _ = tree
    tables = _good_tables(launch)
    assert table_problems(tables, [launch]) == {} and rebuild_token(tables, [launch]) == ""  # intact: trusted
    damage(tables)
    # older than the collect rule's inputs: Snakemake rebuilds it anyway, not checked here
    stamp = (tables / "runs.csv").stat().st_mtime
    os.utime(launch, (stamp, stamp))
    for t in TABLES:
        os.utime(tables / f"{t}.csv", (stamp - 10, stamp - 10))
    assert table_problems(tables, [launch]) == {}
    for t in TABLES:
        os.utime(tables / f"{t}.csv", (stamp, stamp))
    found = table_problems(tables, [launch])
    assert set(found) == set(problems) and all(found[t].startswith(w) for t, w in problems.items()), found
    before = {t: (tables / f"{t}.csv").read_bytes() for t in problems}
    # set aside (nothing lost, the others left in place), and collect's rerun token changes, once
    token = rebuild_token(tables, [launch])
    kept = {p.name.split(".csv.damaged-")[0]: p for p in tables.glob("*.csv.damaged-*")}
    assert sorted(kept) == sorted(problems) and token == ",".join(sorted(p.name for p in kept.values()))
    assert all(kept[t].read_bytes() == before[t] and not (tables / f"{t}.csv").exists() for t in problems)
    assert all((tables / f"{t}.csv").exists() for t in set(TABLES) - set(problems))
    assert rebuild_token(tables, [launch]) == token


def test_a_dry_run_sets_no_table_aside(tree):
    """``snakemake -n`` changes nothing on disk (issue 34, case 6): a table failing its check is
    only named (the token says which, so the dry run's plan shows the rebuild); the run that
    executes sets it aside."""
    launch, _ = tree
    tables = _good_tables(launch)
    _cut_half(tables / "runs.csv")
    before = {p.name: p.read_bytes() for p in tables.iterdir()}
    token = rebuild_token(tables, [launch], change=False)
    assert {p.name: p.read_bytes() for p in tables.iterdir()} == before
    assert token == "runs.csv.pending", token
    assert rebuild_token(tables, [launch]) not in ("", token)  # the real run: set aside, another token
    assert list(tables.glob("runs.csv.damaged-*"))


# -- issue 34: rule compare's tables (claims, claims_summary, sensitivity) ------------------------


def _write_claims(d: Path) -> None:
    rows = [{"claim": f"c{i:02d}", "status": "reproduced", "seeds_a": 3, "seeds_b": 3, "value": i / 7}
            for i in range(51)]
    write_derived({"claims": pd.DataFrame(rows),
                   "claims_summary": pd.DataFrame(rows)[["claim", "status"]],
                   "sensitivity": pd.DataFrame({"claim": ["c00", "c01"], "parameter": ["alpha", "beta"],
                                                "low": [0.9, 1.0], "high": [1.1, 1.2]})}, d)


# (id, damage, {table: start of the reason})
DERIVED_DAMAGE = [
    ("claims_cut_at_a_row_boundary", lambda d: _drop_last_rows(d / "claims.csv", 31),
     {"claims": "its 20 rows are not what rule compare wrote"}),
    ("claims_cut_mid_row", lambda d: _cut_half(d / "claims.csv"), {"claims": "its last row is cut short"}),
    ("summary_last_row_dropped", lambda d: _drop_last_rows(d / "claims_summary.csv"),
     {"claims_summary": "its 50 rows are not what rule compare wrote"}),
    ("sensitivity_changed_in_place", lambda d: (d / "sensitivity.csv").write_text(
        (d / "sensitivity.csv").read_text().replace("0.9", "9.0")), {"sensitivity": "its 2 rows are not what"}),
    ("summary_not_utf8", lambda d: (d / "claims_summary.csv").write_bytes(b"\xff\xfe\n"),
     {"claims_summary": "unreadable"}),
    ("manifest_gone", lambda d: (d / DERIVED_MANIFEST).unlink(),
     {t: "no checksum in claims.SHA256SUMS" for t in DERIVED}),
]


@pytest.mark.parametrize("damage,problems", [c[1:] for c in DERIVED_DAMAGE], ids=[c[0] for c in DERIVED_DAMAGE])
def test_a_claims_table_cut_in_place_is_set_aside_to_be_rebuilt(tmp_path, damage, problems):
    """The claims tables were consumed however cut (issue 34, cases 1 and 2): 20 of 51 claim rows
    reached the report silently, and a half row killed the report rule, whose outputs Snakemake
    then deleted, on every later run.  Now each fails its check against the checksums rule
    compare wrote; rule compare's token sets it aside before any job (so compare rebuilds it and
    the report is never built from it); a dry run only names it."""
    d = tmp_path / "tables"
    _write_claims(d)
    assert derived_problems(d) == {} and derived_token(d) == ""  # intact: trusted
    damage(d)
    found = derived_problems(d)
    assert set(found) == set(problems) and all(found[t].startswith(w) for t, w in problems.items()), found
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    dry = derived_token(d, change=False)  # snakemake -n: nothing changes
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    assert dry == ",".join(sorted(f"{t}.csv.pending" for t in problems))
    token = derived_token(d)
    kept = {p.name.split(".csv.damaged-")[0]: p for p in d.glob("*.csv.damaged-*")}
    assert sorted(kept) == sorted(problems) and token == ",".join(sorted(p.name for p in kept.values()))
    assert all(kept[t].read_bytes() == before[f"{t}.csv"] and not (d / f"{t}.csv").exists() for t in problems)
    assert derived_token(d) == token  # stable until rebuilt
    _write_claims(d)  # compare's rerun
    assert derived_problems(d) == {} and derived_token(d) == token
