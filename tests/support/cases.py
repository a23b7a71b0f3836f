"""One smoke case per function, shared by the host-RIE and the container suites.

Cases with ``aws=True`` run against a provisioned moto server (the ``stack`` fixture).
"""

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
    aws: bool = True


def _handled_before(message_id: str) -> Callable[[Any], None]:
    def check(result: Any) -> None:
        # Nothing staged under this SES message id: handled before (staging is deleted last).
        assert result == {"status": "already-processed", "messageId": message_id}

    return check


def _extractor(result: Any) -> None:
    # Needs no AWS: a calendar file has no text extractor. The key arrives URL-encoded and is decoded.
    [item] = result["results"]
    assert (
        item["key"] == "attachments/anoop-at-synchronycorp.com/o3vrnil0e2ic28trm7dfhrc2v0clambda4nbp0g1/"
        "Team Invite (2026).ICS"
    )
    assert item["status"] == "skipped"


def _sender(result: Any) -> None:
    assert result == {"batchItemFailures": []}


CASES = [
    Case("inbound-handler", "ses-inbound.json", _handled_before("o3vrnil0e2ic28trm7dfhrc2v0clambda4nbp0g1")),
    Case("reply-handler", "ses-reply.json", _handled_before("r8a1owner0reply0message0id00000000000001")),
    Case("attachment-extractor", "s3-calendar.json", _extractor, aws=False),
    Case("ack-sender", "sqs-send.json", _sender),
    Case("forward-sender", "sqs-send.json", _sender),
    Case("reply-sender", "sqs-send.json", _sender),
]


def event_for(case: Case) -> Any:
    return load_event(case.event)
