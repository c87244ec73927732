"""``infiniband_100g``: SGP's fast network, 100 Gbit/s EDR InfiniBand behind a non-blocking
switch, 2 us per message.  Every message at the simulated flow's full rate (``msg_efficiency``
1): NCCL over one EDR adapter reaches 12.2 GB/s of bus bandwidth, 0.98 of line rate, already
more than the flow model's 0.97 / 1.05 = 0.92 (NVIDIA/nccl-tests #29)."""

from . import register_platform, star_network

register_platform(
    "infiniband_100g", star_network,
    numbers={"nic_gbps": 100.0, "latency_us": 2.0, "max_hosts": 256, "msg_efficiency": 1.0},
    sources={"nic_gbps": "SGP (Assran+ 2019) Sec. 6: 100 Gbit/s InfiniBand",
             "latency_us": None,  # a typical EDR figure, no paper's
             "msg_efficiency": "NVIDIA/nccl-tests #29 (NVIDIA, 2019): 12.2 GB/s all-reduce bus bandwidth on one "
                               "100 Gb/s EDR adapter, \"as good as you can get\" (0.98 of line rate; the simulated "
                               "flow, 0.97 / 1.05 = 0.92 of it, is already at or below that)"},
)
