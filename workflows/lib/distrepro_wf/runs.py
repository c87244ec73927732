"""Execute runs so that a failure can never pass for a result.

Runs of one experiment at one node count form a *launch group*: one torchrun launch
runs them one after another (``impls.run --plan``), so each run does not pay the
process start, ``import torch`` and rendezvous again.

Layout of a run, ``results/runs/<experiment>/<method>/n<N>/<straggler>/seed<S>/``::

    run.json        the resolved config (written by rule train before it runs)
    outcome.json    {"status": "ok" | "failed", "reason", "log", ...}
    run/            the complete result: config, provenance, metrics/rank*.jsonl
    failed-<time>/  attempts that failed, kept for inspection
    checkpoint/     per-epoch checkpoints while a run is in progress (resume)

and of a group, ``results/launches/<experiment>/n<N>.json`` (the train rule's
output) listing its members and their status.

An attempt writes into ``.attempt-<pid>/``; only when every rank logged every epoch
is it renamed to ``run/`` (replacing an older good one).  A failed attempt never
touches ``run/``; its outcome says ``failed``.  Members whose ``run/`` is complete
for the same config are not rerun (delete a run's directory to force it).

Retry: the train rule's ``params.retry`` is :func:`launch_retry_token`, read from the
group's ``n<N>.retry.json`` (not a rule output, so Snakemake never deletes it).  A launch
with a failed member writes a new token there; a successful one leaves it alone.  So
Snakemake's params rerun trigger runs a failed group again on the next invocation,
and a good one never.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from .launch import torchrun_command


def check_complete(attempt: Path, nodes: int, epochs: int) -> str | None:
    """None if the attempt holds a complete run, else what is missing."""
    if (attempt / "ERROR.txt").exists():
        return (attempt / "ERROR.txt").read_text().strip()
    for name in ("config.json", "provenance.json"):
        if not (attempt / name).exists():
            return f"{name} missing"
    for r in range(nodes):
        p = attempt / "metrics" / f"rank{r}.jsonl"
        if not p.exists():
            return f"metrics of rank {r} missing"
        seen = set()
        with open(p) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    return f"rank {r}: truncated metrics line"
                if rec.get("kind") == "epoch":
                    seen.add(rec["epoch"])
        if seen != set(range(epochs)):
            return f"rank {r} logged epochs {sorted(seen)} of {epochs}"
    return None


def _tail(path: Path, n: int = 25) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-n:])
    except OSError:
        return ""


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    os.replace(tmp, path)


def is_current(run_dir: Path, cfg: dict[str, Any]) -> bool:
    """True if ``run_dir`` already holds a complete, ok result of exactly ``cfg``."""
    try:
        outcome = json.loads((run_dir / "outcome.json").read_text())
        done = json.loads((run_dir / "run" / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return outcome.get("status") == "ok" and done == cfg


def write_run_configs(members: dict[str, dict[str, Any]]) -> list[Path]:
    """Write ``<run dir>/run.json`` for each member (only if its content changed)."""
    paths = []
    for run_dir, cfg in members.items():
        p = Path(run_dir) / "run.json"
        text = json.dumps(cfg, indent=2, sort_keys=True)
        if not p.exists() or p.read_text() != text:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        paths.append(p)
    return paths


def _retry_path(launch_path: str | Path) -> Path:
    return Path(launch_path).with_suffix(".retry.json")


def launch_retry_token(launch_path: str | Path) -> str:
    try:
        return json.loads(_retry_path(launch_path).read_text())["token"]
    except (OSError, json.JSONDecodeError, KeyError):
        return ""


def execute_group(run_cfg_paths: list[Path], launch_path: Path, log_path: Path, launcher: dict[str, Any],
                  env: dict[str, str] | None = None) -> dict[str, Any]:
    members = []
    for p in map(Path, run_cfg_paths):
        cfg = json.loads(p.read_text())
        members.append({"dir": p.parent, "config_path": p, "cfg": cfg, "skip": is_current(p.parent, cfg)})
    todo = [m for m in members if not m["skip"]]
    if len({m["cfg"]["nodes"] for m in members}) > 1:
        raise ValueError("a launch group must share one node count")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launch_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rc, reason = 0, None
    if todo:
        for m in todo:
            m["attempt"] = m["dir"] / f".attempt-{os.getpid()}"
            shutil.rmtree(m["attempt"], ignore_errors=True)
            m["attempt"].mkdir(parents=True)
        plan = launch_path.parent / f".plan-{os.getpid()}.json"
        plan.write_text(json.dumps([{"config": str(m["config_path"]), "out": str(m["attempt"]),
                                     "checkpoint_dir": str(m["dir"] / "checkpoint")} for m in todo], indent=2))
        cmd = torchrun_command(todo[0]["cfg"]["nodes"], str(plan), launcher)
        timeout = float(launcher.get("timeout_s", 3600)) * len(todo)
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            try:
                rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                    env={**os.environ, **(env or {})}).returncode
                reason = None if rc == 0 else f"torchrun exited with code {rc}"
            except subprocess.TimeoutExpired:
                rc, reason = -1, f"timed out after {timeout:.0f} s"
        plan.unlink(missing_ok=True)
    status = []
    for m in members:
        if m["skip"]:
            status.append({"run": str(m["dir"]), "status": "ok", "reused": True})
            continue
        missing = check_complete(m["attempt"], m["cfg"]["nodes"], m["cfg"]["workload"]["epochs"])
        outcome = {"status": "ok" if missing is None else "failed", "returncode": rc,
                   "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "log": str(log_path),
                   "group_duration_s": round(time.time() - t0, 3)}
        if missing is None:
            final, old = m["dir"] / "run", m["dir"] / f".old-{os.getpid()}"
            if final.exists():
                final.rename(old)
            m["attempt"].rename(final)
            shutil.rmtree(old, ignore_errors=True)
            shutil.rmtree(m["dir"] / "checkpoint", ignore_errors=True)
            outcome["run_dir"] = "run"
        else:
            kept = m["dir"] / time.strftime("failed-%Y%m%dT%H%M%S")
            m["attempt"].rename(kept)
            outcome.update(reason=f"{reason}: {missing}" if reason else missing, attempt_dir=kept.name,
                           log_tail=_tail(log_path))
        _write_json(m["dir"] / "outcome.json", outcome)
        status.append({"run": str(m["dir"]), "status": outcome["status"], "reused": False})
    launch = {"members": status, "returncode": rc, "duration_s": round(time.time() - t0, 3),
              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if any(s["status"] != "ok" for s in status):
        _write_json(_retry_path(launch_path), {"token": f"retry-after-{launch['finished_at']}-{os.getpid()}"})
    _write_json(launch_path, launch)
    return launch
