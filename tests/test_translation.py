"""The translation task (impls/tasks/translation.py) through fairseq: the synthetic corpus,
fairseq-preprocess's data-bin, token batches, the tiny Transformer's training step, BLEU
from real decodes, one simulated AllReduce-SGD run (same seed, same numbers), every
registered method training it on the simulated backend, and the exact ones on real ranks
ending where the simulated backend ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

# fairseq is a required dependency (scripts/setup.sh installs fairseq-fixed): where it is
# missing these tests fail at collection, never skip (tests/test_faults_numerics.py)
import fairseq  # noqa: F401
from conftest import ROOT, make_config
from impls.data.synth_parallel import SyntheticLanguagePair, generate

SPLITS = {"train": 400, "valid": 40, "test": 20}
WORKLOAD = {"task": {"name": "translation", "arch": "transformer_tiny", "max_tokens": 256, "eval_sentences": 20},
            "batch_size": 64, "epochs": 2, "eval_ranks": "zero",
            "optimizer": {"name": "adam", "lr": 0.002, "betas": [0.9, 0.98]}}


def test_corpus_is_deterministic(tmp_path):
    a, b, c = (generate(tmp_path / d, seed=s, **SPLITS) for d, s in (("a", 0), ("b", 0), ("c", 1)))
    assert a == b == SPLITS
    for f in ("train.src", "train.tgt", "valid.src", "valid.tgt", "test.src", "test.tgt"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
        assert (tmp_path / "a" / f).read_bytes() != (tmp_path / "c" / f).read_bytes()
    assert len((tmp_path / "a" / "valid.tgt").read_text().splitlines()) == SPLITS["valid"]
    # more training sentences leave valid and test unchanged
    generate(tmp_path / "d", seed=0, train=500, valid=40, test=20)
    assert (tmp_path / "d" / "valid.src").read_bytes() == (tmp_path / "a" / "valid.src").read_bytes()


def test_translation_rule():
    lang = SyntheticLanguagePair(seed=0, vocab=5)
    n, a, v, p = lang.src["noun"][0], lang.src["adj"][0], lang.src["verb"][0], lang.src["name"][0]
    m = lang.mapping
    sent = [(v, "verb"), (a, "adj"), (n, "noun"), (p, "name")]
    # adjective after its noun, first verb last, names copied
    assert lang.translate(sent) == [m[n], m[a], p, m[v]]
    assert m[p] == p and m[n] != n and len(set(lang.mapping.values())) == len(lang.mapping)


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    """A small synthetic corpus binarized by fairseq's own fairseq-preprocess."""
    tmp = tmp_path_factory.mktemp("mt")
    generate(tmp / "raw", seed=0, vocab=8, **SPLITS)
    from fairseq import options
    from fairseq_cli import preprocess

    # fairseq-preprocess's own parser and main, in this process (the pipeline's rule runs the
    # same module as a command; importing fairseq twice would cost this test seconds)
    args = options.get_preprocessing_parser().parse_args([
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(tmp / "raw" / "train"),
        "--validpref", str(tmp / "raw" / "valid"), "--testpref", str(tmp / "raw" / "test"),
        "--destdir", str(tmp / "data-bin"), "--workers", "1"])
    preprocess.main(args)
    return tmp / "data-bin"


def _task(data_bin: Path, **task):
    from impls.config.dataclass_config import from_dict
    from impls.config.runconfig import WorkloadConfig
    from impls.tasks import build_task

    wl = dict(WORKLOAD, task={**WORKLOAD["task"], "data": str(data_bin), **task})
    t = build_task(from_dict(WorkloadConfig, wl, "workload"))
    t.build_data()
    return t


def test_preprocess_output_loads(data_bin):
    t = _task(data_bin)
    assert (len(t.train), len(t.val)) == (SPLITS["train"], SPLITS["valid"])
    # 8 words per class: 32 words + 4 specials, padded to a multiple of 8 (fairseq's padding_factor)
    assert (len(t.src_dict), len(t.tgt_dict)) == (40, 40)
    for d, lang in ((t.src_dict, "src"), (t.tgt_dict, "tgt")):
        words = set((data_bin.parent / "raw" / f"train.{lang}").read_text().split())
        assert len(words) == 32 and all(d.index(w) != d.unk() for w in words)
    raw = (data_bin.parent / "raw" / "valid.tgt").read_text().splitlines()
    assert t.text(t.val.pairs.tgt[3]) == raw[3]  # the binarized text reads back as written
    # token batches: at most max_tokens (padding counted) and batch_size sentences, every sample once
    batches = t.train.token_batches(64, seed=1)
    sizes = t.train.pairs.num_tokens_vec(list(range(len(t.train))))
    assert sorted(i for b in batches for i in b) == list(range(SPLITS["train"]))
    assert all(len(b) <= 64 and len(b) * max(sizes[b]) <= 256 for b in batches)


