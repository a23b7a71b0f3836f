"""The ``rate#ses`` item of the send-status table: the shared SES rate's theoretical arrival time
(TAT), which common/senders/ratelimit.py claims windows of. Its one writer: each write is conditional,
and a refused one raises :class:`TatMovedError` carrying the TAT it found (no second read)."""

from __future__ import annotations

from common.aws import dynamodb
from common.errors import EmailHandlerError

__all__ = ["KEY", "TatMovedError", "append", "give_back", "start"]

KEY = {"id": "rate#ses"}
_DAY_S = 86400


class TatMovedError(EmailHandlerError):
    """The TAT was not where the write expected it; ``tat`` is where it is (None: no item)."""

    def __init__(self, tat: int | None) -> None:
        super().__init__(f"rate window moved (tat {tat})")
        self.tat = tat


def _moved(lost: dynamodb.ConditionFailedError) -> TatMovedError:
    return TatMovedError(int(lost.item["tat"]) if lost.item and "tat" in lost.item else None)


def append(table: str, now_us: int, length_us: int) -> int:
    """Add ``length_us`` to a TAT that is ahead of ``now_us`` (an atomic ADD: instances taking turns
    never lose a race); returns the new TAT."""
    try:
        got = dynamodb.update(
            table,
            KEY,
            "SET expiresAt = :ttl ADD tat :len",
            {":now": now_us, ":ttl": now_us // 1_000_000 + _DAY_S, ":len": length_us},
            condition="tat >= :now",
            return_values="UPDATED_NEW",
            raise_on_condition=True,
        )
    except dynamodb.ConditionFailedError as lost:
        raise _moved(lost) from None
    return int((got or {})["tat"])


def start(table: str, now_us: int, new_us: int) -> None:
    """Set the TAT to ``new_us`` if it is not ahead of ``now_us`` (or there is none yet)."""
    try:
        dynamodb.update(
            table,
            KEY,
            "SET tat = :new, expiresAt = :ttl",
            {":now": now_us, ":ttl": now_us // 1_000_000 + _DAY_S, ":new": new_us},
            condition="attribute_not_exists(tat) OR tat <= :now",
            raise_on_condition=True,
        )
    except dynamodb.ConditionFailedError as lost:
        raise _moved(lost) from None


def give_back(table: str, end_us: int, back_us: int) -> None:
    """Move the TAT back from ``end_us`` to ``back_us`` if nobody claimed after ``end_us``."""
    try:
        dynamodb.update(
            table,
            KEY,
            "SET tat = :back",
            {":back": back_us, ":end": end_us},
            condition="tat = :end",
            raise_on_condition=True,
        )
    except dynamodb.ConditionFailedError as lost:
        raise _moved(lost) from None
