"""Translation corpora: what rule ``translation_data`` binarizes, and which runs need it.

A corpus is named under the config's optional ``corpora`` section (``synth_ende``, the
synthetic stand-in, is always there) and binarized by ``fairseq-preprocess`` into
``results/data/translation/<corpus>/data-bin`` (marker ``corpus.json``, written last).
A translation workload points its ``task.data`` at that directory, or at any data-bin of
its own (then no rule makes it)::

    corpora:
      synth_ende: {kind: synthetic, seed: 0, train: 5000, valid: 300, test: 300, vocab: 30}
      wmt16_en_de:              # full scale: a local copy, tokenized and BPE'd (fairseq's
        kind: raw               #   prepare-wmt14en2de.sh layout: train.en, train.de, valid.*, test.*)
        root: /data/wmt16_en_de
        source_lang: en
        target_lang: de
        joined_dictionary: true
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from impls.errors import ConfigError

from . import dataprep

ROOT = "results/data/translation"
MARKER = "corpus.json"
SYNTHETIC = {"kind": "synthetic", "seed": 0, "train": 5000, "valid": 300, "test": 300, "vocab": 30,
             "joined_dictionary": False}
RAW = {"kind": "raw", "root": None, "source_lang": "src", "target_lang": "tgt", "joined_dictionary": False,
       "splits": ["train", "valid", "test"], "workers": 1}
DEFAULT_CORPORA = {"synth_ende": dict(SYNTHETIC)}


def corpora(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every corpus of ``config`` with its defaults, checked (unknown keys, kinds, roots)."""
    out = {k: dict(v) for k, v in DEFAULT_CORPORA.items()}
    for name, spec in (config.get("corpora") or {}).items():
        spec = dict(spec or {})
        kind = spec.get("kind", "synthetic")
        if kind not in ("synthetic", "raw"):
            raise ConfigError(f"corpora.{name}.kind", f"{kind!r} is not allowed; allowed values: raw, synthetic")
        defaults = SYNTHETIC if kind == "synthetic" else RAW
        unknown = sorted(set(spec) - set(defaults))
        if unknown:
            raise ConfigError(f"corpora.{name}.{unknown[0]}", f"unknown key; allowed keys: {', '.join(sorted(defaults))}")
        spec = {**defaults, **spec}
        if kind == "raw":
            bad = sorted(set(spec["splits"]) - {"train", "valid", "test"})
            if bad or "train" not in spec["splits"] or "valid" not in spec["splits"]:
                raise ConfigError(f"corpora.{name}.splits", f"{spec['splits']}: train and valid, and optionally test")
            root = spec["root"]
            if not root or not Path(root).is_dir():
                raise ConfigError(f"corpora.{name}.root", f"{root!r} is not a directory (a local copy of the parallel "
                                                          "text: train.<src>, train.<tgt>, valid.*, test.*)")
            for split in spec["splits"]:
                for lang in (spec["source_lang"], spec["target_lang"]):
                    if not (Path(root) / f"{split}.{lang}").is_file():
                        raise ConfigError(f"corpora.{name}.root", f"{root}/{split}.{lang} not found")
        out[name] = spec
    return out


def data_bin(corpus: str) -> str:
    return f"{ROOT}/{corpus}/data-bin"


def corpus_of(data: str) -> str | None:
    """The corpus whose rule makes data-bin ``data``, or None (a data-bin of the user's)."""
    p = Path(data)
    if p.name == "data-bin" and p.parent.parent.as_posix() == ROOT:
        return p.parent.name
    return None


@dataprep.preparer("translation")
def corpus_marker(raw: dict[str, Any]) -> list[str]:
    """The marker of the corpus a run (resolved run config) trains on, if a rule of this
    pipeline makes it (``translation_data``), so that ``fairseq-preprocess`` runs first."""
    task = (raw.get("workload") or {}).get("task") or {}
    corpus = corpus_of(task.get("data", "")) if task.get("name") == "translation" else None
    return [] if corpus is None else [f"{data_bin(corpus)}/{MARKER}"]


def data_inputs(raws: Iterable[dict[str, Any]]) -> list[str]:
    """The corpus markers the runs ``raws`` train on (:func:`corpus_marker` of each)."""
    return sorted({f for raw in raws for f in corpus_marker(raw)})


def check_translation_data(config: dict[str, Any]) -> None:
    """Every translation workload's ``task.data`` exists or is made by a corpus rule."""
    known = corpora(config)
    for wname, wl in (config.get("workloads") or {}).items():
        task = (wl or {}).get("task") or {}
        if task.get("name") != "translation":
            continue
        data = task.get("data", "")
        corpus = corpus_of(data)
        if corpus is None:
            if not Path(data).is_dir():
                raise ConfigError(f"workloads.{wname}.task.data",
                                  f"{data!r} is not a directory; use {data_bin('<corpus>')} with a corpus of "
                                  f"'corpora' ({', '.join(sorted(known))}) or an existing data-bin")
        elif corpus not in known:
            raise ConfigError(f"workloads.{wname}.task.data", f"unknown corpus {corpus!r}; known: "
                                                              f"{', '.join(sorted(known))}")
