"""Published numbers and the claims derived from them: loading and validation.

Data (``config/published/``): ``numbers.csv`` (one published number a row, with its
source and whether it was read in a primary source), ``sources.csv`` and ``claims.yaml``
(the papers, one report page each, and the claims).  :func:`load` validates all three at
pipeline start and raises :class:`impls.errors.ConfigError` naming the file, the row
(``numbers.csv:12 (slowmo_t1_ar_top1).value``) or claim (``claims.yaml: claims[3]
(sgp_x).metric``) and the key; rule ``compare`` turns it into a WorkflowError before any job.

Validation rules (what is an error, what is only "not comparable"):

* Always an error: a damaged file (missing, empty, not UTF-8, a CSV header without exactly
  the schema's columns, a row with another number of cells, no rows, a YAML syntax error or
  a key defined twice, e.g. a paper or a claim's metric: the strict loader
  :mod:`distrepro_wf.yamlio`), a malformed row or claim (JSON schemas under
  ``workflows/schemas``), a duplicate id or source key, a claim whose ``metric`` is not in
  :data:`METRICS`, whose ``paper`` is not in ``papers``, whose ``sources`` name no row of
  numbers.csv, a number whose ``source`` is not in sources.csv or whose ``page`` is not a paper.
* Claim of an experiment that is in the pipeline config: a method it names that is no method
  key of that experiment in this config makes the claim "not comparable (method not in this
  config)", if the name is known: a method key of that experiment in the shipped config
  (``config/config.yaml``; a user's grid may leave methods out) or a registered algorithm
  (``impls.algorithms``).  Any other name is an error (a typo).  Likewise a straggler setting
  not in this config's ``stragglers`` but in the shipped config's makes it "not comparable";
  one in neither is an error.  ``requires.workload`` names the published setting: a config
  without it makes an absolute claim "not comparable".
* Claim of an experiment that is not in the config (a family not implemented yet, or a
  config without it): its method and straggler names are not checked; the claim is
  "not comparable (experiment not in config)".
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import yaml
from jsonschema import Draft202012Validator

from impls.errors import ConfigError

from .catalogue import METRICS
from .config import WORKFLOW_DIR
from .yamlio import load_yaml, loads_yaml

SCHEMAS = WORKFLOW_DIR / "schemas"
PUBLISHED_DIR = WORKFLOW_DIR.parent / "config" / "published"
SHIPPED_CONFIG = WORKFLOW_DIR.parent / "config" / "config.yaml"


def _schema(name: str) -> dict[str, Any]:
    return yaml.safe_load((SCHEMAS / name).read_text())


def _first_error(validator: Draft202012Validator, doc: Any, where: str) -> None:
    """Raise the most specific schema problem of ``doc`` as a ConfigError at ``where`` + its path.

    In claims.yaml a claim is named by its index and id (``claims[3] (sgp_x).metric``), like
    the checks after the schema."""
    # the most specific problem first: the deepest path, then document order
    errors = sorted(validator.iter_errors(doc), key=lambda e: (-len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    e = errors[0]
    steps = list(e.absolute_path)
    if e.validator == "required":
        steps.append(next(k for k in e.validator_value if k not in e.instance))
        msg = "required key missing"
    elif e.validator == "enum":
        msg = f"{e.instance!r} is not allowed; allowed values: {', '.join(map(str, e.validator_value))}"
    elif e.validator == "additionalProperties":
        allowed = sorted(e.schema.get("properties", {}))
        msg = f"unknown key(s) {sorted(set(e.instance) - set(allowed))}; allowed keys: {', '.join(allowed)}"
    else:
        msg = e.message
    path = ""
    for i, p in enumerate(steps):
        path += f"[{p}]" if isinstance(p, int) else f".{p}"
        if i == 1 and steps[0] == "claims" and isinstance(doc["claims"][p], dict) and "id" in doc["claims"][p]:
            path += f" ({doc['claims'][p]['id']})"
    if where.endswith(".yaml"):  # claims.yaml: claims[3] (id).metric, like the checks after the schema
        path = ": " + path.lstrip(".") if path else ""
    raise ConfigError(f"{where}{path}", msg)


def read_text(path: Path) -> str:
    """The text of a published-data file; a missing, unreadable or binary file is a ConfigError."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(str(path), f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")  # a spreadsheet's byte-order mark is not part of the header
    except UnicodeDecodeError as e:
        raise ConfigError(str(path), f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}): "
                                     "a damaged or binary file?") from None


