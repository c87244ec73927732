"""Execute runs so that a failure can never pass for a result, and nothing is lost.

Runs of one experiment at one node count form a *launch group*: one torchrun launch
runs them one after another (``impls.run --plan``), so each run does not pay the
process start, ``import torch`` and rendezvous again.  A simulated run (``backend:
simgrid``) is one process of its own (``python -m impls.sim``: SimGrid's engine runs
once per process), all its ranks inside; its ``measured`` profile is calibrated once
per workload into ``results/calibration/measured.json``.

Layout of a run, ``results/runs/<experiment>/<method>/n<N>/<straggler>/seed<S>/``::

    run.json        the resolved config (written by rule train before it runs)
    outcome.json    {"status": "ok" | "failed", "kind", "reason", "log", "files", "config_sha",
                     "world" (the processes of the launch that ran it; real ranks), ...}
    run/            the complete result: config, provenance, runinfo, metrics/rank*.jsonl, and
                    SHA256SUMS (every file's sha256, written when the run is published)
    failed-<time>/  attempts that failed, kept for inspection
    damaged-<time>/ a result found damaged after it was complete, kept when it is replaced
    checkpoint/     per-epoch checkpoints while a run is in progress (resume)

and of a group, ``results/launches/<experiment>/n<N>.json`` (the train rule's
output) listing its members and their status.

**Attempts.**  An attempt writes into ``.attempt-<host>-<pid>/``; only when
:func:`verify_run` finds it complete (every rank logged every epoch, every file parses)
is it renamed to ``run/``.  A failed attempt never touches ``run/``.  Each failed run
gets a ``kind`` (:data:`KINDS`):

* ``config`` / ``diverged``: the runtime refused the config or training diverged; it
  wrote ``error.json``.  Deterministic: not retried while the run's config is unchanged
  (``outcome.json`` keeps the config's hash), still listed as failed.
* ``crashed``: the run started (``STARTED`` marker) and its launch died or it is
  incomplete.  ``timeout``: the run exceeded ``launcher.timeout_s`` (per run: the launch
  is killed when the run it is on passes it; earlier runs of the launch stand, later
  ones are ``not_started``; the launch's start-up has its own ``timeout_s``).
* ``not_started``: the launch never reached it (no ``STARTED``).
* ``damaged``: a complete result whose files were later found missing or unreadable.

``crashed``, ``timeout``, ``not_started`` and ``damaged`` are retried on the next
invocation, with resume from the run's checkpoint.

**Retry.**  The train rule's ``params.retry`` is :func:`launch_retry_token`, read from the
group's ``n<N>.retry.json`` (not a rule output, so Snakemake never deletes it).  A
launch with a retryable failure writes a new token there, so Snakemake's params rerun
trigger runs the group again on the next invocation, and a good group never.

**Damage** is found at two points, and both persist it the same way
(:func:`mark_damaged`: ``outcome.json`` becomes ``failed``/``damaged`` naming the file,
``run/`` stays where it is, and the group gets a new retry token):

1. when Snakemake evaluates the train rule's params (:func:`launch_retry_token`, every
   invocation, also ``-n``): a cheap check of each member's ``outcome.json`` against the
   manifest of file sizes it recorded when the run completed (a deleted or truncated
   file, a corrupt ``outcome.json``);
2. when rule collect reads a run (:mod:`distrepro_wf.pipeline.collect`): the full check
   (every line parses, every epoch on every rank once and in order, no step record
   twice, and every file against the checksum manifest written when the run was published:
   a same-size change is found there).  A run published before manifests existed is
   checked without one (collect's log notes it); its outcome lists no ``SHA256SUMS``.

Persisting the mark (rather than computing it afresh) is what keeps the rerun trigger
stable: once the run is repaired, the token does not change again.  The next launch of
the group runs :func:`verify_run` on every member: a member whose ``run/`` is intact
after all (e.g. only its ``run.json`` was damaged, which rule train rewrites) is reused
and its outcome set back to ``ok``; a damaged ``run/`` is moved to ``damaged-<time>/``
and the run is recomputed.  Nothing is deleted.

**Interrupts.**  Stale ``.attempt-*``, ``.old-*`` and ``.plan-*.json`` of processes
that are gone (killed invocations) are removed when their group next runs; those of a
live process never.  If the Snakemake process that started the launch dies (``kill
-9``), the launch is killed within a second (not left running beside the next
invocation); its runs resume from their checkpoints next time.  If the rule's script
itself dies, by any signal, the kernel's parent-death signal stops its launch
(:mod:`impls.runtime.procs`: torchrun gets SIGTERM and its ranks SIGKILL; a simulation's fork
server and its forked run SIGKILL).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from impls.backends import backend_of
from impls.runtime.procs import preexec_die_with_parent

from .launch import launch_world, torchrun_command

KINDS = ("config", "diverged", "crashed", "timeout", "not_started", "damaged")
DETERMINISTIC = ("config", "diverged")  # not retried while the config is unchanged
STARTED = "STARTED"  # == impls.runtime.trainer.STARTED (not imported: that would import torch here)
OWNER_ENV = "DISTREPRO_SNAKEMAKE"  # "<host>:<pid>" of the Snakemake process that owns a launch
POLL_S = 0.5


def _host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return True


def _owned_by_dead_process(name: str, prefix: str) -> bool:
    """``<prefix><host>-<pid>[.json]`` (or the older ``<prefix><pid>``) of a process that is gone."""
    tag = name[len(prefix):].removesuffix(".json")
    host, _, pid = tag.rpartition("-")
    return pid.isdigit() and host in ("", _host()) and not pid_alive(int(pid))


def remove_stale(dirs: list[Path]) -> list[Path]:
    """Remove ``.attempt-*``/``.old-*`` dirs and ``.plan-*.json`` in ``dirs`` whose process is gone."""
    removed = []
    for d in dirs:
        if not d.is_dir():
            continue
        for p in d.iterdir():
            prefix = next((x for x in (".attempt-", ".old-", ".plan-") if p.name.startswith(x)), None)
            if prefix and _owned_by_dead_process(p.name, prefix):
                if p.is_dir():
                    shutil.rmtree(p)
                else:
                    p.unlink()
                removed.append(p)
    return removed


def read_json(path: Path) -> Any:
    """Parse a JSON file; the ValueError names the file and what is wrong with it."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path.name} missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path.name} unreadable ({e})") from None


