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
  :mod:`distrepro_wf.pipeline.yamlio`), a malformed row or claim (JSON schemas under
  ``workflows/schemas``: every column of the CSV files is typed, and a pattern's error says
  the allowed form in words, the schema's ``description``), a duplicate id or source key, a
  claim whose ``metric`` is not in :data:`METRICS`, whose ``paper`` is not in ``papers``, whose
  ``sources`` name no row of numbers.csv, a number whose ``source`` is not in sources.csv or
  whose ``page`` is not a paper, a number read in a source (``verified`` yes or secondary)
  whose ``source`` is ``-``, a ``range`` with low > high.
* Also an error: a claim number that is not finite (``expect.value: .nan`` passes the schema's
  ``type: number`` and made every setting "inconclusive"), a pass region the statistic can
  never reach (the metric's bounds in the catalogue, :func:`_check_reachable`), a pass region
  that excludes the claim's own ``published.value`` (:func:`_check_published_agrees`), and an
  ``experiment`` or ``control.experiment`` that neither ``config`` nor any known config file
  (:data:`CONFIG_GLOBS` under ``config/``) defines: a typo that made the claim "not comparable"
  for ever.
* Claim of an experiment that is in the pipeline config: a method it names that is no method
  key of that experiment in this config makes the claim "not comparable (method not in this
  config)", if the name is known: a method key of that experiment in the shipped config
  (``config/config.yaml``; a user's grid may leave methods out) or a registered algorithm
  (``impls.algorithms``).  Any other name is an error (a typo).  Likewise a straggler setting
  not in this config's ``stragglers`` but in the shipped config's makes it "not comparable";
  one in neither is an error.  ``requires.workload`` names the published setting: a config
  without it makes an absolute claim "not comparable".  A claim's ``tuned_on_seeds`` (the seeds
  its hyperparameters were chosen on) sharing a seed with the seeds a side runs is an error.
* Claim of an experiment that is not in the config but in another known config file (the
  default run lacks config/translation.yaml's): its method and straggler names are not
  checked; the claim is "not comparable (experiment not in config)" and
  :attr:`Published.warnings` names the file (one line per file, printed at pipeline start).
"""

from __future__ import annotations

import csv
import difflib
import functools
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import yaml
from jsonschema import Draft202012Validator

from impls.errors import ConfigError

from ..pipeline.catalogue import METRICS, bounds_text
from ..pipeline.config import WORKFLOW_DIR
from ..pipeline.yamlio import load_yaml, loads_yaml
from . import predict
from .expect import pass_region

SCHEMAS = WORKFLOW_DIR / "schemas"
PUBLISHED_DIR = WORKFLOW_DIR.parent / "config" / "published"
SHIPPED_CONFIG = WORKFLOW_DIR.parent / "config" / "config.yaml"
#: the known config files: an experiment a claim names must be defined in one of them (or in the
#: config being run)
CONFIG_DIR = WORKFLOW_DIR.parent / "config"
CONFIG_GLOBS = ("*.yaml", "full/*.yaml")
#: published rows a platform parameter is fitted on (``sim_paper_rows.csv`` role ``fitted``,
#: scripts/bench_sim_paper_rows.py, :mod:`distrepro_wf.bench.simbench`): a simulated claim that sets
#: this parameter never shows a row of it as its published value (:func:`distrepro_wf.claims.evaluate.label_row`)
FITTED_ROWS = {"slowmo_t2a_ar_tpi": "allreduce_efficiency", "sgp_v1_time_ar_n32": "allreduce_efficiency",
               # the every-message bandwidth efficiency, the platform's msg_efficiency (ethernet_10g's nominal 0.456;
               # simbench.with_msg_efficiency)
               "slowmo_t2a_sgp_tpi": "msg_efficiency"}


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
    elif e.validator == "pattern" and e.schema.get("description"):  # the form in words, not the regex
        msg = f"{e.instance!r} does not match the allowed form: {e.schema['description']}"
    elif e.schema.get("description") and e.validator in ("minLength", "maxLength"):
        msg = f"{e.message}; allowed: {e.schema['description']}"
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
        _first_error(validator, row, f"{path}:{line} ({row.get('key', '?')})")
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
        if row["source"] == "-" and row["verified"] in ("yes", "secondary"):
            raise ConfigError(f"{where}.source", f"'-' (no source read) with verified {row['verified']!r}: a number "
                                                 "read somewhere names that source (a key of sources.csv); else "
                                                 "verified is UNVERIFIED or NOT RETRIEVED")
        if row["relation"] == "range" and row["value"]:
            lo, hi = (float(x) for x in row["value"].split(".."))
            if not lo <= hi:
                raise ConfigError(f"{where}.value", f"range {row['value']!r} has low > high; write lo..hi")
    _unique(rows, "id", path, "number id")
    return pd.DataFrame([r for _, r in rows], columns=list(schema["properties"]))


def _check_shape(c: dict[str, Any], where: str) -> None:
    """What the schema leaves to us: which keys go with which comparison."""
    cmp = c["compare"]
    if cmp == "ratio_vs_control" and not c.get("control"):
        raise ConfigError(f"{where}.control", "compare 'ratio_vs_control' needs the control setting: "
                                              "control: {experiment: ..., straggler: ..., nodes: ...}")
    for r in (c.get("mechanism") or {}).get("requires", []):
        share = r["check"] in ("comm_share", "compute_share")
        if share and ("side" not in r or ("min" in r) == bool(r.get("derived"))):
            raise ConfigError(f"{where}.mechanism.requires", f"check {r['check']!r} needs side (a, b or both) and "
                                                             "either min (with its source, if any) or derived: true")
        if ("source" in r or "derived" in r) and not share:
            raise ConfigError(f"{where}.mechanism.requires", f"check {r['check']!r} takes no source or derived: "
                                                             "those are for comm_share and compute_share thresholds")
        if r.get("derived") and r["check"] != "comm_share":
            raise ConfigError(f"{where}.mechanism.requires", f"check {r['check']!r} cannot be derived: only "
                                                             "comm_share has a derivation (1 - 1/s)")
        if r.get("derived") and "source" in r:
            raise ConfigError(f"{where}.mechanism.requires", "derived: true or source, not both")
        if r.get("side") in ("b", "both") and not c.get("b"):
            raise ConfigError(f"{where}.mechanism.requires",
                              f"check {r['check']!r} names side {r['side']}; the claim has one side")
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


def _check_derived(c: dict[str, Any], where: str) -> None:
    """A ``derived`` share gate needs a speed-up of a step time to derive its threshold from."""
    from .mechanisms import derived_min  # noqa: PLC0415

    if any(r.get("derived") for r in (c.get("mechanism") or {}).get("requires", [])) and derived_min(c) is None:
        raise ConfigError(f"{where}.mechanism.requires", "derived: true needs a ratio of step or epoch times "
                                                         "(time_per_epoch_s, time_per_step_s) that states a speed-up: "
                                                         "a pass region away from 1 or a published value; give min "
                                                         "instead")


def _check_finite(node: Any, key: str) -> None:
    """Every number of a claim is finite: YAML's ``.nan`` passes the schema's ``type: number`` and
    would make every setting "inconclusive" (``.inf`` as a tolerance: every setting "reproduced")."""
    if isinstance(node, float) and not math.isfinite(node):
        raise ConfigError(key, f"{node!r} is not allowed: a claim's numbers must be finite (write a number)")
    if isinstance(node, dict):
        for k, v in node.items():
            _check_finite(v, f"{key}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_finite(v, f"{key}[{i}]")


def _check_reachable(c: dict[str, Any], where: str) -> None:
    """A claim whose pass region lies outside every value its statistic can take can never be
    reproduced: the metric's bounds come from the catalogue (:data:`METRICS`, in the display unit:
    accuracies in [0, 100] %).  ``value``/``absolute``: the statistic is the metric; ``difference``
    of a metric bounded on both sides: within +-(high - low); a ratio of a non-negative metric: > 0."""
    m = METRICS[c["metric"]]
    lo, hi = m.display_bounds()
    cmp = c["compare"]
    if cmp in ("value", "absolute"):
        what, s_lo, s_hi = f"{c['metric']} is always {bounds_text((lo, hi))}", lo, hi
    elif cmp == "difference" and lo is not None and hi is not None:
        what, s_lo, s_hi = f"a difference of {c['metric']} is always in [{lo - hi:g}, {hi - lo:g}]", lo - hi, hi - lo
    elif cmp in ("ratio", "ratio_vs_control") and lo is not None and lo >= 0:
        what, s_lo, s_hi = f"a ratio of {c['metric']} (never negative) is always > 0", 0.0, None
    else:
        return

    r_lo, lo_closed, r_hi, hi_closed = pass_region(c["expect"])
    open_zero = cmp.startswith("ratio")  # a ratio is > 0, never 0 (a non-positive side is undefined)
    below = s_lo is not None and (r_hi < s_lo or (r_hi == s_lo and (not hi_closed or open_zero)))
    above = s_hi is not None and (r_lo > s_hi or (r_lo == s_hi and not lo_closed))
    if below or above:
        unit = f" ({m.unit})" if m.unit else ""
        raise ConfigError(f"{where}.expect.value", f"can never be reproduced: {what}{unit} (the metric catalogue, "
                                                   f"distrepro_wf.pipeline.catalogue.METRICS), and the claim expects "
                                                   f"{c['expect']['op']} {c['expect']['value']!r} with tolerance "
                                                   f"{c['expect']['tolerance']!r}")


def _check_published_agrees(c: dict[str, Any], where: str) -> None:
    """A claim's ``expect`` must hold for its own published number: ``published.value`` is the
    published statistic in the claim's unit (the schema), so a pass region that excludes it makes
    the report call "reproduced" a statement its cited number refutes (``value`` 0.32 typed 3.2
    under ``expect: < 1``, or ``<`` flipped to ``>``).  A claim without a published number
    (``value: null``, a derived or qualitative statement) is not checked."""
    v = (c.get("published") or {}).get("value")
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return
    from .expect import _above, _below  # noqa: PLC0415

    region = pass_region(c["expect"])
    if _below(v, region) or _above(v, region):
        e = c["expect"]
        raise ConfigError(f"{where}.expect", f"contradicts the claim's own published number: published.value "
                                             f"{v!r} fails expect {e['op']} {e['value']!r} (tolerance "
                                             f"{e['tolerance']!r}); fix the expect or the published value")


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
    #: what the pipeline prints at start: claims whose experiment only another config file defines
    warnings: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=64)
def _experiments_in(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The experiment names of a config file (the keys of its ``experiments:``), once per version
    of the file (mtime and size are the cache key).  Read as a YAML node tree, never constructed:
    fast (libyaml where built), and an alias is a reference, never expanded."""
    del mtime_ns, size  # the cache key only
    text = Path(path).read_bytes().decode("utf-8")
    root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(root, yaml.MappingNode):
        return ()
    for k, v in root.value:
        if isinstance(k, yaml.ScalarNode) and k.value == "experiments" and isinstance(v, yaml.MappingNode):
            return tuple(str(e.value) for e, _ in v.value if isinstance(e, yaml.ScalarNode))
    return ()


class _KnownNames:
    """Names a claim may use although the running config lacks them: method keys and straggler
    settings of the shipped config (config/config.yaml) and registered algorithms.  Read only
    when a claim names something the running config does not have."""

    def __init__(self, config_dir: Path = CONFIG_DIR) -> None:
        self._shipped: dict[str, Any] | None = None
        self._algorithms: set[str] | None = None
        self._config_dir = Path(config_dir)
        self._defined: dict[str, list[str]] | None = None
        self._unreadable: dict[str, str] = {}

    def defined(self) -> dict[str, list[str]]:
        """experiment -> the known config files (config/*.yaml, config/full/*.yaml) defining it.  A
        file that cannot be read is noted (named if a claim's experiment is then found nowhere):
        it is the run's own config's business to be readable, not the claims'."""
        if self._defined is None:
            self._defined = {}
            root = self._config_dir.parent
            for pattern in CONFIG_GLOBS:
                for f in sorted(self._config_dir.glob(pattern)):
                    name = str(f.relative_to(root)) if f.is_relative_to(root) else str(f)
                    try:
                        st = f.stat()
                        exps = _experiments_in(str(f), st.st_mtime_ns, st.st_size)
                    except (OSError, ValueError, yaml.YAMLError) as err:
                        self._unreadable[name] = f"{name}: {type(err).__name__}: {err}".splitlines()[0]
                        continue
                    for e in exps:
                        self._defined.setdefault(e, []).append(name)
        return self._defined

    def experiment(self, e: str, key: str, config: dict[str, Any]) -> list[str]:
        """[] when ``e`` is an experiment of ``config``; else the known config files that define it
        (the claim is "not comparable" with this config, a warning names them); a ConfigError at
        ``key`` when no known file does (a typo, or a config file not under config/)."""
        if e in (config.get("experiments") or {}):
            return []
        files = self.defined().get(e)
        if files:
            return files
        names = sorted(set(self.defined()) | set(config.get("experiments") or {}))
        close = difflib.get_close_matches(e, names, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        unread = (f"; not readable, so not searched: {'; '.join(self._unreadable.values())}"
                  if self._unreadable else "")
        raise ConfigError(key, f"unknown experiment {e!r}{hint}: neither the config being run nor any known config "
                               f"file ({', '.join(f'{self._config_dir.name}/{g}' for g in CONFIG_GLOBS)}) defines "
                               f"it; known: {', '.join(names)}{unread}")

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


def _check_tuning_seeds(c: dict[str, Any], where: str, config: dict[str, Any]) -> None:
    """``tuned_on_seeds`` must be disjoint from every seed a side of the claim runs in ``config``:
    hyperparameters chosen on the scored seeds flatter the method they were tuned for."""
    tuned = set(c.get("tuned_on_seeds") or ())
    if not tuned:
        return
    from ..pipeline.config import expand

    runs = expand(config, [c["experiment"]])
    for side in ("a", "b"):
        sel = c.get(side)
        if not sel:
            continue
        scored = {r.seed for r in runs if r.method == sel["method"]
                  and ("nodes" not in sel or r.nodes == sel["nodes"])}
        both = sorted(tuned & scored)
        if both:
            raise ConfigError(f"{where}.tuned_on_seeds",
                              f"seed(s) {', '.join(map(str, both))} tuned the hyperparameters and are scored too "
                              f"({sel['method']} runs seeds {', '.join(map(str, sorted(scored)))} in experiment "
                              f"{c['experiment']!r}); tune on other seeds, or score on others")


def _check_straggler(st: str, key: str, stragglers: list[str], known: _KnownNames) -> str:
    if st not in known.stragglers():
        raise ConfigError(key, f"unknown straggler setting {st!r}; known: {', '.join(stragglers)}")
    return f"straggler setting {st!r} not in this config (it has {', '.join(stragglers)})"


def run_command(configfiles: list[str] | tuple[str, ...], target: str = "") -> str:
    """The command that runs the config files ``configfiles`` (and makes ``target``; default: the report)."""
    return " ".join(["snakemake --cores 2", *(f"--configfile {f}" for f in configfiles), target]).strip()


def not_in_config(experiment: str, files: list[str]) -> str:
    """The reason of a claim whose experiment only other config files define: the file, and the
    command that runs it (its report has the claim's rows)."""
    return (f"experiment {experiment!r} is not in this run's config; it is defined in {' and '.join(files)}: "
            f"run `{run_command(files[:1])}`")


def defining_files(config_dir: Path = CONFIG_DIR) -> dict[str, list[str]]:
    """experiment -> the known config files (config/*.yaml, config/full/*.yaml) that define it."""
    return _KnownNames(config_dir).defined()


def load(config: dict[str, Any], directory: Path = PUBLISHED_DIR, config_dir: Path = CONFIG_DIR) -> Published:
    """Read and validate the published data against ``config``; see the module docstring.
    ``config_dir``: where the known config files are (``config/``)."""
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
    known = _KnownNames(config_dir)
    elsewhere: dict[tuple[str, ...], list[str]] = {}  # files -> claims whose experiment only they define
    for i, c in enumerate(doc["claims"]):
        where = f"{cpath}: claims[{i}] ({c['id']})"
        if c["id"] in seen:
            raise ConfigError(f"{where}.id", f"duplicate claim id (first: claims[{seen[c['id']]}])")
        seen[c["id"]] = i
        _check_finite(c, where)
        _check_shape(c, where)
        if c["metric"] not in METRICS:
            raise ConfigError(f"{where}.metric", f"unknown metric {c['metric']!r}; known: {', '.join(METRICS)}")
        _check_reachable(c, where)
        _check_derived(c, where)
        predict.check(c, where)
        _check_published_agrees(c, where)
        if c["paper"] not in papers:
            raise ConfigError(f"{where}.paper", f"unknown paper {c['paper']!r}; known: {', '.join(papers)}")
        for s in c["sources"]:
            if s not in ids:
                raise ConfigError(f"{where}.sources", f"{s!r} is no id of numbers.csv")
        files = known.experiment(c["experiment"], f"{where}.experiment", config)
        ctl = (c.get("control") or {}).get("experiment")
        ctl_files = known.experiment(ctl, f"{where}.control.experiment", config) if ctl else []
        for f in (files, ctl_files):
            if f:
                elsewhere.setdefault(tuple(f), []).append(c["id"])
        if files:
            not_configured[c["id"]] = not_in_config(c["experiment"], files)
            continue
        reason = _check_names(c, where, config, known)
        if reason:
            not_configured[c["id"]] = reason
        else:
            _check_tuning_seeds(c, where, config)
        # requires.workload names the published setting; a config without that workload makes an
        # absolute claim "not comparable", never an error.
    warnings = [f"claim(s) {', '.join(dict.fromkeys(cids))} name experiment(s) defined only in "
                f"{' and '.join(files)}, not in this config: not comparable in this run (run with --configfile "
                f"{files[0]} to evaluate them)" for files, cids in elsewhere.items()]
    return Published(papers, doc["claims"], numbers, sources, not_configured, warnings)
