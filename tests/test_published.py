"""The published-numbers registry (config/published/): the shipped data validates and carries the
shared list, and every kind of malformed row is a clear error naming the file, the line and the key
(damaged files, whole or in part: test_published_damaged.py)."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest
import yaml

from distrepro_wf.claims import published as wfpublished
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PUB = ROOT / "config" / "published"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_shipped_registry_validates_and_is_honest():
    pub = wfpublished.load(CONFIG)
    n = pub.numbers
    assert len(n) >= 90 and len(pub.claims) >= 20
    assert set(n["verified"]) <= {"yes", "secondary", "UNVERIFIED", "NOT RETRIEVED"}
    # a number read in a source names that source; one not retrieved has no value
    assert (n.loc[n["verified"] == "yes", "source"] != "-").all()
    assert (n.loc[n["verified"] == "NOT RETRIEVED", "value"] == "").all()
    # the numbers the issue names are carried with their citations
    row = n.set_index("id")
    assert row.loc["tv_r50_acc1", "value"] == "76.13" and row.loc["tv_r50_acc1", "source"] == "S18"
    assert row.loc["sgp_v1_time_sgp_n32", ["relation", "value", "unit"]].tolist() == ["~", "1.6", "hours"]
    # read in a copy of Goyal et al.'s Sec. 5.1; the 8k number's Table 1 was not (its Sec. 5.2 bound was)
    assert row.loc["goyal_err_bs256", "verified"] == "secondary"
    assert row.loc["goyal_err_bs8k", "verified"] == "UNVERIFIED"
    assert row.loc["goyal_warmup_gap_8k", ["relation", "value", "verified"]].tolist() == ["<=", "0.14", "secondary"]
    # every page of a number is a paper with a title and citation
    assert set(n["page"]) <= set(pub.papers)


# The lead's shared list (shared/published/published-numbers.csv), copied verbatim into the
# repository so that this check runs everywhere (CI has no shared/ folder).
SHARED = Path(__file__).parent / "data" / "shared-published-numbers.csv"
NUM = r"-?\d+(?:\.\d+)?"
# metrics renamed when carried (the comparison moved to the method column)
RENAMED = {("AD-PSGD (Lian+ 2018)", "per-epoch speedup vs synchronous (AR-SGD/D-PSGD)"): "per-epoch speedup"}


def test_shared_list_carried_over():
    """Every number of the shared list is a row of the registry with the same paper and value: a
    single number with the same metric and relation (its qualifier ~ > >= < <=, else =), each number
    of a multi-valued row (``0.96 / 1.07 / 1.03``) with the same metric (any metric of the paper
    where the shared metric itself is a list, ``time / top-1``, split into one row each), a range
    ``4-8`` as ``range 4..8``.  Rows with no number (statements, NOT RETRIEVED) are not compared."""
    ours = wfpublished.load_numbers(PUB / "numbers.csv")
    numeric = ours["value"].str.fullmatch(NUM)
    with open(SHARED, newline="") as f:
        shared = list(csv.DictReader(f))
    missing, compared = [], 0
    for r in shared:
        paper, v = r["paper"], r["value"].strip()
        metric = RENAMED.get((paper, r["metric"]), r["metric"])
        mine = ours[(ours["paper"] == paper) & numeric]
        same_metric = mine[mine["metric"] == metric]
        if one := re.fullmatch(rf"(~|>=|<=|>|<)?\s*({NUM})", v):
            rel, x = one.group(1) or "=", float(one.group(2))
            found = ((same_metric["relation"] == rel) & (same_metric["value"].astype(float) == x)).any()
        elif re.fullmatch(rf"{NUM}(?: / {NUM})+", v):
            pool = mine if " / " in metric else same_metric
            found = {float(x) for x in v.split(" / ")} <= set(pool["value"].astype(float))
        elif rng := re.fullmatch(rf"({NUM})-({NUM})", v):
            found = ((ours["paper"] == paper) & (ours["metric"] == metric) & (ours["relation"] == "range")
                     & (ours["value"] == f"{rng.group(1)}..{rng.group(2)}")).any()
        else:
            continue
        compared += 1
        if not found:
            missing.append((paper, r["metric"], v))
    assert missing == []
    assert (compared, len(shared)) == (39, 67)  # every numeric row of the list was compared


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "published"
    shutil.copytree(PUB, d)
    return d


def _edit_row(path: Path, row_id: str, **changes: str) -> int:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0])
    line = next(i for i, r in enumerate(rows, start=2) if r["id"] == row_id)
    rows[line - 2].update(changes)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return line


@pytest.mark.parametrize("changes, key, words", [
    ({"relation": "about"}, "relation", "allowed values"),
    ({"value": "~1.6"}, "value", "does not match"),
    ({"verified": "maybe"}, "verified", "NOT RETRIEVED"),
    ({"source": "S99"}, "source", "unknown source 'S99'"),
    ({"page": "nosuchpaper"}, "page", "unknown paper"),
    ({"relation": "range", "value": "4-8"}, "value", "does not match"),
    ({"verified": "NOT RETRIEVED"}, "value", "expected to be empty"),
])
def test_malformed_number_is_a_clear_error(tmp_path, changes, key, words):
    d = _copy(tmp_path)
    line = _edit_row(d / "numbers.csv", "sgp_v1_time_sgp_n32", **changes)
    with pytest.raises(ConfigError) as e:
        wfpublished.load(CONFIG, d)
    msg = str(e.value)
    assert f"numbers.csv:{line} (sgp_v1_time_sgp_n32).{key}" in msg and words in msg, msg


def test_unquoted_comma_is_a_clear_error(tmp_path):
    d = _copy(tmp_path)
    with open(d / "numbers.csv", "a") as f:
        f.write("extra_row,P,sgp,S1,abstract,w,m,1,1,s,metric,=,1,x,yes,checked,one too many\n")
    with pytest.raises(ConfigError, match=r"numbers.csv:\d+: row has 17 cells where the header has 16"):
        wfpublished.load(CONFIG, d)
