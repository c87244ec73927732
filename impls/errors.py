"""Errors that carry a clear, user-facing message."""


class ConfigError(ValueError):
    """A configuration value is invalid.

    The message always names the offending key and, where the set is finite, the
    allowed values, e.g. ``algorithm.name: unknown 'sgdd'; known: allreduce_sgd, ...``.
    """

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")
