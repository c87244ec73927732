"""Benchmark ``translation.csv``: the tiny Transformer on the synthetic corpus, on CPU.

Two measurements in one process, one after the other:

1. **Training-step throughput**: target tokens per second of the tiny model's training
   step (forward, label-smoothed loss, backward, the workload's optimizer) at the median of
   ``steps`` timed steps on the corpus's first batch after ``warmup`` ones
   (:func:`impls.runtime.throughput.time_steps`, the timing of ``workload_throughput.csv``),
   at 1 thread and at all the job's threads (the ratio of the two is the figure to compare
   across machines; absolute numbers depend on the load).
2. **BLEU after a short CPU budget**: the model trained serially, one thread, for
   ``budget_cpu_s`` seconds of this process's CPU time (so other load on the machine does not
   shorten it; Adam, fairseq's inverse-square-root schedule over ``warmup_steps``), then greedy
   decodes of the validation set scored
   by sacrebleu through :meth:`impls.tasks.translation.Translation.bleu`, against two
   baselines scored the same way: the untrained model, and the copy baseline (the source
   sentence as the hypothesis; the synthetic languages share only their names).

The workload is the config's ``tiny_transformer`` (``benchmarks.translation.workload``
names another), with ``task.data`` pointed at the rule's data-bin.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pandas as pd

DEFAULTS = {"workload": "tiny_transformer", "warmup": 3, "steps": 50, "budget_cpu_s": 60.0, "warmup_steps": 100,
            "seed": 1, "eval_sentences": 300}
TINY = {"task": {"name": "translation", "arch": "transformer_tiny", "max_tokens": 256,
                 "model_overrides": {"dropout": 0.0}},
        "batch_size": 256, "optimizer": {"name": "adam", "lr": 0.005, "betas": [0.9, 0.98]}}


def _workload(wl_spec: dict[str, Any], data: str) -> dict[str, Any]:
    spec = copy.deepcopy(wl_spec)
    spec["task"] = {**spec.get("task", {}), "data": data}
    return spec


def _setup(wl_spec: dict[str, Any], data: str, seed: int, threads: int):
    """The task on the data-bin, its model and the workload's own optimizer (the registry's
    Adam: the same update the distributed runs take)."""
    import torch

    from impls.config.dataclass_config import from_dict
    from impls.optim import build_optimizer, optimizer_config
    from impls.config.runconfig import WorkloadConfig
    from impls.tasks import build_task

    torch.set_num_threads(threads)
    wl = from_dict(WorkloadConfig, _workload(wl_spec, data), "workload")
    task = build_task(wl)
    torch.manual_seed(seed)
    task.build_data()
    torch.manual_seed(seed)
    model = task.build_model()
    opt = build_optimizer(optimizer_config(wl.optimizer), list(model.parameters()))[0]
    return wl, task, model, opt


def _batches(task, wl, seed: int):
    import torch

    from impls.data.sampler import build_sampler
    from impls.runtime.loop import batches

    sampler = build_sampler(None, task.train, wl.batch_size, 0, 1, seed)
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from batches(task.train, sampler, 0, torch.device("cpu"))
        epoch += 1


def _step(task, model, opt, batch) -> int:
    for p in model.parameters():
        p.grad = None
    task.loss(model, batch).backward()
    opt.step()
    return int(batch[3].ne(task.tgt_dict.pad()).sum())


def throughput(wl_spec: dict[str, Any], data: str, threads: int, warmup: int, steps: int, seed: int) -> dict:
    """Target tokens/s of the training step on the corpus's first batch: the timing function
    of ``workload_throughput.csv`` and of the ``measured`` profile (one code path)."""
    from impls.runtime.throughput import time_steps

    row = time_steps(_workload(wl_spec, data), threads=threads, steps=steps, warmup=warmup, seed=seed)
    return {"metric": "train_tokens_per_s", "threads": threads, "value": row["tokens_per_s"], "steps": row["steps"],
            "seconds": row["step_ms"] * row["steps"] / 1e3, "params": row["params"]}


def bleu_after_budget(wl_spec: dict[str, Any], data: str, budget_cpu_s: float, warm: int, seed: int,
                      eval_sentences: int) -> list[dict]:
    import torch

    threads = 1
    wl, task, model, opt = _setup(wl_spec, data, seed, threads)
    task.cfg.eval_sentences = eval_sentences
    hyps, refs = task.decode(model.eval())
    untrained = task.bleu(hyps, refs)
    pairs = task.val.pairs
    n = min(len(pairs), eval_sentences)
    sources = [task.src_dict.string(pairs.src[i], task.cfg.bpe) for i in range(n)]
    copy_bleu = task.bleu(sources, refs)
    # Adam with fairseq's inverse_sqrt: linear warmup over `warmup` steps, then lr * sqrt(warmup / step)
    lr = opt.lr
    model.train()
    it = _batches(task, wl, seed)
    steps, tokens, t0, c0 = 0, 0, time.perf_counter(), time.process_time()
    while time.process_time() - c0 < budget_cpu_s:
        steps += 1
        opt.lr = lr * min(steps / warm, (warm / steps) ** 0.5)
        tokens += _step(task, model, opt, next(it))
    train_s, train_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    with torch.no_grad():
        hyps, refs = task.decode(model.eval())
    trained = task.bleu(hyps, refs)
    common = {"threads": threads, "steps": steps, "seconds": train_s, "cpu_seconds": train_cpu_s, "sentences": n}
    return [{"metric": "bleu_untrained", "value": untrained, **common},
            {"metric": "bleu_copy_baseline", "value": copy_bleu, **common},
            {"metric": "bleu_trained", "value": trained, **common},
            {"metric": "bleu_trained_minus_copy", "value": trained - copy_bleu, **common},
            {"metric": "train_tokens_per_s_budget", "value": tokens / train_s, **common}]


def measure(spec: dict[str, Any], workloads: dict[str, Any], data: str, all_threads: int) -> pd.DataFrame:
    import torch

    s = {**DEFAULTS, **(spec or {})}
    wl_spec = workloads.get(s["workload"], TINY)
    before = torch.get_num_threads()
    try:
        rows = [throughput(wl_spec, data, 1, s["warmup"], s["steps"], s["seed"])]
        if all_threads > 1:
            rows.append(throughput(wl_spec, data, all_threads, s["warmup"], s["steps"], s["seed"]))
            rows.append({"metric": "train_tokens_per_s_ratio_all_vs_1_thread", "threads": all_threads,
                         "value": rows[1]["value"] / rows[0]["value"]})
        rows += bleu_after_budget(wl_spec, data, float(s["budget_cpu_s"]), int(s["warmup_steps"]), s["seed"],
                                  s["eval_sentences"])
    finally:
        torch.set_num_threads(before)
    return pd.DataFrame(rows)
