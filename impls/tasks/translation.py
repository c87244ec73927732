"""Machine translation through fairseq: the SGP / SlowMo Transformer workload.

Papers: Vaswani et al. 2017 ("Attention Is All You Need") for the model, Ott et al. 2018
("Scaling Neural Machine Translation") for the WMT'16 En-De recipe that SGP (Assran et
al. 2019, section 6) and SlowMo (Wang et al. 2020, Table 2b) train: fairseq's
``transformer_wmt_en_de`` (6+6 layers, 512 wide) or the big model, Adam with betas (0.9,
0.98), inverse-square-root schedule with warmup, label smoothing 0.1, token-based batches.

Everything model- and data-shaped is fairseq's own (``fairseq-fixed==0.12.3.1``, the
``fairseq`` module, which imports on Python 3.11 where PyPI's 0.12.2 does not):

1. **Data**: a ``data-bin`` directory written by ``fairseq-preprocess`` (the pipeline's
   rule ``translation_data``: a synthetic corpus, :mod:`impls.data.synth_parallel`, or a
   local WMT'16 root), loaded with fairseq's ``Dictionary``, ``data_utils.
   load_indexed_dataset`` and ``LanguagePairDataset`` (source left-padded, target
   right-padded, ``prev_output_tokens`` = target shifted right with EOS first).
2. **Batches**: token-based, fairseq's ``data_utils.batch_by_size`` over indices sorted by
   (target, source) length with a seeded shuffle breaking ties: a batch holds at most
   ``max_tokens`` tokens counting padding (``sentences x longest``) and at most
   ``workload.batch_size`` sentences (fairseq's ``--batch-size``).  Batches are made once
   per run; each epoch shuffles their order and deals ``world`` of them per step
   (:class:`~impls.data.sampler.BatchListSampler`).  A batch reaches the runtime as the
   tensors ``(src_tokens, src_lengths, prev_output_tokens, target)``.
3. **Model**: fairseq's ``TransformerModel`` built from an architecture name (``arch``:
   any registered fairseq Transformer architecture, e.g. ``transformer_wmt_en_de``,
   ``transformer_vaswani_wmt_en_de_big``; or ``transformer_tiny``, defined here as
   fairseq's ``transformer`` base architecture with 2+2 layers of width 64, 4 heads, FFN
   128) and ``model_overrides`` (any fairseq model argument, e.g. ``dropout``).
4. **Loss**: label-smoothed cross entropy, computed by fairseq's own
   ``label_smoothed_nll_loss`` (the formula of its ``label_smoothed_cross_entropy``
   criterion: ``(1 - eps) nll + eps / V * sum_v -log p_v``, padding ignored), divided by
   the batch's target tokens.  Differs from fairseq's trainer: fairseq sums the loss over
   all workers' tokens and divides by the global token count (workers with more tokens
   weigh more); here each worker's loss is its own per-token mean and the algorithm
   averages the workers (what every method of this harness does with every task).
5. **Evaluation**: ``loss/val`` (label-smoothed, nats per target token) and ``nll/val``
   (plain NLL per token) over the validation set, and ``bleu/val`` (the primary metric,
   higher is better): the first ``eval_sentences`` validation sentences decoded by fairseq's
   ``SequenceGenerator`` (``beam`` 1: greedy), both hypothesis and reference turned back
   into text by the target ``Dictionary.string`` (``bpe`` removed, e.g. ``subword_nmt``),
   and scored by ``sacrebleu.corpus_bleu`` (``sacrebleu_tokenize``: ``13a`` as sacrebleu's
   default, ``none`` for text already tokenized).  :meth:`Translation.bleu` is that
   scoring path alone (the tests feed it references as hypotheses: 100).

Tuning hints: ``max_tokens`` is the batch (fairseq's recipe: 3584 per GPU x 8 GPUs; the
tiny stand-in: 1024); ``label_smoothing`` 0.1; ``beam`` 4-5 for reported BLEU, 1 for cheap
evaluations during training; ``eval_sentences`` bounds evaluation time (decoding is
sequential in the output length).

Compatibility with torch 2.14 / numpy 2.4: no shim needed (fairseq-fixed imports, trains and
decodes as is).  fairseq is imported lazily, only when a translation task is built (about 4
CPU-seconds), so the harness imports without it; that import reconfigures the root logger,
which :func:`_fairseq` undoes.  fairseq-fixed declares torchaudio, which has no release for
torch 2.14: scripts/setup.sh installs it without (fairseq's speech tasks are not used).

Simulated time (``backend: simgrid``): a paper profile (``transformer_wmt16_v100x8``) charges
its fixed step time whatever the batch; the ``measured`` profile charges per row of the batch,
here per sentence, so a token batch's cost follows its sentence count (the synthetic corpus's
lengths are narrow, 2-10 words, so this is close to per-token).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from . import TASKS, Task

#: architectures defined here, as (fairseq base architecture, its arguments)
ARCHS: dict[str, tuple[str, dict[str, Any]]] = {
    "transformer_tiny": ("transformer", {
        "encoder_layers": 2, "decoder_layers": 2, "encoder_embed_dim": 64, "decoder_embed_dim": 64,
        "encoder_ffn_embed_dim": 128, "decoder_ffn_embed_dim": 128, "encoder_attention_heads": 4,
        "decoder_attention_heads": 4, "dropout": 0.1}),
}


@dataclass
class TranslationConfig:
    name: str = "translation"
    data: str = ""  # a fairseq-preprocess data-bin directory
    source_lang: str = "src"
    target_lang: str = "tgt"
    arch: str = "transformer_tiny"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = field(default=1024, metadata={"min": 1})
    label_smoothing: float = field(default=0.1, metadata={"min": 0, "lt": 1})
    beam: int = field(default=1, metadata={"min": 1})
    max_len_a: float = field(default=1.2, metadata={"min": 0})  # decode at most a * source length + b tokens
    max_len_b: int = field(default=10, metadata={"min": 0})
    eval_sentences: int = field(default=200, metadata={"min": 1})
    eval_max_tokens: int = field(default=4096, metadata={"min": 1})
    bpe: str | None = None  # e.g. subword_nmt ("@@ " continuation marks) or sentencepiece
    sacrebleu_tokenize: str = "13a"


def _fairseq():
    """fairseq's data classes, imported on first use.  Importing fairseq configures the root
    logger (DEBUG, a stderr handler: one of its modules calls ``logging.basicConfig``), which
    would flood a host program's output (Snakemake's, when the workflow validates a config);
    the root logger is restored as it was."""
    import logging

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        import fairseq  # noqa: F401
        from fairseq.data import Dictionary, LanguagePairDataset, data_utils
    except ImportError as e:  # pragma: no cover - the pinned environment has it
        raise ConfigError("workload.task.name", f"task 'translation' needs fairseq (fairseq-fixed==0.12.3.1, "
                                                f"installed by scripts/setup.sh): {e}") from None
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
    return SimpleNamespace(Dictionary=Dictionary, LanguagePairDataset=LanguagePairDataset, data_utils=data_utils)


class PairData(torch.utils.data.Dataset):
    """A fairseq ``LanguagePairDataset`` as the runtime loads it: samples by index, a
    ``collater`` returning a tuple of tensors, and token-based batches (``batch_sampler``)."""

    def __init__(self, pairs, max_tokens: int):
        self.pairs, self.max_tokens = pairs, max_tokens
        self._batches: dict[tuple[int, int], list[list[int]]] = {}

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int):
        return self.pairs[i]

    def collater(self, samples) -> tuple[torch.Tensor, ...]:
        s = self.pairs.collater(samples)
        n = s["net_input"]
        return n["src_tokens"], n["src_lengths"], n["prev_output_tokens"], s["target"]

    def token_batches(self, max_sentences: int | None, seed: int, max_tokens: int | None = None) -> list[list[int]]:
        """fairseq's batching: indices sorted by (target, source) length (ties in a seeded
        random order), cut by ``batch_by_size`` at ``max_tokens`` (padding counted)."""
        max_tokens = max_tokens or self.max_tokens
        key = (max_sentences or 0, seed, max_tokens)
        if key not in self._batches:
            import numpy as np

            du = _fairseq().data_utils
            src, tgt = self.pairs.src_sizes, self.pairs.tgt_sizes
            longest = int(np.maximum(src, tgt).max())
            if longest > max_tokens:
                raise ConfigError("workload.task.max_tokens", f"{max_tokens} is smaller than the longest sentence "
                                                              f"({longest} tokens)")
            order = np.random.RandomState(seed % 2**32).permutation(len(self))
            order = order[np.argsort(tgt[order], kind="mergesort")]
            order = order[np.argsort(src[order], kind="mergesort")]
            order = order[np.argsort(tgt[order], kind="mergesort")]
            batches = du.batch_by_size(order.astype(np.int64), self.pairs.num_tokens, max_tokens=max_tokens,
                                       max_sentences=max_sentences)
            self._batches[key] = [b.tolist() for b in batches]
        return self._batches[key]

    def batch_sampler(self, batch_size: int, rank: int, world: int, seed: int):
        from ..data.sampler import BatchListSampler

        return BatchListSampler(self.token_batches(batch_size, seed), rank, world, seed, "workload.task.max_tokens")


def _model_args(arch: str, overrides: dict[str, Any]) -> argparse.Namespace:
    """fairseq's model arguments: the architecture's defaults under ``overrides``."""
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq.models.transformer import TransformerModel

    base, preset = ARCHS.get(arch, (arch, {}))
    if base not in ARCH_CONFIG_REGISTRY or not base.startswith("transformer"):
        known = sorted(a for a in ARCH_CONFIG_REGISTRY if a.startswith("transformer") and "lm" not in a)
        raise ConfigError("workload.task.arch", f"unknown Transformer architecture {arch!r}; allowed values: "
                                                f"{', '.join(sorted(ARCHS) + known)}")
    # as fairseq-train: model arguments without defaults (SUPPRESS), so the architecture sets them
    parser = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    TransformerModel.add_args(parser)
    known = {a.dest for a in parser._actions}
    args = parser.parse_args([])
    for k, v in {**preset, **overrides}.items():
        if k not in known:
            raise ConfigError(f"workload.task.model_overrides.{k}", "not an argument of fairseq's TransformerModel")
        setattr(args, k, v)
    ARCH_CONFIG_REGISTRY[base](args)  # fills in every argument not set, as fairseq-train does
    args.arch = base
    return args


@TASKS.register("translation")
class Translation(Task):
    Config = TranslationConfig
    primary_metric = "bleu/val"
    higher_is_better = True
    metrics = ("bleu/val", "loss/val", "nll/val")
    throughput_unit = "tokens/s"

    @classmethod
    def describe(cls, spec, synthetic):
        data = (f"random tokens, vocab {synthetic['vocab']}, {synthetic['sentences']} x {synthetic['length']}"
                if synthetic else spec.get("data", ""))
        return spec.get("arch", "transformer_tiny"), data

    def synthetic_batch(self, spec, seed):
        """No data-bin: one dictionary of ``vocab`` symbols for both sides and a batch of
        ``sentences`` pairs of ``length`` tokens (EOS last), as the collater shapes them:
        ``(src_tokens, src_lengths, prev_output_tokens, target)``."""
        vocab, sentences, length = int(spec["vocab"]), int(spec["sentences"]), int(spec["length"])
        d = _fairseq().Dictionary()
        for i in range(vocab - len(d)):
            d.add_symbol(f"w{i}")
        self.src_dict = self.tgt_dict = d
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(d.nspecial, len(d), (sentences, length), generator=g)
        tgt = torch.randint(d.nspecial, len(d), (sentences, length), generator=g)
        src[:, -1] = tgt[:, -1] = d.eos()
        prev = torch.cat([torch.full((sentences, 1), d.eos()), tgt[:, :-1]], 1)
        return src, torch.full((sentences,), length), prev, tgt

    def batch_units(self, batch):
        return int(batch[3].ne(self.tgt_dict.pad()).sum())

    @classmethod
    def preload(cls) -> None:
        _fairseq()
        import fairseq.criterions.label_smoothed_cross_entropy  # noqa: F401
        import fairseq.models.transformer  # noqa: F401
        import fairseq.sequence_generator  # noqa: F401
        import sacrebleu  # noqa: F401

    def _paths(self) -> tuple[Path, str]:
        c = self.cfg
        if not c.data:
            raise ConfigError("workload.task.data", "missing: a fairseq-preprocess data-bin directory")
        return Path(c.data), f"{c.source_lang}-{c.target_lang}"

    def build_data(self, probe: bool = False) -> None:
        """The dictionaries, and (unless ``probe``) the train and validation pairs.

        ``probe``, before the pipeline has run ``fairseq-preprocess``: without the data-bin
        the model is built on placeholder dictionaries (its shapes then differ only in the
        vocabulary size); the workflow checks that a rule makes the directory."""
        fs, c = _fairseq(), self.cfg
        root, pair = self._paths()
        dicts = [root / f"dict.{lang}.txt" for lang in (c.source_lang, c.target_lang)]
        self.train = self.val = None
        if probe and not root.exists():
            self.src_dict = self.tgt_dict = fs.Dictionary()
            return
        for d in dicts:
            if not d.is_file():
                raise ConfigError("workload.task.data", f"{d} not found: {root} is not a fairseq-preprocess data-bin "
                                                        f"of {pair} (source_lang / target_lang)")
        self.src_dict, self.tgt_dict = (fs.Dictionary.load(str(d)) for d in dicts)
        if probe:
            return
        self.train = PairData(self._pairs("train"), c.max_tokens)
        self.val = PairData(self._pairs("valid"), c.eval_max_tokens)

    def _pairs(self, split: str):
        fs, c = _fairseq(), self.cfg
        root, pair = self._paths()
        parts = []
        for lang, d in ((c.source_lang, self.src_dict), (c.target_lang, self.tgt_dict)):
            ds = fs.data_utils.load_indexed_dataset(str(root / f"{split}.{pair}.{lang}"), d)
            if ds is None:
                raise ConfigError("workload.task.data", f"{root}/{split}.{pair}.{lang}.bin/.idx not found")
            parts.append(ds)
        src, tgt = parts
        if len(src) != len(tgt):
            raise ConfigError("workload.task.data", f"{split}: {len(src)} source but {len(tgt)} target sentences")
        return fs.LanguagePairDataset(src, src.sizes, self.src_dict, tgt, tgt.sizes, self.tgt_dict,
                                      left_pad_source=True, left_pad_target=False, shuffle=False)

    def build_model(self) -> nn.Module:
        from fairseq.models.transformer import TransformerModel

        args = _model_args(self.cfg.arch, self.cfg.model_overrides)
        shim = SimpleNamespace(source_dictionary=self.src_dict, target_dictionary=self.tgt_dict)
        return TransformerModel.build_model(args, shim).to(self.device)

    def _losses(self, model: nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

        src, src_len, prev, target = batch
        out = model(src, src_len, prev)
        lprobs = model.get_normalized_probs(out, log_probs=True)
        loss, nll = label_smoothed_nll_loss(lprobs.view(-1, lprobs.size(-1)), target.view(-1),
                                            self.cfg.label_smoothing, ignore_index=self.tgt_dict.pad(), reduce=True)
        return loss, nll, int(target.ne(self.tgt_dict.pad()).sum())

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        loss, _, ntokens = self._losses(model, batch)
        return loss / ntokens

    def bleu(self, hypotheses: list[str], references: list[str]) -> float:
        """Corpus BLEU of detokenized text, as :meth:`evaluate` scores decodes."""
        import sacrebleu

        return float(sacrebleu.corpus_bleu(hypotheses, [references], tokenize=self.cfg.sacrebleu_tokenize).score)

    def text(self, tokens: torch.Tensor, unk: str | None = None) -> str:
        """Target tokens back to text (padding and EOS dropped, ``bpe`` undone)."""
        return self.tgt_dict.string(tokens, self.cfg.bpe, unk_string=unk)

    @torch.no_grad()
    def decode(self, model: nn.Module, n: int | None = None) -> tuple[list[str], list[str]]:
        """Hypotheses (decoded by fairseq's SequenceGenerator) and references of the first
        ``n`` validation sentences (default ``eval_sentences``), in corpus order."""
        from fairseq.sequence_generator import SequenceGenerator

        c = self.cfg
        n = min(len(self.val), n or c.eval_sentences)
        gen = SequenceGenerator([model], self.tgt_dict, beam_size=c.beam, max_len_a=c.max_len_a,
                                max_len_b=c.max_len_b)
        hyps: dict[int, str] = {}
        refs: dict[int, str] = {}
        pairs = self.val.pairs
        for lo in range(0, n, 64):
            sample = pairs.collater([pairs[i] for i in range(lo, min(n, lo + 64))])
            sample = {"id": sample["id"], "net_input": {k: v.to(self.device) for k, v in sample["net_input"].items()},
                      "target": sample["target"]}
            results = gen.generate([model], sample)
            for i, sid in enumerate(sample["id"].tolist()):
                hyps[sid] = self.text(results[i][0]["tokens"].int().cpu())
                refs[sid] = self.text(pairs.tgt[sid], unk="UNKNOWNTOKENINREF")
        ids = sorted(hyps)
        return [hyps[i] for i in ids], [refs[i] for i in ids]

    @torch.no_grad()
    def evaluate(self, model: nn.Module, workers: int = 0) -> dict[str, float]:
        from ..runtime.loop import batches

        was = model.training
        model.eval()
        loss_sum = nll_sum = 0.0
        ntok = 0
        order = self.val.token_batches(None, 0)
        for batch in batches(self.val, order, 0, self.device):
            loss, nll, n = self._losses(model, batch)
            loss_sum, nll_sum, ntok = loss_sum + float(loss), nll_sum + float(nll), ntok + n
        hyps, refs = self.decode(model)
        model.train(was)
        return {"loss/val": loss_sum / ntok, "nll/val": nll_sum / ntok, "bleu/val": self.bleu(hyps, refs)}
