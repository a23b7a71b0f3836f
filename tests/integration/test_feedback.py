"""SES feedback over SNS at inbound-handler: send status, suppression list, duplicates."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from common.mail.outbound import OutboundMessage
from common.store import sendstatus
from common.store.sendqueue import enqueue
from local.events import sns_event
from local.rie import RieProcess
from tests.support.harness import Stack


@pytest.fixture(scope="module")
def inbound(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("inbound-handler")


def notify(
    stack: Stack,
    fn: RieProcess,
    kind: str,
    sns_id: str,
    recipient: str = "jane@corp.example",
    corr: str = "ack-m1",
    ses_id: str = "ses-1",
    **body: Any,
) -> Any:
    mail = {
        "messageId": ses_id,
        "destination": [recipient],
        "source": stack.cfg.public_email,
        "headers": [{"name": "X-Correlation-ID", "value": corr}] if corr else [],
    }
    message = {"notificationType": kind, "mail": mail, **body}
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.feedback_topic}"
    return fn.invoke(sns_event(json.dumps(message), topic, sns_id))["results"][0]


def bounce(kind: str, recipient: str = "jane@corp.example") -> dict:
    return {
        "bounce": {
            "bounceType": kind,
            "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": recipient}],
        }
    }


def test_delivery_updates_the_send_record_and_duplicates_are_ignored(
    stack: Stack, inbound: RieProcess
) -> None:
    assert (
        notify(stack, inbound, "Delivery", "sns-1", delivery={"recipients": ["jane@corp.example"]})["status"]
        == "delivered"
    )
    assert (
        notify(stack, inbound, "Delivery", "sns-1", delivery={"recipients": ["jane@corp.example"]})["status"]
        == "duplicate"
    )
    record = sendstatus.get_record(stack.cfg, "ack-m1")
    assert record["status"] == "delivered" and record["deliveryAt"].endswith("Z")


def test_permanent_bounce_and_complaint_suppress_at_once(stack: Stack, inbound: RieProcess) -> None:
    r = notify(stack, inbound, "Bounce", "sns-2", **bounce("Permanent"))
    assert r["suppressed"] == ["jane@corp.example"]
    assert sendstatus.suppression(stack.cfg, "Jane@corp.example")["reason"] == "permanent bounce (General)"
    r = notify(
        stack,
        inbound,
        "Complaint",
        "sns-3",
        recipient="bob@corp.example",
        corr="",
        complaint={
            "complainedRecipients": [{"emailAddress": "bob@corp.example"}],
            "complaintFeedbackType": "abuse",
        },
    )
    assert r["suppressed"] == ["bob@corp.example"] and r["correlationId"] == ""
    assert sendstatus.suppression(stack.cfg, "bob@corp.example")["reason"] == "complaint"


def test_transient_bounces_suppress_after_five_and_a_delivery_resets_the_count(
    stack: Stack, inbound: RieProcess
) -> None:
    for n in range(4):
        assert notify(stack, inbound, "Bounce", f"t{n}", **bounce("Transient"))["suppressed"] == []
    assert (
        notify(stack, inbound, "Bounce", "t3", **bounce("Transient"))["status"] == "duplicate"
    )  # not counted
    r = notify(stack, inbound, "Delivery", "d1", delivery={"recipients": ["jane@corp.example"]})
    assert r["status"] == "delivered"  # a delivery after a transient bounce is accepted
    assert sendstatus.suppression(stack.cfg, "jane@corp.example") is None
    for n in range(5):
        r = notify(stack, inbound, "Bounce", f"u{n}", **bounce("Transient"))
    assert r["suppressed"] == ["jane@corp.example"]
    assert sendstatus.suppression(stack.cfg, "jane@corp.example")["reason"] == "5 transient bounces"


def test_correlation_falls_back_to_the_ses_message_id(
    stack: Stack, inbound: RieProcess, rie_function: Callable[..., RieProcess]
) -> None:
    # A real send: its idempotency completion records the SES message id beside the correlation id.
    enqueue(
        stack.cfg.forward_queue,
        OutboundMessage(
            kind="forward",
            idempotency_key="forward:m77",
            correlation_id="forward-m77",
            to=["x@corp.example"],
            subject="Hi",
            text="x",
        ),
        stack.cfg.bucket,
        stack.cfg.claim_check_bytes,
    )
    stack.run_sender(rie_function("forward-sender"), stack.cfg.forward_queue)
    [record] = stack.send_records()
    assert (
        record["sesMessageId"] == record["data"]["sesMessageId"] and record["correlationId"] == "forward-m77"
    )
    r = notify(
        stack,
        inbound,
        "Delivery",
        "sns-77",
        corr="",
        ses_id=record["sesMessageId"],
        delivery={"recipients": ["x@corp.example"]},
    )
    assert r["correlationId"] == "forward-m77"
    assert sendstatus.get_record(stack.cfg, "forward-m77")["status"] == "delivered"


def test_senders_skip_suppressed_recipients_with_a_logged_reason(
    stack: Stack, inbound: RieProcess, rie_function: Callable[..., RieProcess]
) -> None:
    notify(stack, inbound, "Bounce", "sns-9", **bounce("Permanent"))
    fn = rie_function("ack-sender")
    enqueue(
        stack.cfg.ack_queue,
        OutboundMessage(
            kind="ack",
            idempotency_key="ack:s1",
            correlation_id="ack-s1",
            to=["jane@corp.example"],
            subject="Hi",
            text="x",
        ),
        stack.cfg.bucket,
        stack.cfg.claim_check_bytes,
    )
    assert [r.deleted != [] for r in stack.run_sender(fn, stack.cfg.ack_queue)] == [True]
    assert stack.sent() == []
    skipped = [json.loads(line) for line in fn.output().splitlines() if '"recipient skipped"' in line]
    assert skipped[0]["reason"] == "suppressed: permanent bounce (General)"
    [record] = stack.send_records()  # the outcome is the completed idempotency record
    assert record["status"] == "COMPLETED" and record["data"]["status"] == "suppressed"
    assert record["correlationId"] == "ack-s1" and "sesMessageId" not in record


def test_ses_topic_validation_text_and_send_events_are_ignored_at_info(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    """SES publishes a plain-text message to a topic when an event destination is created, and SES (or
    LocalStack, whatever MatchingEventTypes says) may publish "Send" events: inbound-handler answers
    both without failing (a failure would be retried, then dropped) and logs them at INFO."""
    fn = rie_function("inbound-handler")
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.feedback_topic}"
    text = "Successfully validated SNS topic for Amazon SES event publishing."
    assert fn.invoke(sns_event(text, topic, "sns-v1")) == {
        "status": "feedback",
        "results": [{"type": "", "status": "ignored"}],
    }
    send = {
        "eventType": "Send",
        "mail": {"messageId": "ses-5", "destination": ["jane@corp.example"]},
        "send": {},
    }
    assert fn.invoke(sns_event(json.dumps(send), topic, "sns-s1"))["results"] == [
        {"type": "Send", "status": "ignored"}
    ]
    lines = [json.loads(line) for line in fn.output().splitlines() if line.startswith("{")]
    ignored = [line for line in lines if line.get("message") == "feedback ignored"]
    assert [(line["level"], line["sns_message_id"]) for line in ignored] == [
        ("INFO", "sns-v1"),
        ("INFO", "sns-s1"),
    ]
    assert ignored[0]["reason"] == "SES's topic validation message"
    assert not [line for line in lines if line["level"] in ("WARNING", "ERROR")]
    assert fn.invoke(sns_event("not json either", topic, "sns-x1"))["results"] == [
        {"type": "", "status": "ignored"}
    ]
    assert [
        line["level"]
        for line in map(json.loads, (x for x in fn.output().splitlines() if x.startswith("{")))
        if line.get("message") == "feedback ignored"
    ][-1] == "WARNING"  # unexpected text: still ignored, but loudly
