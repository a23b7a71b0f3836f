"""SES's sandbox as a state the system knows (the fresh-account model, local/fresh.py): a forward
to an unverified PRIVATE_EMAIL waits and goes out once the address is verified; an ack to an unverified
contact is not attempted, the record and the forward say why; an owner's reply to an unverified contact
waits, the owner is told at once, and it goes out exactly once when production access arrives. No DLQ
fills because of the sandbox."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from common.aws import client
from common.mail.outbound import OutboundMessage
from common.runtime.log import pseudonym
from common.store import sendstatus
from common.store.sendqueue import enqueue
from local import fresh
from local.rie import RieProcess
from tests.support.harness import Stack, verify_domain_on_fresh_model
from tests.support.mailgen import mail

OWNER = "owner@example.net"
CONTACT = "jane@corp.example"
WAIT = {"SANDBOX_WAIT_SECONDS": "1", "RETRY_DELAYS_SECONDS": "0", "ATTEMPT_RESERVE_SECONDS": "1"}


@pytest.fixture
def sandbox(stack: Stack) -> Iterator[Stack]:
    """The provisioned stack on a new account: example.com verified (so the public address may send),
    the owner's and the contact's addresses not."""
    fresh.set_fresh(True)
    assert verify_domain_on_fresh_model() == "Success"
    client("sesv2").create_email_identity(EmailIdentity=OWNER)  # what the deploy does: SES mails the link
    yield stack
    fresh.set_fresh(False)


def lines(fn: RieProcess, text: str) -> list[dict[str, Any]]:
    return [
        d
        for d in (json.loads(line) for line in fn.output().splitlines() if line.startswith("{"))
        if d.get("message") == text
    ]


def dlq_depths(stack: Stack) -> list[int]:
    cfg = stack.cfg
    return [stack.depth(q + "-dlq") for q in (cfg.ack_queue, cfg.forward_queue, cfg.reply_queue)]


def outbound(kind: str, to: str, n: int = 1) -> OutboundMessage:
    return OutboundMessage(
        kind=kind,
        idempotency_key=f"{kind}:mid{n}",
        correlation_id=f"{kind}-mid{n}",
        to=[to],
        subject=f"{kind} {n}",
        text="Hello.",
    )


def later(stack: Stack, fn: RieProcess, queue: str) -> list[Any]:
    time.sleep(1.2)  # SANDBOX_WAIT_SECONDS: the held message is visible again
    return stack.run_sender(fn, queue)


def test_a_forward_to_an_unverified_owner_waits_and_goes_out_once_the_address_is_verified(
    sandbox: Stack, rie_function: Callable[..., RieProcess], moto_server: str
) -> None:
    stack, cfg = sandbox, sandbox.cfg
    fn = rie_function("forward-sender", env=WAIT)
    enqueue(cfg.forward_queue, outbound("forward", OWNER), cfg.bucket, cfg.claim_check_bytes)
    [batch] = stack.run_sender(fn, cfg.forward_queue)
    assert len(batch.failed) == 1 and stack.sent() == []
    [held] = lines(fn, "send held by the sandbox")
    # the logs name no one: the recipient is its pseudonym (common.runtime.log); the owner cannot be told
    assert held["recipient"] == [pseudonym(OWNER)] and held["notice"] is False
    record = sendstatus.get_record(cfg, "forward-mid1") or {}
    assert record["status"] == "held" and "not verified" in record["heldReason"]
    assert later(stack, fn, cfg.forward_queue)[0].failed  # still waiting
    assert fresh.click(OWNER)  # the owner clicks SES's link
    [done] = later(stack, fn, cfg.forward_queue)
    assert done.failed == [] and [m.destinations for m in stack.sent()] == [[OWNER]]
    assert stack.run_sender(fn, cfg.forward_queue) == [] and dlq_depths(stack) == [0, 0, 0]


def test_a_reply_to_an_unverified_contact_waits_tells_the_owner_and_goes_out_once_with_production_access(
    sandbox: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    stack, cfg = sandbox, sandbox.cfg
    assert fresh.click(OWNER)
    fn = rie_function("reply-sender", env=WAIT)
    enqueue(cfg.reply_queue, outbound("reply", CONTACT), cfg.bucket, cfg.claim_check_bytes)
    stack.run_sender(fn, cfg.reply_queue)  # held; its notice to the owner waits on the forward queue
    assert stack.sent() == []
    stack.run_sender(rie_function("forward-sender", env=WAIT), cfg.forward_queue)
    [notice] = stack.sent()
    assert notice.destinations == [OWNER]
    text = notice.message.get_body(("plain",)).get_content()
    assert notice.message["Subject"] == "Not sent yet: reply 1"
    assert f"Your reply to {CONTACT}" in text and "sandbox" in text and "production access" in text
    # held again on the next cycles: no second notice
    later(stack, fn, cfg.reply_queue)
    assert len(stack.sent()) == 1 and len(lines(fn, "send waiting for the sandbox")) == 2
    assert [d["notice"] for d in lines(fn, "send held by the sandbox")] == [True]
    fresh.grant_production()
    later(stack, fn, cfg.reply_queue)
    assert [m.destinations for m in stack.sent()] == [[OWNER], [CONTACT]]
    time.sleep(1.2)
    assert stack.run_sender(fn, cfg.reply_queue) == [] and len(stack.sent()) == 2  # exactly once
    assert dlq_depths(stack) == [0, 0, 0]


@pytest.mark.parametrize("kind", ["smime", "pgp"])
def test_the_notice_of_a_held_reply_is_encrypted_to_the_owner_key_by_forward_sender(
    sandbox: Stack, rie_function: Callable[..., RieProcess], kind: str
) -> None:
    """With an owner key, the owner's "Not sent yet" notice goes through forward-sender, the sender
    that holds the key: encrypted to it, never sent in clear by the sender that held the reply (which,
    as deployed, has no key)."""
    from tests.support.ownerkeys import body_text, pgp_owner, smime_owner

    stack, cfg = sandbox, sandbox.cfg
    assert fresh.click(OWNER)
    owner = smime_owner() if kind == "smime" else pgp_owner()
    key = owner.pem if kind == "smime" else owner.armored  # type: ignore[union-attr]
    replies = rie_function("reply-sender", env=WAIT)  # as deployed: no owner key
    forwards = rie_function("forward-sender", env={**WAIT, "OWNER_KEY": key})
    enqueue(cfg.reply_queue, outbound("reply", CONTACT), cfg.bucket, cfg.claim_check_bytes)
    stack.run_sender(replies, cfg.reply_queue)
    assert stack.sent() == [] and stack.depth(cfg.forward_queue) == 1
    stack.run_sender(forwards, cfg.forward_queue)
    [notice] = stack.sent()
    assert notice.destinations == [OWNER] and b"Not sent yet" not in notice.raw
    inner = owner.decrypt(notice.raw)
    assert inner["Subject"] == "Not sent yet: reply 1"
    assert f"Your reply to {CONTACT}" in body_text(inner)
    assert dlq_depths(stack) == [0, 0, 0]


def test_a_held_message_on_its_last_receive_is_requeued_not_dead_lettered(
    sandbox: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    stack, cfg = sandbox, sandbox.cfg
    fn = rie_function("forward-sender", env={**WAIT, "MAX_RECEIVE_COUNT": "1"})
    enqueue(cfg.forward_queue, outbound("forward", OWNER), cfg.bucket, cfg.claim_check_bytes)
    [batch] = stack.run_sender(fn, cfg.forward_queue)
    assert batch.failed == [] and stack.sent() == []
    attrs = client("sqs").get_queue_attributes(
        QueueUrl=client("sqs").get_queue_url(QueueName=cfg.forward_queue)["QueueUrl"],
        AttributeNames=["ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "1" and dlq_depths(stack) == [0, 0, 0]


def test_an_ack_to_an_unverified_contact_is_not_attempted_and_the_record_and_forward_say_why(
    sandbox: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    stack, cfg = sandbox, sandbox.cfg
    inbound = rie_function("inbound-handler")
    result = inbound.invoke(stack.receipt(mail(), "0000000000000000000000000000000000000001"))
    assert result["status"] == "forwarded" and result["firstContact"] and result["ack"] is False
    assert stack.depth(cfg.ack_queue) == 0  # not attempted
    record = stack.conversation("jane-at-corp.example") or {}
    assert record["ackStatus"].startswith(f"not sent: SES is in the sandbox and {CONTACT} is not a verified")
    [forward] = stack.peek(cfg.forward_queue)
    said = [line for line in forward.text.splitlines() if "No automatic acknowledgement was sent" in line]
    assert len(said) == 1 and "sandbox" in said[0]
    # with production access the next first contact is acked
    fresh.grant_production()
    other = mail(sender="Ann <ann@corp.example>")
    assert inbound.invoke(stack.receipt(other, "0000000000000000000000000000000000000002"))["ack"] is True
    assert stack.depth(cfg.ack_queue) == 1
