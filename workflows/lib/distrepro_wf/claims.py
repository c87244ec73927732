"""Published numbers, the claims derived from them, and their evaluation on our results.

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

Statuses (:func:`evaluate`), per claim and setting (nodes x straggler), from completed runs
only (``runs.csv``; a failed run, a diverged one included, is only in ``failed.csv``):

* ``reproduced``: the statistic over the seeds' means satisfies ``expect`` (with its
  tolerance); when some runs of the setting failed, it is judged on the completed ones and
  the reason says how many failed and why;
* ``not reproduced``: it does not;
* ``not comparable``: the experiment, method or setting was not run, every run failed
  ("every run failed: ... (seed 1: diverged: ...)"), no run completed, the metric is missing
  (e.g. target accuracy never reached), a ratio's denominator mean is 0, or, for an absolute
  number, the run's workload / node count differs from the published setting.  Missing
  results are never "reproduced".

A claim's overall status: "not reproduced" if any setting is, "reproduced" if every
comparable setting is (and there is one), else "not comparable".  Confidence interval:
percentile bootstrap over seeds (paired by seed when both sides ran the same seeds),
:data:`N_BOOT` resamples with a fixed generator, so the report is deterministic; none with
one seed a side, or when a resample's ratio divides by zero (then ``robust`` is "no");
``robust`` says whether the whole interval satisfies ``expect``.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
import yaml
from jsonschema import Draft202012Validator

from impls.errors import ConfigError

from .config import WORKFLOW_DIR, expand
from .yamlio import load_yaml, loads_yaml

SCHEMAS = WORKFLOW_DIR / "schemas"
PUBLISHED_DIR = WORKFLOW_DIR.parent / "config" / "published"
SHIPPED_CONFIG = WORKFLOW_DIR.parent / "config" / "config.yaml"
N_BOOT = 2000
CI_LEVEL = 0.95
REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"


@dataclass(frozen=True)
class Metric:
    label: str
    unit: str
    column: str
    scale: float = 1.0  # display value = column value * scale


#: The metrics a claim may name: a column of results/tables/<experiment>/runs.csv
#: (see distrepro_wf.collect.summarize) shown in ``unit`` after multiplying by ``scale``.
METRICS: dict[str, Metric] = {
    "final_acc": Metric("final validation top-1", "%", "final_acc", 100.0),
    "best_acc": Metric("best validation top-1", "%", "best_acc", 100.0),
    "final_train_loss": Metric("final training loss", "", "final_train_loss"),
    "final_val_loss": Metric("final validation loss (all classes)", "", "final_val_loss"),
    "time_per_epoch_s": Metric("time per epoch", "s", "time_per_epoch_s"),
    "time_per_step_s": Metric("time per step", "s", "time_per_step_s"),
    "wall_s": Metric("wall-clock time of the run", "s", "wall_s"),
    "wall_h": Metric("wall-clock time of the run", "h", "wall_s", 1 / 3600),
    "bytes_sent_per_epoch": Metric("bytes sent per epoch per rank", "B", "bytes_sent_per_epoch"),
    "bytes_per_step": Metric("bytes sent per step per rank", "B", "bytes_per_step"),
    "comm_s_per_epoch": Metric("communication time per epoch", "s", "comm_s_per_epoch"),
    "straggler_delay_s_per_epoch": Metric("straggler delay per epoch", "s", "straggler_delay_s_per_epoch"),
    "time_to_target_s": Metric("wall-clock time to the target accuracy", "s", "time_to_target_s"),
    "epochs_to_target": Metric("epochs to the target accuracy", "epochs", "epochs_to_target"),
    "bytes_to_target": Metric("bytes sent per rank to the target accuracy", "B", "bytes_to_target"),
    "final_consensus_distance": Metric("final consensus distance", "", "final_consensus_distance"),
}


# ------------------------------------------------------------------ loading and validation


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
    if cmp in ("ratio", "difference") and not c.get("b"):
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
    for st in c.get("where", {}).get("stragglers", []):
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


# ------------------------------------------------------------------ evaluation


def _passes(m: float, expect: dict[str, Any]) -> bool:
    op, v, tol = expect["op"], expect["value"], expect["tolerance"]
    if op == "<":
        return m < v + tol
    if op == "<=":
        return m <= v + tol
    if op == ">":
        return m > v - tol
    if op == ">=":
        return m >= v - tol
    if op == "between":
        return v[0] - tol <= m <= v[1] + tol
    return abs(m - v) <= tol  # within


def expect_text(expect: dict[str, Any], compare: str) -> str:
    op, v, tol = expect["op"], expect["value"], expect["tolerance"]
    what = {"ratio": "a/b", "difference": "a-b", "value": "a", "absolute": "a"}[compare]
    t = f" (tolerance {tol:g})" if tol else ""
    if op == "between":
        return f"{what} in [{v[0]:g}, {v[1]:g}]{t}"
    if op == "within":
        return f"|{what} - {v:g}| <= {tol:g}"
    return f"{what} {op} {v:g}{t}"


def _stat(compare: str, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Statistic on the last axis' means (works on bootstrap matrices); a ratio whose
    denominator mean is 0 is inf or nan (0/0), never a warning."""
    ma = a.mean(axis=-1)
    if compare == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return ma / b.mean(axis=-1)
    if compare == "difference":
        return ma - b.mean(axis=-1)
    return ma


