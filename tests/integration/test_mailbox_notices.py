"""Owner notices with several mailboxes (docs/owner.md, "Several mailboxes" and "Screener"), on the
embedded stack with IAM enforced: hello@example.com goes to two partners' mailboxes and screens
first-time senders, jobs@example.com goes to a recruiter's mailbox, the catch-all to the owner.

* a mailbox that bounces hard is held, and the address's other mailbox is told once per hold;
* the screener's notice goes to the screened address's mailboxes, and only they (and the owner) may
  approve or decline.

Each function runs under the real RIE with its own role's credentials; SES feedback arrives over SNS as
SES sends it (the headers of the forward really sent); the senders consume their queues as the
event-source mapping would; what went out is read back from SES."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from common.delivery.screener import REASON
from common.mail.threads import screener_address
from common.store import holds, senderlists, sendstatus
from common.store import quarantine as records
from local.events import sns_event
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

P1, P2, RECRUITER, OWNER = (
    "p1@partner1.example",
    "p2@partner2.example",
    "r@recruit.example",
    "owner@example.net",
)
HELLO, JOBS = "hello@example.com", "jobs@example.com"
ADDRESSES = {
    HELLO: {"forward_to": [P1, P2], "screener": True},
    JOBS: {"label": "jobs", "forward_to": [RECRUITER]},
}
ENV = {"PUBLIC_ADDRESSES": json.dumps(ADDRESSES), "RETRY_DELAYS_SECONDS": "0"}
FUNCTIONS = ("inbound-handler", "reply-handler", "ack-sender", "forward-sender", "reply-sender")
QUEUES = {"ack-sender": "ack_queue", "forward-sender": "forward_queue", "reply-sender": "reply_queue"}
HELD_SUBJECT = f"Forwards to {P2} are held (it bounced)"
counter = iter(range(10_000))


def next_id(prefix: str) -> str:
    return f"{prefix}{next(counter):039d}"[-40:]


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {name: rie_module(name, env=ENV) for name in FUNCTIONS}


@pytest.fixture
def boxes(moto_server: str, local_defaults: dict[str, str]) -> Stack:
    return Stack(moto_server, {**local_defaults, **ENV}).reset()


def flush(stack: Stack, fns: dict[str, RieProcess]) -> None:
    for name, queue in QUEUES.items():
        stack.run_sender(fns[name], getattr(stack.cfg, queue))


def write_in(stack: Stack, fns: dict[str, RieProcess], sender: str, to: str, subject: str) -> Any:
    raw = mail(sender=sender, to=to, subject=subject, text=f"Hello, {subject}.")
    return fns["inbound-handler"].invoke(stack.receipt(raw, next_id("i"), to=to))


def from_mailbox(stack: Stack, fns: dict[str, RieProcess], box: str, to: str) -> Any:
    """``box`` writes to a thread-domain address, authenticated (DMARC PASS) as any owner mail."""
    raw = mail(sender=f"Someone <{box}>", to=to, subject="Re: Screener", text="ok")
    return fns["reply-handler"].invoke(stack.receipt(raw, next_id("r"), to=to, source=box))


def sent_to(stack: Stack, who: str) -> list[SentMail]:
    return [m for m in stack.sent() if who in m.destinations]


def body(m: SentMail) -> str:
    return str(m.message.get_body(("plain",)).get_content())


def bounce(stack: Stack, fns: dict[str, RieProcess], sent: SentMail, box: str, sns_id: str) -> dict:
    """SES's permanent bounce of ``sent`` at ``box``, with the headers SES echoes, over SNS."""
    message = {
        "notificationType": "Bounce",
        "mail": {
            "messageId": f"ses-{next_id('b')}",
            "source": sent.source,
            "destination": [box],
            "headers": [{"name": k, "value": str(v)} for k, v in sent.message.items()],
        },
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": box, "status": "5.1.1"}],
        },
    }
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.feedback_topic}"
    return fns["inbound-handler"].invoke(sns_event(json.dumps(message), topic, sns_id))["results"][0]


