"""Damaged published-number files (config/published/): every kind of damage a person or a tool can
do to numbers.csv, sources.csv or claims.yaml is one clear ConfigError naming the file, the row or
claim and the key, never a bare KeyError, UnicodeDecodeError or ``<unicode string>``.

Each case damages a copy of the shipped files and loads it with :func:`distrepro_wf.claims.evaluate.load`
(the pipeline's loader, given the copy's directory).  Also the published half of the fault and
bad-input suite of issue 26 (rows 6-9): a claim naming an experiment no config file defines, an
unknown control experiment, a non-finite number, a pass region outside the metric's bounds, and
every CSV column typed (``CSV_CASES``, on the CSV loaders directly).  The pipeline itself stops on such an error
before any job and loses nothing: ``test_a_damaged_file_stops_the_pipeline_before_any_job``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import yaml

from distrepro_wf.claims import published as wfpublished
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PUB = ROOT / "config" / "published"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
GARBAGE = bytes(range(256)) * 4  # not UTF-8: 0x80 at offset 128 is the first invalid byte
FIRST_CLAIM = "sgp_epoch_faster_than_ar"
ROW2 = "sgp_v1_time_sgp_n32"  # numbers.csv line 2
FIRST_EXPECT = 'expect: {op: "<", value: 1.0, tolerance: 0.0}'  # the first claim's
VALUE_CLAIM = "signum_mv_byzantine_3of7"  # compare: value, final_acc >= 50 (%)


def _lines(d: Path, name: str) -> list[str]:
    return (d / name).read_text().splitlines(keepends=True)


def _rewrite(name: str, fn: Callable[[list[str]], list[str]]) -> Callable[[Path], None]:
    """Damage: replace the file's lines by ``fn(lines)``."""
    def damage(d: Path) -> None:
        (d / name).write_text("".join(fn(_lines(d, name))))
    return damage


