"""``fat_tree``: a two-level, full-bisection fat tree for 64-256 nodes (16 nodes per leaf
switch, 16 spine switches), 100 Gbit/s links, 1 us per hop (4 us end to end).  A generic
fabric: none of its numbers is a paper's."""

from __future__ import annotations

from typing import Any

from . import LATENCY_FACTOR, Platform, PlatformConfig, nic_rate_gbps, register_platform

HOSTS = 256  # FatTreeParams(2, [16, 16], ...): 16 leaf switches of 16 hosts


def build(cfg: PlatformConfig, n: int) -> Platform:
    import simgrid

    from ...backends.sim import SPEED

    made: dict[int, Any] = {}

    def node(zone, coord, ident):
        made[ident] = zone.create_host(f"node{ident}", SPEED).seal()
        return made[ident].netpoint, None

    lat = cfg.latency_us * 1e-6 / (4 * LATENCY_FACTOR)  # four links between leaves of two switches
    simgrid.NetZone.create_fatTree_zone("fat_tree", None, simgrid.FatTreeParams(2, [16, 16], [1, 16], [1, 1]),
                                        simgrid.ClusterCallbacks(node, None, None), nic_rate_gbps(cfg) * 1e9 / 8, lat,
                                        simgrid.Link.SharingPolicy.SPLITDUPLEX).seal()
    return Platform(cfg, [made[i] for i in range(n)])


register_platform(
    "fat_tree", build,
    numbers={"nic_gbps": 100.0, "latency_us": 4.0, "max_hosts": 256},
    sources={"nic_gbps": None, "latency_us": None},  # a generic full-bisection fabric
    host_limit=(HOSTS, "16 leaf switches of 16"),
)