def test_a_hard_bounce_holds_the_mailbox_and_tells_the_other_mailbox_once(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    inbox = boxes.watch_alerts()
    # Jane is known to hello@ (an allow entry), so the screener lets her mail through
    senderlists.put(boxes.cfg, f"jane@corp.example to {HELLO}", senderlists.ALLOW, "cli")
    assert write_in(boxes, fns, "Jane <jane@corp.example>", HELLO, "Mail 1")["status"] == "forwarded"
    flush(boxes, fns)
    [to_p2] = [m for m in sent_to(boxes, P2) if m.message["Subject"] == "Mail 1"]

    first = bounce(boxes, fns, to_p2, P2, "sns-1")
    assert first["owner"] == [P2] and first["suppressed"] == []
    assert holds.is_held(sendstatus.recipient_entry(boxes.cfg, P2))
    # one notice queued (counted, not received: a look counts towards the queue's maxReceiveCount)
    assert boxes.depth(boxes.cfg.forward_queue) == 1
    # the same SNS message again, and a second bounce of the same hold: no second notice is queued
    assert bounce(boxes, fns, to_p2, P2, "sns-1")["status"] == "duplicate"
    assert bounce(boxes, fns, to_p2, P2, "sns-2")["owner"] == [P2]
    assert boxes.depth(boxes.cfg.forward_queue) == 1
    flush(boxes, fns)
    [told] = [m for m in sent_to(boxes, P1) if m.message["Subject"] == HELD_SUBJECT]
    text = body(told)
    assert f"Held:   {P2}" in text and "Why:    permanent bounce (General)" in text
    assert f"email-handler suppression remove {P2}" in text and "wait" in text
    assert told.source == HELLO
    assert [m for m in boxes.sent() if m.message["Subject"] == HELD_SUBJECT] == [told]  # P2, owner: none
    # the owner's alert on the alert topic stays, and names who was told (one per mailbox and hour)
    [alert] = inbox()
    assert alert["alert"] == "owner-mailbox-bounced" and alert["held"] is True
    assert f"other mailboxes were told: {P1}" in alert["action"]

    # later forwards: P1's goes, P2's waits in the queue (held), nothing dropped
    assert write_in(boxes, fns, "Jane <jane@corp.example>", HELLO, "Mail 2")["status"] == "forwarded"
    flush(boxes, fns)
    assert [m.message["Subject"] for m in sent_to(boxes, P1)].count("Mail 2") == 1
    assert [m for m in sent_to(boxes, P2) if m.message["Subject"] == "Mail 2"] == []
    assert boxes.depth(boxes.cfg.forward_queue) == 1
    assert "RecipientHeld" in fns["forward-sender"].output()


def test_an_addresss_only_mailbox_bouncing_alerts_the_owner_alone(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    inbox = boxes.watch_alerts()
    assert write_in(boxes, fns, "Bob <bob@corp.example>", JOBS, "Application")["status"] == "forwarded"
    flush(boxes, fns)
    [sent] = sent_to(boxes, RECRUITER)
    assert bounce(boxes, fns, sent, RECRUITER, "sns-r1")["owner"] == [RECRUITER]
    assert holds.is_held(sendstatus.recipient_entry(boxes.cfg, RECRUITER))
    assert boxes.depth(boxes.cfg.forward_queue) == 0  # no one else reads jobs@: no notice
    [alert] = inbox()
    assert alert["recipient"] == RECRUITER and "were told" not in alert["action"]


def test_the_screener_notice_goes_to_the_addresss_mailboxes_and_only_they_decide(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    held = write_in(boxes, fns, "Sam <sam@corp.example>", HELLO, "Hi")
    assert (held["status"], held["reason"], held["notice"]) == ("quarantined", REASON, True)
    flush(boxes, fns)
    subject = f"Screener: a new sender wrote to {HELLO}"
    for box in (P1, P2):
        assert [m.message["Subject"] for m in sent_to(boxes, box)] == [subject]
    assert sent_to(boxes, OWNER) == [] and sent_to(boxes, RECRUITER) == []

    qid = records.quarantine_id(held["messageId"])
    approve = screener_address(
        "approve", HELLO, "sam@corp.example", boxes.cfg.thread_secret, boxes.cfg.thread_domain
    )
    decline = screener_address(
        "decline", HELLO, "sam@corp.example", boxes.cfg.thread_secret, boxes.cfg.thread_domain
    )
    forged = screener_address(
        "approve", HELLO, "sam@corp.example", "another-secret-of-16+", boxes.cfg.thread_domain
    )
    # jobs@'s mailbox: the genuine addresses are refused (not its address), a forged one as any other
    for address in (approve, decline):
        refused = from_mailbox(boxes, fns, RECRUITER, address)
        assert refused["status"] == "rejected"
        assert refused["reason"] == (
            f"{RECRUITER} is not a mailbox of {HELLO}, so it cannot decide about senders screened for it"
        )
    assert from_mailbox(boxes, fns, RECRUITER, forged)["reason"] == "no thread address with a valid tag"
    assert records.get(boxes.cfg, qid)["status"] == records.HELD
    assert senderlists.lookup(boxes.cfg, "sam@corp.example", HELLO) is None
    flush(boxes, fns)
    assert [m for m in sent_to(boxes, "sam@corp.example") if m.message["Subject"] == "Hi"] == []

    # a mailbox of hello@ decides
    approved = from_mailbox(boxes, fns, P2, approve)
    assert (approved["status"], approved["released"]) == ("approved", [qid])
    flush(boxes, fns)
    for box in (P1, P2):
        assert [m.message["Subject"] for m in sent_to(boxes, box)].count("Hi") == 1
