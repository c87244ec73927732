"""The house's structure, checked on the source (milliseconds, nothing runs):

* no import cycle among the modules of ``impls/`` (every ``import`` statement counts, the
  ones inside functions too: a lazy import is still a dependency), nor among those of the
  workflow library ``workflows/lib/distrepro_wf``, whose packages are layers that import only
  downward (:data:`WORKFLOW_LAYERS`: ``pipeline`` < ``claims`` < ``plan`` < ``report`` < ``bench``);
* ``impls/`` (the library) never imports ``workflows/`` (``distrepro_wf``);
* no registered backend name (``impls.backends.BACKENDS``: ``torch``, ``simgrid``), nor a
  value a backend serves (its spec's ``run_values``: the torch process groups ``gloo``,
  ``nccl`` and the request ``auto``), is compared (``==``, ``!=``, ``in``) outside
  ``impls/backends/``: callers ask the backend's spec (``backend_of(value)``,
  ``is_simulated(value)``, ``spec.process_group(value)``, ``spec.needs_gpu(value)``,
  ``backend.spec``) instead;
* no registered algorithm name (``impls.algorithms.ALGORITHMS``, and the closed-form names an
  algorithm declares, ``closed_form_variants``) is compared (``==``, ``!=``, ``in``), gathered in
  a name set, or made the key of a dispatch table outside ``impls/algorithms/``: what the
  workflow needs of a method (``sync_collective``, ``timing_dependent``, ``step_cost``,
  ``closed_form_options``) is declared by its class and asked;
* the workflow never spells the entry module of a simulated run (``impls.sim``): it asks the
  backend's spec (``backend_of(cfg["backend"]).entry_module``, ``one_process``);
* the runtime's loops (``impls/runtime/``) branch on no step-schedule capability flag
  (``barrier_free``, ``per_epoch_collectives``, or any boolean a schedule class declares):
  the schedule owns its epoch-end policy (``impls.runtime.steps``), and no function of the
  run's modules is longer than one screen (60 lines).

Each check also runs on a planted violation, so a check that cannot fail fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from impls.algorithms import ALGORITHMS
from impls.backends import BACKENDS

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("impls", "workflows/lib", "workflows/scripts")  # where a backend name must not be compared


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, mod: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``tree`` (module ``mod``) imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_package else mod.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:  # ``from pkg import sub``: the submodule, else the package
                out.add(f"{target}.{a.name}" if f"{target}.{a.name}" in known else target)
    return out & known


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """``{module: modules it imports}`` of ``{module: (source, is_package)}``.  A module's import of
    its own package (``from . import Backend`` in ``impls/backends/sim.py``, an entry
    registering itself in its package's registry) is not an edge: Python runs the package's
    ``__init__`` before any of its modules anyway, and the package imports its entries to
    fill its registry, the house's registry pattern."""
    known = set(sources)
    return {m: {t for t in imported(ast.parse(src), m, pkg, known) if t != m and not m.startswith(t + ".")}
            for m, (src, pkg) in sources.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: one path ``a -> b -> ... -> a`` per strongly connected
    component of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(comp)
    return [_path(graph, comp) for comp in comps]


def _path(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """One cycle through a component: from its first module back to it (breadth first)."""
    start = min(comp)
    prev: dict[str, str] = {}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & comp):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w not in prev:
                prev[w] = v
                todo.append(w)
    return sorted(comp)


def impls_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p, ROOT): (p.read_text(), p.name == "__init__.py") for p in (ROOT / "impls").rglob("*.py")}


def test_no_import_cycle_among_impls_modules():
    graph = import_graph(impls_sources())
    assert len(graph) > 80 and "impls.algorithms" in graph["impls.config.runconfig"]  # the scan sees the imports
    found = cycles(graph)
    assert found == [], "import cycles in impls/: " + "; ".join(" -> ".join(c) for c in found)


def test_the_cycle_check_finds_a_planted_cycle():
    planted = {"p": ("", True), "p.a": ("def f():\n    from .b import x\n", False),
               "p.b": ("from . import c\n", False), "p.c": ("import p.a\nfrom . import Registry\n", False)}
    assert cycles(import_graph(planted)) == [["p.a", "p.b", "p.c", "p.a"]]


