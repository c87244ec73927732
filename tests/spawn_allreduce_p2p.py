"""Run under torchrun (4 ranks) by tests/test_allreduce_algorithms.py: every algorithm of
impls.comm.allreduce on real gloo ranks, on groups of 2, 3 and 4 ranks, against gloo's own
all_reduce of the same tensor; writes what each rank saw."""

import json
import sys

import torch

from impls.comm.allreduce import ALGORITHMS, all_reduce
from impls.backends import current_backend


def main(out: str) -> None:
    b = current_backend("gloo")
    r = b.rank
    groups = {2: b.subgroup([0, 1]), 3: b.subgroup([0, 1, 2]), 4: b}
    got = {}
    for n, g in groups.items():
        if r >= n:
            continue
        for size in (1, n - 1, 7, 1000):
            g_ = torch.Generator().manual_seed(1000 * n + 10 * r + size)
            x = torch.randn(size, dtype=torch.float64, generator=g_)
            ref = x.clone()
            g.all_reduce(ref)
            for algo in ALGORITHMS:
                t = x.clone()
                all_reduce(t, g, algo)
                got[f"{n}/{size}/{algo}"] = {"max_err": (t - ref).abs().max().item(), "bits": t.tolist()}
    with open(f"{out}/rank{r}.json", "w") as f:
        json.dump(got, f)
    b.close()


if __name__ == "__main__":
    main(sys.argv[1])
