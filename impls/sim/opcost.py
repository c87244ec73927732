"""The op-cost model: what a simulated node's local operations cost, besides its
forward/backward and the wire.

A real node pays for more than its compute and its messages: the gossip arithmetic
(mixing, PushSum's weights, D^2's extrapolation), the optimizer's update, the parameter
server's apply, flatten / unflatten and buffer copies, moving a communication buffer
between the device and host memory, compression / decompression / packing / error
feedback, and the transport's software overhead per message.  Each operation is charged
where it happens, with the number of bytes it touches (``clock.charge_op(kind, nbytes)``,
:class:`impls.backends.Clock`: a no-op on the wall clock, where the operation's real time is
simply spent), by the part that does it: compressors and error feedback, local optimizers,
the parameter server's shard, the majority vote, gossip's mixing and PushSum vectors, the flat
helpers and the communicator charge themselves (:class:`impls.sim.charging.Charging`, bound to the
run's clock by their factories); a method's file charges only its own arithmetic
(``docs/simulated-platform.md``, "Who charges what").  The simulated clock charges it to the
host as

    seconds = nbytes_touched x wire_scale / bandwidth[kind]      (msg: msg_us per message)

``wire_scale`` is the profile's (model bytes / stand-in bytes, 1 for ``measured``), so an
operation on the stand-in's 19 KB vector costs what it costs on ResNet-50's 102 MB.
Every operation here is memory-bound (a few flops per byte), so a bandwidth is the
right unit; the number of bytes touched is the caller's (e.g. ``a.add_(b)`` reads two
vectors and writes one: 3 x S).

Kinds (:data:`KINDS`; metric ``time/<kind>_s`` per step, ``time/msg_overhead_s`` for msg):

* ``arith`` - elementwise arithmetic of the algorithm (``mem_gbps``);
* ``optim`` - the local optimizer's update (``mem_gbps``);
* ``copy``  - flatten / unflatten / clone into a buffer on the device (``copy_gbps``);
* ``stage`` - a communication buffer between device and host memory, both ways
  (``stage_gbps``; ``None``: no device, the data already is in host memory, free);
* ``compress`` - compression, decompression, packing, error feedback (``compress_gbps``);
* ``msg``   - the transport's software overhead per message, on the sender
  (``msg_us``; charged by the simulated backend for every wire message).

Profiles (:func:`paper_opcost`, :func:`measure_opcost`):

* paper profiles (``resnet50_v100x8``, ``transformer_wmt16_v100x8``; 8 V100 per node):
  ``mem_gbps`` = 900 GB/s (V100 SXM2 HBM2 peak, NVIDIA Tesla V100 datasheet) x 0.8
  (ASSUMED efficiency of a streaming elementwise kernel; STREAM-like kernels on HBM2
  typically reach 75-90 % of peak) = 720; ``copy_gbps`` = 720 / 2 = 360 (a device memcpy
  reads and writes, and the caller counts only the bytes copied once: ASSUMED same
  efficiency); ``compress_gbps`` = 720 / 4 = 180 (ASSUMED: sign extraction plus bit
  packing is ~4 passes over the data); ``stage_gbps`` = 12 (PCIe 3.0 x16: 15.75 GB/s
  theoretical = 8 GT/s x 16 lanes x 128b/130b, PCI-SIG; ~12 GB/s effective for pinned
  copies, ASSUMED); ``msg_us`` = 10 (one message of a socket transport on top of the wire's
  latency: NCCL's own latency model charges 9.6 us per inter-node ring step,
  :data:`TCP_MSG_SOURCE`; its range, 0-50 us: :mod:`impls.sim.nominal`).  The node's 8 GPUs each apply the update to
  their own replica in parallel, so a node's device-side op costs what one GPU's does.
* ``measured``: micro-benchmarks of this machine (:func:`measure_opcost`, one thread,
  cached with the calibration): ``mem_gbps`` from ``a.add_(b)`` on 16 MB vectors,
  ``copy_gbps`` from ``a.copy_(b)``, ``compress_gbps`` from sign + 8:1 bit packing,
  ``msg_us`` from a socketpair round trip of a 64-byte message (half of it); no device:
  ``stage_gbps`` None.
* ``fixed``: nothing charged unless given (``profile: {name: fixed, mem_gbps: ...}``), so
  a fixed profile's step is its closed form (compute + messages).
"""

from __future__ import annotations

import math
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping

KINDS = ("arith", "optim", "copy", "stage", "compress", "msg")
METRICS = {k: ("time/msg_overhead_s" if k == "msg" else f"time/{k}_s") for k in KINDS}
BANDWIDTH_OF = {"arith": "mem_gbps", "optim": "mem_gbps", "copy": "copy_gbps", "stage": "stage_gbps",
                "compress": "compress_gbps"}
