"""Rank-sharded, seeded batch order.

``GlobalBatchSampler`` (the default, ``partition: {kind: iid}``): each epoch draws
one permutation of the training set from ``(seed, epoch)``; step ``k`` uses the global batch ``perm[k*B:(k+1)*B]`` with ``B = world * batch_size``,
and rank ``r`` takes the contiguous slice ``[r*b:(r+1)*b]`` of it.  The union of the
ranks' batches at step ``k`` is therefore exactly the batch a single process with
batch size ``B`` sees, which is what makes ``allreduce_sgd`` testable against
``serial_sgd``.  The last incomplete global batch is dropped, so all ranks take the
same number of steps.

``LabelPartitionSampler`` (``partition: {kind: labels, classes_per_worker: c}``):
a non-IID split where each rank only ever sees its own ``c`` classes; see its
docstring.  ``build_sampler`` picks one from ``workload.dataset.partition``.

``BatchListSampler``: variable-size batches fixed in advance (a translation task's
token-based batches, :mod:`impls.tasks.translation`), dealt to ranks step by step.  A
dataset that has a ``batch_sampler(batch_size, rank, world, seed)`` method gets its
batches from it (``build_sampler``'s hook; only the iid partition).
"""

from __future__ import annotations

from typing import Iterator

import torch


class GlobalBatchSampler:
    def __init__(self, n: int, batch_size: int, rank: int = 0, world: int = 1, seed: int = 0):
        if n < batch_size * world:
            from ..errors import ConfigError

            raise ConfigError("workload.batch_size", f"the training set has {n} samples, fewer than one global "
                                                     f"batch ({batch_size} per worker x {world} workers)")
        self.n, self.b, self.rank, self.world, self.seed = n, batch_size, rank, world, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n // (self.b * self.world)

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        perm = torch.randperm(self.n, generator=g)
        B = self.b * self.world
        for k in range(len(self)):
            lo = k * B + self.rank * self.b
            yield perm[lo : lo + self.b].tolist()


class LabelPartitionSampler:
    """Non-IID split: each rank trains only on the samples of its own few classes.

    The ``C`` classes are dealt round-robin: rank ``r`` owns classes
    ``(r * c + j) mod C`` for ``j < c`` (``c = classes_per_worker``), so with
    ``n * c = C`` every class belongs to exactly one rank (D^2's "unshuffled" case,
    Tang et al. 2018: 5 workers x 2 CIFAR-10 classes).  A class owned by several
    ranks has its samples dealt among them in turn.  ``n * c < C`` would leave classes
    unused and is a config error.  Each epoch a rank draws a permutation of its own
    samples from ``(seed, epoch, rank)``; all ranks take the same number of steps,
    ``min_r |D_r| // batch_size`` (computed identically on every rank).
    """

    def __init__(self, labels: torch.Tensor, batch_size: int, rank: int, world: int, seed: int,
                 classes_per_worker: int, key: str = "workload.dataset.partition"):
        from ..errors import ConfigError

        labels = torch.as_tensor(labels).long()
        classes = sorted(int(c) for c in labels.unique())
        C, c = len(classes), classes_per_worker
        if not 1 <= c <= C:
            raise ConfigError(f"{key}.classes_per_worker", f"must be between 1 and {C} (classes), got {c}")
        if world * c < C:
            raise ConfigError(f"{key}.classes_per_worker", f"{c} x {world} workers covers fewer than the {C} "
                                                            f"classes; use at least {-(-C // world)}")
        owners: dict[int, list[int]] = {k: [] for k in classes}
        for r in range(world):
            for j in range(c):
                owners[classes[(r * c + j) % C]].append(r)
        shards: list[list[int]] = [[] for _ in range(world)]
        for k, ranks in owners.items():
            idx = (labels == k).nonzero().flatten().tolist()
            ranks = sorted(set(ranks))
            for i, s in enumerate(idx):
                shards[ranks[i % len(ranks)]].append(s)
        smallest = min(len(s) for s in shards)
        if smallest < batch_size:
            raise ConfigError("workload.batch_size", f"a worker's label shard has {smallest} samples, fewer than "
                                                     f"one batch ({batch_size})")
        self.indices = torch.tensor(sorted(shards[rank]), dtype=torch.long)
        self.classes = sorted({classes[(rank * c + j) % C] for j in range(c)})
        self.b, self.rank, self.seed, self.steps = batch_size, rank, seed, smallest // batch_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed((self.seed * 100_003 + self.epoch) * 1_009 + self.rank)
        perm = self.indices[torch.randperm(len(self.indices), generator=g)]
        for k in range(self.steps):
            yield perm[k * self.b:(k + 1) * self.b].tolist()


class BatchListSampler:
    """Rank-sharded order over a fixed list of (variable-size) batches.

    ``batches`` are lists of sample indices fixed once (e.g. fairseq's ``batch_by_size``
    over length-sorted indices: similar lengths share a batch, so little padding).  Each
    epoch draws a permutation of the batches from ``(seed, epoch)``; step ``k`` is the
    ``world`` batches ``perm[k*world:(k+1)*world]`` and rank ``r`` takes the ``r``-th.  The
    last incomplete group is dropped, so all ranks take the same number of steps.
    """

    def __init__(self, batches: list[list[int]], rank: int = 0, world: int = 1, seed: int = 0,
                 key: str = "workload.batch_size"):
        if len(batches) < world:
            from ..errors import ConfigError

            raise ConfigError(key, f"the training set makes {len(batches)} batches, fewer than one per worker "
                                   f"({world} workers)")
        self.batches, self.rank, self.world, self.seed = batches, rank, world, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.batches) // self.world

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        perm = torch.randperm(len(self.batches), generator=g)
        for k in range(len(self)):
            yield list(self.batches[int(perm[k * self.world + self.rank])])


def dataset_labels(ds) -> torch.Tensor:
    """Class labels of a dataset without loading its inputs (TensorDataset, torchvision)."""
    if hasattr(ds, "tensors"):
        return ds.tensors[1]
    if hasattr(ds, "targets"):
        return torch.as_tensor(ds.targets)
    raise TypeError(f"cannot read the labels of {type(ds).__name__} for a label partition")


def build_sampler(partition: dict | None, ds, batch_size: int, rank: int, world: int, seed: int):
    """The sampler of ``workload.dataset.partition`` (default ``{kind: iid}``)."""
    from ..errors import ConfigError

    spec = dict(partition or {"kind": "iid"})
    kind = spec.pop("kind", "iid")
    key = "workload.dataset.partition"
    if hasattr(ds, "batch_sampler"):  # the dataset makes its own batches (token-based)
        if kind != "iid" or spec:
            raise ConfigError(f"{key}.kind", f"{type(ds).__name__} makes its own batches; allowed values: iid")
        return ds.batch_sampler(batch_size, rank, world, seed)
    if kind == "iid":
        if spec:
            raise ConfigError(f"{key}.{sorted(spec)[0]}", "unknown key for kind iid; allowed keys: kind")
        return GlobalBatchSampler(len(ds), batch_size, rank, world, seed)
    if kind == "labels":
        unknown = sorted(set(spec) - {"classes_per_worker"})
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}", "unknown key; allowed keys: kind, classes_per_worker")
        c = spec.get("classes_per_worker", 2)
        if isinstance(c, bool) or not isinstance(c, int):
            raise ConfigError(f"{key}.classes_per_worker", f"expected an integer, got {c!r}")
        return LabelPartitionSampler(dataset_labels(ds), batch_size, rank, world, seed, c, key)
    raise ConfigError(f"{key}.kind", f"unknown partition {kind!r}; allowed values: iid, labels")
