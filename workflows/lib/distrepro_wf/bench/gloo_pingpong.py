"""Per-message cost of gloo between two ranks (run under torchrun, e.g. by
:func:`distrepro_wf.bench.netnsbench.gloo_link`): rank 0 and rank 1 bounce a 1-element fp32
tensor (blocking ``send``/``recv``) ``n`` times after a warm-up; rank 0 writes the round
trips (seconds) as JSON to the path given.  Half the median round trip is gloo's one-way
time of a small message; minus the TCP one-way time of the same link
(:func:`distrepro_wf.bench.netns.tcp_latency_us`) it is the per-message software overhead
(gloo, the c10d process group, Python) that the simulated network does not charge.

``python -m distrepro_wf.bench.gloo_pingpong OUT.json [N]`` (two ranks; others idle).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    import torch
    import torch.distributed as dist

    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.zeros(1)
    rtt = []
    for i in range(n + n // 10):
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(x, 1)
            dist.recv(x, 1)
        elif rank == 1:
            dist.recv(x, 0)
            dist.send(x, 0)
        if i >= n // 10:
            rtt.append(time.perf_counter() - t0)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"rtt_s": rtt}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
