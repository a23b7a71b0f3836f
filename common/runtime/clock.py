"""The one timestamp format of the system: ISO 8601 in UTC with a ``Z`` (docs/CONTRACT.md, Data)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_z(moment: datetime | None = None, *, millis: bool = False) -> str:
    """``2026-11-23T16:38:28Z`` (or ``…28.123Z`` with ``millis``); now when ``moment`` is None."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    if millis:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` or an offset) as an aware UTC datetime; None if it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def parse_iso_or_now(text: str) -> datetime:
    """:func:`parse_iso`, or now when ``text`` is not a timestamp (an event or record that did not say)."""
    return parse_iso(text) or datetime.now(UTC)
