"""EventBridge: the outcome events the functions put on the owner's event bus (common/runtime/outcomes.py).

An event reports a mail's outcome after that outcome is stored; it must never hold up or fail the mail
itself. So the client makes one attempt (no retry) with a 1 s connect and a 2 s read timeout, and the
caller catches whatever this raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from common.aws import client

# "Entries: ... Array Members: Minimum number of 1 item. Maximum number of 10 items." (EventBridge API
# reference, PutEvents, https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html)
MAX_ENTRIES = 10
TIMEOUTS = (1.0, 2.0)  # connect, read: seconds


def entry(bus: str, source: str, detail_type: str, detail: Mapping[str, Any]) -> dict[str, str]:
    """One PutEventsRequestEntry: ``bus`` is the bus's name or ARN (an omitted bus is ``default``)."""
    return {
        "EventBusName": bus,
        "Source": source,
        "DetailType": detail_type,
        "Detail": json.dumps(detail, separators=(",", ":"), sort_keys=True),
    }


def put(entries: Sequence[Mapping[str, str]]) -> list[str]:
    """Put ``entries`` (ten per request); returns the error code of each entry EventBridge refused
    ([] when every entry was accepted). PutEvents answers 200 with ``FailedEntryCount`` when only
    some entries fail, so those are read from the answer, not raised."""
    api = client("events", max_attempts=1, timeouts=TIMEOUTS)
    refused: list[str] = []
    for start in range(0, len(entries), MAX_ENTRIES):
        answer = api.put_events(Entries=list(entries[start : start + MAX_ENTRIES]))
        if answer.get("FailedEntryCount"):
            refused += [str(e.get("ErrorCode")) for e in answer.get("Entries", []) if e.get("ErrorCode")]
    return refused
