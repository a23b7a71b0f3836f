"""The extractor's one error type and how a library exception becomes a reason people can read."""

from __future__ import annotations

import re

from common.errors import EmailHandlerError
from common.mail.charsets import well_formed

MAX_REASON = 300
# Object ids and reprs carry memory addresses that differ per run and mean nothing to a reader.
# Only from the first of a run of spaces: from every one, a long run without "at 0x" after it is
# rescanned once per space (quadratic on a PDF error message that quotes a stranger's text).
_ADDRESS = re.compile(r"(?<!\s)\s++at 0x[0-9a-fA-F]+")
_INDIRECT = re.compile(r"IndirectObject\((\d+), (\d+), \d+\)")
_HEX = re.compile(r"0x[0-9a-fA-F]{8,}")


MEMORY = "needs more memory than the limit"


class RejectedError(EmailHandlerError):
    """The file cannot be turned into text; ``reason`` says why (goes into the error record)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def loggable(reason: str) -> str:
    """What of a reason may be logged: its head, up to the first ": ". Every reason puts what it read
    from the document (a parser's message quoting the file's bytes, a part's name) after that; the
    whole reason goes only into the error record beside the document (docs/extractor.md)."""
    return reason.split(": ", 1)[0]


def clean(message: str) -> str:
    message = well_formed(message)
    message = _INDIRECT.sub(r"\1 \2 R", _ADDRESS.sub("", message))
    message = " ".join(_HEX.sub("0x...", message).split())
    return message if len(message) <= MAX_REASON else message[: MAX_REASON - 3] + "..."


def describe(exc: BaseException) -> str:
    """A one-line reason for an exception raised by a parser, without addresses or object ids.

    Libraries wrap: pypdf turns a MemoryError while reading the trailer into "PdfReadError:
    Trailer cannot be read: " (empty). The chain of causes decides what really happened.
    """
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    if any(isinstance(e, MemoryError) for e in chain):
        return MEMORY
    if any(isinstance(e, RecursionError) for e in chain):
        return "structure nested too deeply"
    limit = next((e for e in chain if type(e).__name__ == "LimitReachedError"), None)
    if limit is not None:
        return f"over a safety limit: {clean(str(limit))}"
    message = clean(str(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
