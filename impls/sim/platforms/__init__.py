"""Simulated platforms: the papers' clusters, built in code with SimGrid's platform API.

A platform is a preset (``platform.name``) whose numbers can be overridden key by key.
Every host has the same nominal speed (:data:`impls.backends.sim.SPEED`); compute is
charged by the timing profile (:mod:`impls.sim.profiles`), so a host's speed never
needs a paper number.  The network uses SimGrid's default flow-level TCP model
(``LV08``, validated by Velho & Legrand 2009): a flow gets 97 % of its bottleneck
link's bandwidth, links are shared max-min fairly among the flows crossing them, a
route's latency is multiplied by 13.01 (TCP's slow start and handshakes), and each
flow's acknowledgments load the reverse route with 5 % of its rate ("cross traffic").
Link latencies are set so that a message's **end-to-end latency is ``latency_us``**
under that factor, so each preset's alpha-beta parameters are::

    alpha = latency_us * 1e-6 s        beta = 0.97 * nic_gbps * 1e9 / 8 / 1.05 bytes/s

where beta is the rate of a NIC that sends and receives at once (every step of a ring
or of a gossip exchange; a lone one-way flow gets 5 % more)
(:meth:`Platform.alpha_beta`; the cost-model test checks a ring all-reduce against
``2 (n - 1) (alpha + S / (n beta))``).

Presets: one file each in this package (``impls/sim/platforms/<name>.py``), found by the
registry :data:`PLATFORMS` on first use as algorithms and compressors are.  A file calls
:func:`register_platform` with its numbers, each number's published source (or ``None``, with
why in a comment) and its builder; a number without a source entry is refused when the file is
imported (``ValueError`` naming the file's platform and the keys), never at claim time.  Adding
a platform is that one file (``tests/test_sim_platform.py::test_a_platform_is_one_new_file``)::

    from . import register_platform, star_network

    register_platform("gige", star_network,
                      numbers={"nic_gbps": 1.0, "latency_us": 50.0, "max_hosts": 64},
                      sources={"nic_gbps": "the cluster's spec sheet", "latency_us": None})  # measured? no

The presets shipped: ``ethernet_10g`` (SGP / SlowMo's 10 GbE), ``infiniband_100g`` (SGP's
fast network), ``shared_hpc`` (AD-PSGD's network-sharing cluster: racks, oversubscribed
uplinks, seeded background traffic), ``star`` (a network you describe: ``nic_gbps`` and
``latency_us`` required, e.g. ``{name: star, nic_gbps: 0.1, latency_us: 9}``, the shaped
namespaces of :mod:`distrepro_wf.bench.netns`) and ``fat_tree`` (a two-level full-bisection
fat tree for 64-256 nodes); each file's docstring says what it models.  Any preset's numbers
can be overridden key by key in the config.

Any preset takes ``allreduce_efficiency`` (default 1): the all-reduce's achieved bus
bandwidth as a fraction of the ideal ring's (every all-reduce message weighs 1/it times its
bytes); a fitted parameter of the published rows (``bench/sim_paper_rows``), not a preset
value.  And ``msg_efficiency``: every message's achieved share of its flow's rate (the links are
built at ``nic_gbps`` x it: :func:`nic_rate_gbps`), a preset's own number with its source where
the papers' transport was measured or fitted (``ethernet_10g``: 0.456, fitted on SlowMo Table 2a's
SGP row; the table of every uncertain parameter: :mod:`impls.sim.nominal`), 1 elsewhere.

Sources (each file's ``sources``, :data:`SOURCES`, :func:`unsourced`): each preset's network numbers are marked with
their published source or as unsourced (``None``, with why in a comment).  Unsourced today:
every per-message latency (50 us on Ethernet is a typical TCP figure; at 102 MB messages it
is < 1 % of a step, so :func:`unsourced` leaves it out unless asked), and every number of
``shared_hpc`` (racks of 8, the 8:1 uplinks, 50 % background load, 64 MB bursts: the AD-PSGD
paper names a network-sharing cluster but not its network), and ``fat_tree``'s links.  A claim
judged on a platform with an unsourced bandwidth number is "not comparable: platform unknown"
(:mod:`distrepro_wf.claims.mechanisms` ``platform_sourced``).  A value overridden in the config has no
recorded source either (``star``'s are yours to answer for: both must be given).

Choose one with ``platform: {name: ethernet_10g}`` (``backend: simgrid``); more hosts
than ``max_hosts`` is refused before any job runs.  ``max_hosts`` may be raised up to
:data:`MAX_SIM_HOSTS` (1024; ``fat_tree``: its 256), what one simulation process can host:
every rank is a thread of that process with its own model replica, and a ring all-reduce
costs O(n^2) messages per step.  Measured (2-core machine, the 19 KB digits MLP, 2 steps
and an evaluation, ``ethernet_10g``): 256 ranks 33 s and 1.0 GB, 1024 ranks 472 s and
2.3 GB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ...config.dataclass_config import from_dict
from ...errors import ConfigError
from ...registry import Registry

LATENCY_FACTOR = 13.01  # SimGrid LV08: route latency x 13.01
BANDWIDTH_FACTOR = 0.97  # SimGrid LV08: a flow gets 97 % of its bottleneck link
CROSS_TRAFFIC = 0.05  # SimGrid: a flow's acknowledgments take 5 % of its rate on the reverse route

#: the platform presets, one file each in this package (discovered on first use)
PLATFORMS: Registry = Registry("platform", "platform.name", package=__name__, one_per_file=True)
#: numbers that shape bandwidth (and so decide a speed claim); latency is minor for large messages
BANDWIDTH_KEYS = ("nic_gbps", "rack_size", "uplink_gbps", "background_load", "burst_mb", "msg_efficiency")
#: the most ranks (workers and servers) one simulation hosts: see the module docstring
MAX_SIM_HOSTS = 1024
#: a preset's numbers that need no published source: how many hosts one simulation may build
UNSOURCED_BY_NATURE = ("max_hosts",)


@dataclass(frozen=True)
class Preset:
    """One registered platform: its numbers (a ``None`` number must be given in the config),
    each number's source (``None``: unsourced), its builder, and the most hosts it can be
    built with (``host_limit``: (hosts, why), None: any up to ``max_hosts``)."""

    name: str
    build: Callable[["PlatformConfig", int], "Platform"]
    numbers: Mapping[str, Any]
    sources: Mapping[str, str | None]
    host_limit: tuple[int, str] | None = None

    def __call__(self, cfg: "PlatformConfig", hosts: int) -> "Platform":
        return self.build(cfg, hosts)


def register_platform(name: str, build: Callable[["PlatformConfig", int], "Platform"], *,
                      numbers: Mapping[str, Any], sources: Mapping[str, str | None],
                      host_limit: tuple[int, str] | None = None) -> Preset:
    """Register preset ``name`` (the file ``impls/sim/platforms/<name>.py`` calls this once).

    Every number but ``max_hosts`` needs an entry in ``sources``: its published source, or
    ``None`` (unsourced: say why in a comment).  A missing entry, a source for a number the
    preset does not have, or a key the config cannot set is a ``ValueError`` now, when the file
    is imported."""
    known = {f for f in PlatformConfig.__dataclass_fields__ if f != "name"}
    if "max_hosts" not in numbers:
        raise ValueError(f"platform {name!r}: numbers must give max_hosts (at most {MAX_SIM_HOSTS})")
    if bad := sorted(set(numbers) - known):
        raise ValueError(f"platform {name!r}: unknown numbers {bad}; a platform sets {', '.join(sorted(known))}")
    if missing := sorted(set(numbers) - set(sources) - set(UNSOURCED_BY_NATURE)):
        raise ValueError(f"platform {name!r} has no source for {', '.join(missing)}: give each number's "
                         f"published source in sources=, or None (unsourced) with why in a comment")
    if extra := sorted(set(sources) - set(numbers)):
        raise ValueError(f"platform {name!r}: sources for numbers it does not have: {', '.join(extra)}")
    preset = Preset(name, build, dict(numbers), dict(sources), host_limit)
    PLATFORMS.register(name)(preset)
    return preset


class _View(Mapping):
    """A read-only ``{preset name: <attribute of its Preset>}`` over the registry (discovering it)."""

    def __init__(self, attr: str):
        self.attr = attr

    def __getitem__(self, name: str) -> Any:
        if name not in PLATFORMS:
            raise KeyError(name)
        return getattr(PLATFORMS.get(name), self.attr)

    def __iter__(self) -> Iterator[str]:
        return iter(PLATFORMS.names())

    def __len__(self) -> int:
        return len(PLATFORMS.names())


#: each preset's numbers, ``{name: {key: value}}`` (``None``: to be given in the config)
PRESETS: Mapping[str, Mapping[str, Any]] = _View("numbers")
#: each preset's network numbers: their published source, or None (unsourced; why in its file)
SOURCES: Mapping[str, Mapping[str, str | None]] = _View("sources")


@dataclass
class PlatformConfig:
    name: str = field(default="ethernet_10g", metadata={"choices": PRESETS})
    nic_gbps: float | None = field(default=None, metadata={"gt": 0})  # each host's link, Gbit/s
    latency_us: float | None = field(default=None, metadata={"min": 0})  # end-to-end per message
    max_hosts: int | None = field(default=None, metadata={"min": 1, "max": MAX_SIM_HOSTS})
    rack_size: int | None = field(default=None, metadata={"min": 1})  # shared_hpc
    uplink_gbps: float | None = field(default=None, metadata={"gt": 0})  # shared_hpc: each rack's uplink
    background_load: float | None = field(default=None, metadata={"min": 0, "lt": 1})  # shared_hpc
    burst_mb: float | None = field(default=None, metadata={"gt": 0})  # shared_hpc: one background burst
    small_allreduce_bytes: int = field(default=65536, metadata={"min": 0})  # below: recursive doubling (0: never)
    # achieved all-reduce bandwidth / the ideal ring's on these links (NCCL's "bus
    # efficiency"): every all-reduce message weighs 1/it times its bytes.  1: the ideal ring
    # (the presets); below 1: a transport that does not fill the NIC (sockets, few rings).
    allreduce_efficiency: float = field(default=1.0, metadata={"gt": 0, "max": 1})
    # every message's achieved share of its flow's rate (a transport that does not fill the NIC:
    # TCP sockets' per-socket CPU cost), applied to every link's rate; the preset's nominal value with its
    # source (ethernet_10g: fitted, impls/sim/nominal.py), 1 where a preset has none
    msg_efficiency: float | None = field(default=None, metadata={"gt": 0, "max": 1})
    # the collectives a rank runs at once in one process group, the others queued in the order
    # issued (AR-SGD's buckets): 1, NCCL's one stream per communicator (the papers' clusters); a
    # twin of real gloo ranks takes gloo's 2 (impls.backends.TorchSpec.collective_streams)
    collective_streams: int = field(default=1, metadata={"min": 1})

    def validate(self, key: str) -> None:
        preset = PLATFORMS.get(self.name)
        for k, v in preset.numbers.items():
            if getattr(self, k) is None:
                if v is None:
                    raise ConfigError(f"{key}.{k}", f"platform {self.name!r} needs {k} (a custom star: give "
                                                    f"nic_gbps and latency_us)")
                setattr(self, k, v)
        if self.msg_efficiency is None:  # a preset without a measured transport: line rate (unsourced)
            self.msg_efficiency = 1.0
        if preset.host_limit and self.max_hosts > preset.host_limit[0]:
            most, why = preset.host_limit
            raise ConfigError(f"{key}.max_hosts", f"{self.name} is built with {most} hosts ({why}); allowed: "
                                                  f"1..{most}, got {self.max_hosts}")
        for k in _OPTIONAL_NUMBERS:
            if k not in preset.numbers and getattr(self, k) is not None:
                having = [n for n in PLATFORMS.names() if k in PLATFORMS.get(n).numbers]
                raise ConfigError(f"{key}.{k}", f"only platform {', '.join(map(repr, having))} has {k!r}, "
                                                f"not {self.name!r}")


#: numbers only some presets have (``None`` unless the preset or the config sets them)
_OPTIONAL_NUMBERS = ("rack_size", "uplink_gbps", "background_load", "burst_mb")


def unsourced(cfg: PlatformConfig, keys: tuple[str, ...] = BANDWIDTH_KEYS) -> list[str]:
    """The numbers among ``keys`` of a validated platform that have no published source: the
    preset's unsourced ones, and any overridden away from its preset (no source recorded),
    except those the preset leaves to the config (``star``'s, no preset value)."""
    preset = PLATFORMS.get(cfg.name)
    out = []
    for k in keys:
        if k not in preset.numbers:
            continue
        default = preset.numbers[k]
        overridden = default is not None and getattr(cfg, k) != default
        if overridden or not preset.sources.get(k):
            out.append(k)
    return out


def platform_config(spec: Any, key: str = "platform") -> PlatformConfig:
    """``spec``: a preset name or ``{name: ..., <overrides>}``."""
    if isinstance(spec, str):
        spec = {"name": spec}
    return from_dict(PlatformConfig, spec, key)


def check_hosts(cfg: PlatformConfig, hosts: int, key: str = "platform") -> None:
    if hosts > cfg.max_hosts:
        raise ConfigError(f"{key}.max_hosts", f"platform {cfg.name!r} has {cfg.max_hosts} hosts; this run needs "
                                              f"{hosts} (workers and servers)")


@dataclass
class Platform:
    """A built platform: the ranks' hosts, its alpha-beta parameters, background actors."""

    cfg: PlatformConfig
    hosts: list
    start_background: Callable[[int], None] = lambda seed: None

    def alpha_beta(self) -> tuple[float, float]:
        return alpha_beta(self.cfg)


def alpha_beta(cfg: PlatformConfig, duplex: bool = True, line_rate: bool = False) -> tuple[float, float]:
    """The preset's per-message latency (s) and per-direction bandwidth (bytes/s) of a NIC
    sending and receiving at once (see the module docstring), every message at ``msg_efficiency``
    of it as simulated; ``duplex=False``: of a flow alone on its links (no acknowledgments of a
    reverse flow to share them with: 5 % more); ``line_rate``: without ``msg_efficiency`` (the
    closed form's ``bandwidth``, which it multiplies by its ``efficiency``)."""
    beta = BANDWIDTH_FACTOR * (cfg.nic_gbps if line_rate else nic_rate_gbps(cfg)) * 1e9 / 8
    return cfg.latency_us * 1e-6, beta / (1 + CROSS_TRAFFIC) if duplex else beta


def nic_rate_gbps(cfg: PlatformConfig) -> float:
    """The rate a host's NIC link is built with: ``nic_gbps`` x ``msg_efficiency``."""
    return cfg.nic_gbps * (cfg.msg_efficiency or 1.0)


def uplink_rate_gbps(cfg: PlatformConfig) -> float:
    """The rate a rack uplink is built with (``shared_hpc``): ``uplink_gbps`` x ``msg_efficiency``."""
    return cfg.uplink_gbps * (cfg.msg_efficiency or 1.0)


def build_platform(cfg: PlatformConfig, hosts: int) -> Platform:
    """Create the platform in the current SimGrid engine, with ``hosts`` rank hosts."""
    check_hosts(cfg, hosts)
    return PLATFORMS.get(cfg.name)(cfg, hosts)


def link(zone, name: str, gbps: float, latency_s: float):
    """A split-duplex link of ``gbps`` and ``latency_s`` in ``zone`` (a builder's brick)."""
    return zone.create_split_duplex_link(name, gbps * 1e9 / 8).set_latency(latency_s).seal()


def star_network(cfg: PlatformConfig, n: int) -> Platform:
    """``n`` hosts on one non-blocking switch, each behind its NIC of ``nic_gbps``; a message's
    end-to-end latency is ``latency_us`` (two links per route)."""
    import simgrid

    from ...backends.sim import SPEED

    zone = simgrid.NetZone.create_star_zone("cluster")
    lat = cfg.latency_us * 1e-6 / (2 * LATENCY_FACTOR)  # two links per route
    hosts = []
    for i in range(n):
        h = zone.create_host(f"node{i}", SPEED).seal()
        nic = link(zone, f"nic{i}", nic_rate_gbps(cfg), lat)
        zone.add_route(h.netpoint, None, None, None, [simgrid.LinkInRoute(nic, simgrid.LinkInRoute.Direction.UP)],
                       True)
        hosts.append(h)
    zone.seal()
    return Platform(cfg, hosts)
