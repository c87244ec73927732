"""The per-rank training runtime shared by every algorithm (see :mod:`impls.protocol`)."""
