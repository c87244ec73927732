"""Which shared_hpc uplinks and background load give AD-PSGD's published 4-8x?  (claims.yaml,
``adpsgd_epoch_4to8x_faster``: the sweep recorded above the claim and its ``needs`` text.)

Short simulations of adpsgd_sim's setting (16 nodes in racks of 8, resnet50_v100x8 profile, no
straggler, seed 1), one epoch of quadratic_sim, with ``platform: shared_hpc`` and its
``uplink_gbps`` x ``background_load`` overridden; prints AR-SGD's and AD-PSGD's epoch (the last
step's simulated wall time, latest rank) and their ratio.  38 simulations through one
``python -m impls.sim --serve`` fork server: about 1.5 min wall, 1 CPU-min.

    PYTHONPATH=.:workflows/lib python scripts/adpsgd_uplink_sweep.py [OUT_DIR] [up:bg,up:bg,...]
"""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import yaml

from distrepro_wf.pipeline.config import Run, run_config

GRID = list(itertools.product([10.0, 5.0, 2.5, 1.25, 0.625], [0.0, 0.5, 0.8])) + [
    (0.3125, 0.0), (0.3125, 0.5), (0.3125, 0.8), (0.15625, 0.5)]


def epoch_s(run: Path) -> float:
    last: dict[str, float] = {}
    for f in (run / "metrics").glob("rank*.jsonl"):
        for line in open(f):
            d = json.loads(line)
            if d.get("kind") == "step":
                last[f.name] = max(last.get(f.name, 0.0), d["time/wall_s"])
    return max(last.values())


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/adpsgd_uplink_sweep")
    grid = [tuple(float(x) for x in g.split(":")) for g in sys.argv[2].split(",")] if len(sys.argv) > 2 else GRID
    cfg = yaml.safe_load(open("config/config.yaml"))
    reqs, keys = [], []
    for up, bg in grid:
        for m in ("allreduce_sgd", "adpsgd"):
            raw = run_config(cfg, Run("adpsgd_sim", m, 16, "none", 1))
            raw["workload"]["epochs"] = 1
            raw["workload"].pop("evals_per_epoch", None)
            raw["platform"] = {"name": "shared_hpc", "uplink_gbps": up, "background_load": bg}
            o = out / f"{m}_up{up}_bg{bg}"
            o.mkdir(parents=True, exist_ok=True)
            (o / "run.json").write_text(json.dumps(raw))
            keys.append((up, bg, m, o))
            if not (o / "run" / "metrics").exists():
                reqs.append({"config": str(o / "run.json"), "out": str(o / "run"), "checkpoint_dir": str(o / "ck"),
                             "calibration": None, "log": str(o / "log")})
    srv = subprocess.Popen([sys.executable, "-m", "impls.sim", "--serve"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    for r in reqs:
        srv.stdin.write(json.dumps(r) + "\n")
        srv.stdin.flush()
        while "rc" not in (line := json.loads(srv.stdout.readline())):
            pass
        if line["rc"]:
            sys.exit(f"simulation failed: {r['out']} (log {r['log']})")
    srv.stdin.close()
    srv.wait()
    t = {(up, bg, m): epoch_s(o / "run") for up, bg, m, o in keys}
    print("uplink_gbps background_load AR_s ADPSGD_s AR/AD")
    for up, bg in grid:
        a, d = t[(up, bg, "allreduce_sgd")], t[(up, bg, "adpsgd")]
        print(f"{up:g} {bg:g} {a:.2f} {d:.2f} {a / d:.2f}", flush=True)


if __name__ == "__main__":
    main()