CHECKSUMS = "SHA256SUMS"  # a published run's checksum manifest (``sha256sum -c`` reads it), in run/


def verify_run(run_dir: Path, manifest_required: bool = False) -> str | None:
    """None if ``run_dir`` holds a complete run, else what is wrong (naming the file).

    Complete: ``config.json``, ``provenance.json`` and ``runinfo.json`` parse, and for
    every rank of ``config.json``'s ``nodes``, ``metrics/rank<r>.jsonl`` exists, every
    line of it parses and is a record of that rank, its epoch records are those of
    every epoch of the workload, once each and in order, and its step records come in
    order, none twice.  A published run's files must also match its checksum manifest
    (:data:`CHECKSUMS`, :func:`verify_checksums`): a same-size change, a record copied from
    elsewhere, is found there.  A run without one (published before manifests existed) is
    checked for completeness only, unless ``manifest_required`` (its outcome lists one).
    """
    if (run_dir / "error.json").exists() or (run_dir / "ERROR.txt").exists():
        return error_of(run_dir)[1]
    try:
        cfg = read_json(run_dir / "config.json")
        nodes, epochs = int(cfg["nodes"]), int(cfg["workload"]["epochs"])
        read_json(run_dir / "provenance.json")
        read_json(run_dir / "runinfo.json")
    except (ValueError, KeyError, TypeError) as e:
        return f"config.json lacks {e}" if isinstance(e, KeyError) else str(e)
    for r in range(nodes):
        p = run_dir / "metrics" / f"rank{r}.jsonl"
        if not p.exists():
            return f"metrics of rank {r} missing"
        seen: list[int] = []
        last_step = None
        with open(p, errors="replace") as f:
            for i, line in enumerate(f, 1):
                try:
                    rec = json.loads(line)
                    kind, rank = rec.get("kind"), rec.get("rank")
                    if kind == "epoch":
                        seen.append(rec["epoch"])
                    elif kind == "step":
                        at = (int(rec["epoch"]), int(rec["step"]))
                        if last_step is not None and at <= last_step:
                            return (f"metrics of rank {r}: line {i}: step record (epoch {at[0]}, step {at[1]}) "
                                    f"{'repeated' if at == last_step else 'out of order'} ({p.name})")
                        last_step = at
                except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                    return f"metrics of rank {r}: line {i} unreadable ({p.name})"
                if rank != r:
                    return f"metrics of rank {r}: line {i} is a record of rank {rank} ({p.name})"
        if seen != list(range(epochs)):
            missing = sorted(set(range(epochs)) - set(seen))
            if missing:
                return f"metrics of rank {r}: epochs {missing} missing (logged {sorted(set(seen))} of {epochs})"
            twice = sorted({e for e in seen if seen.count(e) > 1})
            if twice:
                return f"metrics of rank {r}: epoch records {twice} logged more than once ({p.name})"
            return f"metrics of rank {r}: epoch records out of order ({seen}) or of epochs past {epochs - 1}"
    return verify_checksums(run_dir, manifest_required)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_checksums(run_dir: Path) -> None:
    """Write the run's checksum manifest (:data:`CHECKSUMS`: ``<sha256>  <relative path>`` per
    file, as ``sha256sum`` writes it); called as the run is published (moved into place)."""
    lines = [f"{_sha256(p)}  {p.relative_to(run_dir)}\n" for p in sorted(run_dir.rglob("*"))
             if p.is_file() and p.name != CHECKSUMS]
    _write_text(run_dir / CHECKSUMS, "".join(lines))


