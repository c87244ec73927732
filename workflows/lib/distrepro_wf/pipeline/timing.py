"""Wall time of whole pipeline invocations, appended to a CSV (benchmark record)."""

from __future__ import annotations

import csv
import os
import socket
import time
from pathlib import Path


def append_pipeline_row(path: str, t0: float, t1: float, status: str, cores: int, runs: int) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    new = not p.exists()
    with open(p, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["started_at", "wall_s", "status", "cores", "runs_in_grid", "host", "cpu_count"])
        w.writerow([time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0)), round(t1 - t0, 2), status, cores,
                    runs, socket.gethostname(), os.cpu_count()])
