"""Emulated network: per-rank links with latency and bandwidth, optionally shared.

Every message the :class:`~impls.comm.Communicator` moves first goes over the real
loopback / backend transport, then the sender or receiver additionally sleeps for
the emulated transfer time of the bytes it actually carried::

    t = steps * latency_s + wire_bytes * 8 / bandwidth_bps     (dedicated links)
    t = steps * latency_s + wire_bytes * 8 / (bandwidth_bps / concurrent)   (shared)

``shared: true`` models one switch/uplink whose capacity is divided among the
ranks that send at the same time (all ranks for a collective or a synchronous
gossip round).  The delay is logged per step as ``time/net_delay_s``.

Presets (``preset:`` key, any field can still be overridden):

* ``none`` - no emulation (only the real transport).
* ``10gbe`` - 10 Gbit/s Ethernet, 50 us per message: the SGP / SlowMo cluster
  (Assran et al. 2019; Wang et al. 2020) and AWS p3.2xlarge "up to 10 Gbps"
  (Bernstein et al. 2019).  The latency is a typical TCP figure, not a paper's.
* ``infiniband`` - 100 Gbit/s EDR InfiniBand, 2 us per message (SGP's fast network).
* ``resnet50_10gbe`` - relative to the workload: sending the whole model once over
  one link takes ``comm_to_compute`` = 0.29 of one step's compute time.  Derived
  from ResNet-50 (25,557,032 fp32 parameters = 102.2 MB = 81.8 ms at 10 Gbit/s) and
  SlowMo Table 2a (32 nodes, 10GbE): AR-SGD 420 ms/iteration and Local SGD (tau=12)
  294 ms/iteration give compute c from 294 = c + (420 - c)/12, c = 282.5 ms;
  81.8 / 282.5 = 0.29.  With this preset a tiny stand-in keeps the communication to
  computation balance that decides the paper's claims; the bandwidth is fixed per run
  from the measured compute time of the first steps (see ``calibrate``; a delay asked
  of an uncalibrated relative network raises).  Latency is
  0: at paper scale 2(n-1) x 50 us is about 1% of a 282 ms step, while on a tiny
  stand-in an absolute 50 us would dominate its sub-millisecond steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .costmodel import Cost
from .dataclass_config import from_dict
from .errors import ConfigError

KINDS = ("none", "absolute", "relative")


@dataclass
class NetworkConfig:
    kind: str = field(default="none", metadata={"choices": KINDS})
    latency_s: float = field(default=0.0, metadata={"min": 0})
    bandwidth_gbps: float = field(default=0.0, metadata={"min": 0})  # absolute: link bandwidth in Gbit/s
    comm_to_compute: float = field(default=0.0, metadata={"min": 0})  # relative: model-send time / step compute
    shared: bool = False
    allreduce_algorithm: str = field(default="ring", metadata={"choices": ("ring", "tree", "recursive_doubling")})

    def validate(self, key: str) -> None:
        if self.kind == "absolute" and self.bandwidth_gbps <= 0:
            raise ConfigError(f"{key}.bandwidth_gbps", "must be > 0 for kind 'absolute'")
        if self.kind == "relative" and self.comm_to_compute <= 0:
            raise ConfigError(f"{key}.comm_to_compute", "must be > 0 for kind 'relative'")


PRESETS: dict[str, dict[str, Any]] = {
    "none": {"kind": "none"},
    "10gbe": {"kind": "absolute", "bandwidth_gbps": 10.0, "latency_s": 50e-6},
    "infiniband": {"kind": "absolute", "bandwidth_gbps": 100.0, "latency_s": 2e-6},
    "resnet50_10gbe": {"kind": "relative", "comm_to_compute": 0.29, "latency_s": 0.0},
}


def network_config(spec: Mapping[str, Any] | str | None, key: str = "network") -> NetworkConfig:
    """Resolve ``spec`` (a preset name, or a mapping with optional ``preset``)."""
    if spec is None:
        spec = "none"
    if isinstance(spec, str):
        spec = {"preset": spec}
    spec = dict(spec)
    preset = spec.pop("preset", None)
    base: dict[str, Any] = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(f"{key}.preset", f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        base = dict(PRESETS[preset])
    base.update(spec)
    return from_dict(NetworkConfig, base, key)


class NetworkModel:
    """Turns a :class:`~impls.costmodel.Cost` into an emulated delay in seconds."""

    def __init__(self, cfg: NetworkConfig):
        self.cfg = cfg
        self.bandwidth_Bps = cfg.bandwidth_gbps * 1e9 / 8 if cfg.kind == "absolute" else 0.0

    @property
    def enabled(self) -> bool:
        return self.cfg.kind != "none"

    @property
    def calibrated(self) -> bool:
        return self.cfg.kind != "relative" or self.bandwidth_Bps > 0

    def calibrate(self, model_bytes: int, compute_s: float) -> None:
        """Fix a relative preset's bandwidth: ``model_bytes`` take ``ratio * compute_s``."""
        if self.cfg.kind == "relative":
            self.bandwidth_Bps = model_bytes / (self.cfg.comm_to_compute * max(compute_s, 1e-6))

    def delay(self, cost: Cost, concurrent: int = 1) -> float:
        """Emulated transfer time of ``cost`` (seconds).

        A relative preset has no bandwidth until :meth:`calibrate` has run: asking it
        for a delay then is a bug in the caller, and raises rather than emulating an
        infinitely fast network (a silent 0 would void every claim about the network).
        """
        if not self.enabled or cost.steps == 0:
            return 0.0
        if not self.calibrated:
            raise RuntimeError(f"network kind 'relative' (comm_to_compute {self.cfg.comm_to_compute}) is not "
                               "calibrated: call calibrate(model_bytes, compute_s) before communicating")
        bw = self.bandwidth_Bps / (max(concurrent, 1) if self.cfg.shared else 1)
        return cost.steps * self.cfg.latency_s + cost.wire_bytes / bw

    def describe(self) -> dict[str, Any]:
        return {**self.cfg.__dict__, "bandwidth_gbps_effective": self.bandwidth_Bps * 8 / 1e9}

