"""At a paper profile an overlapped AR-SGD's buckets are the paper model's (``profile.model_layout``,
:mod:`impls.sim.profiles`): their sizes and their points in the backward pass come from the paper
model's parameters in backward order (torchvision's ResNet-50, built on the meta device), not from
the stand-in MLP's (85 % of its bytes in the layer backward reaches last).  Numbers written out
here; simulated constants as in ``tests/test_sim_time.py`` (``ethernet_10g`` at line rate: alpha = 50 us,
beta = 1.154762e9 bytes/s per direction of a 2-rank ring)."""

from __future__ import annotations

import json

import pytest

from impls.errors import ConfigError
from impls.sim.profiles import Profile, profile_config

import sim_server
from conftest import make_config

ALPHA, BETA = 50e-6, 0.97 * 10e9 / 8 / 1.05
ETH = {"name": "ethernet_10g", "msg_efficiency": 1.0}  # at line rate: the constants above
R50_BYTES = 102_228_128  # 25,557,032 fp32 parameters (torchvision's model card)
#: ResNet-50's parameters in backward order cut by DDP's rule (1 MiB first bucket, then 25 MiB:
#: a bucket closes before a tensor that would overflow it): fc.bias (1000 x 4 bytes) alone, since
#: fc.weight (8.192 MB) would overflow the first bucket; then layer4 and fc.weight in 26.06 MB,
#: ...; the last bucket holds layer1, bn1 and conv1 (8.67 MB), ready when backward ends
R50_BUCKETS = [4_000, 26_058_752, 17_850_368, 25_200_640, 24_449_024, 8_665_344]


def test_profile_knows_resnet50s_parameter_sizes_in_backward_order():
    from impls.comm.flat import WireLayout

    layout = Profile(profile_config("resnet50_v100x8")).gradient_layout()
    assert (len(layout), sum(layout)) == (161, R50_BYTES)
    assert layout[:2] == (1000 * 4, 1000 * 2048 * 4) and layout[-1] == 64 * 3 * 7 * 7 * 4  # fc first, conv1 last
    assert profile_config("resnet50_v100x1").model_layout == "resnet50"
    assert profile_config("transformer_wmt16_v100x8").model_layout == "none"  # no layout yet: the stand-in's
    assert Profile(profile_config({"name": "fixed", "step_ms": 10})).gradient_layout() is None
    with pytest.raises(ConfigError) as e:
        profile_config({"name": "fixed", "step_ms": 10, "model_layout": "resnet50"})
    assert e.value.key == "profile.model_layout"
    with pytest.raises(ConfigError) as e:
        profile_config({"name": "fixed", "step_ms": 10, "model_mb": 1, "model_layout": "vgg"})
    assert e.value.key == "profile.model_layout"
    # the stand-in's 2410 gradient elements in the same proportions: the 4 KB first bucket rounds to
    # no element (merged into the next), the last to 204 elements (2410 x 8665344 / R50_BYTES = 204.3)
    wire = WireLayout(layout, 2410, 25 * 2**20, 2**20)
    assert wire.paper_bytes == [R50_BUCKETS[0] + R50_BUCKETS[1], *R50_BUCKETS[2:]]
    assert wire.slices[-1] == (2206, 2410)
    done = [sum(R50_BUCKETS[:k + 1]) / R50_BYTES for k in range(1, 6)]
    assert wire.ready_at == pytest.approx(done, rel=1e-12)


def _steps(tmp, layout: str) -> list[dict]:
    profile = {"name": "fixed", "step_ms": 400, "model_mb": R50_BYTES / 1e6, "model_layout": layout}
    cfg = make_config("allreduce_sgd", 2, backend="simgrid", platform=ETH, profile=profile,
                      workload={"epochs": 1, "max_steps_per_epoch": 3})
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    rc = sim_server.run(tmp / "cfg.json", tmp / "out", tmp / "ckpt", None, tmp / "sim.log")
    assert rc == 0, (tmp / "sim.log").read_text()[-3000:]
    recs = [json.loads(x) for x in (tmp / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    return [r for r in recs if r["kind"] == "step"]


def test_overlapped_allreduce_follows_the_paper_models_buckets(tmp_path):
    """AR-SGD with overlap (DDP's default buckets), 2 ranks on ethernet_10g, 400 ms compute, the
    messages of ResNet-50 (102.228128 MB) timed by its layout.  Bucket ``k`` (bytes ``B_k``) is
    ready at ``C (1/3 + 2/3 f_k)`` (``f_k``: the share of ResNet-50's parameters in buckets
    ``0..k``) and its all-reduce takes ``2 alpha + B_k / beta``; each ends before the next is
    ready (the tightest: the fourth, 21.3 ms, with the last ready 22.6 ms later), so the step is
    the compute plus the last bucket's all-reduce: ``C + 2 alpha + w / beta`` with ``w`` the
    last bucket's 8,665,344 bytes as the stand-in's 204 elements carry them (204 x 4 bytes x
    102228128 / 9640, the wire scale) = 400 + 0.1 + 7.4936 = 407.5936 ms.  On the stand-in's
    own layout the last bucket is its first layer, 86 % of the model: 475 ms."""
    c = 0.400
    for k in range(1, 5):  # the closed form's premise, written out: bucket k done before k+1 is ready
        ready = [c * (1 / 3 + 2 / 3 * sum(R50_BUCKETS[:j + 1]) / R50_BYTES) for j in (k, k + 1)]
        assert ready[0] + 2 * ALPHA + R50_BUCKETS[k] / BETA < ready[1], k
    w = 204 * 4 * R50_BYTES / 9640
    want = c + 2 * ALPHA + w / BETA
    assert want == pytest.approx(0.4075936, rel=1e-6)
    # the closed form (AR-SGD's step_cost: DDP's buckets of the profile's layout, each ring as its bucket is ready)
    from distrepro_wf.claims import closedform as cf
    from distrepro_wf.claims import sensitivity as sens
    profile = {"name": "fixed", "step_ms": 400, "model_mb": R50_BYTES / 1e6, "model_layout": "resnet50"}
    p = sens.nominal_point({"experiments": {"x": {"backend": "simgrid", "platform": ETH,
                                                  "profile": profile}}}, "x", 2, "none")
    assert cf.step_s("allreduce_sgd", p.with_(overlap=1.0)) == pytest.approx(want, rel=1e-3)
    steps = _steps(tmp_path / "r50", "resnet50")
    for r in steps:
        assert r["time/step_s"] == pytest.approx(want, abs=2e-6)
        assert r["overlap/buckets_in_backward"] == 5.0
    stand_in = _steps(tmp_path / "none", "none")
    assert all(r["time/step_s"] > 0.47 for r in stand_in)
