"""Structured JSON logging through mypylogger.

Two things the plain library does not do for a Lambda:

* mypylogger writes through a background ``QueueListener``. A Lambda sandbox
  may be frozen the moment the handler returns, so :func:`flush` blocks until
  every record queued so far has been written (``Queue.join``; the stdlib
  listener calls ``task_done`` per record on 3.12+).
* ``logger.info(..., extra={"filename": ...})`` raises ``KeyError`` because the
  key collides with a ``LogRecord`` attribute. :class:`SafeLogger` renames such
  keys (``filename`` -> ``filename_``) instead of crashing the invocation.

Messages are constant strings; anything about a person (addresses, subjects,
bodies) goes into ``extra`` fields only.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import mypylogger

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def safe_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``fields`` with keys that would collide with LogRecord attributes suffixed by ``_``."""
    return {(f"{k}_" if k in _RESERVED else k): v for k, v in fields.items()}


class SafeLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose ``extra`` can never raise on a reserved key."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        extra = kwargs.get("extra")
        if extra:
            kwargs["extra"] = safe_fields(extra)
        return msg, kwargs


def get_logger(name: str | None = None) -> SafeLogger:
    return SafeLogger(mypylogger.get_logger(name or "service-email-handler"), {})


def configure(service: str, environment: str) -> None:
    """Set the process-wide static fields (mypylogger reads APP_NAME only at import)."""
    from common import __version__

    mypylogger.get_logger(
        "service-email-handler",
        static_fields={
            "service": os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or service,
            "environment": environment,
            "version": __version__,
        },
    )


def set_level(level: int | str, *names: str) -> None:
    """Raise or lower the level of named loggers (local tools whose stdout is data or a console)."""
    for name in names:
        get_logger(name).logger.setLevel(level)


def bind(**fields: Any) -> None:
    mypylogger.bind(**safe_fields(fields))


def clear_bindings() -> None:
    mypylogger.clear_bindings()


def flush(logger: SafeLogger | logging.Logger | None = None) -> None:
    """Block until every record logged so far is written to stdout/stderr."""
    base = logger.logger if isinstance(logger, SafeLogger) else (logger or get_logger().logger)
    for handler in base.handlers:
        queue = getattr(handler, "queue", None)
        if queue is not None and hasattr(queue, "join"):
            queue.join()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or detached stream: nothing left to flush
            pass