def verify_checksums(run_dir: Path, required: bool = False) -> str | None:
    """None if every file of ``run_dir`` matches its checksum manifest (no file missing, changed
    or added since it was published), else what is wrong; None for a run without a manifest
    (published before manifests existed), unless ``required``."""
    path = run_dir / CHECKSUMS
    if not path.exists():
        return f"{CHECKSUMS} missing" if required else None
    try:
        expected = {}
        for i, line in enumerate(path.read_text().splitlines(), 1):
            digest, sep, rel = line.partition("  ")
            if not sep or len(digest) != 64 or not rel:
                raise ValueError(f"line {i}")
            expected[rel] = digest
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"{CHECKSUMS} unreadable ({e})"
    present = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and p.name != CHECKSUMS}
    for rel, digest in sorted(expected.items()):
        if rel not in present:
            return f"{rel} missing (listed in {CHECKSUMS})"
        if _sha256(run_dir / rel) != digest:
            return f"{rel} changed since the run was published (its sha256 differs from {CHECKSUMS})"
    added = sorted(present - set(expected))
    if added:
        return f"{added[0]} added since the run was published (not in {CHECKSUMS})"
    return None


def has_checksums(outcome: dict[str, Any]) -> bool:
    """Whether the run of ``outcome`` was published with a checksum manifest (its file list has it)."""
    return CHECKSUMS in (outcome.get("files") or {})


def error_of(attempt: Path) -> tuple[str, str]:
    """(kind, message) of a run the runtime refused: ``error.json``, else ``ERROR.txt`` (config)."""
    try:
        err = json.loads((attempt / "error.json").read_text())
        return err["kind"], err["message"]
    except (OSError, ValueError, KeyError, TypeError):
        return "config", (attempt / "ERROR.txt").read_text(errors="replace").strip()


def manifest(run_dir: Path) -> dict[str, int]:
    """{relative path: size} of every file of a complete run (the cheap damage check)."""
    return {str(p.relative_to(run_dir)): p.stat().st_size for p in sorted(run_dir.rglob("*")) if p.is_file()}


def config_sha(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]


def _tail(path: Path, n: int = 25) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-n:])
    except OSError:
        return ""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_json(path: Path, obj: Any) -> None:
    _write_text(path, json.dumps(obj, indent=2))