def test_wiring_and_bleu_from_decodes(data_bin):
    t = _task(data_bin)
    torch.manual_seed(0)
    model = t.build_model()
    assert sum(p.numel() for p in model.parameters()) < 200_000
    hyps, refs = t.decode(model)
    assert len(hyps) == len(refs) == 20
    assert t.bleu(refs, refs) == pytest.approx(100.0)  # a perfect hypothesis, through the same path
    m = t.evaluate(model)
    assert set(m) == set(t.metrics) and m["bleu/val"] == pytest.approx(t.bleu(hyps, refs))
    assert m["bleu/val"] < 10  # an untrained model's decodes
    from impls.data.sampler import build_sampler
    from impls.runtime.loop import batches

    sampler = build_sampler(None, t.train, 64, 0, 1, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    losses = []
    for i, batch in enumerate(batches(t.train, sampler, 0, torch.device("cpu"))):
        assert len(batch) == 4 and batch[0].shape[0] == batch[3].shape[0]
        opt.zero_grad()
        loss = t.loss(model, batch)
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if i == 5:
            break
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
    assert t.decode(model)[0] != hyps  # the decodes follow the model


def test_allreduce_on_simulated_backend_is_deterministic(data_bin, tmp_path):
    import sim_server

    wl = dict(WORKLOAD, task={**WORKLOAD["task"], "data": str(data_bin)}, max_steps_per_epoch=2)
    cfg = make_config("allreduce_sgd", 2, workload=wl, backend="simgrid", platform="ethernet_10g",
                      profile="transformer_wmt16_v100x8")
    cfg["workload"] = wl
    out = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        (d / "cfg.json").write_text(json.dumps(cfg))
        assert sim_server.run(d / "cfg.json", d / "out", d / "ckpt", None, d / "sim.log") == 0, \
            (d / "sim.log").read_text()[-3000:]
        out.append([(d / "out" / "metrics" / f"rank{r}.jsonl").read_text() for r in range(2)])
    assert out[0] == out[1]
    recs = [json.loads(x) for x in out[0][0].splitlines()]
    epochs = [r for r in recs if r["kind"] == "epoch"]
    assert len(epochs) == 2 and all(0 <= e["bleu/val"] <= 100 for e in epochs)
    assert epochs[-1]["loss/train"] < [r for r in recs if r["kind"] == "step"][0]["loss/train"]
    a = torch.load(tmp_path / "a" / "ckpt" / "rank0.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "a" / "ckpt" / "rank1.pt", weights_only=False)["model"]
    assert max((a[k].float() - b[k].float()).abs().max().item() for k in a) == 0  # all-reduce keeps replicas equal


def test_batch_list_sampler_deals_each_step_to_the_ranks():
    from impls.data.sampler import BatchListSampler
    from impls.errors import ConfigError

    batches = [[i, i + 100] for i in range(7)]
    ranks = [list(BatchListSampler(batches, r, 3, seed=5)) for r in range(3)]
    assert all(len(x) == 2 for x in ranks)  # 7 batches // 3 ranks; the rest dropped
    taken = [b for step in zip(*ranks) for b in step]
    assert len({tuple(b) for b in taken}) == 6 and all(b in batches for b in taken)
    assert [list(BatchListSampler(batches, r, 3, seed=5)) for r in range(3)] == ranks  # same seed, same order
    later = []
    for r in range(3):
        s = BatchListSampler(batches, r, 3, seed=5)
        s.set_epoch(1)
        later.append(list(s))
    assert later != ranks  # another epoch, another order
    with pytest.raises(ConfigError, match="workload.task.max_tokens"):
        BatchListSampler(batches[:2], 0, 3, key="workload.task.max_tokens")


def test_corpus_config_errors_name_the_key(tmp_path):
    from distrepro_wf.pipeline import translation as wt
    from impls.errors import ConfigError

    assert wt.corpora({})["synth_ende"]["kind"] == "synthetic"
    with pytest.raises(ConfigError, match=r"corpora\.c\.vocabulary: unknown key; allowed keys: .*vocab"):
        wt.corpora({"corpora": {"c": {"kind": "synthetic", "vocabulary": 3}}})
    with pytest.raises(ConfigError, match=r"corpora\.w\.root"):
        wt.corpora({"corpora": {"w": {"kind": "raw", "root": str(tmp_path / "none")}}})
    wl = {"task": {"name": "translation", "data": wt.data_bin("nope")}}
    with pytest.raises(ConfigError, match=r"workloads\.t\.task\.data: unknown corpus 'nope'"):
        wt.check_translation_data({"workloads": {"t": wl}})
    runs = [{"workload": {"task": {"name": "translation", "data": wt.data_bin("synth_ende")}}},
            {"workload": {"dataset": {"name": "digits"}}}]
    assert wt.data_inputs(runs) == [f"{wt.data_bin('synth_ende')}/{wt.MARKER}"]
    # the generic train rule asks the registered data preparers, and names no task itself
    from distrepro_wf.pipeline import dataprep

    assert dataprep.PREPARERS["translation"] is wt.corpus_marker
    assert dataprep.inputs(runs) == wt.data_inputs(runs) and dataprep.inputs(runs[1:]) == []
    train_rule = (ROOT / "workflows" / "rules" / "train.smk").read_text()
    assert "dataprep.inputs(" in train_rule and "wftranslation" not in train_rule


# ------------------------------------------------------------------ every method on the task
#: methods that own their update accept only SGD (``supported_optimizers``): its learning rate
#: per method (signum_mv's step is lr x sign: as small as Adam's first steps)
SGD_LR = {"signum_mv": 0.002}
#: methods whose final parameters on real ranks equal the simulated backend's (deterministic,
#: synchronous): one torchrun launch of 2 ranks runs them all
EXACT = ("allreduce_sgd", "sgp", "dpsgd")


def _method_config(name: str, data_bin: Path) -> dict:
    from impls.algorithms import get_algorithm

    cls = get_algorithm(name)
    wl = dict(WORKLOAD, task={**WORKLOAD["task"], "data": str(data_bin), "eval_sentences": 4}, epochs=1,
              max_steps_per_epoch=4, optimizer={**WORKLOAD["optimizer"], "lr": 0.003})
    supported = cls.supported_optimizers
    if supported is not None and "adam" not in supported:  # e.g. {"sgd": {"momentum": 0.0}}
        opt, required = next(iter(supported.items()))
        wl["optimizer"] = {"name": opt, "lr": SGD_LR.get(name, 0.1), "momentum": 0.0, "weight_decay": 0.0,
                           **required}
    algo = {"name": "sgp", "topology": {"name": "exponential", "peers": 1}} if name == "sgp" else name
    cfg = make_config(algo, 1 if name == "serial_sgd" else 2, workload=wl)
    cfg["workload"] = wl
    return cfg


def _sim(cfg: dict, tmp: Path) -> Path:
    import sim_server

    cfg = {**cfg, "backend": "simgrid", "platform": "ethernet_10g",
           "profile": {"name": "transformer_wmt16_v100x8", "jitter": 0.03}}
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    rc = sim_server.run(tmp / "cfg.json", tmp / "out", tmp / "ckpt", None, tmp / "sim.log")
    assert rc == 0, (tmp / "sim.log").read_text()[-3000:]
    err = tmp / "out" / "ERROR.txt"
    assert not err.exists(), err.read_text()
    return tmp


@pytest.fixture(scope="module")
def simulated(data_bin, tmp_path_factory):
    """Each method's simulated run on the tiny corpus, made once (the spawn test reuses them)."""
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            done[name] = _sim(_method_config(name, data_bin), tmp_path_factory.mktemp(f"sim_{name}"))
        return done[name]

    return get


def _all_methods() -> list[str]:
    from impls.algorithms import load_all

    return sorted(load_all().names())


@pytest.mark.parametrize("name", _all_methods())
def test_every_method_trains_the_transformer_simulated(name, simulated):
    """4 steps of the tiny Transformer (Adam, or the SGD a method owning its update accepts) on
    2 simulated workers (plus a server rank where the method has one): finite losses that
    fall, and a BLEU from real decodes."""
    run = simulated(name)
    recs = [json.loads(x) for x in (run / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    losses = [r["loss/train"] for r in recs if r["kind"] == "step"]
    assert len(losses) >= 2 and all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < losses[0], losses
    epoch = [r for r in recs if r["kind"] == "epoch"][-1]
    assert 0 <= epoch["bleu/val"] <= 100 and epoch["loss/val"] == epoch["loss/val"]


@pytest.mark.spawn
def test_exact_methods_on_real_ranks_equal_simulated(data_bin, simulated, run_torchrun):
    """One torchrun launch (2 gloo ranks, fairseq imported once per rank) runs the exact
    methods; each ends with the simulated backend's parameters (1e-6) and step losses."""
    results, _ = run_torchrun([_method_config(name, data_bin) for name in EXACT])
    for name, real in zip(EXACT, results):
        sim = simulated(name)
        for r in range(2):
            a = real.final_state(r)
            b = torch.load(sim / "ckpt" / f"rank{r}.pt", weights_only=False)["model"]
            assert set(a) == set(b)
            diff = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
            assert diff <= 1e-6, (name, r, diff)
        sim_losses = [json.loads(x)["loss/train"] for x in (sim / "out" / "metrics" / "rank0.jsonl").read_text()
                      .splitlines() if json.loads(x)["kind"] == "step"]
        real_losses = [x["loss/train"] for x in real.records(0, "step")]
        assert real_losses == pytest.approx(sim_losses, abs=1e-6), name


def test_allreduce_sends_the_gradient_not_constant_buffers(simulated):
    """fairseq's sinusoidal position tables are non-persistent buffers (constants every rank
    computes): AR-SGD's per-step buffer broadcast leaves them out, so a step sends the ring
    all-reduce of the gradient (at 2 ranks: its size) and the two ``version`` floats, not 0.7x
    more (which the Transformer profile then scaled into 0.5 s of simulated broadcast a step)."""
    run = simulated("allreduce_sgd")
    state = torch.load(run / "ckpt" / "rank0.pt", weights_only=False)["model"]
    grad_bytes = sum(v.numel() * v.element_size() for k, v in state.items() if not k.endswith("version"))
    recs = [json.loads(x) for x in (run / "out" / "metrics" / "rank0.jsonl").read_text().splitlines()]
    sent = [r["comm/bytes_sent"] for r in recs if r["kind"] == "step"]
    assert sent and all(grad_bytes <= b <= grad_bytes + 64 for b in sent), (grad_bytes, sent)


def test_translation_benchmark_rows(data_bin):
    """``translation.csv``'s helper on a short budget: tokens/s from the shared timing function
    at 1 thread and at 2 (with their ratio), and BLEU of the untrained model, the copy baseline
    and the model after the CPU budget, all from real decodes (scored 0-100)."""
    from distrepro_wf.bench.mtbench import measure

    spec = {"workload": "t", "warmup": 1, "steps": 2, "budget_cpu_s": 1.0, "warmup_steps": 5, "eval_sentences": 8}
    threads = torch.get_num_threads()
    df = measure(spec, {"t": WORKLOAD}, str(data_bin), all_threads=2).set_index("metric")
    assert list(df.index) == ["train_tokens_per_s", "train_tokens_per_s", "train_tokens_per_s_ratio_all_vs_1_thread",
                              "bleu_untrained", "bleu_copy_baseline", "bleu_trained", "bleu_trained_minus_copy",
                              "train_tokens_per_s_budget"]
    tps = df.loc["train_tokens_per_s"]
    assert list(tps["threads"]) == [1, 2] and (tps["value"] > 0).all() and (tps["steps"] == 2).all()
    assert df.loc["train_tokens_per_s_ratio_all_vs_1_thread", "value"] == pytest.approx(
        tps["value"].iloc[1] / tps["value"].iloc[0])
    for m in ("bleu_untrained", "bleu_copy_baseline", "bleu_trained"):
        assert 0.0 <= df.loc[m, "value"] <= 100.0, m
    assert df.loc["bleu_trained", "steps"] >= 1 and df.loc["bleu_trained", "cpu_seconds"] >= 1.0
    assert df.loc["bleu_trained_minus_copy", "value"] == pytest.approx(
        df.loc["bleu_trained", "value"] - df.loc["bleu_copy_baseline", "value"])
    assert torch.get_num_threads() == threads  # the process's threads are restored