WORKFLOW_LIB = ROOT / "workflows" / "lib"
#: the workflow library's packages, bottom first: a module imports its own package or one below,
#: never one above (function-level imports counted).  ``pipeline``: config, runs, tables;
#: ``claims``: verdicts on the tables; ``report``: pages and figures of both; ``bench``: the
#: benchmarks, which run the pipeline, reuse the claims' closed forms and draw with the report's plots.
WORKFLOW_LAYERS = ("pipeline", "claims", "plan", "report", "bench")
#: known upward imports still to remove, each with why (none may be added): the ``plan`` package
#: (merged after this check was written) has its section checked by ``pipeline.config.validate``;
#: ``plan/config.py`` imports nothing of the workflow (no cycle), and belongs below the pipeline
KNOWN_UPWARD: set[str] = set()  # none: a layer asks the ones below it, never above


def workflow_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(p, WORKFLOW_LIB): (p.read_text(), p.name == "__init__.py")
            for p in (WORKFLOW_LIB / "distrepro_wf").rglob("*.py")}


def upward_imports(graph: dict[str, set[str]], top: str = "distrepro_wf",
                   layers: tuple[str, ...] = WORKFLOW_LAYERS) -> list[str]:
    """``module -> module`` for every import of a package above the importer's (:data:`WORKFLOW_LAYERS`)."""
    def layer(m: str) -> int | None:
        parts = m.split(".")
        return layers.index(parts[1]) if len(parts) > 1 and parts[0] == top and parts[1] in layers else None

    return sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                  if layer(m) is not None and layer(t) is not None and layer(t) > layer(m))


def test_the_workflow_library_imports_only_downward_and_has_no_cycle():
    graph = import_graph(workflow_sources())
    assert len(graph) > 40 and "distrepro_wf.pipeline.catalogue" in graph["distrepro_wf.claims.evaluate"]
    assert {m.split(".")[1] for m in graph if m.count(".")} == set(WORKFLOW_LAYERS)  # every package has its layer
    found = cycles(graph)
    assert found == [], "import cycles in workflows/lib: " + "; ".join(" -> ".join(c) for c in found)
    assert set(upward_imports(graph)) - KNOWN_UPWARD == set(), f"the layers, bottom first: {WORKFLOW_LAYERS}"


def test_the_layer_check_finds_a_planted_upward_import():
    planted = {"distrepro_wf": ("", True), "distrepro_wf.pipeline": ("", True), "distrepro_wf.claims": ("", True),
               "distrepro_wf.report": ("", True),
               "distrepro_wf.pipeline.config": ("def validate():\n    from ..report.plots import FIGURES\n", False),
               "distrepro_wf.report.plots": ("from ..pipeline.config import validate\n"
                                             "from ..claims import stats\n", False),
               "distrepro_wf.claims.stats": ("import math\n", False)}
    graph = import_graph(planted)
    assert upward_imports(graph) == ["distrepro_wf.pipeline.config -> distrepro_wf.report.plots"]
    assert cycles(graph) == [["distrepro_wf.pipeline.config", "distrepro_wf.report.plots",
                              "distrepro_wf.pipeline.config"]]


