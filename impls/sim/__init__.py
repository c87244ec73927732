"""The simulated platform: the same runtime and algorithm code as real ranks, every rank
an actor of a SimGrid simulation (:mod:`impls.backends.sim`), on a platform preset
(:mod:`.platforms`) with a timing profile (:mod:`.profiles`); :mod:`.engine` runs one
configuration (``python -m impls.sim``).  Importing this package does not import SimGrid.
"""
