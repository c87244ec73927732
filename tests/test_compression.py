"""Compressors (impls/compression), compressed_sgd, and the compression benchmark helper."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import launch, make_config
from impls.algorithms import algorithm_config
from impls.compression import (ErrorFeedback, build, code_bits, load_all, pack_bits, pack_codes, unpack_bits,
                               unpack_codes, wire_bytes)
from impls.errors import ConfigError

SIZES = [1, 7, 8, 9, 1000, 1003]
LAYOUT_1003 = [500, 3, 500]
# one spec per compressor (and the variants whose packing differs)
SPECS = {
    "sign": {"name": "sign"},
    "sign_blocks": {"name": "sign", "scale": "mean_abs", "block": "size", "block_size": 64},
    "cast16": {"name": "cast", "dtype": "float16"},
    "castbf": {"name": "cast", "dtype": "bfloat16"},
    "cast32": {"name": "cast", "dtype": "float32"},
    "topk": {"name": "topk", "ratio": 0.1},
    "randomk": {"name": "randomk", "ratio": 0.1},
    "dgc": {"name": "dgc", "ratio": 0.1},
    "onebit": {"name": "onebit", "block": "size", "block_size": 64},
    "terngrad": {"name": "terngrad", "block": "size", "block_size": 64},
    "qsgd": {"name": "qsgd", "levels": 5, "bucket_size": 64},
    "qsgd1": {"name": "qsgd", "levels": 1},
}


def c8(d):
    return math.ceil(d / 8)


# the documented bytes per message of d elements (the module docstrings / compressed_sgd's table)
FORMULA = {
    "sign": lambda d: c8(d),
    "sign_blocks": lambda d: c8(d) + 4 * math.ceil(d / 64),
    "cast16": lambda d: 2 * d,
    "castbf": lambda d: 2 * d,
    "cast32": lambda d: 4 * d,
    "topk": lambda d: 8 * math.ceil(0.1 * d),
    "randomk": lambda d: 4 * math.ceil(0.1 * d),
    "dgc": lambda d: 8 * math.ceil(0.1 * d),
    "onebit": lambda d: c8(d) + 8 * math.ceil(d / 64),
    "terngrad": lambda d: 2 * c8(d) + 4 * math.ceil(d / 64),
    "qsgd": lambda d: 4 * math.ceil(d / 64) + (1 + 3) * c8(d),
    "qsgd1": lambda d: 4 + 2 * c8(d),
}


def vec(d, seed=0):
    return torch.randn(d, generator=torch.Generator().manual_seed(seed))


def reference_pack(bits):
    """The documented layout, written the slow obvious way: element i is bit i % 8 of byte i // 8."""
    out = [0] * c8(len(bits))
    for i, b in enumerate(bits.tolist()):
        out[i // 8] |= int(b) << (i % 8)
    return torch.tensor(out, dtype=torch.uint8)


def test_every_compressor_file_is_covered():
    assert {s["name"] for s in SPECS.values()} == set(load_all().names())


@pytest.mark.parametrize("n", [0, *SIZES, 8 * (1 << 18) + 13])  # the last: more than one pass of pack_bits
def test_pack_bits_layout_and_round_trip(n):
    bits = torch.rand(n, generator=torch.Generator().manual_seed(n)) < 0.5
    packed = pack_bits(bits)
    assert packed.dtype == torch.uint8 and packed.numel() == c8(n)
    if n <= 1003:
        assert torch.equal(packed, reference_pack(bits))
    assert torch.equal(unpack_bits(packed, n), bits)
    if n > 9:  # a view with an odd offset packs like its copy
        assert torch.equal(pack_bits(bits[3:]), pack_bits(bits[3:].clone()))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bits", [1, 2, 3, 8])
def test_pack_codes_round_trip(n, bits):
    codes = torch.randint(0, 2**bits, (n,), generator=torch.Generator().manual_seed(n + bits))
    packed = pack_codes(codes, bits)
    assert packed.numel() == bits * c8(n)
    assert torch.equal(unpack_codes(packed, bits, n), codes)
    assert code_bits(1) == 1 and code_bits(3) == 2 and code_bits(4) == 3 and code_bits(255) == 8


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("n", SIZES)
def test_wire_shapes_bytes_and_round_trip_of_the_packing(name, n):
    """wire(numel) is the parts' real shapes and dtypes; bytes are the documented formula;
    decompressing the parts after a trip through the byte message gives the same vector."""
    from impls.algorithms.compressed_sgd import from_bytes, to_bytes

    c = build(SPECS[name], seed=3)
    x = vec(n, n)
    wire = c.wire(n)
    parts = c.compress(x)
    assert [(tuple(p.shape), p.dtype) for p in parts] == wire
    assert [(tuple(b.shape), b.dtype) for b in c.empty(n)] == wire
    assert wire_bytes(parts) == FORMULA[name](n)
    back = from_bytes(to_bytes(parts).clone(), parts)
    assert all(torch.equal(a, b) for a, b in zip(parts, back))
    assert torch.equal(c.decompress(back, n), c.decompress(parts, n))


def test_sign_is_exact():
    x = vec(1003)
    y = build({"name": "sign"}).decompress(build({"name": "sign"}).compress(x), 1003)
    assert torch.equal(y, torch.where(x >= 0, 1.0, -1.0))


@pytest.mark.parametrize("dtype,eps", [("float16", 2.0**-11), ("bfloat16", 2.0**-8), ("float32", 0.0)])
def test_cast_within_dtype_precision(dtype, eps):
    x = vec(1003)
    c = build({"name": "cast", "dtype": dtype})
    y = c.decompress(c.compress(x), 1003)
    assert ((y - x).abs() <= eps * x.abs()).all()
    if dtype != "float32":
        assert not torch.equal(y, x)


def test_topk_keeps_exactly_the_k_largest():
    x = vec(1003)
    c = build({"name": "topk", "ratio": 0.05})
    y = c.decompress(c.compress(x), 1003)
    k = math.ceil(0.05 * 1003)
    kept = y != 0
    assert int(kept.sum()) == k
    assert torch.equal(y[kept], x[kept])
    assert x[kept].abs().min() > x[~kept].abs().max()


def test_randomk_regenerates_the_indices_and_its_scaled_form_is_unbiased():
    d, k = 200, 20
    x = vec(d)
    sender, receiver = build({"name": "randomk", "ratio": 0.1}, seed=5), build({"name": "randomk", "ratio": 0.1}, seed=5)
    acc = torch.zeros(d)
    for _ in range(3):  # the receiver compresses its own vector each round too (synchronous SGD)
        parts = sender.compress(x)
        receiver.compress(vec(d, 9))
        y = receiver.decompress(parts, d)
        assert int((y != 0).sum()) == k and torch.equal(y[y != 0], x[y != 0])
        acc += y != 0
    assert int((acc > 0).sum()) > k  # the rounds pick different coordinates
    other = build({"name": "randomk", "ratio": 0.1}, seed=6)
    other.compress(x)
    assert not torch.equal(other.decompress(parts, d), receiver.decompress(parts, d))
    # unbiased: scaled by d / k, the mean over rounds tends to x
    c = build({"name": "randomk", "ratio": 0.1, "unbiased": True}, seed=1)
    draws = 4000
    mean = sum(c.decompress(c.compress(x), d) for _ in range(draws)) / draws
    # per entry: variance x^2 (d/k - 1), so the standard error is |x| 3 / sqrt(draws); 5 sigma
    assert ((mean - x).abs() <= 5 * x.abs() * 3 / math.sqrt(draws) + 1e-6).all()
    biased = build({"name": "randomk", "ratio": 0.1}, seed=1)
    assert (sum(biased.decompress(biased.compress(x), d) for _ in range(50)) / 50).abs().sum() < 0.5 * x.abs().sum()


UNBIASED = {  # spec, the gap between adjacent reconstruction values for x = vec(64, 1)
    "qsgd3": ({"name": "qsgd", "levels": 3, "bucket_size": 16}, lambda x: max(b.norm() for b in x.split(16)) / 3),
    "qsgd1": ({"name": "qsgd", "levels": 1}, lambda x: x.norm()),
    "terngrad": ({"name": "terngrad", "block": "tensor"}, lambda x: x.abs().max()),
}


@pytest.mark.parametrize("name", UNBIASED)
def test_stochastic_quantisers_are_unbiased(name):
    """The mean of 2000 seeded draws is within 5 standard errors of x: each entry is a
    Bernoulli between two adjacent values ``gap`` apart, so its sd is at most gap / 2."""
    spec, gap = UNBIASED[name]
    d, draws = 64, 2000
    x = vec(d, 1)
    c = build(spec, seed=11)
    samples = torch.stack([c.decompress(c.compress(x), d) for _ in range(draws)])
    tol = 5 * (gap(x) / 2) / math.sqrt(draws)
    err = (samples.mean(0) - x).abs()
    assert (err <= tol).all(), float(err.max())
    assert err.max() > tol / 100  # it is a mean of random draws, not x itself
    assert not torch.equal(samples[0], samples[1])  # the draws differ per call
    again = build(spec, seed=11)  # same seed, same first draw
    assert torch.equal(again.decompress(again.compress(x), d), samples[0])


def test_qsgd_levels_are_multiples_of_the_norm_over_s():
    x = vec(1003)
    c = build({"name": "qsgd", "levels": 4})
    y = c.decompress(c.compress(x), 1003)
    q = y.abs() / x.norm() * 4
    assert torch.allclose(q, q.round(), atol=1e-4) and q.max() <= 4 + 1e-5
    assert ((y == 0) | (y.sign() == x.sign())).all()


def test_onebit_reconstructs_the_means_of_each_side():
    x = vec(1003)
    c = build({"name": "onebit", "block": "layer"}, layout=LAYOUT_1003)
    y = c.decompress(c.compress(x), 1003)
    for a, b in zip(x.split(LAYOUT_1003), y.split(LAYOUT_1003)):
        assert torch.allclose(b[a >= 0], a[a >= 0].mean().expand(int((a >= 0).sum())))
        assert torch.allclose(b[a < 0], a[a < 0].mean().expand(int((a < 0).sum())))


def test_dgc_momentum_correction_masking_and_warmup():
    d = 100
    c = build({"name": "dgc", "ratio": 1.0, "momentum": 0.5})
    g = [vec(d, i) for i in range(3)]
    u = torch.zeros(d)
    for gi in g:  # ratio 1: every entry is sent, so u is masked to zero each time: sends g
        assert torch.allclose(c.decompress(c.compress(gi), d), gi)
    c = build({"name": "dgc", "ratio": 0.05, "momentum": 0.5})
    u, v = torch.zeros(d), torch.zeros(d)
    for gi in g:  # the documented recursion, written out
        u = 0.5 * u + gi
        v = v + u
        y = c.decompress(c.compress(gi), d)
        sent = y != 0
        assert int(sent.sum()) == 5 and torch.allclose(y[sent], v[sent])
        v[sent] = 0
        u[sent] = 0
        assert torch.allclose(c.state_dict()["v"], v) and torch.allclose(c.state_dict()["u"], u)
    w = build({"name": "dgc", "ratio": 0.001, "warmup_steps": 8, "warmup_stages": 4})
    ks = []
    for _ in range(10):
        ks.append(w.wire(10000)[0][0][0])
        w.compress(vec(10000))
    assert ks == [2500, 2500, 625, 625, 157, 157, 40, 40, 10, 10]


@pytest.mark.parametrize("spec", [{"name": "sign", "scale": "mean_abs"}, {"name": "topk", "ratio": 0.1},
                                  {"name": "onebit", "block": "tensor"}, {"name": "qsgd", "levels": 2},
                                  {"name": "randomk", "ratio": 0.2}],
                         ids=["sign", "topk", "onebit", "qsgd", "randomk"])
def test_error_feedback_loses_nothing(spec):
    """sum of decompressed transmissions + final memory == sum of inputs."""
    d = 1003
    c = build({**spec, "error_feedback": True}, seed=2)
    assert isinstance(c, ErrorFeedback)
    inputs = [vec(d, i) for i in range(6)]
    sent = sum(c.decompress(c.compress(x), d) for x in inputs)
    total = sum(inputs)
    assert torch.allclose(sent + c.state_dict()["memory"], total, atol=1e-4)
    assert not torch.allclose(sent, total, atol=1e-2)  # the memory is not trivially zero


def test_stateful_compressors_resume_from_their_state_dict():
    x = vec(300)
    for spec in [{"name": "dgc", "ratio": 0.1}, {"name": "qsgd"}, {"name": "randomk", "ratio": 0.1},
                 {"name": "terngrad", "block": "tensor"}, {"name": "topk", "ratio": 0.1, "error_feedback": True}]:
        a = build(spec, seed=4)
        a.compress(x)
        b = build(spec, seed=4)
        b.load_state_dict(a.state_dict())
        pa, pb = a.compress(x * 2), b.compress(x * 2)
        assert all(torch.equal(p, q) for p, q in zip(pa, pb)), spec


@pytest.mark.parametrize("spec,key,allowed", [
    ({"name": "sgn"}, "algorithm.compressor.name", "cast, dgc, onebit, qsgd, randomk, sign, terngrad, topk"),
    ({"name": "topk", "rate": 0.1}, "algorithm.compressor.rate", "ratio"),
    ({"name": "cast", "dtype": "int8"}, "algorithm.compressor.dtype", "float16, bfloat16, float32"),
    ({"name": "qsgd", "norm": "l1"}, "algorithm.compressor.norm", "l2, max"),
    ({"name": "topk", "ratio": 0.0}, "algorithm.compressor.ratio", "> 0"),
    ({"name": "sign", "error_feedback": "yes"}, "algorithm.compressor.error_feedback", "true or false"),
    ({"ratio": 0.1}, "algorithm.compressor.name", "known: cast"),
    ("sign", "algorithm.compressor", "mapping"),
])
def test_bad_compressor_configs_name_the_key_and_the_allowed_values(spec, key, allowed):
    with pytest.raises(ConfigError) as e:
        algorithm_config({"name": "compressed_sgd", "compressor": spec})
    assert e.value.key == key and allowed in str(e.value)


# -- real ranks -------------------------------------------------------------------------------

def _max_rel(a, b):
    return max(float((a[k] - b[k]).norm() / b[k].norm().clamp_min(1e-12)) for k in b)


@pytest.mark.spawn
def test_compressed_sgd_on_real_and_simulated_ranks(tmp_path):
    """4 gloo ranks, one launch: lossless compression == allreduce_sgd (1e-6); sign's measured
    bytes per step are the formula's (5 %); the simulated backend ends where the real one does."""
    from test_sim_runs import EQUAL_TOL, sim_config, simulate

    n = 4
    lossless = {"name": "compressed_sgd", "compressor": {"name": "cast", "dtype": "float32"}}
    sign = {"name": "compressed_sgd", "compressor": {"name": "sign", "scale": "mean_abs", "error_feedback": True}}
    qsgd = {"name": "compressed_sgd", "compressor": {"name": "qsgd", "levels": 3}}
    # every other compressor end to end, in the same launch (their packing is tested above)
    others = {k: {"name": "compressed_sgd", "compressor": {**SPECS[k], "error_feedback": k in ("topk", "onebit")}}
              for k in ("topk", "randomk", "dgc", "onebit", "terngrad")}
    (ref, ll, sg, qs, *rest), _ = launch([make_config("allreduce_sgd", n), make_config(lossless, n),
                                          make_config(sign, n), make_config(qsgd, n),
                                          *(make_config(a, n) for a in others.values())], tmp_path / "real")
    d = sum(t.numel() for t in ref.final_state(0).values())
    for name, run in zip(others, rest):
        steps = run.records(0, "step")
        # the message each worker all-gathers is the compressor's packed parts: the formula's bytes
        assert steps[0]["compress/bytes"] == FORMULA[name](d), name
        assert steps[0]["comm/bytes_sent"] == pytest.approx((n - 1) * FORMULA[name](d), rel=0.05), name
        for r in range(n):  # one model on every replica, moved away from the uncompressed run's
            assert _max_rel(run.final_state(r), run.final_state(0)) == 0.0, name
        assert _max_rel(run.final_state(0), ref.final_state(0)) > 1e-3, name
        losses = [e["loss/train"] for e in run.records(0, "epoch")]
        assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0], (name, losses)
    for r in range(n):
        assert _max_rel(ll.final_state(r), ref.final_state(r)) <= 1e-6
        for run in (sg, qs):  # replicas stay equal, and lossy compression does change the result
            assert _max_rel(run.final_state(r), run.final_state(0)) == 0.0
            assert _max_rel(run.final_state(r), ref.final_state(r)) > 1e-3
    steps = sg.records(0, "step")
    formula = (n - 1) * (c8(d) + 4)  # all-gather of ceil(d/8) sign bytes + one fp32 scale
    for rec in steps:
        assert rec["comm/bytes_sent"] == pytest.approx(formula, rel=0.05)
        assert rec["compress/bytes"] == c8(d) + 4
    assert len(steps) == 20
    sim = simulate(sim_config(qsgd, n), tmp_path / "sim")
    for r in range(n):
        b = torch.load(sim / "ckpt" / f"rank{r}.pt", weights_only=False)["model"]
        a = qs.final_state(r)
        assert max((a[k] - b[k]).abs().max().item() for k in a) <= EQUAL_TOL
    assert json.loads((sim / "out" / "provenance.json").read_text())["backend"] == "simgrid"


