"""Never lose or block the owner's own mail (docs/security.md), under the real RIE against moto.

The attack: one SES complaint about a forward (the owner pressed "spam") or five transient
bounces put the owner's address on the suppression list, and every later forward was skipped
silently. Here the SES notifications are built from the forward the sender really sent (its
headers, as SES echoes them), delivered over SNS to inbound-handler, and what follows is checked
through the forward-sender.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from common.aws import client
from common.store import sendstatus
from local.events import sns_event
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

OWNER = "owner@example.net"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        "inbound-handler": rie_module("inbound-handler"),
        "forward-sender": rie_module("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"}),
    }


_ids = iter(range(10**6))


def forward_one(
    stack: Stack, fns: dict[str, RieProcess], sender: str = "Jane <jane@corp.example>"
) -> tuple[dict, SentMail | None]:
    """A contact writes in; the forward-sender sends the forward. Returns the handler's result and the sent
    mail."""
    before = len(stack.sent())
    result = fns["inbound-handler"].invoke(stack.receipt(mail(sender=sender), f"{next(_ids):040d}"))
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    sent = stack.sent()[before:]
    return result, (sent[0] if sent else None)


def notify(
    stack: Stack, fns: dict[str, RieProcess], kind: str, sent: Any, recipient: str = OWNER, **body: Any
) -> dict:
    """SES's notification about ``sent``, with the headers SES echoes, over SNS to inbound-handler."""
    headers = [{"name": k, "value": str(v)} for k, v in sent.message.items()]
    message = {
        "notificationType": kind,
        "mail": {
            "messageId": f"ses-{next(_ids)}",
            "source": stack.cfg.public_email,
            "destination": [recipient],
            "headers": headers,
        },
        **body,
    }
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.feedback_topic}"
    return fns["inbound-handler"].invoke(sns_event(json.dumps(message), topic, f"sns-{next(_ids)}"))[
        "results"
    ][0]


def bounce(btype: str, recipient: str = OWNER, subtype: str = "General", status: str = "") -> dict:
    bounced = {"emailAddress": recipient, **({"status": status} if status else {})}
    return {"bounce": {"bounceType": btype, "bounceSubType": subtype, "bouncedRecipients": [bounced]}}


def complaint(recipient: str = OWNER) -> dict:
    return {
        "complaint": {"complainedRecipients": [{"emailAddress": recipient}], "complaintFeedbackType": "abuse"}
    }


