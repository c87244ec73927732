"""Snakemake script of rule ``translation_data``: a parallel corpus -> fairseq data-bin.

The synthetic stand-in is generated first (:mod:`impls.data.synth_parallel`) into
``results/data/translation/<corpus>/raw``; a ``raw`` corpus is read from its local root.
Then ``fairseq-preprocess`` (fairseq's own CLI, in this interpreter) binarizes it into
``data-bin``; its output goes to the rule's log.  ``corpus.json`` (the spec and the sentence
counts of each split) is written last: the marker the train rule waits for.
"""

import json
import logging
import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_path = Path(sm.log[0])
log_path.parent.mkdir(parents=True, exist_ok=True)
logging.basicConfig(filename=log_path, filemode="w", level=logging.INFO, format="%(asctime)s %(message)s")
spec = dict(sm.params.spec)
marker = Path(sm.output[0])
dest = marker.parent
logging.info("corpus %s: %s", sm.wildcards.corpus, json.dumps(spec))

if spec["kind"] == "synthetic":
    from impls.data.synth_parallel import generate

    raw, src, tgt, splits = dest.parent / "raw", "src", "tgt", ["train", "valid", "test"]
    generate(raw, seed=spec["seed"], train=spec["train"], valid=spec["valid"], test=spec["test"], vocab=spec["vocab"])
else:
    raw, src, tgt, splits = Path(spec["root"]), spec["source_lang"], spec["target_lang"], list(spec["splits"])
cmd = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", src, "--target-lang", tgt,
       "--destdir", str(dest), "--workers", str(spec.get("workers", 1))]
for split in splits:
    cmd += [f"--{split}pref", str(raw / split)]  # train, valid, test
if spec.get("joined_dictionary"):
    cmd.append("--joined-dictionary")
logging.info("%s", " ".join(cmd))
with open(log_path, "a") as f:
    subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)
counts = {s: sum(1 for _ in open(raw / f"{s}.{src}")) for s in splits}
marker.write_text(json.dumps({"corpus": sm.wildcards.corpus, "spec": spec, "source_lang": src, "target_lang": tgt,
                              "sentences": counts}, indent=1))
logging.info("done: %s", counts)
