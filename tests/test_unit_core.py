"""Tier 1: unit math of the shared parts (no processes)."""

import math

import pytest
import torch

from impls.algorithms import ALGORITHMS, algorithm_config, load_all
from impls.backends import Backend, Clock, _Done
from impls.comm.communicator import Communicator
from impls.comm.costmodel import collective_cost
from impls.data.sampler import GlobalBatchSampler
from impls.errors import ConfigError
from impls.runtime.metrics import check_keys
from impls.optim import SGD
from impls.runtime.straggler import StragglerModel, straggler_config


def test_registry_lists_known_names_on_unknown():
    load_all()
    with pytest.raises(ConfigError) as e:
        ALGORITHMS.get("sgdd")
    assert e.value.key == "algorithm.name"
    assert "allreduce_sgd" in str(e.value) and "serial_sgd" in str(e.value)


def test_every_algorithm_registered_under_its_file_name():
    import pkgutil

    import impls.algorithms as pkg

    load_all()
    files = {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
    assert files == set(ALGORITHMS.names())


def test_algorithm_config_rejects_unknown_hyperparameter():
    with pytest.raises(ConfigError) as e:
        algorithm_config({"name": "allreduce_sgd", "bucket": 3})
    assert e.value.key == "algorithm.bucket" and "bucket_mb" in str(e.value)
    with pytest.raises(ConfigError, match="expected a number"):
        algorithm_config({"name": "allreduce_sgd", "bucket_mb": "big"})


@pytest.mark.parametrize("momentum,nesterov,wd", [(0.0, False, 0.0), (0.9, False, 1e-4), (0.9, True, 5e-4)])
def test_sgd_matches_torch_optim_sgd_bit_for_bit(momentum, nesterov, wd):
    torch.manual_seed(0)
    a = [torch.randn(5, 3, requires_grad=True), torch.randn(7, requires_grad=True)]
    b = [p.detach().clone().requires_grad_() for p in a]
    ours = SGD(a, lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=wd)
    ref = torch.optim.SGD(b, lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=wd, foreach=False)
    for step in range(5):
        g = [torch.randn_like(p) for p in a]
        for p, q, gi in zip(a, b, g):
            p.grad, q.grad = gi.clone(), gi.clone()
        ours.lr = ref.param_groups[0]["lr"] = 0.1 / (step + 1)
        ours.step()
        ref.step()
        for p, q in zip(a, b):
            assert torch.equal(p, q)


def test_sgd_state_roundtrip():
    p = torch.randn(4, requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = torch.ones(4)
    opt.step()
    st = opt.state_dict()
    opt2 = SGD([p], lr=0.5, momentum=0.9)
    opt2.load_state_dict(st)
    assert opt2.lr == 0.1 and torch.equal(opt2.buffers[0], opt.buffers[0])


def test_sampler_union_of_rank_batches_is_the_global_batch():
    n, b, world = 103, 4, 3
    single = GlobalBatchSampler(n, b * world, 0, 1, seed=7)
    ranks = [GlobalBatchSampler(n, b, r, world, seed=7) for r in range(world)]
    for s in [single, *ranks]:
        s.set_epoch(2)
    assert len(single) == len(ranks[0]) == n // (b * world)
    for k, (glob, *parts) in enumerate(zip(single, *ranks)):
        assert sum(parts, []) == glob
        assert all(len(p) == b for p in parts)


def test_sampler_epochs_differ_and_are_seeded():
    s = GlobalBatchSampler(50, 5, seed=1)
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first
    s.set_epoch(0)
    assert list(s) == first
    assert list(GlobalBatchSampler(50, 5, seed=2)) != first


def test_straggler_fixed_slows_exactly_the_configured_ranks():
    cfg = straggler_config({"kind": "fixed", "ranks": [-1, 0], "factor": 4})
    models = [StragglerModel(cfg, r, 4, seed=1) for r in range(4)]
    assert [m.active for m in models] == [True, False, False, True]
    assert models[3].delay(0.01) == pytest.approx(0.03)
    assert models[1].delay(0.01) == 0.0


def test_straggler_fixed_delay_s_adds_seconds_per_step():
    cfg = straggler_config({"kind": "fixed", "ranks": [-1], "factor": 2, "delay_s": 0.5})
    assert StragglerModel(cfg, 1, 2, seed=1).delay(0.01) == pytest.approx(0.51)
    assert StragglerModel(cfg, 0, 2, seed=1).delay(0.01) == 0.0
    assert StragglerModel(straggler_config({"kind": "fixed", "ranks": [0], "delay_s": 0.25}), 0, 1, 1).delay(1.0) \
        == pytest.approx(0.25)


def test_a_straggler_setting_says_its_one_compute_factor():
    """What a closed form takes as the straggler (distrepro_wf.claims.predict): none 1, fixed its
    factor; none where there is no single one (random draws per step, delay_s adds seconds)."""
    f = lambda spec: straggler_config(spec).compute_factor()  # noqa: E731
    assert f({"kind": "none"}) == 1.0 and f({"kind": "fixed", "ranks": [-1], "factor": 4}) == 4.0
    assert f({"kind": "random", "mean_fraction": 3.0}) is None
    assert f({"kind": "fixed", "ranks": [-1], "factor": 2, "delay_s": 0.5}) is None


def test_straggler_random_is_seeded_and_has_the_configured_mean():
    cfg = straggler_config({"kind": "random", "mean_fraction": 0.5})
    a = [StragglerModel(cfg, 1, 2, seed=3).delay(1.0) for _ in range(1)]
    m1, m2 = StragglerModel(cfg, 1, 2, seed=3), StragglerModel(cfg, 1, 2, seed=3)
    s1 = [m1.delay(1.0) for _ in range(4000)]
    assert s1 == [m2.delay(1.0) for _ in range(4000)]
    assert a[0] == s1[0]
    assert sum(s1) / len(s1) == pytest.approx(0.5, rel=0.1)  # exponential mean, 4000 draws: ~1.6% std
    assert StragglerModel(cfg, 0, 2, seed=3).delay(1.0) != s1[0]


@pytest.mark.parametrize("spec,key", [
    ({"kind": "slow"}, "straggler.kind"),
    ({"kind": "fixed", "factor": 4}, "straggler.ranks"),
    ({"kind": "fixed", "ranks": [0], "factor": 0.5}, "straggler.factor"),
    ({"kind": "random", "mean_fraction": 0}, "straggler.mean_fraction"),
    ({"kind": "none", "speed": 2}, "straggler.speed"),
    ({"kind": "fixed", "ranks": [0], "delay_s": -1.0}, "straggler.delay_s"),
    ({"kind": "random", "mean_fraction": 0.5, "delay_s": 1.0}, "straggler.delay_s"),
])
def test_bad_straggler_specs_name_the_key(spec, key):
    with pytest.raises(ConfigError) as e:
        straggler_config(spec)
    assert e.value.key == key


def test_straggler_rank_out_of_range():
    with pytest.raises(ConfigError, match="does not exist with 2 workers"):
        StragglerModel(straggler_config({"kind": "fixed", "ranks": [5], "factor": 2}), 0, 2, 1)


def test_cost_model_ring_allreduce():
    c = collective_cost("all_reduce", 1000, 4, "ring")
    assert c.bytes_sent == pytest.approx(1500) and c.steps == 6
    assert collective_cost("all_reduce", 1000, 1).bytes_sent == 0
    t = collective_cost("all_reduce", 1024, 8, "tree")
    assert t.steps == 6
    assert collective_cost("all_gather", 10, 5).bytes_sent == 40


class _Peers(Backend):
    """Rank 0 of ``world`` ranks whose operations complete at once (no process group)."""

    def __init__(self, world: int):
        super().__init__()
        self.world = world

    def isend(self, t, dst):
        return _Done()

    def irecv(self, t, src):
        return _Done()


class _NoSleep(Clock):
    def sleep(self, seconds):
        raise AssertionError(f"the communicator slept {seconds} s: real ranks emulate no network")


@pytest.mark.parametrize("algorithm,sent", [("ring", 1750.0), ("tree", 2000.0), ("recursive_doubling", 3000.0)])
def test_communicator_counts_all_reduce_bytes_by_its_algorithm_and_never_sleeps(algorithm, sent):
    comm = Communicator(_Peers(8), _NoSleep(), allreduce_algorithm=algorithm)
    t = torch.zeros(250)  # 1000 bytes; 8 ranks: ring 2 * 7/8, tree 2, recursive doubling log2(8) payloads
    comm.all_reduce(t)
    comm.all_reduce(t, async_op=True).wait()
    h = comm.isend(t, 1)
    assert h.is_completed()
    h.wait()
    h.wait()  # a second wait counts nothing
    comm.irecv(torch.zeros(10), 2).wait()
    c = comm.pop_counters()
    assert (c.bytes_sent, c.bytes_recv, c.messages) == (2 * sent + 1000, 2 * sent + 40, 3)
    assert set(c.as_metrics()) == {"comm/bytes_sent", "comm/bytes_recv", "comm/messages", "time/comm_s"}
    assert c.comm_s >= 0 and comm.pop_counters().messages == 0


def test_communicator_refuses_an_unknown_allreduce_algorithm():
    with pytest.raises(ValueError, match="unknown allreduce algorithm 'butterfly'; known: ring, tree"):
        Communicator(_Peers(4), allreduce_algorithm="butterfly")


def test_metric_keys_must_be_namespaced():
    check_keys({"kind": "step", "loss/train": 1.0, "comm/bytes_sent": 3})
    with pytest.raises(ValueError):
        check_keys({"loss": 1.0})


def test_cifar_resnet20_has_the_papers_parameter_count():
    """He et al. 2016 (Sec. 4.2): 0.27M.  Counted by hand for our variant (3x3 convs without bias,
    BatchNorm weight + bias, option-B 1x1 projection shortcuts where the width changes):"""
    from impls.models import build_model

    def conv(cin, cout, k=3):
        return cin * cout * k * k

    def bn(c):
        return 2 * c

    def block(cin, cout):  # two 3x3 convs + BN, a projection shortcut when the width changes
        shortcut = conv(cin, cout, 1) + bn(cout) if cin != cout else 0
        return conv(cin, cout) + bn(cout) + conv(cout, cout) + bn(cout) + shortcut

    stem = conv(3, 16) + bn(16)
    stages = 3 * block(16, 16) + block(16, 32) + 2 * block(32, 32) + block(32, 64) + 2 * block(64, 64)
    head = 64 * 10 + 10
    assert stem + stages + head == 272_474  # option A (zero-padded identity shortcuts) would be 269_722
    m = build_model({"name": "resnet20"}, (3, 32, 32), 10)
    assert sum(p.numel() for p in m.parameters()) == 272_474
    assert m(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_resnet50_parameter_count_matches_torchvision_model_card():
    from impls.models import build_model

    m = build_model({"name": "resnet50"}, (3, 224, 224), 1000)
    assert sum(p.numel() for p in m.parameters()) == 25_557_032


def test_unknown_model_and_dataset():
    from impls.data import build_dataset
    from impls.models import build_model

    with pytest.raises(ConfigError, match="known: .*mlp"):
        build_model({"name": "vgg"}, (1, 8, 8), 10)
    with pytest.raises(ConfigError, match="known: .*digits"):
        build_dataset({"name": "mnist"})


def test_digits_matches_scikit_learn():
    import numpy as np
    from sklearn.datasets import load_digits

    from impls.data.digits import load_digits_array

    d = load_digits()
    raw = load_digits_array()
    assert np.array_equal(raw[:, :64], d.data) and np.array_equal(raw[:, 64], d.target)
    assert math.isclose(raw[:, :64].max(), 16)


def test_steady_heap_keeps_a_steps_freed_activations_mapped(tmp_path, monkeypatch):
    """impls.runtime.loop.steady_heap (called by the runtime and the ddp benchmark): a
    step that allocates ~2 MiB activations and frees them no longer gives the pages back
    to the kernel and faults them in again at every step (glibc's default heap trimming:
    thousands of page faults per step, 20-25 % of a ResNet-20 step's CPU).  In a fresh
    process, as the setting is process-wide; an explicit MALLOC_* environment wins."""
    import os
    import platform
    import subprocess
    import sys

    import impls.runtime.loop as loop

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's mallopt only")
    script = tmp_path / "heap.py"
    script.write_text("""
import resource, torch
from impls.runtime.loop import steady_heap
def faults(mib, n, steps=4):  # page faults per step, after two warm-up steps
    for i in range(steps + 2):
        if i == 2:
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        xs = [torch.ones(mib << 18) for _ in range(n)]  # a forward pass: n activations of mib MiB, written
        del xs  # the backward pass frees them
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / steps
shapes = [(2, 16), (1, 48), (6, 6)]
before = [faults(*s) for s in shapes]  # glibc's default: most runs fault most pages again (where small
print(before, steady_heap(), [faults(*s) for s in shapes])  # objects sit in the heap decides)
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True).stdout
    before, applied, after = eval(out.replace(" True ", ", True, ").replace(" False ", ", False, "))
    pages = [mib * n * 256 for mib, n in [(2, 16), (1, 48), (6, 6)]]  # 4 KiB pages written per step
    assert applied is True, out
    assert all(a < 0.05 * p for a, p in zip(after, pages)), (before, after)
    monkeypatch.setattr(loop, "_heap_steady", None)  # (returns before any mallopt: this process is unchanged)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert loop.steady_heap() is False


def test_backward_overlap_starts_buckets_in_order_as_backward_completes_them():
    """allreduce_sgd's overlap (impls.comm.flat.BackwardOverlap) on a real
    autograd pass: each bucket starts from the backward pass once its last gradient has
    arrived, in bucket order, at its ready point of the clock; a bucket holding a parameter
    without gradient (unused this step) starts when backward ends; backward passes outside
    the armed step start nothing; a second backward pass in one step is refused."""
    from impls.comm.flat import BackwardOverlap, GradientBuckets

    torch.manual_seed(0)
    a, b, unused = torch.nn.Linear(4, 3), torch.nn.Linear(3, 2), torch.nn.Linear(2, 2)
    params = [*a.parameters(), *b.parameters(), *unused.parameters()]  # 12 + 3 + 6 + 2 + 4 + 2 = 29
    # reverse order, 16-byte buckets: [unused.bias 2, unused.weight 4] [b.bias 2] [b.weight 6] [a.bias 3] [a.weight 12]
    buckets = GradientBuckets(params, bucket_mb=16 / 2**20, first_bucket_mb=24 / 2**20)
    assert [[p.numel() for p in m] for m in buckets.members] == [[2, 4], [2], [6], [3], [12]]
    assert buckets.ready_at == pytest.approx([6 / 29, 8 / 29, 14 / 29, 17 / 29, 1.0])
    events, total = [], [29]

    class Marks(Clock):
        def backward_point(self, fraction):
            events.append(("point", round(fraction * total[0])))  # in parameters

    def launch(i):
        events.append(("launch", i, buckets.flats[i].abs().sum().item() > 0))
        return i

    ov = BackwardOverlap(buckets, launch, Marks())
    x = torch.randn(5, 4)
    buckets.zero_and_bind()
    b(a(x)).sum().backward()  # not armed: nothing starts
    assert events == []
    buckets.zero_and_bind()
    with ov.armed():
        b(a(x)).sum().backward()
        in_backward = list(events)
    # bucket 0 (the unused layer) never completes, so nothing may start before it: all start at the end
    assert in_backward == [] and [e[1] for e in events] == [0, 1, 2, 3, 4] and ov.in_backward == 0
    assert ov.take_handles() == [0, 1, 2, 3, 4] and ov.take_handles() == [None] * 5
    # without the unused layer in the buckets, every bucket leaves from backward, in order, with its gradient
    events.clear()
    total[0] = 23
    for p in params:
        p.grad = None
    b(a(x)).sum().backward()  # reference gradients (no hook armed)
    ref = {id(p): p.grad.clone() for p in params[:4]}
    buckets = GradientBuckets(params[:4], bucket_mb=16 / 2**20, first_bucket_mb=16 / 2**20)
    ov = BackwardOverlap(buckets, launch, Marks(), divisor=2.0)
    buckets.unbind()  # as zero_grad with overlap: fresh gradients, moved in by the hooks
    with ov.armed():
        b(a(x)).sum().backward()
        in_backward = list(events)
        for p, view in buckets.views:  # each gradient in its bucket, divided by the world size, and p.grad is it
            assert p.grad is view and torch.equal(view, ref[id(p)] / 2)
        with pytest.raises(RuntimeError, match="second backward pass in one step"):
            b(a(x)).sum().backward()
    assert in_backward == [("point", 2), ("launch", 0, True), ("point", 8), ("launch", 1, True),
                           ("point", 11), ("launch", 2, True), ("point", 23), ("launch", 3, True)]
    assert ov.in_backward == 4
