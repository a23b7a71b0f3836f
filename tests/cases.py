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
    # The key arrives URL-encoded in the event and must be decoded.
    assert result["keys"] == ["attachments/anoop-at-synchronycorp.com/o3vrnil0e2ic28trm7dfhrc2v0clambda4nbp0g1/My CV (2026).PDF"]


def _sender(result: Any) -> None:
    assert result == {"batchItemFailures": []}


CASES = [
    Case("inbound-handler", "ses-inbound.json", _inbound),
    Case("reply-handler", "ses-reply.json", _reply),
    Case("attachment-extractor", "s3-attachment.json", _extractor),
    Case("ack-sender", "sqs-send.json", _sender),
    Case("forward-sender", "sqs-send.json", _sender),
    Case("reply-sender", "sqs-send.json", _sender),
]


def event_for(case: Case) -> Any:
    return load_event(case.event)