def read_csv_rows(path: Path, schema: dict[str, Any]) -> list[tuple[int, dict[str, str]]]:
    """``(line, row)`` of every row of a published CSV whose header must hold exactly the
    schema's properties (each once); a ConfigError names the file and the line otherwise."""
    text = read_text(path)
    if not text.strip():
        raise ConfigError(str(path), "empty file (no header row): restore it, e.g. git checkout -- " + Path(path).name)
    allowed = list(schema["properties"])
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        header = next(reader)
        missing = [c for c in schema["required"] if c not in header]
        unknown = [c for c in header if c not in allowed]
        twice = sorted({c for c in header if header.count(c) > 1})
        if missing or unknown or twice:
            what = "; ".join(f"{k}: {', '.join(v)}" for k, v in (("missing column(s)", missing),
                             ("unknown column(s)", unknown), ("column(s) twice", twice)) if v)
            raise ConfigError(f"{path}:1 (header)", f"{what}; allowed: {', '.join(allowed)}")
        for cells in reader:
            if not cells:  # a blank line
                continue
            if len(cells) != len(header):
                hint = "a comma in an unquoted cell?" if len(cells) > len(header) else "a truncated row?"
                raise ConfigError(f"{path}:{reader.line_num}",
                                  f"row has {len(cells)} cells where the header has {len(header)} ({hint})")
            rows.append((reader.line_num, dict(zip(header, cells))))
    except csv.Error as e:
        raise ConfigError(f"{path}:{reader.line_num}", f"not valid CSV: {e}") from None
    if not rows:
        raise ConfigError(str(path), "no rows after the header (a truncated file?)")
    return rows


def _unique(rows: list[tuple[int, dict[str, str]]], key: str, path: Path, what: str) -> None:
    first: dict[str, int] = {}
    for line, row in rows:
        if row[key] in first:
            raise ConfigError(f"{path}:{line} ({row[key]}).{key}",
                              f"duplicate {what} {row[key]!r} (first on line {first[row[key]]})")
        first[row[key]] = line


def load_sources(path: Path) -> pd.DataFrame:
    schema = _schema("published_sources.schema.yaml")
    validator = Draft202012Validator(schema)
    rows = read_csv_rows(path, schema)
    for line, row in rows:
        _first_error(validator, row, f"{path}:{line}")
    _unique(rows, "key", path, "source key")
    return pd.DataFrame([r for _, r in rows], columns=list(schema["properties"]))


def load_numbers(path: Path, sources: pd.DataFrame | None = None, pages: Iterable[str] | None = None) -> pd.DataFrame:
    schema = _schema("published_numbers.schema.yaml")
    validator = Draft202012Validator(schema)
    rows = read_csv_rows(path, schema)
    known = set(sources["key"]) if sources is not None else None
    pages = set(pages) if pages is not None else None
    for line, row in rows:
        where = f"{path}:{line} ({row.get('id', '?')})"
        _first_error(validator, row, where)
        if known is not None:
            for key in row["source"].split("+"):
                if key not in known:
                    raise ConfigError(f"{where}.source", f"unknown source {key!r}; known: {', '.join(sorted(known))}")
        if pages is not None and row["page"] not in pages:
            raise ConfigError(f"{where}.page", f"unknown paper {row['page']!r}; known: {', '.join(sorted(pages))}")
    _unique(rows, "id", path, "number id")
    return pd.DataFrame([r for _, r in rows], columns=list(schema["properties"]))


def _check_shape(c: dict[str, Any], where: str) -> None:
    """What the schema leaves to us: which keys go with which comparison."""
    cmp = c["compare"]
    if cmp == "ratio_vs_control" and not c.get("control"):
        raise ConfigError(f"{where}.control", "compare 'ratio_vs_control' needs the control setting: "
                                              "control: {experiment: ..., straggler: ..., nodes: ...}")
    for r in (c.get("mechanism") or {}).get("requires", []):
        if r["check"] in ("comm_share", "compute_share") and ("side" not in r or "min" not in r):
            raise ConfigError(f"{where}.mechanism.requires", f"check {r['check']!r} needs side (a or b) and min")
        if r.get("side") == "b" and not c.get("b"):
            raise ConfigError(f"{where}.mechanism.requires", f"check {r['check']!r} names side b; the claim has one side")
    if cmp in ("ratio", "ratio_vs_control", "difference") and not c.get("b"):
        raise ConfigError(f"{where}.b", f"compare {cmp!r} needs the second side b: {{method: ...}}")
    if cmp in ("value", "absolute") and "b" in c:
        raise ConfigError(f"{where}.b", f"compare {cmp!r} has one side (a); remove b or use ratio / difference")
    if cmp == "absolute":
        if "requires" not in c:
            raise ConfigError(f"{where}.requires", "compare 'absolute' needs requires: {workload: ..., nodes: [...]}, "
                                                   "the published setting a run must match")
        if (c.get("published") or {}).get("value") is None:
            raise ConfigError(f"{where}.published.value", "compare 'absolute' needs the published number")
    elif "requires" in c:
        raise ConfigError(f"{where}.requires", f"only compare 'absolute' takes requires (this is {cmp!r})")
    v = c["expect"]["value"]
    if c["expect"]["op"] == "between":
        if not (isinstance(v, list) and v[0] <= v[1]):
            raise ConfigError(f"{where}.expect.value", f"op 'between' needs [low, high] with low <= high, got {v!r}")
    elif isinstance(v, list):
        raise ConfigError(f"{where}.expect.value", f"op {c['expect']['op']!r} needs a number, got {v!r}")


def _registered_algorithms() -> set[str]:
    from impls.algorithms import load_all

    return set(load_all().names())


