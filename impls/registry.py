"""Name -> class registries (the fairseq / Bagua pattern).

An entry is registered under a snake_case name; looking up an unknown name raises
:class:`~impls.errors.ConfigError` listing every known name.
"""

from __future__ import annotations

import re
from typing import Callable, Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


class Registry(Generic[T]):
    def __init__(self, kind: str, key: str):
        self.kind = kind  # e.g. "algorithm"
        self.key = key  # config key that selects an entry, e.g. "algorithm.name"
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        if not _SNAKE.match(name):
            raise ValueError(f"{self.kind} name {name!r} is not snake_case")

        def deco(obj: T) -> T:
            if name in self._entries and self._entries[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(
                self.key, f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries
