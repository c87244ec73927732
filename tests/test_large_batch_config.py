"""config/large_batch.yaml (the large-batch and mixed-precision recipes) validates as the
pipeline validates it, and every claim on it names one of its methods and settings."""

from __future__ import annotations

import yaml

from conftest import ROOT


def test_large_batch_config_and_claims_validate():
    from distrepro_wf.pipeline.config import run_config, validate
    from distrepro_wf.claims.published import load

    cfg = yaml.safe_load((ROOT / "config" / "large_batch.yaml").read_text())
    runs = validate(cfg)
    exp = cfg["experiments"]["large_batch"]
    assert len(runs) == 5 * sum(len(m["nodes"]) for m in exp["methods"].values())
    assert {r.nodes for r in runs} == {1, 16, 64}
    wl = {r.method: run_config(cfg, r)["workload"] for r in runs}
    assert wl["linear_warmup"]["schedule"]["warmup_epochs"] == 2  # the recipes differ where they should
    assert wl["linear_no_warmup"]["schedule"] == {**wl["linear_warmup"]["schedule"], "warmup_epochs": 0}
    assert wl["lars_warmup"]["optimizer"]["name"] == "lars" and wl["linear_warmup"]["optimizer"]["name"] == "sgd"
    assert [wl[m].get("precision", "fp32") for m in ("linear_warmup", "linear_warmup_bf16", "linear_warmup_fp16")] \
        == ["fp32", "bf16", "fp16"]
    load(cfg)  # claims.yaml, numbers.csv, sources.csv against this config
    claims = yaml.safe_load((ROOT / "config" / "published" / "claims.yaml").read_text())["claims"]
    ours = [c for c in claims if c["experiment"] == "large_batch"]
    assert len(ours) == 7
    for c in ours:
        for side in ("a", "b"):
            method = exp["methods"][c[side]["method"]]
            nodes = c[side].get("nodes") or c["where"]["nodes"][0]
            assert nodes in method["nodes"], (c["id"], side)


def test_epoch_time_figure_with_equal_times_at_every_seed(tmp_path):
    """A simulated clock without jitter gives every seed the same time per epoch; the mean of
    equal floats can round below them, and the figure's whiskers must not go negative."""
    import pandas as pd

    from distrepro_wf.report.plots import epoch_time_vs_nodes

    x = next(v for v in (0.1 + k * 0.0137 for k in range(1000)) if pd.Series([v] * 5).mean() > v)
    runs = pd.DataFrame({"straggler": "none", "method": "a", "nodes": [16] * 5, "time_per_epoch_s": [x] * 5})
    epoch_time_vs_nodes(runs, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0
