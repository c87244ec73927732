"""Tier 1: the label-partitioned (non-IID) sampler and its config errors."""

import pytest
import torch

from impls.data import build_dataset
from impls.data.sampler import GlobalBatchSampler, LabelPartitionSampler, build_sampler
from impls.errors import ConfigError


@pytest.fixture(scope="module")
def digits():
    return build_dataset({"name": "digits", "partition": {"kind": "labels", "classes_per_worker": 2}})


def _samplers(ds, world, c, b=16, seed=3):
    return [build_sampler({"kind": "labels", "classes_per_worker": c}, ds.train, b, r, world, seed)
            for r in range(world)]


@pytest.mark.parametrize("world,c", [(2, 5), (5, 2), (10, 1)])
def test_disjoint_classes_cover_every_sample_once(digits, world, c):
    """n * c = C: every class has one owner; each rank sees only its classes; shards partition the data."""
    y = digits.train.tensors[1]
    ss = _samplers(digits, world, c)
    assert len({len(s) for s in ss}) == 1  # same number of steps on every rank
    owned = [set(s.classes) for s in ss]
    assert all(len(o) == c for o in owned) and set().union(*owned) == set(range(10))
    assert sum(len(o) for o in owned) == 10
    all_idx = torch.cat([s.indices for s in ss])
    assert len(all_idx) == len(y) and len(set(all_idx.tolist())) == len(y)
    for s in ss:
        s.set_epoch(1)
        seen = [i for batch in s for i in batch]
        assert set(y[seen].tolist()) <= set(s.classes)
        assert len(seen) == len(s) * 16 and len(set(seen)) == len(seen)


def test_shared_classes_are_dealt_among_their_owners(digits):
    y = digits.train.tensors[1]
    ss = _samplers(digits, 4, 3)  # 12 slots over 10 classes: classes 0 and 1 have two owners
    assert [s.classes for s in ss] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 1, 9]]
    all_idx = torch.cat([s.indices for s in ss]).tolist()
    assert sorted(all_idx) == list(range(len(y)))
    n0 = [int((y[s.indices] == 0).sum()) for s in ss]
    assert abs(n0[0] - n0[3]) <= 1 and n0[1] == n0[2] == 0


def test_order_depends_on_seed_epoch_and_rank_only():
    """Two ranks with one class of 32 samples each (equal shards): the order of a rank's batches is a
    function of (seed, epoch, rank) alone: it changes with each of them, and nothing else (another
    sampler instance, iterating again, the global torch RNG) changes it."""
    labels = torch.tensor([0] * 32 + [1] * 32)

    def order(seed: int, epoch: int, rank: int) -> list[int]:
        """Positions within the rank's own shard, in the order the batches visit them."""
        s = LabelPartitionSampler(labels, 8, rank, 2, seed, 1)
        s.set_epoch(epoch)
        return [i - 32 * rank for batch in s for i in batch]

    base = order(1, 2, 0)
    assert sorted(base) == list(range(32))
    torch.manual_seed(12345)
    torch.rand(100)  # the global RNG plays no part
    assert order(1, 2, 0) == base
    assert order(2, 2, 0) != base  # seed
    assert order(1, 3, 0) != base  # epoch
    assert order(1, 2, 1) != base  # rank: the same positions of an equal shard, another order
    s = LabelPartitionSampler(labels, 8, 0, 2, 1, 1)
    s.set_epoch(2)
    assert [i for b in s for i in b] == [i for b in s for i in b] == base  # iterating again


def test_iid_is_the_default(digits):
    s = build_sampler(None, digits.train, 16, 0, 2, 1)
    assert isinstance(s, GlobalBatchSampler)
    assert isinstance(build_sampler({"kind": "iid"}, digits.train, 16, 0, 2, 1), GlobalBatchSampler)


@pytest.mark.parametrize("spec,match", [
    ({"kind": "dirichlet"}, r"workload.dataset.partition.kind: unknown partition 'dirichlet'; allowed values: iid, labels"),
    ({"kind": "labels", "classes_per_worker": 1}, r"classes_per_worker: 1 x 2 workers covers fewer than the 10 classes; use at least 5"),
    ({"kind": "labels", "classes_per_worker": 11}, r"classes_per_worker: must be between 1 and 10"),
    ({"kind": "labels", "classes_per_worker": "2"}, r"classes_per_worker: expected an integer"),
    ({"kind": "labels", "classes": 2}, r"partition.classes: unknown key; allowed keys: kind, classes_per_worker"),
    ({"kind": "iid", "classes_per_worker": 2}, r"partition.classes_per_worker: unknown key for kind iid"),
])
def test_bad_partition_specs(digits, spec, match):
    with pytest.raises(ConfigError, match=match):
        build_sampler(spec, digits.train, 16, 0, 2, 1)


def test_labels_of_a_dataset_with_targets():
    class DS:
        targets = [0, 1, 0, 1, 2, 2, 2, 2]
    s = LabelPartitionSampler(torch.tensor(DS.targets), 1, 1, 3, 0, 1)
    assert s.classes == [1] and s.indices.tolist() == [1, 3]
    assert build_sampler({"kind": "labels", "classes_per_worker": 1}, DS(), 1, 2, 3, 0).indices.tolist() == [4, 5, 6, 7]
