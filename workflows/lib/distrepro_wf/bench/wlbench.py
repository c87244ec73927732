"""Benchmark ``workload_throughput.csv`` (rule ``bench_workload_throughput``): samples/s
(tokens/s for translation) of each shipped workload's training step on this CPU, at one
thread and at all the job's threads, fp32 and bf16 autocast, and the ``profile:`` entry a
simulated node of that batch would charge on this machine.

Every row is :func:`impls.runtime.throughput.time_steps` (the function the simulated
platform's ``measured`` profile calibrates with): the workload as its config file defines it
(model, optimizer, precision switch through the registries), one fixed batch, ``warmup``
steps excluded, the median of the timed steps.  Workloads whose data lives in files this
machine may not have (CIFAR, ImageNet, WMT'16) run on random tensors of the real shape
(:func:`~impls.runtime.throughput.synthetic_stand_in`; translation: ``tokens``, a random
token batch over a vocabulary of the real size).  Full-scale models run at a small batch
(``batch_size``) and few steps: their rows give this CPU's cost per sample, not a
recommendation to train them here.

Settings (:data:`DEFAULTS`, overridable under ``benchmarks.workload_throughput``):
``workloads`` (label -> ``{config, workload?, batch_size?, tokens?, steps?, warmup?}``;
``workload`` names the config's workload, default the label, or is an inline mapping),
``threads`` (``1`` and ``all``), ``precisions``, ``steps`` / ``warmup``, ``budget_s`` (a
configuration stops timing once its timed steps exceed this, after at least 3), and
``emulated_bf16_max_fp32_ms``: on a CPU without native bf16 arithmetic (no AVX-512 BF16 /
AMX, e.g. AVX2 machines) torch emulates bf16 matrix products and convolutions, 5-25x slower
than fp32 (measured here: a ResNet-50 step at batch 4 takes a minute), so a bf16 row is timed
only where the workload's fastest fp32 step at the same threads took at most this many ms;
the others say ``skipped`` and why (``null``: time them all).  ``gpu``: ``auto`` adds the
same rows on the first CUDA device where torch sees one (``device`` column: its name;
``threads``: the job's, for the host side), ``false`` never.

Columns: ``workload, config, model, data, batch, unit, throughput`` (samples/s or
tokens/s at the median step), ``vs_1_thread`` (this row's throughput / the same workload and
precision at one CPU thread), ``vs_fp32`` (/ the same workload, device and threads in fp32),
``throughput_best`` (at the fastest step: on a shared machine, the closer to the uncontended
figure), the timings of :func:`~impls.runtime.throughput.time_steps`, ``profile`` (JSON, what
``profile:`` accepts) and the machine (``device, cpu_model, cpu_count, threads, torch, host,
loadavg_1m``).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from impls.errors import ConfigError

from .tables import merge_spec

from ..pipeline.yamlio import load_yaml

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[4]

SGD_CIFAR = {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 5.0e-4}
DEFAULTS: dict[str, Any] = {
    "workloads": {
        # the tiny stand-ins, at their configs' batch
        "digits_mlp": {"config": "config/config.yaml"},
        "digits_cnn": {"config": "config/config.yaml"},
        "mnist_mlp_lb": {"config": "config/large_batch.yaml"},
        # the synthetic corpus: 128 symbols (fairseq pads the dictionary to a multiple of 8),
        # 32 sentences of 8 tokens = max_tokens 256 (sentences of 2-10 words + EOS)
        "tiny_transformer": {"config": "config/translation.yaml",
                             "tokens": {"vocab": 128, "sentences": 32, "length": 8}},
        # CIFAR-shaped models on random 3x32x32 tensors, at batch 32
        "cifar10_resnet20": {"config": "config/full/adpsgd.yaml", "batch_size": 32},
        "cifar10_vgg16": {"config": None, "batch_size": 32, "warmup": 1,
                          "workload": {"dataset": {"name": "cifar10"}, "model": {"name": "vgg16"}, "batch_size": 32,
                                       "optimizer": SGD_CIFAR}},
        # full scale at a small batch: ResNet-50 on 224x224, transformer_wmt_en_de on 1,024 tokens
        # (a shared 32,768-symbol dictionary, Ott et al. 2018's joined BPE vocabulary)
        "resnet50_imagenet": {"config": "config/full/sgp.yaml", "batch_size": 4, "steps": 3, "warmup": 1},
        "transformer_wmt16": {"config": "config/full/translation.yaml", "steps": 3, "warmup": 1,
                              "tokens": {"vocab": 32768, "sentences": 32, "length": 32}},
    },
    "threads": [1, "all"],
    "precisions": ["fp32", "bf16"],
    "steps": 10,
    "warmup": 2,
    "budget_s": 8.0,
    "emulated_bf16_max_fp32_ms": 250.0,
    "gpu": "auto",
}
ENTRY_KEYS = {"config", "workload", "batch_size", "tokens", "steps", "warmup"}
KEY = "benchmarks.workload_throughput"
COLUMNS = ["workload", "config", "model", "data", "batch", "unit", "throughput", "device", "threads", "precision",
           "vs_1_thread", "vs_fp32", "status", "throughput_best", "step_ms", "step_ms_min", "fwd_bwd_ms",
           "fwd_bwd_ms_min", "optim_ms", "samples_per_s", "tokens", "tokens_per_s", "rows", "params", "model_mb",
           "optimizer", "warmup", "steps", "profile", "cpu_model", "cpu_count", "torch", "host", "loadavg_1m"]


def bench_spec(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULTS` with the config's keys replacing them (an unknown key is an error)."""
    spec = merge_spec(DEFAULTS, given, KEY)
    for label, e in spec["workloads"].items():
        bad = sorted(set(e or {}) - ENTRY_KEYS)
        if bad:
            raise ConfigError(f"{KEY}.workloads.{label}", f"unknown key(s) {bad}; allowed keys: "
                                                          f"{', '.join(sorted(ENTRY_KEYS))}")
    bad = sorted(set(spec["precisions"]) - {"fp32", "bf16", "fp16"})
    if bad:
        raise ConfigError(f"{KEY}.precisions", f"unknown {bad}; allowed values: fp32, bf16, fp16")
    cap = spec["emulated_bf16_max_fp32_ms"]
    if spec["gpu"] not in ("auto", False):
        raise ConfigError(f"{KEY}.gpu", f"allowed values: auto, false; got {spec['gpu']!r}")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap < 0):
        raise ConfigError(f"{KEY}.emulated_bf16_max_fp32_ms", f"expected a number >= 0 or null, got {cap!r}")
    spec["precisions"] = sorted(spec["precisions"], key=lambda p: p != "fp32")  # fp32 first: the bf16 cap reads it
    return spec


