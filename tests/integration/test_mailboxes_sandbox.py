"""Several mailboxes on a new account (docs/owner.md, "Several mailboxes", "Sandbox"), on the emulator's
fresh-account model (local/fresh.py: SES in the sandbox, an address identity Pending until its link is
clicked, a send to an unverified recipient refused as SES refuses it) with IAM enforced.

hello@example.com reads two mailboxes; only the first is verified. A contact's mail reaches the first at
once; the second's forward waits in its queue and the owner (PRIVATE_EMAIL) is told once; `email-handler
status` lists both mailboxes with their verification; once the second mailbox is verified the way the
docs say (`email-handler ses verify-address`, then its reader clicks SES's link), the waiting forward
goes out by itself, exactly once."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from common.runtime.log import pseudonym
from common.store import sendstatus
from local import fresh
from local.rie import RieProcess
from ops.main import main as cli
from tests.support.harness import SentMail, Stack, verify_domain_on_fresh_model
from tests.support.mailgen import mail

P1, P2, OWNER, CONTACT = (
    "p1@partner1.example",
    "p2@partner2.example",
    "owner@example.net",
    "jane@corp.example",
)
ADDRESSES = {"hello@example.com": {"forward_to": [P1, P2]}}
# The sandbox's send rate, 1/s, as the deploy sets it on such an account (the model throttles above it; a
# send it throttles is tried again a second later, as the default RETRY_DELAYS_SECONDS does, later); a
# held send is visible again after a second (SANDBOX_WAIT_SECONDS), so the test can wait it out. Its
# peeks and waits receive the held forward more than 5 times; the replacement copy a last receive makes
# (15 minutes' delay) is test_sandbox.py's, so the queues here allow more receives.
ENV = {
    "MAX_RECEIVE_COUNT": "20",
    "PUBLIC_ADDRESSES": json.dumps(ADDRESSES),
    "MAX_SEND_RATE": "1",
    "SANDBOX_WAIT_SECONDS": "1",
    "RETRY_DELAYS_SECONDS": "0,1",
    "ATTEMPT_RESERVE_SECONDS": "1",
}


@pytest.fixture
def sandbox(
    moto_server: str, local_defaults: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    """The stack provisioned for hello@'s two mailboxes on a new account: example.com verified (the public
    address may send), the owner's address verified (its link clicked after the first deploy), the
    mailboxes not yet identities. This process's environment is the configuration's, as the owner's shell
    has it for the CLI."""
    for key, value in {**local_defaults, **ENV}.items():
        if key != "ENVIRONMENT":  # `status --env local` takes the local one from the defaults
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_REGION", local_defaults.get("AWS_REGION", "us-east-1"))
    monkeypatch.setenv("THREAD_SECRET", secrets.token_hex(32))  # the CLI refuses the development one
    stack = Stack(moto_server, {**local_defaults, **ENV}).reset()
    fresh.set_fresh(True)
    assert verify_domain_on_fresh_model() == "Success"
    assert cli(["ses", "verify-address", OWNER]) == 0 and fresh.click(OWNER)
    yield stack
    fresh.set_fresh(False)


def status(moto_server: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`email-handler status --env local --json` (the functions' RIE ports are the fixtures' own, so its
    "functions" check fails here: only the SES and mailbox parts are read)."""
    capsys.readouterr()
    cli(["status", "--env", "local", "--json", "--endpoint", moto_server])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert report["sandbox"] is True
    return report


def mailbox_checks(report: dict[str, Any]) -> dict[str, Any]:
    return {
        c["check"].removeprefix("mailbox "): c for c in report["checks"] if c["check"].startswith("mailbox ")
    }