def _keep_aside(path: Path, prefix: str) -> Path:
    """Rename ``path`` to ``<prefix>-<time>`` beside it (a free name); return the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    dest = path.with_name(f"{prefix}-{stamp}")
    i = 1
    while dest.exists():
        dest, i = path.with_name(f"{prefix}-{stamp}.{i}"), i + 1
    path.rename(dest)
    return dest


def read_outcome(run_dir: Path) -> dict[str, Any]:
    """``outcome.json``, or a failed/damaged outcome naming the file if it is unreadable."""
    try:
        out = read_json(run_dir / "outcome.json")
        if not isinstance(out, dict) or "status" not in out:
            raise ValueError("outcome.json unreadable (no status)")
        return out
    except ValueError as e:
        return {"status": "failed", "kind": "damaged", "reason": f"damaged: {e}", "corrupt_outcome": True}


def mark_damaged(run_dir: Path, reason: str, launch_path: Path | None) -> None:
    """Record that a finished run is damaged (see the module docstring); idempotent.

    ``outcome.json`` becomes failed/damaged (an unreadable one is first kept aside as
    ``outcome.json.damaged-<time>``); ``run/`` is not touched; the group's retry token
    changes so the next invocation repairs the run.
    """
    old = read_outcome(run_dir)
    if old.get("kind") == "damaged" and not old.get("corrupt_outcome"):
        return
    if old.get("corrupt_outcome") and (run_dir / "outcome.json").exists():
        _keep_aside(run_dir / "outcome.json", "outcome.json.damaged")
        old = {}
    new = {**old, "status": "failed", "kind": "damaged", "reason": reason, "damaged_at": _now()}
    new.pop("corrupt_outcome", None)
    run_dir.mkdir(parents=True, exist_ok=True)  # its whole directory may have been deleted
    _write_json(run_dir / "outcome.json", new)
    if launch_path is not None:
        new_retry_token(launch_path, "damaged")


def quick_damage(run_dir: Path) -> str | None:
    """Cheap check of a member of the group's last launch (module docstring, point 1): the
    reason if damaged (its files, or its whole directory, deleted or changed), else None."""
    out = read_outcome(run_dir)
    if out.get("corrupt_outcome"):
        return out["reason"]
    if out.get("status") != "ok":
        return None
    for rel, size in (out.get("files") or {}).items():
        p = run_dir / out.get("run_dir", "run") / rel
        if not p.exists():
            return f"damaged: {rel} missing"
        if p.stat().st_size != size:
            return f"damaged: {rel} changed size ({p.stat().st_size} of {size} bytes)"
    return None


def write_run_configs(members: dict[str, dict[str, Any]]) -> list[Path]:
    """Write ``<run dir>/run.json`` for each member (only if its content changed)."""
    paths = []
    for run_dir, cfg in members.items():
        p = Path(run_dir) / "run.json"
        text = json.dumps(cfg, indent=2, sort_keys=True)
        try:
            same = p.read_text() == text
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        paths.append(p)
    return paths


def run_members(members: dict[str, dict[str, Any]], launch: Path, log: Path,
                timeout_s: float = 600) -> dict[str, dict[str, Any]]:
    """Run ``{run directory: run config}`` (one node count) as rule train does (:func:`execute_group`:
    a simulation is forked by one server; a run already finished with the same config is reused)
    and give each member's outcome: ``{"status": "ok", ...}``, or ``{"status": "failed", "reason":
    "<kind>: <why> (<dir>/outcome.json)"}`` (a member without an outcome "never ran")."""
    paths = write_run_configs(members)
    if paths:
        execute_group(paths, launch, log, {"timeout_s": timeout_s})
    out = {}
    for d in members:
        o = read_outcome(Path(d)) if Path(d, "outcome.json").exists() else {"status": "failed", "reason": "never ran"}
        out[d] = o if o.get("status") == "ok" else {
            "status": "failed", "reason": f"{o.get('kind', '')}: {o.get('reason', '')} ({d}/outcome.json)"}
    return out


def _retry_path(launch_path: str | Path) -> Path:
    return Path(launch_path).with_suffix(".retry.json")


def new_retry_token(launch_path: str | Path, why: str) -> None:
    _write_json(_retry_path(launch_path), {"token": f"retry-{why}-{_now()}-{os.getpid()}-{time.time_ns()}"})


def launch_retry_token(launch_path: str | Path) -> str:
    """The train rule's ``params.retry`` of a group; first marks its damaged members (docstring)."""
    try:
        members = json.loads(Path(launch_path).read_text())["members"]
    except (OSError, ValueError, KeyError, TypeError):
        members = []
    for m in members:
        run_dir = Path(m["run"])
        reason = quick_damage(run_dir)
        if reason:
            mark_damaged(run_dir, reason, launch_path)
    try:
        return json.loads(_retry_path(launch_path).read_text())["token"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def plan_member(config_path: Path) -> dict[str, Any]:
    """A member of a launch, and whether it needs to run (``skip``: reuse its outcome)."""
    run_dir, cfg = config_path.parent, json.loads(config_path.read_text())
    m = {"dir": run_dir, "config_path": config_path, "cfg": cfg, "skip": False}
    out = read_outcome(run_dir) if (run_dir / "outcome.json").exists() else {}
    if out.get("status") == "failed" and out.get("kind") in DETERMINISTIC and out.get("config_sha") == config_sha(cfg):
        m.update(skip=True, status="failed", kind=out["kind"])  # deterministic: same config, same failure
        return m
    if not (out.get("status") == "ok" or out.get("kind") == "damaged") or not (run_dir / "run").exists():
        return m
    try:
        same = read_json(run_dir / "run" / "config.json") == cfg
    except ValueError:
        same = False
    damage = verify_run(run_dir / "run", has_checksums(out)) if same else None
    if same and damage is None:
        if out.get("status") != "ok":  # marked damaged, but run/ is intact (e.g. only run.json was): reuse
            _write_json(run_dir / "outcome.json", {**{k: out[k] for k in ("config_sha", "world") if k in out},
                                                    **ok_outcome(run_dir / "run", out.get("log", "")),
                                                    "repaired_at": _now(), "was": out.get("reason")})
        m.update(skip=True, status="ok")
    elif same:
        m["damaged"] = f"damaged: {damage}"  # recompute; the damaged run/ is kept aside
    return m


def ok_outcome(run: Path, log: str) -> dict[str, Any]:
    return {"status": "ok", "run_dir": run.name, "files": manifest(run), "log": log, "finished_at": _now()}


class Aborted(RuntimeError):
    """The launch was killed because this job is being stopped (signal, or Snakemake is gone)."""


def _kill(proc: subprocess.Popen) -> None:
    """Stop a launch and every process it started (its own session).

    Stop signals are held while it does (a second SIGTERM, or Ctrl-C reaching the
    whole process group, must not cut it short before the SIGKILL)."""
    held = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _owner_gone() -> bool:
    host, _, pid = os.environ.get(OWNER_ENV, "").rpartition(":")
    return host == _host() and pid.isdigit() and not pid_alive(int(pid))


def stop_with_owner(poll_s: float = POLL_S) -> None:
    """For a job that is not a launch (a benchmark script that starts processes of its own, e.g.
    the network-namespace testbed of ``bench_sim_vs_netns``): end this process as a launch is
    ended once the Snakemake process that owns it (``DISTREPRO_SNAKEMAKE``, set by
    :func:`distrepro_wf.pipeline.session.register`) is gone, e.g. after a ``kill -9``: a daemon
    thread polls every ``poll_s`` and then sends this process SIGTERM, once, which the script
    turns into an exception (:func:`raise_on_stop`) so that its ``finally`` blocks stop what it
    started and write nothing.  Outside a workflow (no owner): nothing."""
    import threading

    if not os.environ.get(OWNER_ENV):
        return

    def watch() -> None:
        while not _owner_gone():
            time.sleep(poll_s)
        print(f"the Snakemake process that started this job ({os.environ[OWNER_ENV]}) is gone: stopping",
              file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-owner", daemon=True).start()


def raise_on_stop() -> None:
    """SIGTERM, SIGHUP and SIGINT raise :class:`Aborted` in the main thread (a script's
    ``finally`` blocks then stop its processes and remove what was half made)."""
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, _raise_aborted)


def _raise_aborted(signum, frame):
    raise Aborted(f"stopped by signal {signum}")


def _watch(proc: subprocess.Popen, todo: list[dict[str, Any]], timeout_s: float) -> tuple[int | None, float | None]:
    """Wait for the launch; kill it if the run it is on exceeds ``timeout_s``.

    A run's clock starts at its ``STARTED`` marker; the launch's start-up (process start,
    rendezvous, until the first marker) has a clock of its own, also ``timeout_s``, and a
    start-up that exceeds it times out the first run.  Returns the index in ``todo`` of the
    run that timed out and how long it had run, or (None, None).  Raises
    :class:`Aborted` (after killing the launch) on SIGTERM / SIGINT or if the owning
    Snakemake process is gone.

    The checks run every :data:`POLL_S` seconds, but the launch's end is seen when it comes
    (``proc.wait`` with that timeout, not a sleep): a plan's short simulations take 0.4-8 s each,
    and a sleep of 0.5 s between polls left each one's lane idle for 0.25 s on average.
    """
    current, since = -1, time.time()
    old = {s: signal.signal(s, _raise_aborted) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                proc.wait(POLL_S)
                return None, None
            except subprocess.TimeoutExpired:
                pass
            started = [i for i, m in enumerate(todo) if (m["attempt"] / STARTED).exists()]
            if started and started[-1] != current:
                current, since = started[-1], time.time()
            if time.time() - since > timeout_s:
                ran = time.time() - since
                _kill(proc)
                return max(current, 0), ran  # -1: in start-up, charged to the first run
            if _owner_gone():
                raise Aborted("the Snakemake process that started this launch is gone")
    except BaseException:
        _kill(proc)
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def classify_failure(attempt: Path, rc: int, timed_out: bool, earlier_failed: bool,
                     timeout_s: float, process: str = "torchrun") -> tuple[str, str]:
    """(kind, reason) of an attempt that is not a complete run (kinds: module docstring).

    ``rc``: the launch's exit code; ``timed_out``: the launch was killed while on this
    run; ``earlier_failed``: an earlier run of the same launch failed.
    """
    if (attempt / "error.json").exists() or (attempt / "ERROR.txt").exists():
        return error_of(attempt)
    started = (attempt / STARTED).exists()
    if timed_out:
        what = verify_run(attempt) if started else "the launch's start-up did not reach it"
        return "timeout", f"timed out after {timeout_s:g} s (launcher.timeout_s, per run): {what}"
    if not started:
        why = "an earlier run of the launch failed" if earlier_failed else f"the launch failed (exit code {rc})"
        return "not_started", f"not started: {why}"
    missing = verify_run(attempt)
    return "crashed", f"{process} exited with code {rc}: {missing}" if rc else f"incomplete: {missing}"


def _launches(todo: list[dict[str, Any]], worlds: dict[Path, int | None] | None = None
              ) -> list[tuple[Any, int | None, list[dict[str, Any]]]]:
    """The processes to start, as ``(backend spec, world, members)``: one process per member whose
    backend runs a whole run in one process (its spec's ``one_process``: a simulation; world
    ``None``), and one torchrun per number of processes the other members need (workers + other
    roles, :func:`distrepro_wf.pipeline.launch.launch_world`, unless ``worlds`` gives them by run
    directory)."""
    by_world: dict[int, list[dict[str, Any]]] = {}
    alone = []
    for m in todo:
        spec = backend_of(m["cfg"].get("backend"))
        if spec.one_process:
            alone.append((spec, None, [m]))
            continue
        world = worlds[m["dir"]] if worlds is not None and m["dir"] in worlds else launch_world(m["cfg"])
        by_world.setdefault(world, []).append(m)
    return [*((backend_of(ms[0]["cfg"].get("backend")), w, ms) for w, ms in by_world.items()), *alone]


class _SimServer:
    """``python -m <the backend's entry module> --serve`` (``impls.sim``) for one launch group: forks one process per simulated run
    (:mod:`impls.sim.__main__`), so each run skips the ~3 s of Python and torch start-up.
    :meth:`submit` returns a :class:`_Forked`, which :func:`_watch` and :func:`_kill` treat
    like the process of one run (its own session: ``killpg(pid)`` stops it)."""

    def __init__(self, log_path: Path, env: dict[str, str] | None, module: str):
        self._log = open(log_path, "a")
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, start_new_session=True,
                                     preexec_fn=preexec_die_with_parent(signal.SIGKILL),
                                     env={**os.environ, **(env or {})})
        self._buf = b""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next answer; None if none came within ``timeout``; ``{"rc": -1}`` if it is gone."""
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.time() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else max(0.0, deadline - time.time())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return {"rc": -1, "pid": -1}
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def submit(self, request: dict[str, Any]) -> "_Forked":
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return _Forked(self, -1, -1)
        answer = self.read(None)
        return _Forked(self, answer.get("pid", -1), answer.get("rc"))

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            _kill(self.proc)
        self._log.close()


class _Forked:
    """One run forked by :class:`_SimServer`, with the part of Popen's interface the watch uses."""

    def __init__(self, server: _SimServer, pid: int, returncode: int | None = None):
        self.server, self.pid, self.returncode = server, pid, returncode

    def poll(self) -> int | None:
        return self.wait(0.0, raise_timeout=False)

    def wait(self, timeout: float | None = None, raise_timeout: bool = True) -> int | None:
        if self.returncode is None:
            answer = self.server.read(timeout)
            if answer is None:
                if raise_timeout:
                    raise subprocess.TimeoutExpired("simulation", timeout)
                return None
            self.returncode = int(answer["rc"])
        return self.returncode


def simulation_command(member: dict[str, Any], calibration: Path, python: str | None = None) -> list[str]:
    """One run of a one-process backend: ``python -m <its spec's entry module> --config ...``."""
    module = backend_of(member["cfg"].get("backend")).entry_module
    return [python or sys.executable, "-m", module, "--config", str(member["config_path"]),
            "--out", str(member["attempt"]), "--checkpoint-dir", str(member["dir"] / "checkpoint"),
            "--calibration", str(calibration)]


def execute_group(run_cfg_paths: list[Path], launch_path: Path, log_path: Path, launcher: dict[str, Any],
                  env: dict[str, str] | None = None, worlds: dict[str, int | None] | None = None) -> dict[str, Any]:
    """Run the members of a launch group that need it; write every outcome and the launch record.

    ``worlds``: {run directory: :func:`distrepro_wf.pipeline.launch.launch_world` of its config}, where
    the caller has them (rule train gets them from the Snakefile, which has imported torch to
    validate the config anyway); a member without one has it worked out here, and that
    imports torch (2-3 s)."""
    members = [plan_member(Path(p)) for p in run_cfg_paths]
    if len({m["cfg"]["nodes"] for m in members}) > 1:
        raise ValueError("a launch group must share one node count")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launch_path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale([launch_path.parent, *(m["dir"] for m in members)])
    todo = [m for m in members if not m["skip"]]
    tag = f"{_host()}-{os.getpid()}"
    t0 = time.time()
    rc = 0
    timeout_s = float(launcher.get("timeout_s", 3600))
    for m in todo:
        m["attempt"] = m["dir"] / f".attempt-{tag}"
        shutil.rmtree(m["attempt"], ignore_errors=True)
        m["attempt"].mkdir(parents=True)
    # one torchrun per world size (the workers plus an algorithm's server ranks), one
    # process per simulated run; results/launches/<experiment>/n<N>.json -> results/
    calibration = launch_path.parent.parent.parent / "calibration" / "measured.json"
    batches = _launches(todo, None if worlds is None else {Path(d): w for d, w in worlds.items()})
    server = None
    try:
        for spec, world, batch in batches:
            plan = launch_path.parent / f".plan-{tag}.json"
            plan.write_text(json.dumps([{"config": str(m["config_path"]), "out": str(m["attempt"]),
                                         "checkpoint_dir": str(m["dir"] / "checkpoint")} for m in batch], indent=2))
            cmd = (simulation_command(batch[0], calibration) if spec.one_process
                   else torchrun_command(world, str(plan), launcher))
            with open(log_path, "a") as log:
                log.write(f"$ {' '.join(cmd)}" + (f"  (forked by python -m {spec.entry_module} --serve)"
                                                  if spec.one_process else "") + "\n")
                log.flush()
                if spec.one_process:  # a simulation: forked by the group's server (same command, no start-up)
                    server = server or _SimServer(log_path, env, spec.entry_module)
                    proc = server.submit({"config": cmd[cmd.index("--config") + 1], "out": str(batch[0]["attempt"]),
                                          "checkpoint_dir": str(batch[0]["dir"] / "checkpoint"),
                                          "calibration": str(calibration), "log": str(log_path)})
                else:
                    # its own session (killpg stops every rank), and SIGTERM to torchrun if
                    # this process dies without killing it (kill -9: impls.runtime.procs)
                    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=preexec_die_with_parent(signal.SIGTERM),
                                            env={**os.environ, **(env or {})})
                timed_out, ran_s = _watch(proc, batch, timeout_s)
                code = proc.wait()
            plan.unlink(missing_ok=True)
            rc = rc or code
            for i, m in enumerate(batch):
                m.update(rc=code, timed_out=timed_out == i, ran_s=ran_s, first=i == 0, world=world,
                         process="the simulation" if spec.one_process else "torchrun")
    finally:
        if server is not None:
            server.close()
    status = []
    earlier_failed = False
    for m in [m for _, _, batch in batches for m in batch]:
        earlier_failed = earlier_failed and not m["first"]  # only a failure in the same launch
        missing = verify_run(m["attempt"])
        outcome = {"returncode": m["rc"], "finished_at": _now(), "log": str(log_path),
                   "group_duration_s": round(time.time() - t0, 3), "config_sha": config_sha(m["cfg"]),
                   **({"world": m["world"]} if m["world"] is not None else {})}
        if missing is None:
            final = m["dir"] / "run"
            if final.exists():
                if m.get("damaged"):
                    _keep_aside(final, "damaged")
                else:
                    final.rename(m["dir"] / f".old-{tag}")
            write_checksums(m["attempt"])  # the manifest collect verifies (verify_run)
            m["attempt"].rename(final)
            shutil.rmtree(m["dir"] / f".old-{tag}", ignore_errors=True)
            shutil.rmtree(m["dir"] / "checkpoint", ignore_errors=True)
            outcome.update(ok_outcome(final, str(log_path)))
        else:
            kind, reason = classify_failure(m["attempt"], m["rc"], m["timed_out"], earlier_failed, timeout_s,
                                            m["process"])
            earlier_failed = True
            if (m["attempt"] / STARTED).exists():
                kept = _keep_aside(m["attempt"], "failed")
            else:
                shutil.rmtree(m["attempt"])  # empty: the launch never reached it
                kept = None
            outcome.update(status="failed", kind=kind, reason=reason,
                           attempt_dir=kept.name if kept else None, log_tail=_tail(log_path))
            if m.get("damaged"):
                outcome["was"] = m["damaged"]
            if kind == "timeout":
                outcome["killed_after_s"] = round(m["ran_s"], 1)
        _write_json(m["dir"] / "outcome.json", outcome)
        m["status"], m["kind"] = outcome["status"], outcome.get("kind")
    for m in members:
        status.append({"run": str(m["dir"]), "status": m["status"], "reused": m["skip"],
                       **({"kind": m["kind"]} if m.get("kind") else {})})
    launch = {"members": status, "returncode": rc, "duration_s": round(time.time() - t0, 3),
              "finished_at": _now()}
    if any(m.get("kind") not in (None, *DETERMINISTIC) for m in todo):
        new_retry_token(launch_path, "failed")
    _write_json(launch_path, launch)
    return launch