def _write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def damage(d: Path) -> None:
        (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return damage


def _remove(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).unlink()


def _drop_column(col: int) -> Callable[[list[str]], list[str]]:
    """Remove the col-th cell of every line (files whose first cells hold no quoted comma)."""
    def fn(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            cells = line.rstrip("\n").split(",")
            out.append(",".join(cells[:col] + cells[col + 1:]) + "\n")
        return out
    return fn


def _replace(name: str, old: str, new: str, count: int = 1) -> Callable[[Path], None]:
    def damage(d: Path) -> None:
        text = (d / name).read_text()
        assert old in text, old
        (d / name).write_text(text.replace(old, new, count))
    return damage


def _edit_claims(fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(d: Path) -> None:
        doc = yaml.safe_load((d / "claims.yaml").read_text())
        fn(doc)
        (d / "claims.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return damage


def _del_key(c: dict, key: str) -> None:
    del c[key]


N, S, C = "numbers.csv", "sources.csv", "claims.yaml"
# (damage, substrings the message must contain): file, row or claim, key, what is wrong
CASES = [
    # ------------------------------------------------------------ numbers.csv
    pytest.param(_write(N, ""), [f"{N}: empty file"], id="numbers-empty"),
    pytest.param(_rewrite(N, lambda ls: ls[:1]), [f"{N}: no rows after the header"], id="numbers-header-only"),
    pytest.param(_rewrite(N, lambda ls: [ls[0].replace("verified,", "")] + ls[1:]),
                 [f"{N}:1 (header)", "missing column(s): verified"], id="numbers-missing-column"),
    pytest.param(_rewrite(N, lambda ls: [ls[0].rstrip("\n") + ",notes\n"] + [x.rstrip("\n") + ",n\n" for x in ls[1:]]),
                 [f"{N}:1 (header)", "unknown column(s): notes", "allowed: id, paper"], id="numbers-extra-column"),
    pytest.param(_rewrite(N, lambda ls: ls + ls[1:2]),
                 [f"{N}:", f"({ROW2}).id: duplicate number id '{ROW2}' (first on line 2)"], id="numbers-duplicate-id"),
    pytest.param(_replace(N, ",~,1.6,hours,", ",~,fast,hours,"),
                 [f"{N}:2 ({ROW2}).value", "'fast' does not match"], id="numbers-non-numeric-value"),
    pytest.param(_replace(N, f"{ROW2},SGP (Assran+ 2019),sgp,S1,", f"{ROW2},SGP (Assran+ 2019),sgp,S99,"),
                 [f"{N}:2 ({ROW2}).source", "unknown source 'S99'"], id="numbers-unknown-source"),
    pytest.param(_rewrite(N, lambda ls: ls[:3] + [ls[3][:40]]),
                 [f"{N}:4: row has 3 cells where the header has 16 (a truncated row?)"],
                 id="numbers-truncated-mid-row"),
    pytest.param(_write(N, GARBAGE), [f"{N}: not UTF-8 text", "offset 128"], id="numbers-binary-garbage"),
    pytest.param(_remove(N), [f"{N}: cannot read", "No such file"], id="numbers-missing-file"),
    # ------------------------------------------------------------ sources.csv
    pytest.param(_write(S, ""), [f"{S}: empty file"], id="sources-empty"),
    pytest.param(_rewrite(S, _drop_column(0)), [f"{S}:1 (header)", "missing column(s): key"],
                 id="sources-missing-column"),
    pytest.param(_rewrite(S, lambda ls: ls + ['S1,"again","https://example.org/again"\n']),
                 [f"{S}:", "(S1).key: duplicate source key 'S1' (first on line 2)"], id="sources-duplicate-key"),
    pytest.param(_write(S, GARBAGE), [f"{S}: not UTF-8 text"], id="sources-binary-garbage"),
    # ------------------------------------------------------------ claims.yaml
    pytest.param(_replace(C, "claims:\n", "claims:\n  - id: [unclosed\n"),
                 [f"{C}: YAML syntax error: line"], id="claims-syntax-error"),
    pytest.param(_write(C, ""), [f"{C}: empty file"], id="claims-empty"),
    pytest.param(_write(C, "- papers\n- claims\n"), [f"{C}: ", "is not of type 'object'"], id="claims-not-a-mapping"),
    pytest.param(_write(C, GARBAGE), [f"{C}: not UTF-8 text"], id="claims-binary-garbage"),
    pytest.param(_replace(C, "papers:\n", "x:\n  a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)) + "papers:\n"),
                 [f"{C}: line 20, column 7: YAML aliases expand this document", "at most 10000 may come from aliases"],
                 id="claims-alias-bomb"),
    pytest.param(_edit_claims(lambda doc: _del_key(doc["claims"][0], "metric")),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).metric: required key missing"], id="claim-missing-key"),
    pytest.param(_edit_claims(lambda doc: doc["claims"][0].update(metric="top5")),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).metric: unknown metric 'top5'"], id="claim-unknown-metric"),
    pytest.param(_edit_claims(lambda doc: doc["claims"][0].update(paper="nopaper")),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).paper: unknown paper 'nopaper'"], id="claim-unknown-paper"),
    pytest.param(_edit_claims(lambda doc: doc["claims"][0].update(sources=["no_such_row"])),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).sources: 'no_such_row' is no id of numbers.csv"],
                 id="claim-source-names-no-row"),
    pytest.param(_edit_claims(lambda doc: doc["claims"].append(doc["claims"][0])),
                 [f"({FIRST_CLAIM}).id: duplicate claim id (first: claims[0])"], id="claim-defined-twice"),
    pytest.param(_replace(C, "papers:\n", "papers:\n  sgp: {title: again, citation: again}\n"),
                 [f"{C}: line", "duplicate key 'papers.sgp'"], id="paper-defined-twice"),
    pytest.param(_replace(C, "    metric: time_per_epoch_s\n", "    metric: time_per_epoch_s\n    metric: wall_s\n"),
                 [f"{C}: line", "duplicate key 'claims[0].metric'"], id="claim-key-twice"),
    # ------------------------------------------------------------ issue 26, rows 6-9
    # row 6: an experiment no known config file defines (a typo) is an error, not "not comparable" for ever
    pytest.param(_replace(C, "    experiment: sgp_sim\n", "    experiment: sgp_simm\n"),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).experiment: unknown experiment 'sgp_simm' (did you mean 'sgp_sim'",
                  "config/*.yaml, config/full/*.yaml", "known: adpsgd"], id="row6-claim-experiment-unknown"),
    # row 7: an unknown control experiment; a NaN (or infinite) number in a claim
    pytest.param(_replace(C, "control: {experiment: sgp_sim_fastnet}", "control: {experiment: sgp_sim_fastnett}"),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).control.experiment: unknown experiment 'sgp_sim_fastnett'",
                  "did you mean 'sgp_sim_fastnet'"], id="row7-control-experiment-unknown"),
    pytest.param(_replace(C, FIRST_EXPECT, 'expect: {op: "<", value: .nan, tolerance: 0.0}'),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).expect.value: nan is not allowed", "finite"],
                 id="row7-expect-value-nan"),
    pytest.param(_replace(C, FIRST_EXPECT, 'expect: {op: between, value: [0.5, .NaN], tolerance: 0.0}'),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).expect.value[1]: nan is not allowed"], id="row7-between-nan"),
    pytest.param(_replace(C, FIRST_EXPECT, 'expect: {op: "<", value: 1.0, tolerance: .inf}'),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).expect.tolerance: inf is not allowed"], id="row7-tolerance-inf"),
    # row 9: a claim its metric's values can never satisfy (the catalogue's bounds, in the display unit)
    pytest.param(_replace(C, 'expect: {op: ">=", value: 50.0, tolerance: 0.0}', 'expect: {op: ">=", value: 150.0, tolerance: 0.0}'),
                 [f"({VALUE_CLAIM}).expect.value: can never be reproduced: final_acc is always in [0, 100] (%)"],
                 id="row9-claim-value-unreachable"),
    pytest.param(_replace(C, FIRST_EXPECT, 'expect: {op: "<", value: 0.0, tolerance: 0.0}'),
                 [f"{C}: claims[0] ({FIRST_CLAIM}).expect.value: can never be reproduced: a ratio of time_per_epoch_s"],
                 id="row9-claim-ratio-unreachable"),
    # issue 34, case 4: an expect its own published number contradicts (a typo in either)
    pytest.param(_replace(C, "    published:\n      value: 0.32\n", "    published:\n      value: 3.2\n"),
                 [f"{C}: claims[1] (sgp_tta_faster_than_ar).expect: contradicts the claim's own published number: "
                  "published.value 3.2 fails expect < 1.0 (tolerance 0.0)"], id="i34-published-value-typo"),
    pytest.param(_replace(C, FIRST_EXPECT + "\n    published:\n      value: 0.32",
                          'expect: {op: ">", value: 1.0, tolerance: 0.0}\n    published:\n      value: 0.32'),
                 [f"{C}: claims[1] (sgp_tta_faster_than_ar).expect: contradicts the claim's own published number: "
                  "published.value 0.32 fails expect > 1.0"], id="i34-expect-op-flipped"),
    pytest.param(_replace(C, "published: {value: -0.85,", "published: {value: -1.85,"),
                 ["(sgp_top1_within_1p2_of_ar).expect: contradicts the claim's own published number: "
                  "published.value -1.85 fails expect"], id="i34-published-difference-outside"),
]


