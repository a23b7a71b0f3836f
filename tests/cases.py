"""One smoke case per function, shared by the host-RIE and the container suites."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.conftest import load_event


@dataclass(frozen=True)
class Case:
    function: str
    event: str
    check: Callable[[Any], None]


def _inbound(result: Any) -> None:
    assert result["status"] == "received"
    assert result["messageId"] == "o3vrnil0e2ic28trm7dfhrc2v0clambda4nbp0g1"


def _reply(result: Any) -> None:
    assert result["status"] == "received"
    assert result["recipients"] == ["anoop-at-synchronycorp.com.tag@thread.example.com"]


def _extractor(result: Any) -> None:
    # Needs no AWS: a calendar file has no text extractor. The key arrives URL-encoded and is decoded.
    [item] = result["results"]
    assert item["key"] == "attachments/anoop-at-synchronycorp.com/o3vrnil0e2ic28trm7dfhrc2v0clambda4nbp0g1/Team Invite (2026).ICS"
    assert item["status"] == "skipped"


def _sender(result: Any) -> None:
    assert result == {"batchItemFailures": []}


CASES = [
    Case("inbound-handler", "ses-inbound.json", _inbound),
    Case("reply-handler", "ses-reply.json", _reply),
    Case("attachment-extractor", "s3-calendar.json", _extractor),
    Case("ack-sender", "sqs-send.json", _sender),
    Case("forward-sender", "sqs-send.json", _sender),
    Case("reply-sender", "sqs-send.json", _sender),
]


def event_for(case: Case) -> Any:
    return load_event(case.event)
