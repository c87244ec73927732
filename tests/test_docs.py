"""The documentation is checked like code: README.md and docs/*.md.

* the README stays a five-minute read (at most 150 lines) that maps every page of docs/;
* every relative link resolves, and every command block (bash, sh, console, or a block with no
  language) that names a file of the repository (``config/...yaml``, ``scripts/...sh``) names
  one that exists;
* docs/configuration-reference.md is what ``python -m distrepro_wf.pipeline.schemadoc`` prints
  from the schema (regenerate it after editing the schema);
* each worked example of docs/extending.md runs as written in a copy of the library: a block
  ``<lang> file=PATH`` is written to PATH, ``<lang> append=PATH`` appended to it, a ``diff``
  block applied with ``patch -p1``, then each ``bash`` / ``python`` block runs there, in order.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from distrepro_wf.pipeline import schemadoc
from distrepro_wf.pipeline.yamlio import load_yaml

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
COMMAND_LANGS = {"", "bash", "sh", "shell", "console"}
#: a path of the repository named in a command: under one of its top-level folders
REPO_PATH = re.compile(r"(?<![\w/.-])((?:config|scripts|profiles|workflows|impls|tests|docs|requirements|\.ci)"
                       r"/[\w./-]*[\w/])")
#: the extensions docs/extending.md must show with a worked example (its "## " headings)
EXTENSIONS = ("An algorithm", "A compressor", "A simulated platform", "A task", "A figure")


def _blocks(text: str) -> list[tuple[str, dict[str, str], str]]:
    """(language, attributes such as file=PATH, body) of every fenced block."""
    out = []
    for info, body in FENCE.findall(text):
        lang, *attrs = info.split() or [""]
        out.append((lang, dict(a.split("=", 1) for a in attrs if "=" in a), body))
    return out


def test_readme_is_a_five_minute_read_that_maps_every_docs_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    commands = _blocks(text)[0][2].splitlines()
    assert [c.split("#")[0].strip() for c in commands] == ["bash scripts/reproduce.sh", "bash scripts/test.sh"]
    linked = {(ROOT / m).resolve() for m in LINK.findall(text) if not m.startswith(("http", "#"))}
    assert not [p.name for p in DOCS if p.resolve() not in linked], "docs pages missing from README's map"
    assert any(m.endswith(".png") and (ROOT / m).exists() for m in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page (lower case, punctuation
    dropped, spaces as hyphens)."""
    text = FENCE.sub("", page.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_anchors_are_githubs():
    page = ROOT / "docs" / "simulated-platform.md"
    assert "a-shaped-real-network-on-one-machine-network-namespaces" in anchors(page)
    assert "the-simulated-platform-backend-simgrid" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        dest = page.parent / path if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to missing files or headings {broken}"


def repo_paths_in_commands(text: str) -> list[str]:
    """The repository paths named in the command blocks of ``text`` (placeholders such as
    ``config/<name>.yaml`` or ``config/full/*.yaml`` left out)."""
    found = []
    for lang, _, body in _blocks(text):
        if lang in COMMAND_LANGS:
            found += [p for p in REPO_PATH.findall(body) if not re.search(r"[<>{}*]|/X\.", p)]
    return found


def test_repo_paths_in_commands_are_found():
    text = "```bash\nsnakemake --configfile config/full/sgp.yaml  # or config/<name>.yaml\n```\n" \
           "```yaml\nplatform: impls/not/a/command.py\n```\n```\nbash scripts/x.sh;\n```\n"
    assert repo_paths_in_commands(text) == ["config/full/sgp.yaml", "scripts/x.sh"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_file_a_command_block_names_exists(page):
    missing = sorted({p for p in repo_paths_in_commands(page.read_text()) if not (ROOT / p).exists()})
    assert not missing, f"{page.relative_to(ROOT)}: command blocks name files that do not exist: {missing}"


def test_configuration_reference_is_generated_from_the_schema():
    committed = (ROOT / "docs" / "configuration-reference.md").read_text()
    assert committed == schemadoc.render(load_yaml(schemadoc.SCHEMA)), (
        "docs/configuration-reference.md differs from the schema: run "
        "python -m distrepro_wf.pipeline.schemadoc > docs/configuration-reference.md")


def test_schemadoc_follows_refs_and_names_open_mappings():
    schema = {"type": "object", "required": ["experiments"], "properties": {
        "experiments": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {"nodes": {"$ref": "#/$defs/nodes", "description": "a | b"},
                                             "mode": {"enum": ["a", "b"], "default": "a"}}}}},
        "$defs": {"nodes": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}}}}
    rows = {r[0]: r for r in schemadoc.rows(schema)}
    assert list(rows) == ["`experiments`", "`experiments.<experiment>`", "`experiments.<experiment>.nodes`",
                          "`experiments.<experiment>.mode`"]
    assert rows["`experiments`"][2] == "yes"
    assert rows["`experiments.<experiment>.nodes`"][1:] == ("list of integer", "", "items >= 1; at least 1 item",
                                                           "", "a \\| b")
    assert rows["`experiments.<experiment>.mode`"][3:5] == ("one of `a`, `b`", "`a`")
    with pytest.raises(ValueError, match="unsupported"):
        list(schemadoc.rows({"properties": {"x": {"$ref": "other.yaml#/x"}}}))


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


EXTENDING = _sections((ROOT / "docs" / "extending.md").read_text())


def test_extending_has_a_worked_example_per_extension():
    for name in EXTENSIONS:
        assert name in EXTENDING, f"docs/extending.md has no section {name!r}"
        langs = [lang for lang, _, _ in _blocks(EXTENDING[name])]
        assert {"bash", "python"} & set(langs), f"{name}: no command that runs the example"


@pytest.mark.parametrize("section", EXTENSIONS)
def test_extending_worked_example_runs(section, tmp_path):
    work = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__")
    for top in ("impls", "workflows"):
        shutil.copytree(ROOT / top, work / top, ignore=ignore)
    env = {**os.environ, "PYTHONPATH": f"{work}:{work / 'workflows' / 'lib'}",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for lang, attrs, body in _blocks(EXTENDING[section]):
        where = f"{section}: {lang} block {body[:60]!r}"
        if "file" in attrs:
            target = work / attrs["file"]
            assert not target.exists() or target.suffix == ".json", f"{where}: {attrs['file']} already exists"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        elif "append" in attrs:
            assert (work / attrs["append"]).exists(), where
            with open(work / attrs["append"], "a") as f:
                f.write(body)
        elif lang == "diff":
            proc = subprocess.run(["patch", "-p1", "--no-backup-if-mismatch"], input=body, cwd=work,
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{where}: the patch does not apply:\n{proc.stdout}{proc.stderr}"
        elif lang in ("bash", "python"):
            cmd = ["bash", "-euo", "pipefail", "-c", body] if lang == "bash" else [sys.executable, "-c", body]
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{where} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_the_readme_grid_is_a_valid_config_on_real_ranks_and_simulated():
    """README's "your own grid" example passes the pipeline's checks, as written and with the
    `backend: simgrid` and `platform: ethernet_10g` it suggests adding."""
    import copy

    import yaml

    from distrepro_wf.pipeline.config import validate

    lang, _, body = next(b for b in _blocks((ROOT / "README.md").read_text()) if b[0] == "yaml")
    config = yaml.safe_load(body)
    assert len(validate(copy.deepcopy(config))) == 24  # 2 methods x 2 node counts x 2 stragglers x 3 seeds
    for exp in config["experiments"].values():
        exp.update(backend="simgrid", platform="ethernet_10g")
    assert {r.experiment for r in validate(config)} == {"mine"}
