"""The benchmarks: each a pipeline target writing a CSV (:mod:`.tables`, :mod:`.simbench`,
:mod:`.ddpbench`, :mod:`.netnsbench`, ...).
"""
