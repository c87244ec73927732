"""``python -m impls.sim.calibrate``: a timing profile of your own hardware for the
simulated platform.

Times a workload's training step on this machine (:func:`impls.runtime.throughput.
time_steps`: the model and optimizer of the workload, one batch, warm-up steps excluded,
the median of the timed ones) and prints the ``profile:`` entry a simulated node of that
batch would charge: ``{name: fixed, step_ms, model_mb}``, the step's compute time and the
model's fp32 size (messages are scaled to it).  Paste it into an experiment with
``backend: simgrid`` to ask "what would method X do on N of these machines on that
network?" with this machine as the node::

    python -m impls.sim.calibrate --config config/full/sgp.yaml --workload resnet50_imagenet \\
        --batch 8 --threads 16 --precision bf16
    # resnet50, batch 8, 16 threads, bf16 on <cpu>: 412.3 ms/step (median of 5; min 405.1), 19.4 samples/s
    profile: {name: fixed, step_ms: 412.3, model_mb: 102.228128}

A CIFAR or ImageNet dataset is replaced by random tensors of its shape (its files need
not be here; ``--real-data`` keeps them); a translation workload runs on a random token
batch (``--tokens VOCAB,SENTENCES,LENGTH``; default the WMT'16 scale 32768,32,32), or on its
data-bin with ``--real-data``.  The step includes the optimizer's update (the simulated
clock charges nothing else for local computation); jitter, if wanted, is added by hand
(``jitter: 0.03``).  The rows of ``results/bench/workload_throughput.csv`` carry the same
entry for every shipped workload (its ``profile`` column).

Versus the ``measured`` profile: that one times the *stand-in* actually being simulated (per
sample, one thread, forward/backward only) so the simulated run charges what its own math
costs here; this one times the *real* model you want the simulated nodes to be.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import ConfigError


def load_workload(config: str, name: str) -> dict[str, Any]:
    """Workload ``name`` of a pipeline config file (YAML), or a JSON mapping given inline."""
    import yaml

    if name.lstrip().startswith("{"):
        return json.loads(name)
    with open(config) as f:
        workloads = (yaml.safe_load(f) or {}).get("workloads", {})
    if name not in workloads:
        raise ConfigError("workload", f"no workload {name!r} in {config}; known: {', '.join(sorted(workloads))}")
    return workloads[name]


def calibrate(workload: dict[str, Any], batch: int | None = None, threads: int = 1, precision: str | None = None,
              steps: int = 5, warmup: int = 2, tokens: dict[str, int] | None = None,
              real_data: bool = False, device: str = "cpu") -> dict[str, Any]:
    """The timing row of :func:`~impls.runtime.throughput.time_steps` plus its ``profile`` entry."""
    import torch

    from ..runtime.throughput import profile_entry, synthetic_stand_in, time_steps

    wl = dict(workload)
    if batch:
        wl["batch_size"] = batch
    translation = (wl.get("task") or {}).get("name") == "translation"
    if not real_data:
        wl = synthetic_stand_in(wl)
        if translation and tokens is None:
            tokens = {"vocab": 32768, "sentences": 32, "length": 32}
    row = time_steps(wl, threads=threads, precision=precision, steps=steps, warmup=warmup,
                     tokens=tokens if translation else None, device=torch.device(device))
    return {**row, "profile": profile_entry(row)}


def main(argv: list[str] | None = None) -> None:
    import torch

    ap = argparse.ArgumentParser(prog="python -m impls.sim.calibrate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config/config.yaml", help="pipeline config holding the workload")
    ap.add_argument("--workload", required=True, help="its name there, or an inline JSON workload mapping")
    ap.add_argument("--batch", type=int, default=None, help="rows per step (default: the workload's batch_size)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(), help="default: all of torch's")
    ap.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default=None, help="default: the workload's")
    ap.add_argument("--steps", type=int, default=5, help="timed steps (the median is reported)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--tokens", default=None, help="translation: VOCAB,SENTENCES,LENGTH of the random batch")
    ap.add_argument("--real-data", action="store_true", help="the workload's own data (files must be here)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N (a GPU node)")
    ap.add_argument("--json", action="store_true", help="print the whole timing row as JSON")
    a = ap.parse_args(argv)
    tokens = None
    if a.tokens:
        try:
            v, s, n = (int(x) for x in a.tokens.split(","))
        except ValueError:
            ap.error(f"--tokens: expected VOCAB,SENTENCES,LENGTH (three integers), got {a.tokens!r}")
        tokens = {"vocab": v, "sentences": s, "length": n}
    try:
        row = calibrate(load_workload(a.config, a.workload), a.batch, a.threads, a.precision, a.steps, a.warmup,
                        tokens, a.real_data, a.device)
    except ConfigError as e:
        raise SystemExit(f"invalid configuration: {e}") from None
    if a.json:
        print(json.dumps(row))
        return
    rate = (f"{row['tokens_per_s']:.1f} tokens/s" if row["tokens"] is not None
            else f"{row['samples_per_s']:.2f} samples/s")
    ntok = "" if row["tokens"] is None else f" ({row['tokens']} tokens)"
    print(f"# batch {row['rows']}{ntok}, "
          f"{row['threads']} threads, {row['precision']} on {row['device']}, {row['cpu_model']} "
          f"(torch {row['torch']}, load "
          f"{row['loadavg_1m']}): {row['step_ms']:.1f} ms/step (median of {row['steps']}; min "
          f"{row['step_ms_min']:.1f}), {rate}")
    p = row["profile"]
    print(f"profile: {{name: {p['name']}, step_ms: {p['step_ms']}, model_mb: {p['model_mb']}}}")


if __name__ == "__main__":
    main()