def test_owner_complaint_flags_the_contact_alerts_and_forwards_continue(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    inbox = stack.watch_alerts()
    first, sent = forward_one(stack, fns)
    cid = first["conversationId"]
    result = notify(stack, fns, "Complaint", sent, **complaint())
    assert result["suppressed"] == [] and result["owner"] == [OWNER]
    assert sendstatus.suppression(stack.cfg, OWNER) is None
    record = stack.conversation(cid)
    assert record["spamCandidate"] is True and record["spamReports"] == 1
    [alert] = inbox()
    assert alert["alert"] == "owner-complaint" and alert["contact"] == "jane@corp.example"
    assert alert["original"] == f"s3://{stack.cfg.bucket}/conversations/{cid}/{first['messageId']}.eml"
    assert stack.s3_keys(f"conversations/{cid}/") == [f"conversations/{cid}/{first['messageId']}.eml"]
    _, later = forward_one(stack, fns, "Bob <bob@corp.example>")
    assert later is not None and later.destinations == [OWNER]  # not skipped as suppressed


def test_public_and_owner_addresses_are_never_suppressed(stack: Stack, fns: dict[str, RieProcess]) -> None:
    _, sent = forward_one(stack, fns)
    for _ in range(6):
        notify(
            stack,
            fns,
            "Bounce",
            sent,
            recipient="Hello@Example.com",
            **bounce("Transient", "Hello@Example.com"),
        )
    notify(stack, fns, "Complaint", sent, recipient="owner+x@example.net", **complaint("owner+x@example.net"))
    assert notify(stack, fns, "Bounce", sent, **bounce("Permanent"))["suppressed"] == []
    for address in ("hello@example.com", OWNER, "owner+x@example.net"):
        assert sendstatus.suppression(stack.cfg, address) is None
    assert not sendstatus.suppress(stack.cfg, OWNER, "manual")  # refused at the write itself


def test_permanent_owner_bounce_holds_forwards_in_the_queue_and_dlq_until_a_delivery(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    inbox = stack.watch_alerts()
    first, sent = forward_one(stack, fns)
    result = notify(
        stack, fns, "Bounce", sent, **bounce("Permanent", subtype="OnAccountSuppressionList", status="5.1.1")
    )
    assert result["suppressed"] == [] and result["owner"] == [OWNER]
    [alert] = inbox()
    assert alert["alert"] == "owner-mailbox-bounced" and alert["held"] is True
    assert (
        alert["original"]
        == f"s3://{stack.cfg.bucket}/conversations/{first['conversationId']}/{first['messageId']}.eml"
    )
    assert "delete-suppressed-destination" in alert["action"]

    # Two more mails arrive while the mailbox is broken: nothing is sent, nothing is dropped.
    held = [
        fns["inbound-handler"].invoke(
            stack.receipt(mail(sender=f"C{n} <c{n}@corp.example>"), f"{next(_ids):040d}")
        )
        for n in range(2)
    ]
    for _ in range(stack.cfg.max_receive_count + 1):
        stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue, visibility_s=0)
    assert len(stack.sent()) == 1  # only the first forward, before the bounce
    dead = stack.receive(stack.cfg.forward_queue + "-dlq")
    assert sorted(json.loads(d["Body"])["idempotency_key"] for d in dead) == sorted(
        f"forward:{h['messageId']}" for h in held
    )
    failed = inbox()  # the final-failure alert, once for all held forwards, says where the original is
    assert [(a["alert"], a["errorCode"]) for a in failed] == [("send-failed", "RecipientHeld")]
    assert failed[0]["original"].startswith(f"s3://{stack.cfg.bucket}/conversations/c")

    # The owner fixes the mailbox; a delivery (here: of another message) lifts the hold and says so.
    assert notify(stack, fns, "Delivery", sent, delivery={"recipients": [OWNER]})["owner"] == [OWNER]
    assert [a["alert"] for a in inbox()] == ["owner-mailbox-delivered"]
    for d in dead:  # what `email-handler dlq redrive` does
        sqs = client("sqs")
        sqs.send_message(
            QueueUrl=sqs.get_queue_url(QueueName=stack.cfg.forward_queue)["QueueUrl"], MessageBody=d["Body"]
        )
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    assert [m.destinations for m in stack.sent()[1:]] == [[OWNER], [OWNER]]


@pytest.mark.parametrize(
    ("btype", "subtype", "status"),
    [
        ("Permanent", "General", "5.7.1"),  # "message rejected as spam": about this message, not the mailbox
        ("Permanent", "General", "5.3.4"),  # too big
        ("Transient", "ContentRejected", ""),
        ("Transient", "AttachmentRejected", ""),
    ],
)
def test_a_stranger_cannot_hold_the_owners_forwards_by_sending_mail_the_provider_rejects(
    stack: Stack, fns: dict[str, RieProcess], btype: str, subtype: str, status: str
) -> None:
    inbox = stack.watch_alerts()
    first, sent = forward_one(stack, fns)
    for _ in range(stack.cfg.transient_bounce_limit + 1):
        notify(stack, fns, "Bounce", sent, **bounce(btype, subtype=subtype, status=status))
    alerts = inbox()
    assert (
        len(alerts) == 1
        and alerts[0]["held"] is False
        and alerts[0]["original"].endswith(f"/{first['messageId']}.eml")
    )
    _, later = forward_one(stack, fns, "Bob <bob@corp.example>")
    assert later is not None and later.destinations == [OWNER]


def test_a_held_mailbox_is_probed_once_per_interval(
    stack: Stack, rie_module: Callable[..., RieProcess]
) -> None:
    env = {"OWNER_HOLD_PROBE_SECONDS": "10", "RETRY_DELAYS_SECONDS": "0"}
    inbound, sender = rie_module("inbound-handler", env=env), rie_module("forward-sender", env=env)
    fns = {"inbound-handler": inbound, "forward-sender": sender}
    _, sent = forward_one(stack, fns)
    notify(stack, fns, "Bounce", sent, **bounce("Permanent"))
    for n in range(2):
        inbound.invoke(stack.receipt(mail(sender=f"P{n} <p{n}@corp.example>"), f"{next(_ids):040d}"))
    stack.run_sender(sender, stack.cfg.forward_queue, visibility_s=0, max_batches=2)
    assert len(stack.sent()) == 1  # held: no probe before the interval
    time.sleep(max(0.0, sendstatus.recipient_entry(stack.cfg, OWNER)["probeAfter"] - time.time()) + 1.1)
    stack.run_sender(sender, stack.cfg.forward_queue, visibility_s=0, max_batches=2)
    assert len(stack.sent()) == 2  # exactly one probe went out; the other stays queued
    assert stack.depth(stack.cfg.forward_queue) == 1
    assert "held recipient probed" in sender.output()


def test_transient_contact_suppression_expires(stack: Stack, fns: dict[str, RieProcess]) -> None:
    _, sent = forward_one(stack, fns)
    for _ in range(stack.cfg.transient_bounce_limit):
        result = notify(
            stack,
            fns,
            "Bounce",
            sent,
            recipient="jane@corp.example",
            **bounce("Transient", "jane@corp.example"),
        )
    assert result["suppressed"] == ["jane@corp.example"]
    entry = sendstatus.recipient_entry(stack.cfg, "jane@corp.example")
    assert (
        abs(entry["expiresAt"] - (time.time() + stack.cfg.transient_suppression_s)) < 60
    )  # DynamoDB TTL attribute
    assert sendstatus.suppression(stack.cfg, "jane@corp.example") is not None
    client("dynamodb").update_item(
        TableName=stack.cfg.suppression_table,
        Key={"email": {"S": "jane@corp.example"}},
        UpdateExpression="SET expiresAt = :x",
        ExpressionAttributeValues={":x": {"N": "1"}},
    )
    assert (
        sendstatus.suppression(stack.cfg, "jane@corp.example") is None
    )  # expired, even before TTL deletes it
    # A permanent bounce is never shortened to a temporary suppression.
    notify(
        stack, fns, "Bounce", sent, recipient="bob@corp.example", **bounce("Permanent", "bob@corp.example")
    )
    sendstatus.suppress(stack.cfg, "bob@corp.example", "5 transient bounces", 60)
    assert "expiresAt" not in sendstatus.recipient_entry(stack.cfg, "bob@corp.example")
