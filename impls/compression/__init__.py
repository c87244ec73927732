"""Gradient compressors: compress/decompress pairs that put real packed bytes on the wire.

One compressor = one small file here holding a config dataclass and one :class:`Compressor`
subclass registered with ``@register("<name>")`` under its file name (the same pattern as
:mod:`impls.algorithms`); the config value ``compressor: {name: ..., <hyperparameters>}``
selects it, and ``error_feedback: true`` in that mapping wraps it in :class:`ErrorFeedback`
(a wrapper around *any* compressor, the way torch's PowerSGD hook takes
``use_error_feedback``), never a copy per compressor.

The protocol, for a flat fp32 vector ``x`` of ``numel`` elements (an algorithm flattens its
gradient or momentum, :mod:`impls.comm.flat`)::

    c = build({"name": "sign", "scale": "mean_abs"}, seed=run_seed, layout=[p.numel() for p in params],
              clock=comm.clock)   # the run's clock: c charges its own work (below)
    parts = c.compress(x)               # list of tensors, what goes on the wire (uint8 bits, fp32 scales, ...)
    y = c.decompress(parts, numel)      # flat fp32 vector of numel elements: the receiver's view of x
    c.wire(numel)                       # [(shape, dtype), ...] of the parts: receive buffers, all_gather
    wire_bytes(parts)                   # bytes the parts occupy: what the communicator counts

Every part's shape depends on ``numel`` (and the config) only, never on the values, so a
receiver can allocate its buffers before the data arrives and collectives (``all_gather``)
see equal shapes on every rank.  ``layout`` is the per-layer sizes of the flat vector, for
compressors that work per layer (blockwise scales).

A compressor file implements ``encode`` and ``decode``; the base class's ``compress`` and
``decompress`` call them and charge the work to the clock the compressor was built with
(:class:`impls.sim.charging.Charging`; op-cost kind ``compress``, :mod:`impls.sim.opcost`): one
pass over the fp32 vector each, ``4 numel`` bytes (the ``compress`` bandwidth is the rate of a
whole compression, sign extraction and packing included).  :class:`ErrorFeedback` charges its
add and subtract of the residual besides (``3 x 4 numel`` bytes each: two vectors read, one
written), so a method never charges a compressor's work by hand.

Stateful compressors (error feedback's memory, DGC's momentum, a seeded RNG) checkpoint their
state with ``state_dict`` / ``load_state_dict``; an algorithm puts it in its own state dict.
One compressor instance serves one call site (one vector): an algorithm that compresses two
different vectors (a worker's gradient and a server's reply) builds two.

Bit packing (:func:`pack_bits` / :func:`unpack_bits`): 8 booleans per uint8, little-endian
within a byte (element ``i`` is bit ``i % 8`` of byte ``i // 8``), the last byte zero-padded;
``ceil(n / 8)`` bytes for ``n`` elements.  Codes of ``b`` bits (QSGD's levels, TernGrad's
ternary digits) go as ``b`` such bit planes (:func:`pack_codes`): ``b * ceil(n / 8)`` bytes.
``workflows/scripts/bench_compression.py`` measures pack_bits against memcpy.

Sparsifiers (top-k, random-k, DGC) keep ``k = ceil(ratio * d)`` of ``d`` entries, computed
exactly by :func:`keep_count` from the ratio as written in the config (``0.07 * 100`` is
``7.000000000000001`` in floating point, whose ``ceil`` would overshoot to 8).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar, Mapping, Sequence

import torch

from ..sim.charging import Charging
from ..config.dataclass_config import from_dict
from ..registry import Registry

COMPRESSORS: Registry = Registry("compressor", "compressor.name", package=__name__, one_per_file=True)
register = COMPRESSORS.register
_BIT_WEIGHTS = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)
# Eight 0/1 bytes read as one little-endian int64 ``v = sum b_i << 8i``: ``v * _GATHER`` puts
# ``b_i`` at bit ``56 + i`` (the shifts 56 - 7i of _GATHER; the other products land at distinct
# positions, so nothing carries), so its top byte is the packed byte.  ``byte * _SPREAD`` copies
# the byte into all eight, ``& _SELECT`` keeps bit i in byte i: one int64 operation per 8 elements.
_GATHER = 0x0102040810204080
_SPREAD = 0x0101010101010101
_SELECT = 0x8040201008040201 - 2**64  # as a signed int64
_CHUNK = 1 << 18  # int64 words per pass of pack_bits: the temporary (2 MiB) stays in cache
_FAST = sys.byteorder == "little"


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """Booleans (any shape, flattened) -> uint8 of ``ceil(n / 8)`` bytes (see the module docstring).

    Non-boolean input counts as ``!= 0``."""
    b = bits.reshape(-1)
    if b.dtype != torch.bool:
        b = b != 0
    n = b.numel()
    full = n // 8
    out = torch.empty(-(-n // 8), dtype=torch.uint8, device=b.device)
    if not _FAST:  # pragma: no cover - big-endian hosts: the plain formulation
        pad = torch.cat([b.to(torch.uint8), b.new_zeros(8 * out.numel() - n, dtype=torch.uint8)])
        return (pad.view(-1, 8) * _BIT_WEIGHTS.to(b.device)).sum(dim=1, dtype=torch.uint8)
    if full:
        head = b[: 8 * full]
        if head.storage_offset() % 8:
            head = head.clone()
        words = head.view(torch.uint8).view(torch.int64)
        tmp = torch.empty(min(_CHUNK, full), dtype=torch.int64, device=b.device)
        for i in range(0, full, _CHUNK):
            w = words[i: i + _CHUNK]
            t = tmp[: w.numel()]
            torch.mul(w, _GATHER, out=t)
            out[i: i + t.numel()].copy_(t.bitwise_right_shift_(56))  # copy_ keeps the low byte
    if n > 8 * full:
        tail = b[8 * full:].to(torch.uint8)
        out[full] = (tail * _BIT_WEIGHTS[: tail.numel()].to(b.device)).sum(dtype=torch.uint8)
    return out


def unpack_bits(packed: torch.Tensor, n: int) -> torch.Tensor:
    """uint8 from :func:`pack_bits` -> the first ``n`` booleans."""
    p = packed.reshape(-1)
    if not _FAST:  # pragma: no cover
        return ((p.reshape(-1, 1) & _BIT_WEIGHTS.to(p.device)) != 0).reshape(-1)[:n]
    v = p.to(torch.int64).mul_(_SPREAD).bitwise_and_(_SELECT)
    return v.view(torch.uint8).ne(0)[:n]


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned integer codes below ``2**bits`` -> ``bits`` bit planes of :func:`pack_bits`,
    concatenated: plane ``j`` (bytes ``j * ceil(n/8)`` to ``(j+1) * ceil(n/8)``) holds bit ``j``
    of every code.  ``bits * ceil(n / 8)`` bytes, the fewest whole bits per element."""
    c = codes.reshape(-1)
    if bits == 0 or c.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=c.device)
    return torch.cat([pack_bits(c.bitwise_and(1 << j) != 0) for j in range(bits)])