@dataclass
class Published:
    papers: dict[str, dict[str, Any]]
    claims: list[dict[str, Any]]
    numbers: pd.DataFrame
    sources: pd.DataFrame
    not_configured: dict[str, str]  # claim id -> why it cannot be evaluated with this config


class _KnownNames:
    """Names a claim may use although the running config lacks them: method keys and straggler
    settings of the shipped config (config/config.yaml) and registered algorithms.  Read only
    when a claim names something the running config does not have."""

    def __init__(self) -> None:
        self._shipped: dict[str, Any] | None = None
        self._algorithms: set[str] | None = None

    def shipped(self) -> dict[str, Any]:
        if self._shipped is None:
            self._shipped = load_yaml(SHIPPED_CONFIG) or {}
        return self._shipped

    def methods(self, experiment: str) -> set[str]:
        if self._algorithms is None:
            self._algorithms = _registered_algorithms()
        exp = (self.shipped().get("experiments") or {}).get(experiment) or {}
        return set(exp.get("methods") or {}) | self._algorithms

    def stragglers(self) -> set[str]:
        return set(self.shipped().get("stragglers") or {})


def _check_names(c: dict[str, Any], where: str, config: dict[str, Any], known: _KnownNames) -> str | None:
    """Method and straggler names of a claim whose experiment is in ``config``: None when all are
    configured, the "not comparable" reason when one is known but not in this config; a ConfigError
    when a name is known nowhere (a typo)."""
    e = c["experiment"]
    methods = list(config["experiments"][e]["methods"])
    stragglers = list(config.get("stragglers", {}))
    reason = None
    for side in ("a", "b"):
        sel = c.get(side)
        if not sel:
            continue
        m = sel["method"]
        if m not in methods:
            allowed = known.methods(e)
            if m not in allowed:
                raise ConfigError(f"{where}.{side}.method",
                                  f"unknown method {m!r}: not a method of experiment {e!r} ({', '.join(methods)}), "
                                  f"of the shipped config, nor a registered algorithm "
                                  f"({', '.join(sorted(allowed - set(methods)))})")
            reason = reason or f"method {m!r} not in this config (experiment {e!r} runs {', '.join(methods)})"
        st = sel.get("straggler")
        if st is not None and st not in stragglers:
            why = _check_straggler(st, f"{where}.{side}.straggler", stragglers, known)  # a typo raises
            reason = reason or why
    ctl = (c.get("control") or {}).get("straggler")
    for st in c.get("where", {}).get("stragglers", []) + ([ctl] if ctl else []):
        if st not in stragglers:
            why = _check_straggler(st, f"{where}.where.stragglers", stragglers, known)
            reason = reason or why
    return reason


def _check_straggler(st: str, key: str, stragglers: list[str], known: _KnownNames) -> str:
    if st not in known.stragglers():
        raise ConfigError(key, f"unknown straggler setting {st!r}; known: {', '.join(stragglers)}")
    return f"straggler setting {st!r} not in this config (it has {', '.join(stragglers)})"


def load(config: dict[str, Any], directory: Path = PUBLISHED_DIR) -> Published:
    """Read and validate the published data against ``config``; see the module docstring."""
    directory = Path(directory)
    cpath = directory / "claims.yaml"
    doc = loads_yaml(read_text(cpath), str(cpath))
    if doc is None:
        raise ConfigError(str(cpath), "empty file: expected papers: and claims: (restore it, e.g. git checkout)")
    _first_error(Draft202012Validator(_schema("claims.schema.yaml")), doc, str(cpath))
    papers = doc["papers"]
    sources = load_sources(directory / "sources.csv")
    numbers = load_numbers(directory / "numbers.csv", sources, papers)
    ids = set(numbers["id"])
    seen: dict[str, int] = {}
    not_configured: dict[str, str] = {}
    known = _KnownNames()
    exps = config.get("experiments", {})
    for i, c in enumerate(doc["claims"]):
        where = f"{cpath}: claims[{i}] ({c['id']})"
        if c["id"] in seen:
            raise ConfigError(f"{where}.id", f"duplicate claim id (first: claims[{seen[c['id']]}])")
        seen[c["id"]] = i
        _check_shape(c, where)
        if c["metric"] not in METRICS:
            raise ConfigError(f"{where}.metric", f"unknown metric {c['metric']!r}; known: {', '.join(METRICS)}")
        if c["paper"] not in papers:
            raise ConfigError(f"{where}.paper", f"unknown paper {c['paper']!r}; known: {', '.join(papers)}")
        for s in c["sources"]:
            if s not in ids:
                raise ConfigError(f"{where}.sources", f"{s!r} is no id of numbers.csv")
        if c["experiment"] not in exps:
            not_configured[c["id"]] = f"experiment {c['experiment']!r} not in config"
            continue
        reason = _check_names(c, where, config, known)
        if reason:
            not_configured[c["id"]] = reason
        # requires.workload names the published setting; a config without that workload makes an
        # absolute claim "not comparable", never an error.
    return Published(papers, doc["claims"], numbers, sources, not_configured)
