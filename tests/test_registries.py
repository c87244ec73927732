"""Registries: one per axis, each discovering its entries, each with its row in docs/extending.md.

docs/extending.md's "to add | write | selected by" table is the contributor's map of the
extension points; this checks it against the registries themselves (every Registry
object in ``impls``), so a new axis without a row, a row naming a file that moved, or a
registry whose entries need a hand-written import line turns red here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import textwrap

import pytest

import impls
from conftest import ROOT
from impls.errors import ConfigError
from impls.registry import Registry


def _all_registries() -> dict[str, Registry]:
    """Every Registry object defined at the top level of an ``impls`` module (importing a
    module has no side effects: the library rule), by ``module.NAME``."""
    found: dict[int, tuple[str, Registry]] = {}
    for info in pkgutil.walk_packages(impls.__path__, "impls."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if isinstance(obj, Registry) and id(obj) not in found:
                found[id(obj)] = (f"{info.name}.{name}", obj)
    return dict(found.values())


def _readme_rows() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "extending.md").read_text()
    start = text.index("| to add | write | selected by |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_every_registry_has_its_row_in_the_readme_table():
    registries = _all_registries()
    # the axes the house names (issue 25): a lost registry is a failure too
    assert {r.kind for r in registries.values()} >= {
        "algorithm", "task", "dataset", "model", "optimizer", "schedule", "compressor", "platform", "backend",
        "topology", "step schedule"}
    selected = {k for _, _, sel in _readme_rows() for k in re.findall(r"`([^`]+)`", sel)}
    missing = sorted(f"{where} (key {r.key!r})" for where, r in registries.items() if r.key not in selected)
    assert not missing, f"registries without a row in docs/extending.md's 'to add' table: {missing}"


def test_every_path_in_the_readme_table_exists():
    for what, write, _ in _readme_rows():
        for path in re.findall(r"`((?:impls|workflows)/[^`]*)`", write):
            path = re.sub(r"<name>.*$", "", path)  # impls/algorithms/<name>.py: its folder
            assert (ROOT / path).exists(), f"docs/extending.md 'to add' row {what!r} names {path}, which does not exist"


def test_packaged_registries_discover_every_module_of_their_package():
    """A registry that lives in a package finds each entry without an import line: after
    discovery every module of the package is imported, and the docs/extending.md row's path is that
    package (so 'write a file there' is the whole recipe)."""
    rows = {sel: write for _, write, sel in _readme_rows()}
    packaged = [r for r in _all_registries().values() if r.package]
    assert {r.kind for r in packaged} >= {"algorithm", "compressor", "task", "dataset", "model", "optimizer"}
    for r in packaged:
        assert r.names(), r.kind
        pkg = importlib.import_module(r.package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                assert f"{r.package}.{info.name}" in sys.modules, (r.kind, info.name)
        write = next(w for sel, w in rows.items() if f"`{r.key}`" in sel)
        assert r.package.replace(".", "/") + "/" in write, (r.kind, write)


def _plant(tmp_path, name: str, files: dict[str, str]) -> None:
    pkg = tmp_path / name
    pkg.mkdir()
    for fname, body in files.items():
        (pkg / fname).write_text(textwrap.dedent(body))


def test_a_new_file_is_an_entry_and_a_file_without_one_is_named(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    init = """
        from impls.registry import Registry
        R = Registry("widget", "widget.name", package=__name__, one_per_file={strict})
    """
    entry = "from . import R\n\n@R.register('{n}')\ndef f():\n    return '{n}'\n"
    _plant(tmp_path, "wpkg_loose", {"__init__.py": init.format(strict=False), "alpha.py": entry.format(n="alpha"),
                                    "helper.py": "X = 1\n", "_private.py": "raise ImportError('never imported')\n"})
    loose = importlib.import_module("wpkg_loose").R
    assert loose.names() == ["alpha"] and loose.get("alpha")() == "alpha" and "alpha" in loose
    with pytest.raises(ConfigError, match=r"widget\.name.*unknown widget 'beta'; known: alpha"):
        loose.get("beta")
    _plant(tmp_path, "wpkg_strict", {"__init__.py": init.format(strict=True), "alpha.py": entry.format(n="alpha"),
                                     "gamma.py": entry.format(n="not_gamma")})
    with pytest.raises(RuntimeError, match=r"wpkg_strict/gamma\.py registers no widget named 'gamma'"):
        importlib.import_module("wpkg_strict").R.names()