def bootstrap_ci(compare: str, a: pd.Series, b: pd.Series | None, n_boot: int = N_BOOT,
                 level: float = CI_LEVEL, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap over seeds; ``a``/``b`` are indexed by seed.  Paired resampling when
    both sides ran the same seeds.  NaN where fewer than two seeds, and where the statistic is
    undefined in some resample (a ratio whose resampled denominator mean is 0): the interval
    is then unbounded, and no percentile of the defined resamples may stand for it."""
    rng = np.random.default_rng(seed)
    if len(a) < 2 and (b is None or len(b) < 2):
        return math.nan, math.nan
    if b is not None and sorted(a.index) == sorted(b.index):
        seeds = sorted(a.index)
        av, bv = a.loc[seeds].to_numpy(float), b.loc[seeds].to_numpy(float)
        idx = rng.integers(0, len(seeds), size=(n_boot, len(seeds)))
        stats = _stat(compare, av[idx], bv[idx])
    else:
        av = a.to_numpy(float)
        ia = rng.integers(0, len(av), size=(n_boot, len(av)))
        if b is None:
            stats = _stat(compare, av[ia], None)
        else:
            bv = b.to_numpy(float)
            ib = rng.integers(0, len(bv), size=(n_boot, len(bv)))
            stats = _stat(compare, av[ia], bv[ib])
    if not np.isfinite(stats).all():
        return math.nan, math.nan
    lo, hi = np.percentile(stats, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def _grid(config: dict[str, Any], experiment: str) -> pd.DataFrame:
    runs = expand(config, [experiment])
    return pd.DataFrame([r._asdict() for r in runs], columns=["experiment", "method", "nodes", "straggler", "seed"])


def _settings(c: dict[str, Any], grid: pd.DataFrame) -> list[tuple[int, str]]:
    a = c["a"]
    g = grid[grid["method"] == a["method"]]
    if "nodes" in a:
        g = g[g["nodes"] == a["nodes"]]
    if "straggler" in a:
        g = g[g["straggler"] == a["straggler"]]
    w = c.get("where", {})
    if isinstance(w.get("nodes"), list):
        g = g[g["nodes"].isin(w["nodes"])]
    elif isinstance(w.get("nodes"), dict):
        g = g[g["nodes"] >= w["nodes"]["min"]]
    if "stragglers" in w:
        g = g[g["straggler"].isin(w["stragglers"])]
    return sorted({(int(n), str(s)) for n, s in zip(g["nodes"], g["straggler"])}, key=lambda t: (t[0], t[1] != "none", t[1]))


def _where_text(c: dict[str, Any]) -> str:
    w = c.get("where", {})
    parts = []
    if isinstance(w.get("nodes"), list):
        parts.append(f"nodes {w['nodes']}")
    elif isinstance(w.get("nodes"), dict):
        parts.append(f"nodes >= {w['nodes']['min']}")
    if "stragglers" in w:
        parts.append(f"stragglers {w['stragglers']}")
    return ", ".join(parts) or "any setting"


def _select(table: pd.DataFrame | None, sel: dict[str, Any], nodes: int, straggler: str) -> pd.DataFrame:
    """Rows of a runs/failed/grid table for one side of a claim at one setting."""
    if table is None or table.empty:
        return pd.DataFrame(columns=["method", "nodes", "straggler", "seed"])
    return table[(table["method"] == sel["method"]) & (table["nodes"] == sel.get("nodes", nodes))
                 & (table["straggler"] == sel.get("straggler", straggler))]


def _failed_text(failed: pd.DataFrame) -> str:
    """'2 failed (seed 1: diverged: rank 0, step 3 ...; +1 more)': the count and the first reason."""
    f = failed.sort_values("seed")
    first = f.iloc[0]
    reason = first["reason"] if isinstance(first.get("reason"), str) and first["reason"] else "no reason recorded"
    more = f"; +{len(f) - 1} more" if len(f) > 1 else ""
    return f"{len(f)} failed (seed {int(first['seed'])}: {reason}{more})"


def _side(runs: pd.DataFrame, failed: pd.DataFrame | None, grid: pd.DataFrame, sel: dict[str, Any], nodes: int,
          straggler: str, metric: Metric) -> tuple[pd.Series, str, str]:
    """One side of a claim at one setting: ``(values by seed, problem, note)``.

    Values come from completed runs only (runs.csv; a failed run, diverged ones included, is
    only in failed.csv).  ``problem`` (the side is not comparable) when no completed run has the
    metric; ``note`` says how many runs failed when the side is judged on the others."""
    m, n, st = sel["method"], sel.get("nodes", nodes), sel.get("straggler", straggler)
    ok = _select(runs, sel, nodes, straggler)
    values = (pd.Series(dtype=float) if metric.column not in ok else
              (ok.set_index("seed")[metric.column].astype(float) * metric.scale).dropna())
    bad = _select(failed, sel, nodes, straggler)
    failed_text = _failed_text(bad) if len(bad) else ""
    if len(values):
        return values, "", f"judged on {len(values)} completed run(s) of {m}; {failed_text}" if failed_text else ""
    if len(ok):
        problem = f"{metric.column} missing for {m} (e.g. the target accuracy was never reached)"
        return values, problem + (f"; {failed_text}" if failed_text else ""), ""
    if failed_text:
        configured = set(_select(grid, sel, nodes, straggler)["seed"])
        if configured <= set(bad["seed"]):
            return values, f"every run failed: {m} at n={n}, {st}: {failed_text}", ""
        return values, f"no completed run of {m} at n={n}, {st}: {failed_text}, the others not collected", ""
    return values, f"no completed run of {m} at n={n}, {st}", ""


COLUMNS = ["claim", "paper", "experiment", "statement", "metric", "unit", "compare", "nodes", "straggler", "status",
           "reason", "measured", "ci_low", "ci_high", "robust", "seeds_a", "seeds_b", "published", "gap", "expected",
           "published_note", "sources"]


def _row(c: dict[str, Any], status: str, reason: str, nodes: Any = None, straggler: Any = None, **kw: Any) -> dict:
    m = METRICS[c["metric"]]
    unit = "x" if c["compare"] == "ratio" else (("pt" if m.unit == "%" else m.unit) if c["compare"] == "difference"
                                              else m.unit)
    pub = c.get("published", {})
    row = {"claim": c["id"], "paper": c["paper"], "experiment": c["experiment"], "statement": c["statement"],
           "metric": c["metric"], "unit": unit, "compare": c["compare"], "nodes": nodes, "straggler": straggler,
           "status": status, "reason": reason, "measured": math.nan, "ci_low": math.nan, "ci_high": math.nan,
           "robust": "", "seeds_a": 0, "seeds_b": 0, "published": pub.get("value"), "gap": math.nan,
           "expected": expect_text(c["expect"], c["compare"]), "published_note": pub.get("note", ""),
           "sources": " ".join(c["sources"])}
    row.update(kw)
    return row


def evaluate_claim(c: dict[str, Any], config: dict[str, Any], runs: dict[str, pd.DataFrame],
                   failed: dict[str, pd.DataFrame], not_configured: dict[str, str]) -> list[dict[str, Any]]:
    if c["id"] in not_configured:
        return [_row(c, NOT_COMPARABLE, not_configured[c["id"]])]
    e = c["experiment"]
    exp = config["experiments"][e]
    if c["compare"] == "absolute":
        req = c["requires"]
        if exp["workload"] != req["workload"]:
            return [_row(c, NOT_COMPARABLE, f"reduced scale: experiment {e!r} runs workload {exp['workload']!r}, the "
                                            f"published number is for {req['workload']!r}"
                                            + (f" at {req['nodes']} nodes" if "nodes" in req else ""))]
    grid = _grid(config, e)
    settings = _settings(c, grid)
    if c["compare"] == "absolute" and "nodes" in c["requires"]:
        settings = [s for s in settings if s[0] in c["requires"]["nodes"]]
    if not settings:
        ran = grid[grid["method"] == c["a"]["method"]]
        return [_row(c, NOT_COMPARABLE, f"setting not run: the claim needs {_where_text(c)}"
                                        + (f", nodes {c['requires']['nodes']}" if c.get("requires", {}).get("nodes")
                                           else "")
                                        + f"; the config runs {c['a']['method']} at nodes "
                                          f"{sorted(set(ran['nodes']))}, stragglers {sorted(set(ran['straggler']))}")]
    metric = METRICS[c["metric"]]
    table = runs.get(e, pd.DataFrame())
    out = []
    for nodes, straggler in settings:
        sides = {"a": c["a"]} | ({"b": c["b"]} if "b" in c else {})
        vals, problems, notes = {}, [], []
        for side, sel in sides.items():
            vals[side], problem, note = _side(table, failed.get(e), grid, sel, nodes, straggler, metric)
            problems += [problem] if problem else []
            notes += [note] if note else []
        seeds = {"seeds_a": len(vals["a"]), "seeds_b": len(vals.get("b", ()))}
        if problems:
            out.append(_row(c, NOT_COMPARABLE, "; ".join(problems + notes), nodes, straggler, **seeds))
            continue
        a, b = vals["a"], vals.get("b")
        measured = float(_stat(c["compare"], a.to_numpy(float), None if b is None else b.to_numpy(float)))
        if not math.isfinite(measured):
            out.append(_row(c, NOT_COMPARABLE, "; ".join(["statistic undefined (division by zero)"] + notes),
                            nodes, straggler, **seeds))
            continue
        lo, hi = bootstrap_ci(c["compare"], a, b)
        ok = _passes(measured, c["expect"])
        if math.isnan(lo):
            # one seed a side: no interval; a resample dividing by zero: an unbounded one
            robust = "" if max(len(a), len(b) if b is not None else 0) < 2 else "no"
            if robust:
                notes.append("no confidence interval: the denominator's mean is 0 in some bootstrap resamples")
        else:
            robust = "yes" if _passes(lo, c["expect"]) and _passes(hi, c["expect"]) else "no"
        pub = (c.get("published") or {}).get("value")
        out.append(_row(c, REPRODUCED if ok else NOT_REPRODUCED, "; ".join(notes), nodes, straggler,
                        measured=measured, ci_low=lo, ci_high=hi, robust=robust,
                        gap=measured - pub if pub is not None else math.nan, **seeds))
    return out


def evaluate(published: Published, config: dict[str, Any], runs: dict[str, pd.DataFrame],
             failed: dict[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """One row per (claim, setting); see the module docstring for the statuses."""
    rows = []
    for c in published.claims:
        rows.extend(evaluate_claim(c, config, runs, failed or {}, published.not_configured))
    return pd.DataFrame(rows, columns=COLUMNS)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: its overall status and how many settings had each status."""
    rows = []
    for cid, g in results.groupby("claim", sort=False):
        st = set(g["status"])
        overall = (NOT_REPRODUCED if NOT_REPRODUCED in st else REPRODUCED if REPRODUCED in st else NOT_COMPARABLE)
        rows.append({"claim": cid, "paper": g["paper"].iloc[0], "experiment": g["experiment"].iloc[0],
                     "statement": g["statement"].iloc[0], "status": overall,
                     "settings": len(g), "reproduced": int((g["status"] == REPRODUCED).sum()),
                     "not_reproduced": int((g["status"] == NOT_REPRODUCED).sum()),
                     "not_comparable": int((g["status"] == NOT_COMPARABLE).sum()),
                     "reason": "; ".join(dict.fromkeys(r for r in g["reason"] if isinstance(r, str) and r))})
    return pd.DataFrame(rows, columns=["claim", "paper", "experiment", "statement", "status", "settings", "reproduced",
                                       "not_reproduced", "not_comparable", "reason"])


def paper_of_experiment(papers: dict[str, dict[str, Any]], paper: str | None) -> str | None:
    """Paper id whose title or alias equals an experiment's ``paper:`` string (None: no paper)."""
    if not paper:
        return None
    for pid, p in papers.items():
        if paper == p["title"] or paper in p.get("aliases", []):
            return pid
    return None


def page_of_experiment(papers: dict[str, dict[str, Any]], config: dict[str, Any], experiment: str,
                       harness: str = "harness") -> str:
    """Report page of an experiment: the paper its ``paper:`` names, else the harness page."""
    return paper_of_experiment(papers, config["experiments"][experiment].get("paper")) or harness


def read_tables(tables_dir: Path, experiments: Iterable[str]) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    runs, failed = {}, {}
    for e in experiments:
        d = Path(tables_dir) / e
        runs[e] = pd.read_csv(d / "runs.csv") if (d / "runs.csv").exists() else pd.DataFrame()
        failed[e] = pd.read_csv(d / "failed.csv") if (d / "failed.csv").exists() else pd.DataFrame()
    return runs, failed
