"""``infiniband_100g``: SGP's fast network, 100 Gbit/s EDR InfiniBand behind a non-blocking
switch, 2 us per message."""

from . import register_platform, star_network

register_platform(
    "infiniband_100g", star_network,
    numbers={"nic_gbps": 100.0, "latency_us": 2.0, "max_hosts": 256},
    sources={"nic_gbps": "SGP (Assran+ 2019) Sec. 6: 100 Gbit/s InfiniBand",
             "latency_us": None},  # a typical EDR figure, no paper's
)