# issue 26 row 8: every column of the published CSV files typed, the message naming the file, line, column
# and what is allowed (the CSV loaders themselves: load() runs them after claims.yaml, which these leave alone)
CSV_CASES = [
    pytest.param(_replace(N, f"{ROW2},SGP (Assran+ 2019),sgp,S1,abstract (v1),ResNet-50/ImageNet 90ep,SGP,32,",
                          f"{ROW2},SGP (Assran+ 2019),sgp,S1,abstract (v1),ResNet-50/ImageNet 90ep,SGP,thirty-two,"),
                 [f"{N}:2 ({ROW2}).nodes: 'thirty-two' does not match the allowed form: a count in digits"],
                 id="row8-numbers-nodes-in-words"),
    pytest.param(_replace(N, ",SGP,32,256,10GbE,", ",SGP,32,many,10GbE,"),
                 [f"{N}:2 ({ROW2}).gpus: 'many' does not match the allowed form: a count"], id="row8-numbers-gpus"),
    pytest.param(_replace(N, ",~,1.6,hours,", ",~,1.6,hrs,"),
                 [f"{N}:2 ({ROW2}).unit: 'hrs' does not match the allowed form: one of - % x ms s minutes hours"],
                 id="row8-numbers-unknown-unit"),
    pytest.param(_replace(N, f"{ROW2},SGP (Assran+ 2019),", f"{ROW2}, SGP (Assran+ 2019),"),
                 [f"{N}:2 ({ROW2}).paper: ' SGP (Assran+ 2019)' does not match the allowed form: one line of text, "
                  "not empty, no space at either end"], id="row8-numbers-text-padded"),
    pytest.param(_rewrite(N, lambda ls: ls[:1] + [ls[1].rsplit(",", 1)[0] + ",\n"] + ls[2:]),
                 [f"{N}:2 ({ROW2}).checked: '' does not match the allowed form: one line of text"],
                 id="row8-numbers-checked-empty"),
    pytest.param(_replace(N, f"{ROW2},SGP (Assran+ 2019),sgp,S1,", f"{ROW2},SGP (Assran+ 2019),sgp,-,"),
                 [f"{N}:2 ({ROW2}).source: '-' (no source read) with verified 'yes'"], id="row8-numbers-yes-unsourced"),
    pytest.param(_replace(N, "range,4..8,", "range,8..4,"),
                 [f"{N}:", ".value: range '8..4' has low > high"], id="row8-numbers-range-reversed"),
    pytest.param(_replace(S, "S2,", "S2x,"),
                 [f"{S}:3 (S2x).key: 'S2x' does not match the allowed form: \"S\" and a number"], id="row8-sources-key"),
    pytest.param(_replace(S, "https://arxiv.org/abs/1910.00643", "arxiv 1910.00643"),
                 [f"{S}:5 (S4).where: 'arxiv 1910.00643' does not match the allowed form: the source's address(es)"],
                 id="row8-sources-where-not-an-address"),
    pytest.param(_replace(S, "S2,\"Official SGP code", "S2,\"  Official SGP code"),
                 [f"{S}:3 (S2).what: '  Official SGP code", "no space at either end"], id="row8-sources-what-padded"),
]