def config_files(spec: Mapping[str, Any], root: Path = REPO) -> list[str]:
    """The config files the benchmark reads its workloads from (the rule's inputs): absolute,
    a relative path being the repository's (whatever the working directory, ``-d``)."""
    return sorted({str(root / e["config"]) for e in spec["workloads"].values() if e.get("config")})


def resolve_workload(label: str, entry: Mapping[str, Any], root: Path = REPO) -> dict[str, Any]:
    """The workload mapping of one entry: inline, or read from its config file, with the
    entry's ``batch_size`` and the synthetic stand-in of file-based image data."""
    from impls.runtime.throughput import synthetic_stand_in

    wl = entry.get("workload", label)
    if isinstance(wl, str):
        path = root / entry["config"]
        workloads = (load_yaml(path) or {}).get("workloads", {})
        if wl not in workloads:
            raise ConfigError(f"{KEY}.workloads.{label}.workload", f"no workload {wl!r} in {entry['config']}; "
                                                                   f"known: {', '.join(sorted(workloads))}")
        wl = workloads[wl]
    wl = copy.deepcopy(dict(wl))
    if entry.get("batch_size"):
        wl["batch_size"] = int(entry["batch_size"])
    return synthetic_stand_in(wl)


def native_bf16() -> bool:
    """Whether this CPU computes in bf16 natively (x86 AVX-512 BF16 / AMX, Arm's bf16)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return any(f in flags for f in ("avx512_bf16", "amx_bf16", "bf16"))


def _task_class(wl: Mapping[str, Any]) -> Any:
    from impls.tasks import TASKS

    return TASKS.get((wl.get("task") or {}).get("name", "classification"))


def _describe(wl: Mapping[str, Any], entry: Mapping[str, Any]) -> tuple[str, str]:
    task = wl.get("task") or {}
    own = _task_class(wl).describe(task, entry.get("tokens"))  # a task whose model and data are its own
    if own is not None:
        return own
    ds = dict(wl.get("dataset") or {})
    if ds.get("name") == "synthetic":
        return wl["model"]["name"], f"random {'x'.join(map(str, ds['shape']))}, {ds['classes']} classes"
    return (wl.get("model") or {}).get("name", task.get("name", "")), ds.get("name", task.get("name", ""))


def measure(given: Mapping[str, Any] | None, all_threads: int, root: Path = REPO) -> pd.DataFrame:
    """Every (workload, threads, precision) of the spec, one after the other in this process."""
    import torch

    from impls.runtime.throughput import machine, profile_entry, time_steps

    spec = bench_spec(given)
    threads = sorted({all_threads if t == "all" else int(t) for t in spec["threads"]})
    cpu_cap = None if native_bf16() else spec["emulated_bf16_max_fp32_ms"]
    settings = [(torch.device("cpu"), t, cpu_cap) for t in threads]
    if spec["gpu"] == "auto" and torch.cuda.is_available():
        settings.append((torch.device("cuda", 0), all_threads, None))
    rows = []
    for label, entry in spec["workloads"].items():
        wl = resolve_workload(label, entry, root)
        model, data = _describe(wl, entry)
        head = {"workload": label, "config": entry.get("config") or "inline", "model": model, "data": data,
                "unit": _task_class(wl).throughput_unit}
        for device, t, cap in settings:
            fp32_ms = None
            for prec in spec["precisions"]:
                if prec != "fp32" and cap is not None and (fp32_ms is None or fp32_ms > cap):
                    why = (f"skipped: {prec} is emulated on this CPU (no native bf16) and the fastest fp32 step "
                           f"took {fp32_ms or float('nan'):.0f} ms > emulated_bf16_max_fp32_ms {cap:g}")
                    rows.append({**head, **machine(t, device), "precision": prec, "status": why})
                    continue
                t0 = time.perf_counter()
                r = time_steps(wl, threads=t, precision=prec, steps=int(entry.get("steps", spec["steps"])),
                               warmup=int(entry.get("warmup", spec["warmup"])), tokens=entry.get("tokens"),
                               budget_s=float(spec["budget_s"]), device=device)
                log.info("%s %s threads=%d %s: %.1f ms/step (%.1f s)", label, r["device"], t, prec, r["step_ms"],
                         time.perf_counter() - t0)
                if prec == "fp32":
                    fp32_ms = r["step_ms_min"]  # the uncontended step: other load only ever adds
                per_step = r["rows"] if r["tokens"] is None else r["tokens"]  # the task's units (tokens/s)
                rows.append({**head, **r, "status": "ok", "batch": r["rows"],
                             "throughput": per_step / (r["step_ms"] / 1e3),
                             "throughput_best": per_step / (r["step_ms_min"] / 1e3),
                             "profile": json.dumps(profile_entry(r))})
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    for c in ("batch", "tokens", "rows", "params", "warmup", "steps"):
        table[c] = table[c].astype("Int64")
    return add_ratios(table)


def add_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """``vs_1_thread`` and ``vs_fp32``: each row's throughput over its twin's at one CPU thread
    (same workload and precision; a GPU row: its speed-up over one CPU thread) / in fp32 (same
    workload, device and threads)."""
    t = table.copy()
    ok = t["status"] == "ok"
    cpu = t["device"] == "cpu"
    one = t[ok & cpu & (t["threads"] == 1)].set_index(["workload", "precision"])["throughput"]
    fp32 = t[ok & (t["precision"] == "fp32")].set_index(["workload", "device", "threads"])["throughput"]
    nan = float("nan")
    t["vs_1_thread"] = [r.throughput / one.get((r.workload, r.precision), nan) if ok_ else nan
                        for r, ok_ in zip(t.itertuples(), ok)]
    t["vs_fp32"] = [r.throughput / fp32.get((r.workload, r.device, r.threads), nan) if ok_ else nan
                    for r, ok_ in zip(t.itertuples(), ok)]
    return t
