"""A probe's raw timings turned into a cluster's platform and profile (``results/probe/<cluster>.yaml``).

:mod:`impls.bench.probe` times, on the cluster's real ranks, all-reduces and ping-pongs over
message sizes and one training step (its CSV: ``kind, bytes, peer, rep, seconds``; its JSON
sidecar: hosts, world, transport, date, model size).  :func:`summarize` reads them:

* **all-reduce** (nccl-tests' definitions, its ``doc/PERFORMANCE.md``): the algorithm
  bandwidth ``algbw = S / t`` of ``S`` bytes per rank in ``t`` seconds (median over
  repetitions), and the bus bandwidth ``busbw = algbw x 2 (n - 1) / n``
  (:func:`bus_bandwidth`): what each rank's link carried, comparable across world sizes and
  with the NIC's rate;
* **point to point** (:func:`fit_p2p`): one-way time ``t(S)`` = half the median round trip of
  ``S`` bytes, fitted by least squares as ``t(S) = overhead + S / bandwidth``: the
  **latency** is the smallest message's one-way time (end to end, what the simulated
  platform's ``latency_us`` means), the **bandwidth** the largest message's ``S / t(S)``, the
  **per-message overhead** the fit's intercept (the time a message costs beyond its bytes at
  the fitted rate);
* **step**: the median over ranks of each rank's step (ms), the model's fp32 size (MB).

The file's ``platform`` is what a plan's ``network`` takes (``topology: star``, ``nic_gbps``,
``latency_us``, ``overhead_us``; ``nic_gbps`` is the NIC rate under which the simulator's lone
flow, which gets :data:`impls.sim.platforms.BANDWIDTH_FACTOR` of its link, moves at the
measured bandwidth: the point-to-point one, or the largest all-reduce's bus bandwidth where
that is lower, i.e. where the links carry less when every rank communicates at once, as in
training: ``measured.nic_from`` says which);
its ``profile`` what a plan's ``model`` takes (``step_ms``, ``model_mb``, ``batch``); its
``provenance`` where the figures come from (hosts, world, transport, device, date, the raw CSV,
and ``ranks``: each rank's place, with its Slurm job, task and node when launched under Slurm).  A plan
names the file as ``plan.probe`` (:func:`load`; :func:`distrepro_wf.plan.config.with_probe`).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from impls.errors import ConfigError


def bus_bandwidth(algbw: float, n: int) -> float:
    """nccl-tests' all-reduce bus bandwidth of algorithm bandwidth ``algbw`` on ``n`` ranks."""
    return algbw * 2 * (n - 1) / n


def fit_p2p(sizes: Sequence[float], one_way_s: Sequence[float]) -> dict[str, float]:
    """Latency (s), bandwidth (bytes/s) and per-message overhead (s) of one-way times per size
    (module docstring); ``slope_bandwidth``: the fit's ``1 / slope``."""
    pts = sorted(zip(map(float, sizes), map(float, one_way_s)))
    if len(pts) < 2 or pts[0][0] == pts[-1][0]:
        raise ValueError("a point-to-point fit needs at least two message sizes")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    return {"latency_s": ys[0], "bandwidth_Bps": xs[-1] / ys[-1], "overhead_s": max(0.0, intercept),
            "slope_bandwidth_Bps": 1 / slope if slope > 0 else float("inf")}


def _median_by(rows: Iterable[Mapping[str, Any]], kind: str) -> dict[float, float]:
    by: dict[float, list[float]] = {}
    for r in rows:
        if r["kind"] == kind:
            by.setdefault(float(r["bytes"]), []).append(float(r["seconds"]))
    return {s: statistics.median(v) for s, v in sorted(by.items())}


def summarize(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], cluster: str,
              raw: str | None = None) -> dict[str, Any]:
    """The probe file's content (module docstring) from the raw rows and the provenance ``meta``."""
    from impls.sim.platforms import BANDWIDTH_FACTOR

    n = int(meta["world"])
    ar = [{"bytes": s, "seconds": t, "algbw_gbps": s / t * 8 / 1e9, "busbw_gbps": bus_bandwidth(s / t, n) * 8 / 1e9}
          for s, t in _median_by(rows, "all_reduce").items()]
    pairs = {}
    for peer in sorted({str(r["peer"]) for r in rows if r["kind"] == "p2p"}):
        med = _median_by([r for r in rows if r["kind"] == "p2p" and str(r["peer"]) == peer], "p2p")
        pairs[peer] = fit_p2p(list(med), [t / 2 for t in med.values()])
    if not pairs or not ar:
        raise ValueError("a probe needs all-reduce and point-to-point timings")
    # the slowest pair sets the cluster's figures (one NIC rate for every host on a star)
    bw = min(f["bandwidth_Bps"] for f in pairs.values())
    # ... unless the links carried less when every rank communicated at once (the largest
    # all-reduce's bus bandwidth: hosts whose transport shares a CPU, a PCIe bus or a switch)
    busbw = ar[-1]["busbw_gbps"] * 1e9 / 8
    rate, rate_from = (bw, "p2p") if bw <= busbw else (busbw, "all_reduce")
    lat = max(f["latency_s"] for f in pairs.values())
    ovh = max(f["overhead_s"] for f in pairs.values())
    steps = [float(r["seconds"]) * 1e3 for r in rows if r["kind"] == "step"]
    r6 = lambda x: float(f"{x:.6g}")  # noqa: E731
    # the collectives a rank of the probed transport runs at once (gloo 2, NCCL 1): the plan's twin runs as many
    from impls.backends import BACKENDS  # noqa: PLC0415

    streams = BACKENDS.get("torch")().collective_streams.get(str(meta.get("backend", "")))
    return {
        "cluster": cluster,
        "platform": {"topology": "star", "nic_gbps": r6(rate * 8 / 1e9 / BANDWIDTH_FACTOR),
                     "latency_us": r6(lat * 1e6), "overhead_us": r6(ovh * 1e6),
                     **({"collective_streams": streams} if streams else {})},
        "profile": {"step_ms": r6(statistics.median(steps)), "model_mb": r6(float(meta["model_mb"])),
                    **({"batch": int(meta["batch"])} if meta.get("batch") else {})},
        "measured": {
            "p2p_bandwidth_gbps": r6(bw * 8 / 1e9),
            "nic_from": rate_from,
            "all_reduce": [{k: r6(v) for k, v in a.items()} for a in ar],
            "p2p": {f"0-{peer}": {"latency_us": r6(f["latency_s"] * 1e6), "bandwidth_gbps": r6(f["bandwidth_Bps"] * 8e-9),
                                  "overhead_us": r6(f["overhead_s"] * 1e6),
                                  "slope_bandwidth_gbps": r6(f["slope_bandwidth_Bps"] * 8e-9)}
                    for peer, f in pairs.items()},
            "step_ms_per_rank": [r6(s) for s in steps],
        },
        "provenance": {**{k: meta[k] for k in ("hosts", "world", "backend", "device", "date", "threads", "ranks")
                          if k in meta},
                       **({"workload": meta["workload"]} if "workload" in meta else {}),
                       **({"raw": raw} if raw else {})},
    }


