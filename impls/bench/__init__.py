"""Benchmarks run as processes of their own: AR-SGD against torch DDP (:mod:`.ddp`,
``python -m impls.bench.ddp ddp``) and the all-reduce algorithms (:mod:`.allreduce`).
"""
