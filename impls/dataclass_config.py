"""Build config dataclasses from plain dicts with clear errors.

Every method, straggler model and network model declares its hyperparameters as a
dataclass; :func:`from_dict` turns a YAML/JSON mapping into one, rejecting unknown
keys (listing the allowed ones) and values of the wrong type or outside a declared
``choices`` set (``field(metadata={"choices": (...)})``).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping, TypeVar

from .errors import ConfigError

C = TypeVar("C")


def _check_type(key: str, value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _check_type(key, value, a)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(key, f"value {value!r} does not match {tp}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(key, f"expected a list, got {value!r}")
        (inner, *_) = typing.get_args(tp) or (Any,)
        out = [_check_type(f"{key}[{i}]", v, inner) for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"expected a mapping, got {value!r}")
        return dict(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, f"expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(key, f"expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[C], data: Mapping[str, Any] | None, key: str) -> C:
    """Instantiate dataclass ``cls`` from ``data``; ``key`` prefixes error messages."""
    data = dict(data or {})
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{key}.{unknown[0]}",
            f"unknown key; allowed keys: {', '.join(sorted(fields))}",
        )
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        f = fields[name]
        k = f"{key}.{name}"
        value = _check_type(k, value, hints[name])
        choices = f.metadata.get("choices")
        if choices is not None and value not in choices:
            raise ConfigError(k, f"{value!r} is not allowed; allowed values: {', '.join(map(str, choices))}")
        kwargs[name] = value
    try:
        obj = cls(**kwargs)
    except TypeError as e:  # missing required field
        raise ConfigError(key, str(e)) from None
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(key)
    return obj


def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)