# -- the throughput benchmark's helper (distrepro_wf/bench/compbench.py) ---------------------------

def test_compression_benchmark_rows_and_ratios():
    from distrepro_wf.bench.compbench import COLUMNS, best_times, measure

    calls = []
    t = best_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeat=3)
    assert calls == ["a", "b"] * 4 and set(t) == {"a", "b"}  # a warm-up, then interleaved rounds
    df = measure({"elements": 4096, "repeat": 2, "threads": [1, "all"], "compile": False}, all_threads=2)
    assert list(df.columns) == COLUMNS
    assert list(df["compressor"]) == ["sign", "sign_blockwise"] * 2 and list(df["threads"]) == [1, 1, 2, 2]
    gbps = 4 * 4096 / df["seconds"] / 1e9
    # seconds are rounded to 1 us (a 4096-element call takes ~15 us: up to 3 % off), gbps to 1e-3
    assert ((gbps - df["input_gbps"]).abs() <= 1e-3 + gbps * 0.6e-6 / (df["seconds"] - 0.5e-6)).all()
    assert ((df["ratio"] - df["input_gbps"] / df["memcpy_gbps"]).abs() <= 0.02 * df["ratio"] + 1e-3).all()
    # the fused kernels' graphs (what torch.compile is given) compute the compressor's output
    from distrepro_wf.bench.compbench import _blockwise_sign_pack
    x = vec(1000)
    bits, scales = _blockwise_sign_pack(x, 64)  # 15 full blocks and a tail of 40
    ref = build({"name": "sign", "scale": "mean_abs", "block": "size", "block_size": 64}).compress(x)
    assert torch.equal(bits, ref[0]) and torch.allclose(scales, ref[1], rtol=1e-6)


def test_compressed_sgd_runs_allreduce_sgds_own_setup(monkeypatch):
    """compressed_sgd subclasses allreduce_sgd and takes its setup through super() (issue 25:
    it used to skip it), differing only in its buckets (one flat buffer) and its overlap
    (none: compression needs the whole gradient, see its docstring)."""
    from impls.algorithms.allreduce_sgd import AllreduceSGD
    from impls.backends import Backend, Clock
    from impls.comm.communicator import Communicator
    from impls.optim import SGDConfig
    from impls.protocol import Context

    calls, parent = [], AllreduceSGD.setup
    monkeypatch.setattr(AllreduceSGD, "setup", lambda self, model: (calls.append(type(self).__name__),
                                                                     parent(self, model))[1])
    cls, cfg = algorithm_config({"name": "compressed_sgd"})
    algo = cls(cfg, Context(0, 1, Communicator(Backend(), Clock()), SGDConfig(lr=0.1), 0))
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    algo.setup(model)
    assert calls == ["CompressedSGD"] and algo.overlap is None and algo._bvec is None
    assert [len(m) for m in algo.buckets.members] == [4] and algo.compressor is not None
