"""``star``: a network you describe: hosts on one non-blocking switch, each NIC of
``nic_gbps`` and ``latency_us`` end to end, both required (no default), e.g. ``{name: star,
nic_gbps: 0.1, latency_us: 9}`` (the shaped namespaces of :mod:`distrepro_wf.bench.netns`:
their tbf rate and their measured veth latency).  Its numbers are the config's to answer for."""

from . import register_platform, star_network

register_platform(
    "star", star_network,
    numbers={"nic_gbps": None, "latency_us": None, "max_hosts": 256},
    sources={"nic_gbps": "given in the config", "latency_us": "given in the config"},
)
