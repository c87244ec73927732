"""The published-numbers registry (config/published/): the shipped data validates, and every kind
of malformed row is a clear error naming the file, the line and the key."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import yaml

from distrepro_wf import claims as wfclaims
from impls.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PUB = ROOT / "config" / "published"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_shipped_registry_validates_and_is_honest():
    pub = wfclaims.load(CONFIG)
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
    assert row.loc["goyal_err_bs256", "verified"] == "UNVERIFIED"
    # every page of a number is a paper with a title and citation
    assert set(n["page"]) <= set(pub.papers)


def test_shared_list_carried_over():
    """Every (paper, metric) of the shared list's numeric rows is in the project registry."""
    shared = Path("/work/shared/published/published-numbers.csv")
    if not shared.exists():
        pytest.skip("the shared list is not on this machine (it was carried into config/published/)")
    ours = wfclaims.load_numbers(PUB / "numbers.csv")
    with open(shared, newline="") as f:
        papers = {r["paper"] for r in csv.DictReader(f)}
    assert papers <= set(ours["paper"])


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
        wfclaims.load(CONFIG, d)
    msg = str(e.value)
    assert f"numbers.csv:{line} (sgp_v1_time_sgp_n32).{key}" in msg and words in msg, msg


def test_unquoted_comma_is_a_clear_error(tmp_path):
    d = _copy(tmp_path)
    with open(d / "numbers.csv", "a") as f:
        f.write("extra_row,P,sgp,S1,abstract,w,m,1,1,s,metric,=,1,x,yes,checked,one too many\n")
    with pytest.raises(ConfigError, match=r"numbers.csv:\d+: row has 17 cells where the header has 16"):
        wfclaims.load(CONFIG, d)


def test_duplicate_ids_and_unknown_source_keys(tmp_path):
    d = _copy(tmp_path)
    _edit_row(d / "numbers.csv", "slowmo_t1_sgp_top1", id="slowmo_t1_ar_top1")
    with pytest.raises(ConfigError, match="duplicate number id 'slowmo_t1_ar_top1'"):
        wfclaims.load(CONFIG, d)
    d2 = _copy(tmp_path / "b")
    (d2 / "sources.csv").write_text((d2 / "sources.csv").read_text() + 'S1,"again",""\n')
    with pytest.raises(ConfigError, match="duplicate source key 'S1'"):
        wfclaims.load(CONFIG, d2)
