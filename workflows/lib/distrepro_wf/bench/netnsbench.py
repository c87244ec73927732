"""``results/bench/sim_vs_netns.csv``: the simulator against real ranks on a shaped network.

Each method runs twice with the same config:

* **real**: every rank a host of a testbed of Linux network namespaces
  (:mod:`distrepro_wf.bench.netns`: veth pairs on a bridge, each NIC shaped both ways to
  ``rate_mbit`` by ``tc tbf``; no added delay, this kernel has no ``netem``), one
  ``torchrun`` per host rendezvousing on the first (the multi-node path of a Slurm
  launch), gloo over the veths;
* **simulated**: SimGrid (``python -m impls.sim``) on the ``star`` platform of the same
  bandwidth and the latency measured on the testbed (TCP ping-pong, half the median round
  trip).

Compute is the same ``fixed`` profile on both (``step_ms``): simulated, it is charged to
the host; on real ranks the forward/backward runs and the rank sleeps to ``step_ms``
(:class:`impls.backends.ChargedClock`), so the 2 cores shared by all ranks do not bound
it.  The model (an MLP of a few MB on digits) is sized so that a message takes about
``step_ms`` at the lower rate: communication and compute are comparable.

A row per (method, ranks, bandwidth): the mean step time of the workers (every worker's
``time/step_s`` after ``warmup_steps``) real and simulated, their ratio, whether it is
within ``tolerance``, and per setting (ranks, bandwidth) whether the methods' order by
step time is the same (``order_agrees``, with both orders in ``order_real`` /
``order_sim``), and whether it is once ties are set aside (``order_agrees_beyond_margin``:
no pair that both sides separate by more than ``order_margin`` is ordered oppositely;
``order_discordant`` lists those that are).  ``netns_link.csv`` holds each bandwidth's link measurements: TCP one-way
latency (the platform's), the bulk payload rate, and gloo's one-way time of a 1-element
tensor, whose difference to TCP's is the per-message overhead the simulator does not
charge.  A failed run enters no row (the setting's ``missing`` says which and why).

Everything here but :func:`run_all` (the rule's work) is pure and tested
(``tests/test_netns.py``).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..pipeline.ordering import discordant, order  # noqa: F401  (order: part of this module's API)

from impls.errors import ConfigError

from . import simbench
from .ranges import FRACTION, TIMEOUT_S, Range, check_spec

TOPK = {"name": "topk", "ratio": 0.01, "error_feedback": True}
DEFAULTS: dict[str, Any] = {
    "nodes": [2, 4],
    "rates_mbit": [100, 200],
    "step_ms": 150.0,
    # 648 K fp32 parameters = 2.6 MB: 0.22 s on 100 Mbit/s, 0.11 s on 200, against 150 ms of compute
    "workload": {**simbench.TINY_WORKLOAD, "model": {"name": "mlp", "hidden": [768, 768]},
                 "max_steps_per_epoch": 10},
    "methods": {
        "allreduce_sgd": {"name": "allreduce_sgd"},  # ring (the run's allreduce_algorithm)
        "sgp": {"name": "sgp"},
        "osgp": {"name": "osgp"},
        "dpsgd": {"name": "dpsgd"},  # mix_then_step
        "dpsgd_step_then_mix": {"name": "dpsgd", "order": "step_then_mix"},
        "adpsgd": {"name": "adpsgd"},
        "ps_sync": {"name": "ps_sync"},
        "ps_async": {"name": "ps_async"},
        "signum_mv": {"name": "signum_mv", "optimizer": {"momentum": 0.0, "nesterov": False}},  # server vote
        "compressed_sgd_topk": {"name": "compressed_sgd", "compressor": TOPK},
    },
    "warmup_steps": 2,
    # what the simulated twin charges besides compute and the wire: "measured" = this machine's op
    # costs (impls.sim.opcost.measure_opcost: arithmetic, copies, packing) and, per message, the
    # gloo overhead the testbed measures (gloo one-way - TCP one-way, netns_link.csv); "none": nothing
    "sim_opcost": "measured",
    "warmup_steps": 2,
    "tolerance": 0.15,
    "order_margin": 0.05,  # order_agrees_beyond_margin: pairs both sides separate by more than this
    "timeout_s": 1200,  # per launch (one per bandwidth and world size)
}
COLUMNS = ["method", "ranks", "bandwidth_mbit", "real_step_ms", "sim_step_ms", "ratio", "within_15pct",
           "order_agrees", "order_agrees_beyond_margin", "order_discordant", "order_real", "order_sim", "real_compute_ms", "real_comm_ms", "sim_comm_ms",
           "latency_us", "step_ms", "sim_opcost", "missing", "note"]
OPCOST_CHOICES = ("measured", "none")
#: the numeric settings' allowed ranges (:mod:`distrepro_wf.bench.ranges`): a bandwidth is positive and
#: finite (a negative one reached ``tc``, which wrapped it to an unshaped link)
RANGES = {"nodes": Range(2, 64, integer=True, many=True), "rates_mbit": Range(0, 100_000, lo_open=True, many=True),
          "step_ms": Range(0, 600_000, lo_open=True), "warmup_steps": Range(0, 1000, integer=True),
          "tolerance": FRACTION, "order_margin": FRACTION, "timeout_s": TIMEOUT_S}


def bench_spec(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULTS` with the config's ``benchmarks.sim_vs_netns`` keys replacing them."""
    spec = copy.deepcopy(DEFAULTS)
    unknown = sorted(set(given or {}) - set(spec))
    if unknown:
        raise ConfigError("benchmarks.sim_vs_netns", f"unknown key(s) {unknown}; allowed keys: "
                                                     f"{', '.join(sorted(spec))}")
    spec.update(copy.deepcopy(dict(given or {})))
    check_spec("sim_vs_netns", spec, RANGES)
    if spec["sim_opcost"] not in OPCOST_CHOICES:
        raise ConfigError("benchmarks.sim_vs_netns.sim_opcost", f"{spec['sim_opcost']!r} is not allowed; allowed "
                                                                f"values: {', '.join(OPCOST_CHOICES)}")
    return spec


