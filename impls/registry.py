"""Name -> class registries (the fairseq / Bagua pattern).

An entry is registered under a snake_case name.  A registry given its ``package``
discovers its entries: the first lookup imports every module of that package (files
starting with ``_`` skipped; a module that registers nothing is a helper), so adding an
entry is adding a file, with no import line to write anywhere.  With ``one_per_file``
each module must register an entry under its own file name (the algorithm and
compressor rule: one file, one entry).  Looking up an unknown name raises
:class:`~impls.errors.ConfigError` listing every known name, and :meth:`Registry.build`
checks a spec's arguments against the entry's signature first, so a typo is an error
naming the key and the allowed ones rather than a ``TypeError`` deep in a job.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Generic, Mapping, TypeVar

from .errors import ConfigError

T = TypeVar("T")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


class Registry(Generic[T]):
    def __init__(self, kind: str, key: str, package: str | None = None, one_per_file: bool = False):
        self.kind = kind  # e.g. "algorithm"
        self.key = key  # config key that selects an entry, e.g. "algorithm.name"
        self.package = package  # where the entries live (discovered on first use); None: declared beside it
        self.one_per_file = one_per_file
        self._entries: dict[str, T] = {}
        self._package_loaded = package is None

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
        self.discover()
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(
                self.key, f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}"
            ) from None

    def build(self, spec: Mapping[str, Any], *args: Any, fixed: tuple[str, ...] = (), probe: bool = False,
              **kwargs: Any) -> Any:
        """Call the entry named ``spec["name"]`` with the rest of ``spec`` as keyword arguments.

        ``args``/``kwargs`` are what the caller supplies itself (``fixed`` names those
        passed positionally, so they are not offered to the user).  Unknown keys raise a
        :class:`ConfigError` at ``<key prefix>.<key>`` listing the allowed keys.  With
        ``probe``, an entry that has a cheaper ``entry.probe`` (same arguments: checks
        without a full scan of a large dataset) is probed instead of built.
        """
        spec = dict(spec)
        name = spec.pop("name", None)
        entry = self.get(name)
        params = inspect.signature(entry).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            allowed = [n for n, p in params.items() if n not in kwargs and n not in fixed
                       and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            unknown = sorted(set(spec) - set(allowed))
            if unknown:
                prefix = self.key.rsplit(".", 1)[0]
                raise ConfigError(f"{prefix}.{unknown[0]}",
                                  f"unknown key for {self.kind} {name!r}; allowed keys: "
                                  f"{', '.join(['name', *allowed])}")
        fn = getattr(entry, "probe", entry) if probe else entry
        return fn(*args, **kwargs, **spec)

    def discover(self) -> "Registry[T]":
        """Import every module of ``self.package`` once (``_``-prefixed files skipped); with
        ``one_per_file``, check that each registers an entry named after its file."""
        if not self._package_loaded:
            import importlib
            import pkgutil

            self._package_loaded = True  # before the imports: a module may look the registry up
            pkg = importlib.import_module(self.package)
            for info in pkgutil.iter_modules(pkg.__path__):
                if info.name.startswith("_"):
                    continue
                importlib.import_module(f"{self.package}.{info.name}")
                if self.one_per_file and info.name not in self._entries:
                    self._package_loaded = False
                    raise RuntimeError(f"{self.package.replace('.', '/')}/{info.name}.py registers no {self.kind} "
                                       f"named {info.name!r}")
        return self

    def names(self) -> list[str]:
        return sorted(self.discover()._entries)

    def __contains__(self, name: str) -> bool:
        return name in self.discover()._entries
