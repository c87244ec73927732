"""``python -m impls.sim --config run.json --out DIR``: one simulated run (see
:mod:`impls.sim.engine`).  Writes ``STARTED`` first, and ``error.json`` for a config
error or a divergence (as real ranks do); any other failure exits non-zero."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True, help="resolved run config (JSON) with backend: simgrid")
    ap.add_argument("--out", required=True, help="output directory (metrics, config, provenance)")
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--calibration", default=None, help="cache of the 'measured' profile (JSON)")
    args = ap.parse_args(argv)
    from ..errors import ConfigError, DivergedError
    from ..runtime.trainer import STARTED, write_error
    from .engine import simulate

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / STARTED).write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")
    raw = json.loads(Path(args.config).read_text())
    try:
        simulate(raw, out, args.checkpoint_dir, args.calibration)
    except (ConfigError, DivergedError) as err:
        write_error(out, "config" if isinstance(err, ConfigError) else "diverged", err)


if __name__ == "__main__":
    main()
