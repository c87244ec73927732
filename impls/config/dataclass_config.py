"""Build config dataclasses from plain dicts with clear errors.

Every method, straggler model, optimizer and schedule declares its hyperparameters as a
dataclass; :func:`from_dict` turns a YAML/JSON mapping into one, rejecting unknown
keys (listing the allowed ones), values of the wrong type, non-finite numbers (NaN and
infinity are never a meaningful hyperparameter), and values outside a declared set or
range::

    lr: float = field(default=0.1, metadata={"min": 0})          # 0 <= lr
    momentum: float = field(default=0.9, metadata={"min": 0, "lt": 1})   # 0 <= m < 1
    gamma: float = field(default=0.1, metadata={"gt": 0})         # 0 < gamma
    kind: str = field(default="none", metadata={"choices": ("none", "fixed")})

``min``/``max`` are inclusive, ``gt``/``lt`` exclusive; for a list the bound applies to
every element.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Mapping, TypeVar

from ..errors import ConfigError

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
            hint = (" (YAML 1.1 reads a number without a dot, like 1e-4, as text: write 1.0e-4)"
                    if isinstance(value, str) and _looks_numeric(value) else "")
            raise ConfigError(key, f"expected a number, got {value!r}{hint}")
        if not math.isfinite(value):
            raise ConfigError(key, f"must be a finite number, got {value!r}")
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


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_BOUNDS = {"min": (lambda v, b: v >= b, ">="), "gt": (lambda v, b: v > b, ">"),
           "max": (lambda v, b: v <= b, "<="), "lt": (lambda v, b: v < b, "<")}


def check_bounds(key: str, value: Any, metadata: Mapping[str, Any]) -> None:
    """Raise if ``value`` (or any element of a list) breaks a bound of ``metadata``."""
    if value is None:
        return
    bounds = [(ok, op, metadata[name]) for name, (ok, op) in _BOUNDS.items() if name in metadata]
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if not all(ok(v, b) for ok, _, b in bounds):
            raise ConfigError(key, f"must be {' and '.join(f'{op} {b}' for _, op, b in bounds)}, got {v!r}")


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
        check_bounds(k, value, f.metadata)
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