def unpack_codes(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """:func:`pack_codes`' inverse: int64 codes of ``n`` elements."""
    out = torch.zeros(n, dtype=torch.int64, device=packed.device)
    per = -(-n // 8)
    for j in range(bits):
        out.bitwise_or_(unpack_bits(packed[j * per: (j + 1) * per], n).to(torch.int64) << j)
    return out


def code_bits(levels: int) -> int:
    """The fewest bits that hold the codes ``0 .. levels``."""
    return max(1, int(levels).bit_length())


def keep_count(ratio: float, numel: int) -> int:
    """``min(numel, ceil(ratio * numel))`` in exact arithmetic: how many of ``numel`` entries a
    sparsifier keeps at ``ratio``.

    The ratio is taken as the decimal the config wrote (``repr`` of the float, the shortest
    decimal that reads back as it: ``0.07`` is 7/100, not the binary double just above
    it), so ``k`` is the documented ``ceil(ratio * d)`` for every size; the floating-point
    product overshoots by one where ``ratio * d`` is a whole number it rounds up past
    (0.07 x 100 gives 8)."""
    r = Fraction(repr(float(ratio)))
    return min(numel, -(-r.numerator * numel // r.denominator))


def block_sizes(numel: int, block: str, block_size: int = 0, layout: Sequence[int] | None = None) -> list[int]:
    """Sizes of the blocks of a ``numel``-element vector: ``tensor`` (one), ``layer`` (the
    model's layers, from ``layout``) or ``size`` (``block_size`` each, the last one shorter)."""
    if block == "layer" and layout is not None:
        if sum(layout) != numel:
            raise ValueError(f"layout covers {sum(layout)} elements, the vector has {numel}")
        return list(layout)
    if block == "size":
        full, rest = divmod(numel, block_size)
        return [block_size] * full + ([rest] if rest else [])
    return [numel]


@dataclass
class BlockConfig:
    """The blocks a block-wise compressor keeps one scale (or one pair of means) per: the config
    keys ``block`` and ``block_size`` shared by ``sign``, ``onebit`` and ``terngrad`` (a compressor's
    ``Config`` subclasses it, redeclaring ``block`` where its paper's default differs).

    * ``block``: ``tensor`` (one block), ``layer`` (the model's layers: the algorithm's layout) or
      ``size`` (``block_size`` consecutive elements each, the last one shorter);
    * ``block_size`` (0): the elements per block for ``block: size``."""

    block: str = field(default="layer", metadata={"choices": ("tensor", "layer", "size")})
    block_size: int = field(default=0, metadata={"min": 0})

    def check_blocks(self) -> None:
        """A ``size`` block needs its size (called by the compressor's constructor)."""
        from ..errors import ConfigError

        if self.block == "size" and self.block_size < 1:
            raise ConfigError("compressor.block_size", "block 'size' needs block_size >= 1")

    def sizes(self, numel: int, layout: Sequence[int] | None) -> list[int]:
        """:func:`block_sizes` of a ``numel``-element vector under this config."""
        return block_sizes(numel, self.block, self.block_size, layout)


def generator(seed: int, count: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator seeded by (``seed``, ``count``): call ``count`` of a stochastic compressor
    draws the same numbers whatever ran before (reproducible, resumable from the count)."""
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 1_000_003 + int(count)) % (2**63 - 1))
    return g


def wire_bytes(parts: Sequence[torch.Tensor]) -> int:
    return sum(p.numel() * p.element_size() for p in parts)


class Compressor(Charging):
    """Base class; see the module docstring for the protocol.  A compressor file implements
    ``encode`` / ``decode``; :meth:`compress` / :meth:`decompress` run them and charge them."""

    Config: ClassVar[type]
    #: True when the receiver regenerates random choices from the seed (``randomk``'s indices):
    #: every sender and receiver must then be built with the same ``seed``; otherwise an
    #: algorithm gives each worker its own (independent rounding noise, ``qsgd``, ``terngrad``)
    shared_seed: ClassVar[bool] = False

    def __init__(self, cfg: Any, seed: int = 0, layout: Sequence[int] | None = None):
        self.cfg = cfg
        self.seed = seed
        self.layout = list(layout) if layout is not None else None

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        raise NotImplementedError

    def compress(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The parts of ``x`` on the wire; charges one ``compress`` pass over ``x``."""
        parts = self.encode(x)
        self.charge("compress", x.numel() * x.element_size())
        return parts

    def decompress(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
        """The receiver's flat vector of ``numel`` elements; charges one ``compress`` pass over it."""
        y = self.decode(parts, numel)
        self.charge("compress", y.numel() * y.element_size())
        return y

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        raise NotImplementedError

    def decode(self, parts: Sequence[torch.Tensor], numel: int) -> torch.Tensor:
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
    sum to the inputs (tested).  The memory is this call site's state (``state_dict``).

    Its cost (charged here, besides the inner compressor's own ``C`` and ``D``): the add
    ``x + e`` (none on the first call, when there is no memory yet) and the subtract
    ``y - D(parts)``, 3 passes of the vector's bytes each, as ``compress`` work."""

    def __init__(self, inner: Compressor):
        super().__init__(inner.cfg, inner.seed, inner.layout)
        self.inner = inner
        self.shared_seed = inner.shared_seed
        self.memory: torch.Tensor | None = None

    def wire(self, numel: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return self.inner.wire(numel)

    def bind_clock(self, clock):
        self.inner.bind_clock(clock)
        return super().bind_clock(clock)

    def compress(self, x: torch.Tensor) -> list[torch.Tensor]:
        nb = x.numel() * x.element_size()
        y = x if self.memory is None else x + self.memory
        if self.memory is not None:
            self.charge("compress", 3 * nb)  # y = x + e: reads x and e, writes y
        parts = self.inner.compress(y)
        self.memory = y - self.inner.decompress(parts, y.numel())
        self.charge("compress", 3 * nb)  # e = y - D(parts): reads both, writes e
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
    return COMPRESSORS.discover()


def build(spec: Mapping[str, Any], key: str = "compressor", seed: int = 0,
          layout: Sequence[int] | None = None, clock: Any = None) -> Compressor:
    """A compressor from ``{name, error_feedback?, <hyperparameters>}``; unknown names or keys
    raise :class:`~impls.errors.ConfigError` naming ``key`` and the allowed values.  ``clock``:
    the run's clock, which the compressor charges its work to (None: nothing charged)."""
    from ..errors import ConfigError

    spec = dict(spec)
    if "name" not in spec:
        raise ConfigError(f"{key}.name", f"missing; known: {', '.join(load_all().names())}")
    ef = spec.pop("error_feedback", False)
    if not isinstance(ef, bool):
        raise ConfigError(f"{key}.error_feedback", f"expected true or false, got {ef!r}")
    try:
        cls = load_all().get(spec.pop("name"))
    except ConfigError as e:  # the registry names its own key; name the caller's
        raise ConfigError(f"{key}.name", str(e).split(": ", 1)[1]) from None
    c = cls(from_dict(cls.Config, spec, key), seed=seed, layout=layout)
    return (ErrorFeedback(c) if ef else c).bind_clock(clock)
