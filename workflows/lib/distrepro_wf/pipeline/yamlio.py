"""Strict YAML reading for every file a user edits (configs, claims).

PyYAML's ``safe_load`` keeps the *last* of two equal keys, so an experiment or method
defined twice silently loses the first definition, and its syntax errors read
``in "<unicode string>", line 3``.  :func:`load_yaml` refuses duplicate keys and
reports every problem as a :class:`~impls.errors.ConfigError` naming the file, the
line and (for duplicates) the dotted key::

    config.yaml: line 12: duplicate key 'experiments.sgp' (first defined on line 3)

Aliases (``*name``, a reference to an ``&name`` anchor) are bounded: PyYAML builds one
shared object per anchor, but every consumer that copies or serializes the result
(Snakemake passing a config to its jobs, ``json.dumps``, ``copy.deepcopy``) expands each
reference, so nine nested levels of nine aliases ("billion laughs") become gigabytes.
Before anything is constructed, :func:`loads_yaml` counts the nodes the document has once
every alias is expanded; more than :data:`MAX_ALIAS_NODES` added by aliases, or an alias
inside its own anchor (a self-referential document, which recursive consumers never
finish), is an error naming the line and column of the anchor::

    c.yaml: line 6, column 7: YAML aliases expand this document from 32 to 4412961518 nodes (past 10000 here); ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from impls.errors import ConfigError

#: nodes that aliases may add to a document (all its references expanded); a config that
#: reuses a workload through an anchor adds tens, a "billion laughs" document billions
MAX_ALIAS_NODES = 10_000


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader whose mappings reject a key that appears twice."""


def _path_of(loader: _StrictLoader, node: yaml.MappingNode) -> str:
    return getattr(node, "_distrepro_path", "")


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    base = _path_of(loader, node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        dotted = f"{base}.{key}" if base else str(key)
        if isinstance(value_node, yaml.MappingNode):
            value_node._distrepro_path = dotted  # type: ignore[attr-defined]
        elif isinstance(value_node, yaml.SequenceNode):
            for i, item in enumerate(value_node.value):
                if isinstance(item, yaml.MappingNode):
                    item._distrepro_path = f"{dotted}[{i}]"  # type: ignore[attr-defined]
        try:
            hash(key)
        except TypeError:
            raise ConfigError(dotted, f"line {key_node.start_mark.line + 1}: a mapping key must be a scalar") from None
        line = key_node.start_mark.line + 1
        if key in seen:
            raise ConfigError(dotted, f"line {line}: duplicate key {dotted!r} (first defined on line {seen[key]})")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _where(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


def check_aliases(root: yaml.Node, limit: int = MAX_ALIAS_NODES) -> None:
    """Raise :class:`ConfigError` if expanding every alias of the composed document ``root``
    adds more than ``limit`` nodes, or if a node contains itself.  Linear in the written
    document: each node's expanded size is computed once (memoized), depth first without
    recursion."""
    size: dict[int, int] = {}
    written = 0
    first_big: yaml.Node | None = None  # the first node (innermost) that expands past the limit
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = [c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode) else (
            node.value if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            if first_big is None and size[id(node)] > limit:
                first_big = node
            continue
        if id(node) in size:
            continue
        if id(node) in open_:  # reached again before it was finished: it contains itself
            raise ConfigError("", f"{_where(node)}: an alias refers to its own anchor (a self-referential "
                                  "document, which cannot be expanded); write the value out")
        open_.add(id(node))
        written += 1
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children))
    expanded = size[id(root)]
    if expanded - written > limit:
        raise ConfigError("", f"{_where(first_big or root)}: YAML aliases expand this document from {written} to "
                              f"{expanded} nodes (past {limit} here); at most {limit} may come from aliases "
                              "(an alias bomb?): write the values out or use fewer references")


def _load(text: str) -> Any:
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_aliases(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def loads_yaml(text: str, source: str) -> Any:
    """Parse ``text`` strictly; ``source`` (a file name) prefixes every error."""
    try:
        return _load(text)
    except RecursionError:
        raise ConfigError(source, "YAML nested too deeply to read") from None
    except ConfigError as e:
        raise ConfigError(source, str(e)[len(e.key) + 2:]) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise ConfigError(source, f"YAML syntax error: {where}{what}") from None
    except yaml.YAMLError as e:
        raise ConfigError(source, f"YAML error: {e}") from None


def load_yaml(path: str | Path) -> Any:
    """Read and parse ``path`` strictly (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(str(path), f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(str(path), f"not a text (UTF-8) file: byte {e.start} cannot be decoded") from None
    return loads_yaml(text, str(path))