def mailboxes(moto_server: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The status report's mailboxes and its check of each."""
    report = status(moto_server, capsys)
    return report["mailboxes"], mailbox_checks(report)


def subjects(stack: Stack, who: str) -> list[str]:
    return [str(m.message["Subject"]) for m in stack.sent() if who in m.destinations]


def body(m: SentMail) -> str:
    return str(m.message.get_body(("plain",)).get_content())


def dlq_depths(stack: Stack) -> list[int]:
    cfg = stack.cfg
    return [stack.depth(q + "-dlq") for q in (cfg.ack_queue, cfg.forward_queue, cfg.reply_queue)]


def test_a_second_unverified_mailbox_waits_is_listed_and_gets_its_forward_once_verified(
    sandbox: Stack,
    rie_function: Callable[..., RieProcess],
    moto_server: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stack, cfg = sandbox, sandbox.cfg
    assert cli(["ses", "verify-address", P1]) == 0
    boxes, checks = mailboxes(moto_server, capsys)
    assert boxes[P1]["status"] == "Pending" and boxes[P2]["status"] == "not an identity"
    assert fresh.click(P1)  # P1's reader clicks SES's link; P2 has not been asked yet

    inbound = rie_function("inbound-handler", env=ENV)
    forwards = rie_function("forward-sender", env=ENV)
    raw = mail(sender=f"Jane <{CONTACT}>", to="hello@example.com", subject="Mail 1", text="Hello, Mail 1.")
    result = inbound.invoke(stack.receipt(raw, "0" * 39 + "1", to="hello@example.com"))
    assert result["status"] == "forwarded" and result["ack"] is False  # the contact is unverified too
    queued = {m.to[0]: m for m in stack.peek(cfg.forward_queue)}
    assert sorted(queued) == [P1, P2]

    # P1's forward sent, P2's held (it goes back to its queue) and the owner's notice queued and sent; at
    # 1/s a run may outlast SANDBOX_WAIT_SECONDS, so P2's forward may be held more than once in it
    batches = stack.run_sender(forwards, cfg.forward_queue)
    assert any(b.failed for b in batches)
    assert subjects(stack, P1) == ["Mail 1"] and subjects(stack, P2) == []
    # the owner, who verifies mailboxes, is told at once, at PRIVATE_EMAIL, through forward-sender
    [notice] = [m for m in stack.sent() if m.destinations == [OWNER]]
    assert notice.message["Subject"] == "Not sent yet: Mail 1" and notice.source == cfg.public_email
    text = body(notice)
    assert f"Your forward to {P2} (subject: Mail 1) has not gone out yet." in text
    assert "sandbox" in text and "when that address is verified" in text
    held = forwards.output()
    assert pseudonym(P2) in held and P2 not in held  # the logs name no one
    record = sendstatus.get_record(cfg, queued[P2].correlation_id) or {}
    assert record["status"] == "held" and record["recipient"] == P2 and "not verified" in record["heldReason"]
    assert stack.depth(cfg.forward_queue) == 1  # P2's forward waits in its queue: nothing is lost

    # status: both mailboxes, each with its verification; the unverified one says what to do
    report = status(moto_server, capsys)
    boxes, checks = report["mailboxes"], mailbox_checks(report)
    assert boxes[P1] == {"addresses": ["hello@example.com"], "status": "Success", "held": ""}
    assert boxes[P2] == {"addresses": ["hello@example.com"], "status": "not an identity", "held": ""}
    assert checks[P1]["ok"] is True and checks[P2]["ok"] is False
    assert checks[P2]["detail"] == f"in the sandbox it needs verifying: email-handler ses verify-address {P2}"
    assert OWNER not in boxes  # hello@ has its own mailboxes: PRIVATE_EMAIL is not one of them
    assert P1 not in report["test_contacts"]  # listed once, as a mailbox, not as a contact to test with

    # P2 is asked: Pending until its reader clicks; meanwhile the forward waits, no second notice
    capsys.readouterr()
    assert cli(["ses", "verify-address", P2]) == 0
    said = capsys.readouterr().out
    assert f"SES mailed verification link to {P2}" in said
    assert "forwards to it wait in their queue and go out by themselves once it is verified" in said
    assert "replies to it wait" not in said  # a mailbox gets forwards; the owner's replies go to contacts
    boxes, checks = mailboxes(moto_server, capsys)
    assert boxes[P2]["status"] == "Pending" and checks[P2]["ok"] is False
    time.sleep(1.2)  # SANDBOX_WAIT_SECONDS: the held forward is visible again
    again = stack.run_sender(forwards, cfg.forward_queue)
    assert again and all(b.failed for b in again) and subjects(stack, P2) == [] and len(stack.sent()) == 2

    assert fresh.click(P2)
    time.sleep(1.2)
    done = stack.run_sender(forwards, cfg.forward_queue)
    assert done and not any(b.failed for b in done) and subjects(stack, P2) == ["Mail 1"]
    [forward] = [m for m in stack.sent() if m.destinations == [P2]]
    assert f"Sent to every mailbox of hello@example.com: {P1}, {P2}" in body(forward)
    boxes, checks = mailboxes(moto_server, capsys)
    assert boxes[P2]["status"] == "Success" and checks[P2]["ok"] is True

    # exactly once: the queue is empty, each mailbox and the owner got one mail, no DLQ filled
    time.sleep(1.2)
    assert stack.run_sender(forwards, cfg.forward_queue) == [] and stack.depth(cfg.forward_queue) == 0
    assert (subjects(stack, P1), subjects(stack, P2)) == (["Mail 1"], ["Mail 1"])
    assert subjects(stack, OWNER) == ["Not sent yet: Mail 1"] and len(stack.sent()) == 3
    # the send's outcome is its completed idempotency record (the send-status record keeps the hold)
    [sent] = [r for r in stack.send_records() if r.get("correlationId") == queued[P2].correlation_id]
    assert sent["status"] == "COMPLETED" and sent["data"]["status"] == "sent" and sent["sesMessageId"]
    assert dlq_depths(stack) == [0, 0, 0]
