"""``ethernet_10g``: the SGP / SlowMo clusters (Assran et al. 2019; Wang et al. 2020): one
10 Gbit/s Ethernet NIC per node behind a non-blocking switch, 50 us per message (a typical
TCP figure, not a paper's)."""

from . import register_platform, star_network

register_platform(
    "ethernet_10g", star_network,
    numbers={"nic_gbps": 10.0, "latency_us": 50.0, "max_hosts": 256},
    sources={"nic_gbps": "SGP (Assran+ 2019) Sec. 6 and SlowMo (Wang+ 2020) Sec. 5: 10 Gbit/s Ethernet",
             "latency_us": None},  # a typical TCP figure, no paper's
)
