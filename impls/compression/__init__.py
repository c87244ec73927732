"""Gradient compressors: compress/decompress pairs that put real packed bytes on the wire.

One compressor = one small file here holding a config dataclass and one :class:`Compressor`
subclass registered with ``@register("<name>")`` under its file name (the same pattern as
:mod:`impls.algorithms`); the config value ``compressor: {name: ..., <hyperparameters>}``
selects it, and ``error_feedback: true`` in that mapping wraps it in :class:`ErrorFeedback`
(a wrapper around *any* compressor, the way torch's PowerSGD hook takes
``use_error_feedback``), never a copy per compressor.

The protocol, for a flat fp32 vector ``x`` of ``numel`` elements (an algorithm flattens its
gradient or momentum, :mod:`impls.flat`)::

    c = build({"name": "sign", "scale": "mean_abs"}, seed=run_seed, layout=[p.numel() for p in params])
    parts = c.compress(x)               # list of tensors, what goes on the wire (uint8 bits, fp32 scales, ...)
    y = c.decompress(parts, numel)      # flat fp32 vector of numel elements: the receiver's view of x
    c.wire(numel)                       # [(shape, dtype), ...] of the parts: receive buffers, all_gather
    wire_bytes(parts)                   # bytes the parts occupy: what the communicator counts

Every part's shape depends on ``numel`` (and the config) only, never on the values, so a
receiver can allocate its buffers before the data arrives and collectives (``all_gather``)
see equal shapes on every rank.  ``layout`` is the per-layer sizes of the flat vector, for
compressors that work per layer (blockwise scales).

Stateful compressors (error feedback's memory, DGC's momentum, a seeded RNG) checkpoint their
state with ``state_dict`` / ``load_state_dict``; an algorithm puts it in its own state dict.
One compressor instance serves one call site (one vector): an algorithm that compresses two
different vectors (a worker's gradient and a server's reply) builds two.

Bit packing (:func:`pack_bits` / :func:`unpack_bits`): 8 booleans per uint8, little-endian
within a byte (element ``i`` is bit ``i % 8`` of byte ``i // 8``), the last byte zero-padded;
``ceil(n / 8)`` bytes for ``n`` elements.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, ClassVar, Mapping, Sequence

import torch

from ..dataclass_config import from_dict
from ..registry import Registry

COMPRESSORS: Registry = Registry("compressor", "compressor.name")
register = COMPRESSORS.register
_loaded = False
_BIT_WEIGHTS = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """Booleans (any shape, flattened) -> uint8 of ``ceil(n / 8)`` bytes (see the module docstring)."""
    b = bits.reshape(-1).to(torch.uint8)
    pad = (-b.numel()) % 8
    if pad:
        b = torch.cat([b, b.new_zeros(pad)])
    return (b.view(-1, 8) * _BIT_WEIGHTS.to(b.device)).sum(dim=1, dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor, n: int) -> torch.Tensor:
    """uint8 from :func:`pack_bits` -> the first ``n`` booleans."""
    w = _BIT_WEIGHTS.to(packed.device)
    return ((packed.reshape(-1, 1) & w) != 0).reshape(-1)[:n]


def wire_bytes(parts: Sequence[torch.Tensor]) -> int:
    return sum(p.numel() * p.element_size() for p in parts)


class Compressor:
    """Base class; see the module docstring for the protocol."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any, seed: int = 0, layout: Sequence[int] | None = None):
        self.cfg = cfg
        self.seed = seed
        self.layout = list(layout) if layout is not None else None

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        raise NotImplementedError

    def compress(self, x: torch.Tensor) -> list[torch.Tensor]:
        raise NotImplementedError

    def decompress(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        raise NotImplementedError

    def empty(self, numel: int, device: torch.device | str = "cpu") -> list[torch.Tensor]:
        """Receive buffers for one compressed message of a ``numel``-element vector."""
        return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in self.wire(numel)]

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


class ErrorFeedback(Compressor):
    """Error feedback around any compressor (Seide et al. 2014; Karimireddy et al. 2019, EF-SGD).

    The residual the compressor dropped is added to the next input::

        y = x + e;  parts = C(y);  e = y - D(parts)

    so nothing is lost, only delayed: the decompressed transmissions plus the final memory
    sum to the inputs (tested).  The memory is this call site's state (``state_dict``)."""

    def __init__(self, inner: Compressor):
        super().__init__(inner.cfg, inner.seed, inner.layout)
        self.inner = inner
        self.memory: torch.Tensor | None = None

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return self.inner.wire(numel)

    def compress(self, x: torch.Tensor) -> list[torch.Tensor]:
        y = x if self.memory is None else x + self.memory
        parts = self.inner.compress(y)
        self.memory = y - self.inner.decompress(parts, y.numel())
        return parts

    def decompress(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        return self.inner.decompress(parts, numel)

    def state_dict(self) -> dict[str, Any]:
        return {"memory": self.memory, "inner": self.inner.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.memory = state.get("memory")
        self.inner.load_state_dict(state.get("inner") or {})


def load_all() -> Registry:
    """Import every compressor module once; check that each registers under its file name."""
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("_"):
                continue
            importlib.import_module(f"{__name__}.{info.name}")
            if info.name not in COMPRESSORS:
                raise RuntimeError(f"impls/compression/{info.name}.py registers no compressor named {info.name!r}")
        _loaded = True
    return COMPRESSORS


def build(spec: Mapping[str, Any], key: str = "compressor", seed: int = 0,
          layout: Sequence[int] | None = None) -> Compressor:
    """A compressor from ``{name, error_feedback?, <hyperparameters>}``; unknown names or keys
    raise :class:`~impls.errors.ConfigError` naming ``key`` and the allowed values."""
    from ..errors import ConfigError

    spec = dict(spec)
    if "name" not in spec:
        raise ConfigError(f"{key}.name", f"missing; known: {', '.join(load_all().names())}")
    ef = spec.pop("error_feedback", False)
    if not isinstance(ef, bool):
        raise ConfigError(f"{key}.error_feedback", f"expected true or false, got {ef!r}")
    cls = load_all().get(spec.pop("name"))
    c = cls(from_dict(cls.Config, spec, key), seed=seed, layout=layout)
    return ErrorFeedback(c) if ef else c
