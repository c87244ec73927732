"""Errors that carry a clear, user-facing message."""


class ConfigError(ValueError):
    """A configuration value is invalid.

    The message always names the offending key and, where the set is finite, the
    allowed values, e.g. ``algorithm.name: unknown 'sgdd'; known: allreduce_sgd, ...``.
    """

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


class DivergedError(RuntimeError):
    """Training produced a non-finite loss, gradient or parameter.

    Raised identically on every rank (the ranks agree on the first bad value before
    raising), so a launch skips that run together and the rest of its plan still runs.
    The message names the rank, the step and the value, e.g.
    ``diverged: rank 2, step 13 (epoch 1): loss/train = nan`` or ``diverged: rank 1:
    step 3 (epoch 0): non-finite gradient of fc.weight (nan)``.
    """


class DivergedAtStep(DivergedError):
    """A rank's gradient was non-finite at a step: raised by that rank alone, at once, before
    its algorithm (or a compressor) sees the gradient, where a rank may leave alone: a
    single-rank run, or a backend whose ranks share one process (the simulated platform: the
    other ranks block and the simulation ends with this error).  On real multi-rank launches
    the rank instead zeroes that gradient and steps on in lockstep until the ranks agree at the
    epoch's end (:func:`impls.runtime.agreement.check_divergence`): leaving alone would end
    the launch and the rest of its plan."""
