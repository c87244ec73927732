"""The clock seam of the op-cost model: a part that does local work charges it itself.

:class:`Charging` is mixed into every part whose work a simulated clock must charge
(compressors, error feedback, local optimizers, the parameter server's shard); the factory that
builds the part for a run binds it to the run's clock (:class:`impls.backends.Clock`, whose
``charge_op`` is a no-op on the wall clock).  What each part charges: ``docs/simulated-platform.md``,
"Who charges what"; the kinds and bandwidths: :mod:`impls.sim.opcost`.  No imports: any part
of ``impls`` may use it without an import cycle.
"""

from __future__ import annotations

from typing import Any


class Charging:
    """A part that does local work a simulated clock must charge (a compressor, error feedback,
    a local optimizer, a majority vote, a server's apply): it charges each operation itself,
    where the operation runs, with the bytes it touches (:meth:`charge`, kinds of
    :mod:`impls.sim.opcost`), so no algorithm can forget a cost or charge it at the wrong moment.

    The factory that builds the part for a run binds it to the run's clock (:meth:`bind_clock`:
    ``impls.compression.build(..., clock=)``, ``impls.optim.build_optimizer(..., clock=)``, the
    communicator's clock); the wall clock's ``charge_op`` is a no-op (the work's real time is
    simply spent).  A part built outside a run (a test, a benchmark) is unbound and charges
    nothing.  The binding is the part's own attribute: nothing global, nothing kept between runs."""

    _clock: Any = None

    def bind_clock(self, clock: Any):
        """Charge this part's work to ``clock`` from now on (None: charge nothing); returns self."""
        self._clock = clock
        return self

    def charge(self, kind: str, nbytes: float) -> None:
        """This part has just done an operation of ``kind`` touching ``nbytes`` bytes."""
        if self._clock is not None:
            self._clock.charge_op(kind, nbytes)