FIELDS = ("mem_gbps", "copy_gbps", "stage_gbps", "compress_gbps", "msg_us")

V100_HBM2_PEAK_GBPS = 900.0  # NVIDIA Tesla V100 (SXM2) datasheet
HBM_EFFICIENCY = 0.8  # ASSUMED (streaming elementwise kernels reach 75-90 % of HBM2 peak)
PCIE3_X16_EFFECTIVE_GBPS = 12.0  # PCIe 3.0 x16: 15.75 GB/s theoretical (PCI-SIG); ~12 effective, ASSUMED
TCP_MSG_US = 10.0  # software overhead of one message of a socket transport, on top of the platform's latency
TCP_MSG_SOURCE = ("NVIDIA/nccl src/graph/tuning.cc: NCCL's latency model charges 9.6 us per inter-node ring step "
                  "(hwLat NET, Simple protocol); range 0-50 us (impls/sim/nominal.py)")


@dataclass(frozen=True)
class OpCost:
    """Bandwidths in GB/s (1e9 bytes/s) per kind, ``None``: that kind is free; ``msg_us``:
    seconds x 1e6 per message."""

    mem_gbps: float | None = None
    copy_gbps: float | None = None
    stage_gbps: float | None = None
    compress_gbps: float | None = None
    msg_us: float = 0.0
    source: str = "none"

    def seconds(self, kind: str, nbytes: float) -> float:
        if kind == "msg":
            return self.msg_us * 1e-6 * nbytes  # nbytes: the number of messages
        try:
            bw = getattr(self, BANDWIDTH_OF[kind])
        except KeyError:
            raise ValueError(f"unknown op kind {kind!r}; known: {', '.join(KINDS)}") from None
        return 0.0 if not bw or nbytes <= 0 else nbytes / (bw * 1e9)

    def free(self) -> bool:
        return not any((self.mem_gbps, self.copy_gbps, self.stage_gbps, self.compress_gbps, self.msg_us))

    def describe(self) -> dict[str, Any]:
        return asdict(self)


FREE = OpCost()


def paper_opcost() -> OpCost:
    """A node of 8 V100 (SXM2) behind PCIe 3.0 and a socket transport (module docstring)."""
    mem = V100_HBM2_PEAK_GBPS * HBM_EFFICIENCY
    return OpCost(mem_gbps=mem, copy_gbps=mem / 2, stage_gbps=PCIE3_X16_EFFECTIVE_GBPS, compress_gbps=mem / 4,
                  msg_us=TCP_MSG_US, source="V100 HBM2 900 GB/s x 0.8 (assumed); PCIe 3.0 x16 12 GB/s "
                                            "(assumed effective); 10 us per message (NCCL's model)")


def given_opcost(spec: Mapping[str, Any], base: OpCost = FREE) -> OpCost:
    """``base`` with the profile config's op-cost keys (``mem_gbps``, ...) that are set."""
    over = {k: spec[k] for k in FIELDS if spec.get(k) is not None}
    if not over:
        return base
    d = {**asdict(base), **over, "source": "given" if base is FREE else base.source + "; overridden: "
                                                                        + ", ".join(sorted(over))}
    return OpCost(**d)


def _best(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_opcost(numel: int = 4 * 1024 * 1024, repeats: int = 7) -> OpCost:
    """This machine's op costs (one thread; the fastest of ``repeats``: other load only adds)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.ones(numel), torch.full((numel,), 0.5)
        nb = numel * 4
        add = 3 * nb / _best(lambda: a.add_(b), repeats)  # reads a, b; writes a
        cp = nb / _best(lambda: a.copy_(b), repeats)  # the bytes copied once (as callers count them)
        from ..compression import pack_bits

        comp = nb / _best(lambda: pack_bits(b > 0), repeats)  # sign + 8:1 packing
    finally:
        torch.set_num_threads(threads)
    x, y = socket.socketpair()
    try:
        msg = b"x" * 64

        def ping() -> None:
            for _ in range(200):
                x.sendall(msg)
                y.recv(64)
                y.sendall(msg)
                x.recv(64)

        msg_us = _best(ping, 3) / 400 * 1e6
    finally:
        x.close()
        y.close()
    return OpCost(mem_gbps=add / 1e9, copy_gbps=cp / 1e9, compress_gbps=comp / 1e9, msg_us=msg_us,
                  source="measured here (one thread): add_, copy_, sign packing of 16 MB; socketpair 64 B")
