"""Checkpoints of one rank's run: saved at each epoch's end, agreed on and restored at start.

Each rank keeps ``<checkpoint_dir>/rank<r>.pt``: the epoch it ends, the config's hash, the
model, the algorithm's state (optimizer, buffers, residuals), the loss scaler's, the random
generators (torch, python, the straggler model's), the wall time and the clock's reading,
and the metrics written so far.  A run resumes only if every rank holds a checkpoint of
the same epoch of this config (one agreement at the start, :func:`resume`); otherwise every
rank starts from scratch, so a resumed run's numbers equal the uninterrupted run's.
"""

from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .metrics import MetricsWriter
from .agreement import agree, gather_notes
from .context import RunContext
from .precision import MixedPrecision

_KEYS = {"epoch", "config_hash", "model", "algo", "rng", "wall_s", "metrics"}


def load_checkpoint(path: Path, model: torch.nn.Module, h: str, device) -> tuple[dict | None, str | None]:
    """This rank's checkpoint if it is readable and of this config, else ``(None, why)``.

    An unreadable or damaged file (truncated, not a checkpoint, another model's
    shapes) is moved aside to ``<name>.unreadable-<time>`` and treated as absent: the
    run starts from scratch instead of failing every retry.  A checkpoint of another
    config is simply ignored (it is overwritten at the end of the first epoch).
    """
    if not path.exists():
        return None, None
    try:
        state = torch.load(path, map_location=device, weights_only=False)
        missing = _KEYS - set(state)
        if missing:
            raise ValueError(f"missing {sorted(missing)}")
        ours = model.state_dict()
        if set(state["model"]) != set(ours) or any(state["model"][k].shape != v.shape for k, v in ours.items()):
            raise ValueError("its parameters do not match this model")
    except Exception as e:  # noqa: BLE001  (any damage: EOFError, UnpicklingError, RuntimeError, ...)
        aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
        path.rename(aside)
        return None, f"{path.name} unreadable ({type(e).__name__}: {str(e)[:200]}), kept as {aside.name}"
    return (state if state["config_hash"] == h else None), None


@dataclass
class Resumed:
    """Where this rank's run starts: epoch 0, or the epoch after the agreed checkpoint's,
    with what that checkpoint carried (restored into the model, algorithm and generators
    already; the loss scaler's state ``amp`` is the worker loop's to load)."""

    start_epoch: int = 0
    wall_offset: float = 0.0  # the wall time the checkpointed epochs took
    metrics: str = ""  # the metrics records written before the checkpoint
    clock: dict[str, float] | None = None  # the clock's reading (``Clock.resume``); absent in old checkpoints
    amp: dict[str, Any] | None = None
    discarded: list[str] = field(default_factory=list)  # every rank's unreadable-checkpoint note


def _warn(message: str, ctx: RunContext) -> None:
    if ctx.rank == 0:
        print(f"WARNING: {message}; every rank starts this run from scratch", file=sys.stderr, flush=True)


def resume(ctx: RunContext) -> Resumed:
    """Load this rank's checkpoint, agree with the other ranks on the epoch to resume from
    (every rank calls this: two collectives of the runtime's group), and restore it.

    1. each rank reads its own checkpoint (a damaged one is moved aside, a note for all);
    2. the ranks agree on the epoch: if any rank lacks a checkpoint or holds another epoch
       (an asynchronous run killed between two ranks' checkpoints), all start from scratch;
    3. on agreement: model, algorithm state and random generators are restored.
    """
    path = ctx.ckpt_dir / f"rank{ctx.rank}.pt" if ctx.ckpt_dir else None
    state, note = load_checkpoint(path, ctx.model, ctx.config_hash, ctx.device) if path is not None else (None, None)
    found = state["epoch"] if state is not None else -1
    discarded = gather_notes(note, ctx.ctl)
    for n in discarded:
        _warn(f"checkpoint {n}", ctx)
    agreed = agree(found, ctx.ctl)
    if agreed is None:
        _warn("the ranks' checkpoints are of different epochs (an asynchronous run killed between two ranks' "
              "checkpoints)", ctx)
    if agreed in (None, -1):
        return Resumed(discarded=discarded)
    ctx.model.load_state_dict(state["model"])
    ctx.algo.load_state_dict(state["algo"])
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    if "straggler" in state["rng"]:
        ctx.straggler.rng.setstate(state["rng"]["straggler"])
    return Resumed(found + 1, state["wall_s"], state["metrics"], state.get("clock"), state.get("amp"), discarded)


def save_checkpoint(ctx: RunContext, epoch: int, t_start: float, writer: MetricsWriter,
                    prec: MixedPrecision | None = None) -> None:
    """Write this rank's checkpoint of the end of ``epoch`` (nothing without a checkpoint dir).

    Written where the next epoch starts (after the epoch's agreement, whose time the
    next epoch's wall time includes); the clock's reading goes with it, so that a resumed
    simulation continues at exactly this simulated time (``Clock.resume``).  ``t_start``:
    the clock's reading at the run's start; ``prec``: the worker's loss scaler (servers
    have none).  Written to a temporary file and renamed, so a kill leaves the old one."""
    if ctx.ckpt_dir is None:
        return
    path = ctx.ckpt_dir / f"rank{ctx.rank}.pt"
    now = ctx.clock.now()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"epoch": epoch, "config_hash": ctx.config_hash, "model": ctx.model.state_dict(),
                "algo": ctx.algo.state_dict(), "amp": prec.state_dict() if prec is not None else None,
                "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                        "straggler": ctx.straggler.rng.getstate()},
                "wall_s": now - t_start, "clock": {"t_start": t_start, "now": now},
                "metrics": writer.text()}, tmp)
    os.replace(tmp, path)
