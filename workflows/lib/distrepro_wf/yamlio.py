"""Strict YAML reading for every file a user edits (configs, claims).

PyYAML's ``safe_load`` keeps the *last* of two equal keys, so an experiment or method
defined twice silently loses the first definition, and its syntax errors read
``in "<unicode string>", line 3``.  :func:`load_yaml` refuses duplicate keys and
reports every problem as a :class:`~impls.errors.ConfigError` naming the file, the
line and (for duplicates) the dotted key::

    config.yaml: line 12: duplicate key 'experiments.sgp' (first defined on line 3)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from impls.errors import ConfigError


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


def loads_yaml(text: str, source: str) -> Any:
    """Parse ``text`` strictly; ``source`` (a file name) prefixes every error."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
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