def _workflow_imports(tree: ast.AST) -> list[int]:
    """Lines importing ``distrepro_wf`` or ``workflows`` (statements, or ``import_module("...")``)."""
    def theirs(name: str) -> bool:
        return name.split(".")[0] in ("distrepro_wf", "workflows")

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(theirs(a.name) for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and not node.level and theirs(node.module or ""):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and theirs(node.args[0].value):
            lines.append(node.lineno)
    return lines


def test_impls_never_imports_the_workflow():
    offenders = {str(p.relative_to(ROOT)): ln for p in sorted((ROOT / "impls").rglob("*.py"))
                 if (ln := _workflow_imports(ast.parse(p.read_text())))}
    assert offenders == {}
    planted = "import distrepro_wf.report.build\nfrom workflows.lib import x\n" \
              "def f():\n    importlib.import_module('distrepro_wf.pipeline.collect')\n"
    assert _workflow_imports(ast.parse(planted)) == [1, 2, 4]


#: values a backend serves that are also everyday config words (d2's ``mixing: auto``, a
#: benchmark's ``gpu: auto``): compared, they count only where the comparison mentions a backend
EVERYDAY_WORDS = {"auto"}


def backend_names() -> set[str]:
    """The registry names and every value a backend serves (``gloo``, ``nccl``, ``auto``, ...)."""
    names = set(BACKENDS.names())
    assert {"torch", "simgrid"} <= names, f"the backends are registered components: {sorted(names)}"
    served = {v for n in BACKENDS.names() for v in BACKENDS.get(n).run_values}
    assert {"gloo", "nccl", "auto"} <= served, f"the torch backend serves its process groups: {sorted(served)}"
    return names | served


def _name_comparisons(tree: ast.AST, names: set[str]) -> list[str]:
    """``line: expression`` of every comparison with a backend name among its operands (a string
    constant, or one inside a tuple / list / set literal: ``backend in ("simgrid", ...)``); an
    everyday word (:data:`EVERYDAY_WORDS`) only in a comparison whose text names a backend."""
    def named(e: ast.AST, text: str) -> bool:
        if isinstance(e, ast.Constant):
            return e.value in names and (e.value not in EVERYDAY_WORDS or "backend" in text)
        return isinstance(e, (ast.Tuple, ast.List, ast.Set)) and any(named(x, text) for x in e.elts)

    hits = [n for n in ast.walk(tree)
            if isinstance(n, ast.Compare) and any(named(e, ast.unparse(n)) for e in (n.left, *n.comparators))]
    return [f"{n.lineno}: {ast.unparse(n)}" for n in sorted(hits, key=lambda n: (n.lineno, n.col_offset))]


def test_no_backend_name_compared_outside_the_backend_package():
    names = backend_names()
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 100
    offenders = {str(p.relative_to(ROOT)): hits for p in files
                 if ROOT / "impls" / "backends" not in p.parents
                 and (hits := _name_comparisons(ast.parse(p.read_text()), names))}
    assert offenders == {}, ("ask the backend's spec (impls.backends.backend_of / is_simulated, "
                             "spec.process_group / needs_gpu / may_use_gpu) instead")
    planted = ("if cfg.get('backend') == 'simgrid': pass\nok = b != 'torch'\nx = k in ('simgrid', 'x')\ny = k == 'x'\n"
               "gpus = launcher.get('backend', 'auto') != 'gloo'\nif backend == 'nccl': pass\n"
               "b = 'gloo' if backend == 'auto' else backend\nz = mixing == 'auto'\nw = a in ('gloo', 'ring')\n")
    assert [h.split(":")[0] for h in _name_comparisons(ast.parse(planted), names)] == \
        ["1", "2", "3", "5", "6", "7", "9"]  # not 8: an everyday word, no backend in sight


def algorithm_names() -> set[str]:
    """Every registered algorithm and every closed-form name an algorithm declares."""
    names = set(ALGORITHMS.names())
    assert {"allreduce_sgd", "sgp", "ps_sync"} <= names, f"the algorithms are registered: {sorted(names)}"
    return names | {v for n in names for v in ALGORITHMS.get(n).closed_form_variants}


def _is_config_value(v: ast.AST | None) -> bool:
    """A value of a method grid or a label table keyed by method keys (a spec dict, a string, a
    spec constant ``SGP_1PEER``), not a fact about the algorithm (a number, a computed value, a
    function)."""
    return isinstance(v, ast.Dict) or (isinstance(v, ast.Constant) and isinstance(v.value, str)) or (
        isinstance(v, ast.Name) and v.id.isupper())


def _algorithm_name_uses(tree: ast.AST, names: set[str]) -> list[str]:
    """``line: what`` of every comparison with an algorithm name among its operands (a string, or
    one in a tuple / list / set literal), every set literal (or ``set(...)`` / ``frozenset(...)``
    of a literal) holding an algorithm name (a name set), and every dict literal keyed by an
    algorithm name whose values are facts (:func:`_is_config_value`: a dispatch table)."""
    def named(e: ast.AST) -> bool:
        if isinstance(e, ast.Constant):
            return e.value in names
        return isinstance(e, (ast.Tuple, ast.List, ast.Set)) and any(named(x) for x in e.elts)

    hits = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and any(named(e) for e in (n.left, *n.comparators)):
            hits.append((n, f"compared: {ast.unparse(n)}"))
        elif isinstance(n, ast.Set) and named(n):
            hits.append((n, f"name set: {ast.unparse(n)}"))
        elif isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("set", "frozenset") and n.args \
                and isinstance(n.args[0], (ast.Tuple, ast.List)) and named(n.args[0]):
            hits.append((n, f"name set: {ast.unparse(n)}"))
        elif isinstance(n, ast.Dict) and any(k is not None and named(k) and not _is_config_value(v)
                                             for k, v in zip(n.keys, n.values)):
            hits.append((n, f"dispatch on names: {ast.unparse(n)}"))
    return [f"{n.lineno}: {what}" for n, what in sorted(hits, key=lambda h: (h[0].lineno, h[0].col_offset))]


def test_no_algorithm_name_decided_on_outside_the_algorithms():
    names = algorithm_names()
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py"))]
    offenders = {str(p.relative_to(ROOT)): hits for p in files
                 if ROOT / "impls" / "algorithms" not in p.parents
                 and (hits := _algorithm_name_uses(ast.parse(p.read_text()), names))}
    assert offenders == {}, ("ask the algorithm's class (sync_collective, timing_dependent, step_cost, "
                             "closed_form_options, closed_form_variants: impls/protocol.py) instead")
    planted = ("if algorithm == 'allreduce_sgd': pass\n"
               "ok = name in ('ps_sync', 'x')\n"
               "SYNC = frozenset({'allreduce_sgd', 'svrg'})\n"
               "SHARE = {'signum_mv': 1 / 32}\n"
               "x = alg.get('name') != 'dpsgd'\n"
               "grid = {'allreduce_sgd': {'name': 'allreduce_sgd'}, 'sgp': SGP_1PEER}\n"
               "labels = {'sgp': 'SGP'}\n"
               "y = method == 'sgp_1peer'\n"
               "BY = set(['adpsgd', 'ddcgu'])\n"
               "z = n == 'signum_mv_allgather'\n"
               "run = {'sgp': run_sgp}\n")
    lines = [h.split(":")[0] for h in _algorithm_name_uses(ast.parse(planted), names)]
    assert lines == ["1", "2", "3", "4", "5", "9", "10", "11"]  # not 6, 7 (a method grid, labels), 8 (a method key)


def simulated_entry_modules() -> set[str]:
    """What ``python -m`` runs one config of a simulated backend (``impls.sim``)."""
    mods = {BACKENDS.get(n)().entry_module for n in BACKENDS.names() if BACKENDS.get(n)().simulated}
    assert mods == {"impls.sim"}, mods
    return mods


def _entry_spellings(tree: ast.AST, modules: set[str]) -> list[int]:
    """Lines of a string constant that is a simulated backend's entry module."""
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in modules})


