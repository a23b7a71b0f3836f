import json

import pytest

from common.errors import EventError
from common.runtime import events
from tests.conftest import load_event


def test_ses_receipt_fields() -> None:
    r = events.SesReceipt.from_event(load_event("ses-inbound.json"))
    assert r.message_id == "o3vrnil0e2ic28trm7dfhrc2v0clambda4nbp0g1"
    assert r.recipients == ("hello@example.com",)
    assert r.source == "anoop@synchronycorp.com"
    assert r.verdicts == {"spam": "PASS", "virus": "PASS", "spf": "PASS", "dkim": "PASS", "dmarc": "PASS"}


def test_ses_missing_verdict_is_not_a_pass() -> None:
    event = load_event("ses-inbound.json")
    del event["Records"][0]["ses"]["receipt"]["spfVerdict"]
    assert events.SesReceipt.from_event(event).verdicts["spf"] == "PROCESSING_FAILED"


@pytest.mark.parametrize("bad_id", ["", "../etc/passwd", None])
def test_ses_message_id_must_be_a_plain_id(bad_id: str | None) -> None:
    event = load_event("ses-inbound.json")
    event["Records"][0]["ses"]["mail"]["messageId"] = bad_id
    with pytest.raises(EventError, match="messageId"):
        events.SesReceipt.from_event(event)


def test_s3_keys_are_url_decoded() -> None:
    [obj] = events.s3_objects(load_event("s3-attachment.json"))
    assert obj.key.endswith("/My CV (2026).PDF") and obj.size == 1024


def test_sqs_records_and_receive_count() -> None:
    [rec] = events.sqs_records(load_event("sqs-send.json"))
    assert rec.receive_count == 1 and json.loads(rec.body)["schema"] == 1


def test_sns_messages_are_parsed() -> None:
    [msg] = events.sns_messages(load_event("sns-feedback.json"))
    assert msg["eventType"] == "Delivery" and msg["_snsMessageId"]


@pytest.mark.parametrize(
    "event", [{}, {"Records": []}, {"Records": [{"eventSource": "aws:kinesis"}]}, [], "x"]
)
def test_unknown_events_are_rejected(
    event: object,
) -> None:
    with pytest.raises(EventError):
        events.kind(event)


def test_mixed_sources_are_rejected() -> None:
    event = load_event("sqs-send.json")
    event["Records"].append({"eventSource": "aws:s3"})
    with pytest.raises(EventError, match="aws:sqs"):
        events.sqs_records(event)
