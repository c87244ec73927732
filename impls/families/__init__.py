"""Algorithm families: what several methods of :mod:`impls.algorithms` share (gossip
rounds and PushSum: :mod:`.gossip`; server ranks: :mod:`.ps`).  Not algorithms
themselves, so outside the algorithm registry's package.
"""
