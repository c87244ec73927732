"""A synthetic parallel corpus: the translation task's tiny stand-in for WMT'16 En-De.

Generated deterministically from a seed (same seed, same bytes), so BLEU means something
and rises as a model learns, without downloading anything.  The "languages":

1. **Vocabulary.**  Pseudo-words made of syllables, in four classes: nouns, adjectives,
   verbs and names.  Every source noun, adjective and verb has its own target word
   (another pseudo-word, never equal to a source word): a bijective word mapping.  Names
   are copied unchanged (as proper nouns are), so copying the source scores a little
   BLEU but far from what a translation scores: the copy baseline.
2. **Sentences.**  A source sentence is 2-5 phrases; a phrase is a noun, an adjective
   followed by a noun, a verb, or a name (probabilities 0.3, 0.3, 0.25, 0.15).  Lengths are
   therefore 2-10 words.
3. **Local reordering.**  In the target, an adjective follows its noun (``A N`` ->
   ``N' A'``, as French or Spanish would), and a sentence's first verb moves to the end
   (as in a German subordinate clause).  A model must thus learn the word mapping *and*
   attention that looks one position ahead or to the sentence's first verb: a copy-and-map
   model gets the words but not their n-gram order.

Files: ``{train,valid,test}.{src,tgt}``, one whitespace-tokenized sentence per line (what
``fairseq-preprocess`` reads).  Tuning: ``vocab`` words per class (larger is harder to
learn: 30 learns in a minute of CPU); ``train`` sentences (a 2-layer model needs a few
thousand).
"""

from __future__ import annotations

import random
from pathlib import Path

CLASSES = ("noun", "adj", "verb", "name")
_PHRASES = (("noun",), ("adj", "noun"), ("verb",), ("name",))
_PHRASE_P = (0.3, 0.3, 0.25, 0.15)
_SYL = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def _words(rng: random.Random, n: int, taken: set[str], syllables: int) -> list[str]:
    out = []
    while len(out) < n:
        w = "".join(rng.choice(_SYL) for _ in range(syllables))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


class SyntheticLanguagePair:
    """The two vocabularies and the translation rule of one seed (see the module doc)."""

    def __init__(self, seed: int = 0, vocab: int = 30):
        if vocab < 1:
            raise ValueError(f"vocab must be >= 1, got {vocab}")
        rng = random.Random(f"synth-parallel-vocab:{seed}")
        taken: set[str] = set()
        self.src = {c: _words(rng, vocab, taken, 2) for c in CLASSES}
        tgt = {c: _words(rng, vocab, taken, 3) for c in CLASSES if c != "name"}
        self.mapping = {w: t for c in tgt for w, t in zip(self.src[c], tgt[c])}
        self.mapping.update({w: w for w in self.src["name"]})  # names are copied

    def sentence(self, rng: random.Random) -> list[tuple[str, str]]:
        """A source sentence as ``(word, class)`` pairs."""
        out = []
        for _ in range(rng.randint(2, 5)):
            for c in rng.choices(_PHRASES, _PHRASE_P)[0]:
                out.append((rng.choice(self.src[c]), c))
        return out

    def translate(self, sent: list[tuple[str, str]]) -> list[str]:
        """The reference translation: map each word, swap adjective-noun, first verb last."""
        words, classes = [self.mapping[w] for w, _ in sent], [c for _, c in sent]
        i = 0
        while i < len(words) - 1:
            if classes[i] == "adj" and classes[i + 1] == "noun":
                words[i], words[i + 1] = words[i + 1], words[i]
                classes[i], classes[i + 1] = classes[i + 1], classes[i]
                i += 2
            else:
                i += 1
        if "verb" in classes:
            j = classes.index("verb")
            words.append(words.pop(j))
        return words


def generate(out_dir: str | Path, seed: int = 0, train: int = 5000, valid: int = 300, test: int = 300,
             vocab: int = 30) -> dict[str, int]:
    """Write ``{train,valid,test}.{src,tgt}`` under ``out_dir``; returns the sentence counts.

    The three splits come from separate streams of one seed, so changing ``train`` leaves
    ``valid`` and ``test`` unchanged.  Identical sentences may occur in several splits (the
    languages are small); BLEU on ``valid`` still needs the order rules, which no sentence
    lookup gives for the many unseen ones.
    """
    lang = SyntheticLanguagePair(seed, vocab)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {"train": train, "valid": valid, "test": test}
    for split, n in counts.items():
        rng = random.Random(f"synth-parallel-{split}:{seed}")
        src_lines, tgt_lines = [], []
        for _ in range(n):
            s = lang.sentence(rng)
            src_lines.append(" ".join(w for w, _ in s))
            tgt_lines.append(" ".join(lang.translate(s)))
        (out / f"{split}.src").write_text("\n".join(src_lines) + "\n")
        (out / f"{split}.tgt").write_text("\n".join(tgt_lines) + "\n")
    return counts
