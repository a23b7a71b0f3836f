"""The project's one exception family: every error it raises on purpose derives from EmailHandlerError.

A caller that wants "anything this project refuses" catches EmailHandlerError; the subclasses say
which rule refused (and keep the builtin base a caller may already catch, such as ValueError).
"""

__all__ = ["ConfigError", "EmailHandlerError", "EventError"]


class EmailHandlerError(Exception):
    """Base of every exception the project defines."""


class ConfigError(EmailHandlerError, RuntimeError):
    """The environment does not describe a usable configuration; the message names what to fix."""


class EventError(EmailHandlerError, ValueError):
    """An invocation event does not have the shape this function handles."""
