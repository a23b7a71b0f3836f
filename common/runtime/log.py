"""Structured JSON logging through mypylogger.

Two things the plain library does not do for a Lambda:

* mypylogger writes through a background ``QueueListener``. A Lambda sandbox
  may be frozen the moment the handler returns, so :func:`flush` blocks until
  every record queued so far has been written (``Queue.join``; the stdlib
  listener calls ``task_done`` per record on 3.12+).
* ``logger.info(..., extra={"filename": ...})`` raises ``KeyError`` because the
  key collides with a ``LogRecord`` attribute. :class:`SafeLogger` renames such
  keys (``filename`` -> ``filename_``) instead of crashing the invocation.

Messages are constant strings. No record carries a mail's content or names a person
(docs/security.md, "What the logs hold"): every ``extra`` and bound field passes :func:`scrub`, which
replaces each e-mail address anywhere in a value, the conversation id and file name segments of the
bucket's per-contact keys, and the whole value of the fields that carry a person or a mail's text
(:data:`PERSONAL_FIELDS`) by a :func:`pseudonym`: the same input gives the same short id, so log lines
still correlate, and `email-handler forget` leaves nothing to find by content.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import unicodedata
from collections.abc import Mapping, MutableMapping
from typing import Any

import mypylogger

from common import __version__

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


# Fields whose whole value is about a person or is a mail's own text: pseudonymised, never written.
PERSONAL_FIELDS = frozenset(
    {
        "sender",
        "envelope_sender",
        "from",
        "to",
        "cc",
        "recipient",
        "recipients",
        "contact",
        "address",
        "email",
        "display_name",
        "subject",
        "body",
        "body_preview",
        "text",
        "html",
        "attachment",
        "filename",
        "skipped_attachments",
        "owner_mailboxes",
        "conversation_id",
        "conversationId",
    }
)
# "<kind>:<id>" values (idempotency keys, correlation ids): the id is kept when it is an SES message id
# or a hash (letters and digits only), else (a conversation id: "reply:<cid>:<hash>") pseudonymised.
CORRELATION_FIELDS = frozenset({"idempotency_key", "correlation_id"})
# The bucket's per-contact keys: <prefix><cid>/<sesMessageId>/<file> (common/store/layout.py).
_PER_CONTACT = ("conversations/", "attachments/", "withheld/", "extracted-text/", "reply-attachments/")
_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!#$%&'*+/=?^_`{|}~-")
_DOMAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-[]:")
_SAFE_ID = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")  # a conversation id's characters
# Internationalised addresses: an SMTPUTF8 local part (RFC 6531) and an IDN domain's U-labels (RFC 5890)
# are letters, marks and digits of any script; IDNA reads these as label dots too (UTS 46).
_IDN_DOTS = "\u3002\uff0e\uff61"
_WORDISH = ("L", "M", "N")
_TRAILING = ".-:" + _IDN_DOTS


def _in(c: str, ascii_chars: frozenset[str], idn: bool) -> bool:
    """``c`` is one of ``ascii_chars``, or (``idn``) a letter, mark or digit beyond ASCII or an IDN dot."""
    if c in ascii_chars:
        return True
    return idn and c > "\x7f" and (c in _IDN_DOTS or unicodedata.category(c)[0] in _WORDISH)


def pseudonym(value: str) -> str:
    """A short stable id for a value about a person (case and surrounding space ignored)."""
    digest = hashlib.sha256(str(value).strip().lower().encode("utf-8", "surrogatepass")).hexdigest()
    return "p-" + digest[:12]


def _addresses(
    text: str,
    at_sign: str = "@",
    local_chars: frozenset[str] = _LOCAL,
    domain_chars: frozenset[str] = _DOMAIN,
    idn: bool = True,
) -> str:
    """``text`` with every address-like ``local@domain`` replaced by its pseudonym (internationalised
    ones too: ``josé@exämple.com``, ``用户@例子.广告``), and (``at_sign`` "-at-", ``idn`` off) every
    conversation id of an ordinary sender (``local-at-domain``, docs/CONTRACT.md). Linear: each sign
    looks at most 64 characters back and 255 ahead (RFC 5321's limits)."""
    if at_sign not in text:
        return text
    out: list[str] = []
    done = at = 0
    while (at := text.find(at_sign, at)) >= 0:
        start = at
        while start > max(done, at - 64) and _in(text[start - 1], local_chars, idn):
            start -= 1
        after = at + len(at_sign)
        end = after
        while end < min(len(text), after + 255) and _in(text[end], domain_chars, idn):
            end += 1
        while (
            end > after and text[end - 1] in ".-:" + _IDN_DOTS
        ):  # a sentence's full stop is not the domain's
            end -= 1
        domain = text[after:end]
        if start < at and any(dot in domain for dot in "." + _IDN_DOTS):
            out += [text[done:start], pseudonym(text[start:end])]
            done = end
        at = max(at + 1, done)
    return "".join(out) + text[done:]


def _keys(text: str) -> str:
    """``text`` with the conversation id and the file name of each per-contact bucket key pseudonymised."""
    for prefix in _PER_CONTACT:
        if prefix not in text:
            continue
        out: list[str] = []
        done = 0
        while (found := text.find(prefix, done)) >= 0:
            if found and (text[found - 1].isalnum() or text[found - 1] in "-_"):
                out.append(text[done : found + len(prefix)])
                done = found + len(prefix)
                continue
            begin = found + len(prefix)
            end = len(text) if found == 0 else begin  # a value that is a key: file names may have spaces
            while end < len(text) and not text[end].isspace() and text[end] not in "\"',;)]}>":
                end += 1
            parts = text[begin:end].split("/")
            parts[0] = pseudonym(parts[0])  # the conversation id
            if len(parts) > 2:  # <cid>/<sesMessageId>/<file...>
                parts[2:] = [pseudonym("/".join(parts[2:]))]
            out += [text[done:begin], "/".join(parts)]
            done = end
        text = "".join(out) + text[done:]
    return text


def scrub(value: Any, field: str = "") -> Any:
    """``value`` fit for a log record (see the module's docstring)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if field in PERSONAL_FIELDS:
        if isinstance(value, list | tuple | set | frozenset):
            return [pseudonym(str(v)) for v in value]
        return pseudonym(str(value)) if str(value) else ""
    if isinstance(value, Mapping):
        return {k: scrub(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [scrub(v) for v in value]
    text = str(value)
    if field in CORRELATION_FIELDS:
        kind, sep, rest = text.partition(":") if ":" in text else text.partition("-")
        if sep and rest and not rest.isalnum():
            return kind + sep + pseudonym(rest)
    # "＠" (U+FF20) is how an address is spelt past a filter: it names the person as "@" does
    text = _addresses(_addresses(_keys(text)), "\uff20")
    return _addresses(text, "-at-", _SAFE_ID, _SAFE_ID, idn=False)


def safe_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``fields`` scrubbed (:func:`scrub`), with keys that would collide with LogRecord attributes
    suffixed by ``_``."""
    return {(f"{k}_" if k in _RESERVED else k): scrub(v, k) for k, v in fields.items()}


def scrubbed_exception(exc: BaseException, depth: int = 0) -> BaseException:
    """A stand-in for ``exc``: an instance of a subclass of its type (``except`` clauses and
    ``errorType`` see the same class name), with its traceback and chain, and its text scrubbed: an
    exception's message may quote the mail it choked on. Attributes of ``exc`` are not carried over."""
    kind, message = type(exc), scrub(str(exc))
    names = {"__module__": kind.__module__, "__qualname__": kind.__qualname__}
    text = {"__str__": lambda self: message, "__repr__": lambda self: f"{kind.__name__}({message!r})"}
    stand_in: BaseException
    try:
        stand_in = kind.__new__(type(kind.__name__, (kind,), {**names, **text}))
    except TypeError:  # a type that cannot be subclassed or made without its arguments
        stand_in = type(kind.__name__, (Exception,), names)(message)
    stand_in.args = (message,)
    stand_in.__traceback__ = exc.__traceback__
    if depth < 5:
        if exc.__cause__ is not None:
            stand_in.__cause__ = scrubbed_exception(exc.__cause__, depth + 1)
        elif exc.__context__ is not None and not exc.__suppress_context__:
            stand_in.__context__ = scrubbed_exception(exc.__context__, depth + 1)
    stand_in.__suppress_context__ = exc.__suppress_context__
    return stand_in


class SafeLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose ``extra`` can never raise on a reserved key, and whose fields and exceptions
    name no one (:func:`scrub`)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        extra = kwargs.get("extra")
        if extra:
            kwargs["extra"] = safe_fields(extra)
        exc_info = kwargs.get("exc_info")
        if exc_info:
            exc = (
                exc_info
                if isinstance(exc_info, BaseException)
                else (exc_info[1] if isinstance(exc_info, tuple) else sys.exc_info()[1])
            )
            if exc is not None:
                stand_in = scrubbed_exception(exc)
                kwargs["exc_info"] = (type(exc), stand_in, exc.__traceback__)
        return msg, kwargs


def get_logger(name: str | None = None) -> SafeLogger:
    return SafeLogger(mypylogger.get_logger(name or "service-email-handler"), {})


def configure(service: str, environment: str) -> None:
    """Set the process-wide static fields (mypylogger reads APP_NAME only at import)."""

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
