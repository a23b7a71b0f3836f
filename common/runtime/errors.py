"""Exception types shared by every function."""


class ConfigError(RuntimeError):
    """The environment does not describe a usable configuration; the message names what to fix."""


class EventError(ValueError):
    """An invocation event does not have the shape this function handles."""
