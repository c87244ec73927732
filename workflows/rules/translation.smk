# Translation data (impls/tasks/translation.py): a corpus of the config's `corpora` section
# (synth_ende, the synthetic stand-in, is always defined; distrepro_wf/pipeline/translation.py) is
# binarized by fairseq-preprocess into results/data/translation/{corpus}/data-bin.  Train jobs
# of translation workloads wait for it (train.smk's input); the bench target measures the tiny
# Transformer on it.
from distrepro_wf.pipeline import translation as wftranslation

try:
    CORPORA = wftranslation.corpora(config)
    wftranslation.check_translation_data(config)
except ConfigError as e:
    raise WorkflowError(f"invalid configuration: {e}") from None


wildcard_constraints:
    corpus="[A-Za-z0-9_]+",


rule translation_data:
    output:
        f"{wftranslation.ROOT}/{{corpus}}/data-bin/{wftranslation.MARKER}",
    log:
        "results/logs/data/translation/{corpus}.log",
    params:
        spec=lambda wc: CORPORA[wc.corpus],
    threads: 1
    script:
        "../scripts/translation_data.py"


rule bench_translation:
    input:
        corpus=f"{wftranslation.data_bin('synth_ende')}/{wftranslation.MARKER}",
    output:
        "results/bench/translation.csv",
    log:
        "results/logs/bench/translation.log",
    params:
        spec=config.get("benchmarks", {}).get("translation", {}),
        workloads=config["workloads"],
    threads: 64  # everything there is (Snakemake scales it down to --cores)
    script:
        "../scripts/bench_translation.py"