@pytest.mark.parametrize("damage, words", CSV_CASES)
def test_every_column_of_the_published_csv_files_is_typed(tmp_path, damage, words):
    d = tmp_path / "published"
    d.mkdir()
    for name in (N, S):
        shutil.copy(PUB / name, d / name)
    damage(d)
    with pytest.raises(ConfigError) as e:
        wfpublished.load_numbers(d / N, wfpublished.load_sources(d / S))
    msg = str(e.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


@pytest.mark.parametrize("damage, words", CASES)
def test_damaged_published_file_is_a_clear_error(tmp_path, damage, words):
    d = tmp_path / "published"
    shutil.copytree(PUB, d)
    damage(d)
    with pytest.raises(ConfigError) as e:
        wfpublished.load(CONFIG, d)
    msg = str(e.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


def test_claims_of_an_experiment_only_another_config_file_defines_are_a_warning_naming_it():
    """Issue 26 row 6: the default run lacks config/translation.yaml's experiments; their claims load,
    are "not comparable", and one warning per file names it and the claims (the pipeline prints it)."""
    pub = wfpublished.load(CONFIG)
    assert pub.not_configured["sgp_transformer_bleu_close_to_ar"] == (
        "experiment 'translation_sim' is not in this run's config; it is defined in config/translation.yaml: "
        "run `snakemake --cores 2 --configfile config/translation.yaml`")
    (line,) = [w for w in pub.warnings if "config/translation.yaml" in w]
    assert "sgp_transformer_bleu_close_to_ar" in line and "--configfile config/translation.yaml" in line
    assert not [w for w in pub.warnings if "config/config.yaml" in w]  # the run's own experiments: no warning


def _tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root/results and root/reports (Snakemake's own .snakemake/ aside)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for sub in ("results", "reports") for p in sorted((root / sub).rglob("*")) if p.is_file()}


def test_a_damaged_file_stops_the_pipeline_before_any_job(tmp_path):
    """A real ``snakemake`` run (not a dry run) on a copy of the workflow whose numbers.csv is binary
    garbage: it fails at start naming the file, runs no job, and every existing result and report is
    byte-for-byte untouched (nothing added, nothing removed)."""
    for name in ("Snakefile", "config", "workflows"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    (tmp_path / "config/published/numbers.csv").write_bytes(GARBAGE)
    work = tmp_path / "work"
    for rel, text in {"results/tables/baseline/runs.csv": "experiment,method\nbaseline,allreduce_sgd\n",
                      "results/tables/claims.csv": "claim,status\nx,reproduced\n",
                      "results/bench/pipeline_wall.csv": "started_at,wall_s\n2026-01-01T00:00:00,1.0\n",
                      "reports/index.html": "<html>earlier report</html>\n"}.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    before = _tree_digest(work)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}/workflows/lib:{ROOT}")
    p = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(tmp_path / "Snakefile"), "-d", str(work),
                        "--cores", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "invalid published numbers or claims" in out and "numbers.csv: not UTF-8 text" in out, out[-3000:]
    assert "Job stats" not in out and "rule train" not in out, out[-3000:]
    assert _tree_digest(work) == before