#: a probe section's defaults (schema: ``probe:``)
DEFAULTS = {"nodes": 2, "threads": 1, "reps": 5, "sizes_mb": [0.001, 0.1, 1.0, 10.0],
            "p2p_sizes_mb": [0.001, 0.1, 1.0, 10.0]}


def settings(probe: Mapping[str, Any]) -> dict[str, Any]:
    """The ``probe:`` section with its defaults; ConfigError naming ``probe.workload`` if the
    workload would not build (before any job)."""
    from impls.config.dataclass_config import from_dict
    from impls.config.workload import WorkloadConfig

    out = {**DEFAULTS, **dict(probe)}
    from_dict(WorkloadConfig, dict(out["workload"]), "probe.workload")
    if len(set(out["p2p_sizes_mb"])) < 2:
        raise ConfigError("probe.p2p_sizes_mb", "at least two different sizes: the latency/bandwidth fit needs them")
    return out


def entry(probe: Mapping[str, Any], launcher: Mapping[str, Any], csv_out: str) -> list[str]:
    """torchrun's program arguments of the probe (``-m impls.bench.probe ...``), over the launcher's
    transport (``launcher.backend``)."""
    from impls.backends import DEFAULT as DEFAULT_BACKEND

    p = settings(probe)
    mb = lambda xs: ",".join(f"{x * 1e6:g}" for x in xs)  # noqa: E731
    args = ["-m", "impls.bench.probe", "--backend", launcher.get("backend", DEFAULT_BACKEND),
            "--sizes", mb(p["sizes_mb"]), "--p2p-sizes", mb(p["p2p_sizes_mb"]), "--reps", str(p["reps"]),
            "--workload", json.dumps(p["workload"]), "--threads", str(p["threads"]), "--out", csv_out]
    return args + (["--batch", str(p["batch"])] if p.get("batch") else [])


def command(probe: Mapping[str, Any], launcher: Mapping[str, Any], csv_out: str,
            python: str | None = None) -> list[str]:
    """The probe's launch: :func:`distrepro_wf.pipeline.launch.torchrun_command` (the experiments'
    launcher, local or Slurm) of :func:`entry` on ``probe.nodes`` ranks (the namespace testbed
    launches the same entry: :func:`distrepro_wf.bench.netns.launch`)."""
    from ..pipeline.launch import torchrun_command

    return torchrun_command(int(settings(probe)["nodes"]), None, launcher, python=python,
                            entry=entry(probe, launcher, csv_out))


def write(csv_path: Path, meta_path: Path, out: Path, cluster: str, extra: Mapping[str, Any] | None = None) -> dict:
    """Read the probe's CSV and JSON, write ``out`` (YAML); return its content."""
    import csv

    import yaml

    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    meta = {**json.loads(Path(meta_path).read_text()), **(extra or {})}
    doc = summarize(rows, meta, cluster, raw=str(csv_path))
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# probe of cluster {cluster!r} (python -m impls.bench.probe; distrepro_wf.plan.probe): a plan "
              f"takes it as plan.probe: {out}\n")
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False))
    return doc


def load(path: str, key: str = "plan.probe") -> dict[str, Any]:
    """A probe file, checked: ConfigError naming ``key`` if it is missing or not a probe's."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(key, f"no probe file {path!r}; make it with `snakemake --cores 2 probe --configfile "
                               "<a config with a probe: section>` (docs/plan.md)")
    doc = yaml.safe_load(p.read_text()) or {}
    for sec, keys in (("platform", ("nic_gbps", "latency_us")), ("profile", ("step_ms", "model_mb"))):
        missing = [k for k in keys if not isinstance((doc.get(sec) or {}).get(k), (int, float))]
        if missing:
            raise ConfigError(key, f"{path} is not a probe's file: {sec}.{', '.join(missing)} missing")
    return doc