def _split(method: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A method's algorithm and its workload (``optimizer:`` beside the algorithm's keys
    replaces the workload's optimizer keys: signum_mv owns its momentum)."""
    algo = copy.deepcopy(dict(method))
    wl = copy.deepcopy(dict(spec["workload"]))
    wl["optimizer"] = {**wl.get("optimizer", {}), **algo.pop("optimizer", {})}
    return algo, wl


def real_config(method: Mapping[str, Any], nodes: int, spec: Mapping[str, Any]) -> dict[str, Any]:
    algo, wl = _split(method, spec)
    cfg = simbench.run_config(algo, nodes, wl, experiment="sim_vs_netns", backend="gloo",
                              profile={"name": "fixed", "step_ms": spec["step_ms"]})
    cfg["checkpoint"] = False
    return cfg


def sim_config(method: Mapping[str, Any], nodes: int, spec: Mapping[str, Any], rate_mbit: float,
               latency_us: float, opcost: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The simulated twin of a real run: the same fixed compute, the testbed's bandwidth and
    latency, and ``opcost`` (:func:`sim_opcost`: the profile's op-cost keys, charged by the
    simulated host for what the real ranks spend on this machine's CPU)."""
    algo, wl = _split(method, spec)
    return simbench.sim_config(algo, nodes, wl, star_platform(rate_mbit, latency_us),
                               {"name": "fixed", "step_ms": spec["step_ms"], **(opcost or {})},
                               experiment="sim_vs_netns")


def sim_opcost(spec: Mapping[str, Any], measured: Any, link: Mapping[str, Any] | None) -> dict[str, float]:
    """The fixed profile's op-cost keys of the simulated twin (``spec["sim_opcost"]``):
    ``measured`` takes this machine's arithmetic, copy and packing bandwidths (``measured``,
    an :class:`impls.sim.opcost.OpCost`) and the gloo per-message overhead the testbed
    measured (``link``'s ``gloo_overhead_us``, at least 0); ``none`` charges nothing."""
    if spec["sim_opcost"] == "none" or measured is None:
        return {}
    msg_us = max(0.0, float((link or {}).get("gloo_overhead_us", measured.msg_us)))
    return {"mem_gbps": round(measured.mem_gbps, 3), "copy_gbps": round(measured.copy_gbps, 3),
            "compress_gbps": round(measured.compress_gbps, 3), "msg_us": round(msg_us, 2)}


def star_platform(rate_mbit: float, latency_us: float) -> dict[str, Any]:
    """The simulated twin of a testbed: its tbf rate and measured one-way latency, and the
    collectives its gloo ranks run at once (:attr:`impls.backends.TorchSpec.collective_streams`)."""
    from impls.backends import BACKENDS  # noqa: PLC0415

    return {"name": "star", "nic_gbps": rate_mbit / 1e3, "latency_us": round(latency_us, 3),
            "collective_streams": BACKENDS.get("torch")().streams("gloo")}


def launch_groups(spec: Mapping[str, Any]) -> dict[tuple[float, int], list[tuple[str, int]]]:
    """(bandwidth, processes) -> the (method, workers) run in that one launch (a plan)."""
    from impls.config.runconfig import world_size

    groups: dict[tuple[float, int], list[tuple[str, int]]] = {}
    for rate in spec["rates_mbit"]:
        for nodes in spec["nodes"]:
            for label, algo in spec["methods"].items():
                w = world_size(real_config(algo, nodes, spec))
                groups.setdefault((float(rate), w), []).append((label, nodes))
    return groups


def worker_step_ms(out: str | os.PathLike, workers: int, warmup: int, key: str = "time/step_s") -> float:
    """Mean of ``key`` over every worker's steps after its first ``warmup``, ms."""
    steps = simbench.step_times(out, key)
    return statistics.fmean(simbench.after_warmup(steps, warmup, range(workers))) * 1e3


def table(real: Mapping[tuple, Mapping[str, float]], sim: Mapping[tuple, Mapping[str, float]],
          latency_us: Mapping[float, float], spec: Mapping[str, Any],
          missing: Mapping[tuple[int, float], list[str]] | None = None,
          charged: Mapping[float, Mapping[str, float]] | None = None) -> pd.DataFrame:
    """Rows of :data:`COLUMNS`.  ``real`` / ``sim``: (method, ranks, bandwidth) -> {"step",
    "compute", "comm"} in ms, only for runs that succeeded on both sides; ``missing``:
    (ranks, bandwidth) -> the methods left out and why; ``charged``: bandwidth -> the op-cost
    keys the simulated twin charged (:func:`sim_opcost`)."""
    tol = float(spec["tolerance"])
    rows = []
    settings = sorted({(k[1], k[2]) for k in real if k in sim})
    for ranks, bw in settings:
        keys = [k for k in real if k in sim and (k[1], k[2]) == (ranks, bw)]
        r_order = order({k[0]: real[k]["step"] for k in keys})
        s_order = order({k[0]: sim[k]["step"] for k in keys})
        agrees = r_order == s_order
        bad = discordant({k[0]: real[k]["step"] for k in keys}, {k[0]: sim[k]["step"] for k in keys},
                         float(spec["order_margin"]))
        gone = "; ".join((missing or {}).get((ranks, bw), []))
        for m in r_order:
            k = (m, ranks, bw)
            ratio = sim[k]["step"] / real[k]["step"]
            within = bool(abs(ratio - 1) <= tol)
            gap = real[k]["step"] - sim[k]["step"]
            ops = dict((charged or {}).get(bw) or {})
            note = (f"real - simulated = {gap:+.1f} ms a step; communication waited {real[k]['comm']:.1f} ms real vs "
                    f"{sim[k]['comm']:.1f} simulated; real compute {real[k]['compute']:.1f} ms (profile "
                    f"{spec['step_ms']:g}); the rest (optimizer, arithmetic, per-message overhead: "
                    f"{'charged as measured' if ops else 'not simulated'}) "
                    f"{real[k]['step'] - real[k]['compute'] - real[k]['comm'] - (sim[k]['step'] - sim[k]['compute'] - sim[k]['comm']):+.1f} ms")
            rows.append({"method": m, "ranks": ranks, "bandwidth_mbit": bw,
                         "real_step_ms": round(real[k]["step"], 2), "sim_step_ms": round(sim[k]["step"], 2),
                         "ratio": round(ratio, 4), "within_15pct": within, "order_agrees": agrees,
                         "order_agrees_beyond_margin": not bad,
                         "order_discordant": "; ".join(f"{a} < {b} real, > simulated" for a, b in bad),
                         "order_real": " < ".join(r_order), "order_sim": " < ".join(s_order),
                         "real_compute_ms": round(real[k]["compute"], 2), "real_comm_ms": round(real[k]["comm"], 2),
                         "sim_comm_ms": round(sim[k]["comm"], 2), "latency_us": round(latency_us[bw], 2),
                         "step_ms": spec["step_ms"],
                         "sim_opcost": ", ".join(f"{a}={b:g}" for a, b in sorted(ops.items())) or "none",
                         "missing": gone, "note": note})
    return pd.DataFrame(rows, columns=COLUMNS)


def link_row(bw: float, tcp: Mapping[str, float], gloo_rtt_s: Iterable[float]) -> dict[str, Any]:
    """A ``netns_link.csv`` row: TCP and gloo one-way times of a small message, and their difference."""
    rtt = sorted(gloo_rtt_s)
    gloo_us = rtt[len(rtt) // 2] / 2 * 1e6
    return {"bandwidth_mbit": bw, "tcp_one_way_us": round(tcp["tcp_one_way_us"], 2),
            "gloo_one_way_us": round(gloo_us, 2), "gloo_overhead_us": round(gloo_us - tcp["tcp_one_way_us"], 2),
            "bulk_payload_mbit": round(tcp["bulk_mbit"], 2), "bulk_vs_rate": round(tcp["bulk_mbit"] / bw, 4)}


# -- the rule's work (root, network namespaces, child processes) ----------------------------
def gloo_link(tb, workdir: Path, log: str | os.PathLike, n: int = 2000) -> list[float]:
    """Round trips of a 1-element gloo send/recv between hosts 0 and 1 of ``tb`` (torchrun per host)."""
    from . import netns

    out = workdir / f"gloo_pingpong_{tb.k}.json"
    rc = netns.launch(tb, ["-m", "distrepro_wf.bench.gloo_pingpong", str(out), str(n)], log, timeout_s=300)
    if rc != 0:
        raise RuntimeError(f"gloo ping-pong failed (exit status {rc}); see {log}")
    return json.loads(out.read_text())["rtt_s"]


def _run_ok(out: Path, workers: int, epochs: int) -> str | None:
    """None if the run finished (every worker logged its last epoch, no error), else why not:
    a failed or cut-short run enters no row."""
    if (out / "error.json").exists():
        return (out / "error.json").read_text()[:300]
    for r in range(workers):
        path = out / "metrics" / f"rank{r}.jsonl"
        recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
        if not any(x.get("kind") == "epoch" and x.get("epoch") == epochs - 1 for x in recs):
            return f"rank {r} did not finish (the launch failed or was cut short)"
    return None


def run_all(spec: Mapping[str, Any], workdir: str | os.PathLike, log: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every real launch (testbed per bandwidth and world size), then every simulation."""
    from . import netns

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    keys = ("time/step_s", "time/compute_s", "time/comm_s")
    names = {"time/step_s": "step", "time/compute_s": "compute", "time/comm_s": "comm"}
    warm = int(spec["warmup_steps"])
    real: dict[tuple, dict[str, float]] = {}
    missing: dict[tuple[int, float], list[str]] = {}
    links: dict[float, dict[str, Any]] = {}
    latency: dict[float, float] = {}
    for (bw, world), members in sorted(launch_groups(spec).items()):
        with netns.testbed(world, bw) as tb:
            if bw not in links and world >= 2:
                tcp = netns.tcp_latency_us(tb)
                links[bw] = link_row(bw, tcp, gloo_link(tb, workdir, log))
                latency[bw] = tcp["tcp_one_way_us"]
                logging.info("link %g Mbit/s: %s", bw, links[bw])
            plan = []
            for label, nodes in members:
                d = workdir / "real" / f"{bw:g}mbit" / f"n{nodes}" / label
                d.mkdir(parents=True, exist_ok=True)
                (d / "cfg.json").write_text(json.dumps(real_config(spec["methods"][label], nodes, spec), indent=1))
                plan.append({"config": str(d / "cfg.json"), "out": str(d / "out"), "checkpoint_dir": None})
            (workdir / f"plan_{bw:g}_{world}.json").write_text(json.dumps(plan, indent=1))
            logging.info("real: %g Mbit/s, %d hosts: %s", bw, world, [m for m, _ in members])
            rc = netns.launch(tb, ["-m", "impls.run", "--backend", "gloo", "--plan",
                                   str(workdir / f"plan_{bw:g}_{world}.json")], log, spec["timeout_s"],
                              cwd=simbench.REPO)
            if rc != 0:
                logging.info("launch exit status %d", rc)
        for (label, nodes), entry in zip(members, plan):
            why = _run_ok(Path(entry["out"]), nodes, spec["workload"]["epochs"])
            if why is not None:
                missing.setdefault((nodes, bw), []).append(f"{label} (real: {why})")
                continue
            real[(label, nodes, bw)] = {names[k]: worker_step_ms(entry["out"], nodes, warm, k) for k in keys}
    sim: dict[tuple, dict[str, float]] = {}
    measured = None
    if spec["sim_opcost"] == "measured":
        from impls.sim.opcost import measure_opcost

        measured = measure_opcost()
        logging.info("op costs of this machine: %s", measured)
    charged = {bw: sim_opcost(spec, measured, links.get(bw)) for bw in latency}
    for (label, nodes, bw) in sorted(real):
        d = workdir / "sim" / f"{bw:g}mbit" / f"n{nodes}" / label
        cfg = sim_config(spec["methods"][label], nodes, spec, bw, latency[bw], charged[bw])
        child, out = simbench.simulate(cfg, d, log, timeout_s=spec["timeout_s"], must_succeed=False)
        why = _run_ok(out, nodes, spec["workload"]["epochs"]) if child.rc == 0 else f"simulation exit status {child.rc}"
        if why is not None:
            missing.setdefault((nodes, bw), []).append(f"{label} (simulated: {why})")
            continue
        sim[(label, nodes, bw)] = {names[k]: worker_step_ms(out, nodes, warm, k) for k in keys}
    link = pd.DataFrame(list(links.values()))
    return table(real, sim, latency, spec, missing, charged), link


if __name__ == "__main__":  # python -m distrepro_wf.bench.netnsbench OUT.csv [LINK.csv]: outside Snakemake
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        t, l = run_all(bench_spec(None), tmp, Path(tmp) / "log")
        t.to_csv(sys.argv[1], index=False)
        if len(sys.argv) > 2:
            l.to_csv(sys.argv[2], index=False)