def test_the_workflow_asks_the_backend_for_a_simulated_runs_entry():
    modules = simulated_entry_modules()
    files = [p for d in ("workflows/lib", "workflows/scripts") for p in sorted((ROOT / d).rglob("*.py"))]
    offenders = {str(p.relative_to(ROOT)): ln for p in files
                 if (ln := _entry_spellings(ast.parse(p.read_text()), modules))}
    assert offenders == {}, "ask backend_of(cfg['backend']).entry_module instead"
    planted = 'cmd = [sys.executable, "-m", "impls.sim", "--serve"]\n"""python -m impls.sim"""\nm = spec.entry_module\n'
    assert _entry_spellings(ast.parse(planted), modules) == [1]


RUNTIME = ROOT / "impls" / "runtime"
#: the run's modules: the skeleton, what its loops share, and the loops themselves
RUN_MODULES = ("trainer", "context", "agreement", "checkpoint", "worker", "server", "steps")
MAX_FUNCTION_LINES = 60


def schedule_flags() -> set[str]:
    """The capability flags the runtime once branched on, and any boolean a schedule declares."""
    from impls.runtime.steps import STEP_SCHEDULES, StepSchedule

    classes = [StepSchedule, *(STEP_SCHEDULES.get(n) for n in STEP_SCHEDULES.names())]
    assert len(classes) >= 3, "the step schedules are registered"
    declared = {k for c in classes for k, v in vars(c).items() if isinstance(v, bool)}
    return {"barrier_free", "per_epoch_collectives", *declared}


