"""Run under torchrun by tests/test_backend_seam.py: every collective of the backend seam
through the instrumented Communicator, on real gloo ranks; writes what each rank saw."""

import json
import sys

import torch

from impls.backends import current_backend
from impls.comm.communicator import Communicator


def main(out: str) -> None:
    b = current_backend("gloo")
    comm = Communicator(backend=b)
    r, n = b.rank, b.world
    got = {}
    t = torch.full((4,), float(r + 1))
    comm.all_reduce(t, op="max")
    got["all_reduce_max"] = t.tolist()
    t = torch.full((4,), float(r + 1))
    comm.reduce(t, dst=0)
    got["reduce_on_root"] = t.tolist() if r == 0 else None
    parts = [torch.empty(2) for _ in range(n)]
    comm.gather(torch.full((2,), float(r)), parts, dst=1)
    got["gather_on_1"] = [p.tolist() for p in parts] if r == 1 else None
    t = torch.empty(3)
    comm.scatter(t, [torch.full((3,), 10.0 * k) for k in range(n)], src=0)
    got["scatter"] = t.tolist()
    out_t = torch.empty(2)
    comm.reduce_scatter(out_t, [torch.full((2,), float(r * 100 + k)) for k in range(n)])
    got["reduce_scatter"] = out_t.tolist()
    got["counter"] = b.counter_add("seam-test", 1)
    got["objects"] = b.all_gather_object({"rank": r})
    c = comm.pop_counters()
    got["bytes_sent"], got["messages"] = c.bytes_sent, c.messages
    with open(f"{out}/rank{r}.json", "w") as f:
        json.dump(got, f)
    b.close()


if __name__ == "__main__":
    main(sys.argv[1])