def _flag_branches(tree: ast.AST, flags: set[str]) -> list[str]:
    """``line: test`` of every ``if`` / ``while`` / conditional expression / comprehension
    filter whose test names a flag (a variable, or an attribute: ``schedule.per_epoch_collectives``),
    and every read of a flag as an attribute (passing it on is deciding by it elsewhere)."""
    def names(e: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(e) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(e) if isinstance(n, ast.Attribute)}

    tests = [n.test for n in ast.walk(tree) if isinstance(n, (ast.If, ast.While, ast.IfExp))]
    tests += [c for n in ast.walk(tree) if isinstance(n, ast.comprehension) for c in n.ifs]
    hits = {f"{t.lineno}: {ast.unparse(t)}" for t in tests if names(t) & flags}
    hits |= {f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and n.attr in flags and isinstance(n.ctx, ast.Load)}
    return sorted(hits, key=lambda h: int(h.split(":")[0]))


def test_the_runtime_loops_branch_on_no_schedule_capability():
    flags = schedule_flags()
    files = sorted(p for p in RUNTIME.glob("*.py") if p.stem != "steps")  # steps.py: where the policy lives
    assert {"trainer", "worker", "server", "checkpoint"} <= {p.stem for p in files}
    offenders = {p.name: hits for p in files if (hits := _flag_branches(ast.parse(p.read_text()), flags))}
    assert offenders == {}, "ask the step schedule's epoch-end policy (impls.runtime.steps) instead"
    planted = ("barrier_free = not schedule.per_epoch_collectives\n"
               "if barrier_free and last:\n    close()\n"
               "x = 1 if per_epoch_collectives else 2\n"
               "while not barrier_free:\n    pass\n"
               "ys = [e for e in es if e.per_epoch_collectives]\n"
               "if schedule.agrees_at_end(epoch, epochs):\n    check()\n")
    lines = [h.split(":")[0] for h in _flag_branches(ast.parse(planted), flags)]
    assert lines == ["1", "2", "4", "5", "7"]  # not 8: asking the schedule's policy is the way


def _long_functions(tree: ast.AST, limit: int) -> list[str]:
    return [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_every_function_of_the_run_reads_at_once():
    """The run's skeleton, checkpoint, worker and server loops: no function over 60 lines."""
    offenders = {m: hits for m in RUN_MODULES
                 if (hits := _long_functions(ast.parse((RUNTIME / f"{m}.py").read_text()), MAX_FUNCTION_LINES))}
    assert offenders == {}
    planted = "def short():\n    pass\n\n\ndef long():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    assert _long_functions(ast.parse(planted), MAX_FUNCTION_LINES) == [f"long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_impls_top_level_holds_only_the_foundations():
    """The library's layout shows its architecture: at the top of ``impls/`` only the errors,
    the registry, the algorithm protocol and the entry point of a run; every other module lives
    in a subpackage by concern (comm, config, families, runtime, optim, bench, ...)."""
    loose = sorted(p.name for p in (ROOT / "impls").glob("*.py") if p.name != "__init__.py")
    assert loose == ["errors.py", "protocol.py", "registry.py", "run.py"], loose


def test_the_workflow_library_is_split_by_concern():
    """``distrepro_wf`` is five packages (pipeline, claims, report, bench, plan) and no loose module."""
    lib = ROOT / "workflows" / "lib" / "distrepro_wf"
    assert sorted(p.name for p in lib.glob("*.py")) == ["__init__.py"]
    assert sorted(p.name for p in lib.iterdir() if (p / "__init__.py").exists()) == \
        ["bench", "claims", "pipeline", "plan", "report"]
