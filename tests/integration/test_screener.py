"""The screener (docs/owner.md, "Screener") on the embedded stack with IAM enforced: jobs@example.com
has ``"screener": true`` (and acks), hello@example.com has none. inbound-handler holds a first-time
sender's mail and sends the owner one notice; the owner mails its approve or decline address and
reply-handler applies it. Each function runs under the real RIE with its own role's credentials; the
senders consume their queues as the event-source mapping would; what went out is read back from SES."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

import pytest

from common.aws import dynamodb
from common.delivery.compose import FORWARD_MARKER
from common.delivery.screener import APPROVED_NOTE, REASON
from common.mail.threads import screener_address, screener_id
from common.store import quarantine as records
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
JOBS, HELLO = "jobs@example.com", "hello@example.com"
SCREENED = json.dumps(
    {JOBS: {"label": "jobs", "ack_subject": "Thanks for your application", "screener": True}},
    separators=(",", ":"),
)
FUNCTIONS = ("inbound-handler", "reply-handler", "ack-sender", "forward-sender", "reply-sender")
QUEUES = {"ack-sender": "ack_queue", "forward-sender": "forward_queue", "reply-sender": "reply_queue"}
counter = iter(range(10_000))


def next_id(prefix: str) -> str:
    return f"{prefix}{next(counter):039d}"[-40:]


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    env = {"RETRY_DELAYS_SECONDS": "0", "PUBLIC_ADDRESSES": SCREENED}
    return {name: rie_module(name, env=env) for name in FUNCTIONS}


def write_in(
    stack: Stack, fns: dict[str, RieProcess], sender: str, n: int, to: str = JOBS, **kwargs: Any
) -> Any:
    raw = mail(sender=sender, to=to, subject=f"Mail {n}", text=f"Hello, this is mail {n}.\nSecond line.")
    return fns["inbound-handler"].invoke(stack.receipt(raw, next_id("i"), to=to, **kwargs))


def owner_mail(
    stack: Stack, fns: dict[str, RieProcess], to: str, text: str = "", source: str = "owner@example.net"
) -> Any:
    sender = OWNER if source == "owner@example.net" else f"Someone <{source}>"
    raw = mail(sender=sender, to=to, subject="Re: Screener", text=text)
    return fns["reply-handler"].invoke(stack.receipt(raw, next_id("r"), to=to, source=source))


def flush(stack: Stack, fns: dict[str, RieProcess]) -> list[SentMail]:
    for name, queue in QUEUES.items():
        stack.run_sender(fns[name], getattr(stack.cfg, queue))
    return stack.sent()


def to(stack: Stack, address: str) -> list[SentMail]:
    return [m for m in stack.sent() if address in m.destinations]


def address_of(stack: Stack, action: Literal["approve", "decline"], sender: str) -> str:
    return screener_address(action, JOBS, sender, stack.cfg.thread_secret, stack.cfg.thread_domain)


def listing(stack: Stack, entry: str) -> str | None:
    item = dynamodb.get(stack.cfg.sender_lists_table, {"entry": entry})
    return None if item is None else str(item["list"])


def test_three_mails_one_notice_then_approval_forwards_them_in_order_once(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    jane = "Jane Smith <jane@corp.example>"
    held = [write_in(stack, fns, jane, n) for n in (1, 2, 3)]
    assert [(h["status"], h["reason"], h["notice"]) for h in held] == [
        ("quarantined", REASON, True),
        ("quarantined", REASON, False),
        ("quarantined", REASON, False),
    ]
    sent = flush(stack, fns)
    # exactly one notice to the owner, and nothing forwarded; the address acks, so the first mail's ack
    [notice] = to(stack, "owner@example.net")
    [ack] = to(stack, "jane@corp.example")
    assert len(sent) == 2 and ack.message["Subject"] == "Thanks for your application" and ack.source == JOBS
    assert notice.message["Subject"] == f"Screener: a new sender wrote to {JOBS}"
    text = notice.message.get_body(("plain",)).get_content()
    approve, decline = (
        address_of(stack, "approve", "jane@corp.example"),
        address_of(stack, "decline", "jane@corp.example"),
    )
    assert "From:     Jane Smith <jane@corp.example>" in text and "Subject:  Mail 1" in text
    assert "  | Hello, this is mail 1.\n  | Second line.\n" in text
    assert f"  {approve}\n" in text and f"  {decline}\n" in text
    assert all(len(a.split("@")[0]) <= 64 for a in (approve, decline))
    qids = [records.quarantine_id(h["messageId"]) for h in held]
    assert [records.get(stack.cfg, q)["reason"] for q in qids] == [REASON] * 3

    result = owner_mail(stack, fns, approve, "ok")
    assert (result["status"], result["released"]) == ("approved", qids)
    assert listing(stack, f"jane@corp.example to {JOBS}") == "allow"
    forwards = flush(stack, fns)[len(sent) :]
    assert [(m.destinations, m.source, m.message["Subject"]) for m in forwards] == [
        (["owner@example.net"], JOBS, f"Mail {n}") for n in (1, 2, 3)
    ]
    assert (
        forwards[0]
        .message.get_body(("plain",))
        .get_content()
        .startswith(f"{FORWARD_MARKER}\n[!] {APPROVED_NOTE}")
    )
    assert [records.get(stack.cfg, q)["status"] for q in qids] == ["released"] * 3

    # A second approval forwards nothing new.
    again = owner_mail(stack, fns, approve, "ok again")
    assert (again["status"], again["released"]) == ("approved", [])
    assert len(flush(stack, fns)) == len(sent) + 3

    # The fourth mail is forwarded directly, as a known contact's (no second ack).
    fourth = write_in(stack, fns, jane, 4)
    assert (fourth["status"], fourth["firstContact"], fourth["ack"]) == ("forwarded", False, False)
    assert [m.message["Subject"] for m in flush(stack, fns)[len(sent) + 3 :]] == ["Mail 4"]


def test_decline_blocks_the_sender_for_that_address_only_and_tells_them_nothing(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    bob = "Bob <bob@spam.example>"
    first = write_in(stack, fns, bob, 1)
    assert first["status"] == "quarantined" and first["notice"] is True
    flush(stack, fns)
    before = len(to(stack, "bob@spam.example"))  # the first contact's ack, sent while held
    result = owner_mail(stack, fns, address_of(stack, "decline", "bob@spam.example"))
    assert (result["status"], result["released"]) == ("declined", [])
    assert listing(stack, f"bob@spam.example to {JOBS}") == "block"
    later = write_in(stack, fns, bob, 2)
    assert (later["status"], later["reason"]) == (
        "quarantined",
        f"blocked by the owner (bob@spam.example to {JOBS})",
    )
    flush(stack, fns)
    assert len(to(stack, "bob@spam.example")) == before  # nothing more went to Bob
    assert [m.message["Subject"] for m in to(stack, "owner@example.net")] == [
        f"Screener: a new sender wrote to {JOBS}"
    ]
    # the held mail stays held, for the quarantine's retention and the digest
    assert records.get(stack.cfg, records.quarantine_id(first["messageId"]))["status"] == records.HELD
    digest = fns["inbound-handler"].invoke(
        {
            "version": "0",
            "id": "e1",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "time": "2026-11-24T07:00:00Z",
            "resources": [],
            "detail": {},
        }
    )
    assert digest["status"] == "digest-sent" and records.quarantine_id(first["messageId"]) in digest["ids"]
    # Only for jobs@: the same sender writing to hello@ (no screener) is forwarded.
    elsewhere = write_in(stack, fns, bob, 3, to=HELLO)
    assert elsewhere["status"] == "forwarded"


def test_known_senders_pass_a_screened_address(stack: Stack, fns: dict[str, RieProcess]) -> None:
    # an earlier conversation (through another address)
    assert write_in(stack, fns, "Dave <dave@corp.example>", 1, to=HELLO)["status"] == "forwarded"
    passed = write_in(stack, fns, "Dave <dave@corp.example>", 2)
    assert (passed["status"], passed["firstContact"]) == ("forwarded", False)
    # ... but not a forged From of that contact: DMARC FAIL (policy none) is forwarded elsewhere, held here
    forged = write_in(stack, fns, "Dave <dave@corp.example>", 3, verdicts={"dmarc": "FAIL"})
    assert (forged["status"], forged["reason"]) == ("quarantined", REASON)
    # a conversation the owner started from jobs@
    started = owner_mail(
        stack,
        fns,
        f"new@{stack.cfg.thread_domain}",
        "[to: erin@other.example]\n[from: jobs@example.com]\nHi Erin\n",
    )
    assert started["status"] == "started"
    answer = write_in(stack, fns, "Erin <erin@other.example>", 1)
    assert (answer["status"], answer["firstContact"], answer["ack"]) == ("forwarded", False, False)
    # an allow entry (the owner's own, global)
    dynamodb.put(
        stack.cfg.sender_lists_table, {"entry": "@friends.example", "list": "allow", "source": "cli"}
    )
    assert write_in(stack, fns, "Fay <fay@friends.example>", 1)["status"] == "forwarded"


def test_an_address_without_screener_forwards_a_first_contact_as_today(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    result = write_in(stack, fns, "Gil <gil@corp.example>", 1, to=HELLO)
    assert (result["status"], result["firstContact"], result["ack"]) == ("forwarded", True, True)
    flush(stack, fns)
    assert [m.message["Subject"] for m in to(stack, "owner@example.net")] == ["Mail 1"]
    assert records.screened(stack.cfg, screener_id(HELLO, "gil@corp.example")) is None


def test_forged_or_foreign_approvals_are_refused(stack: Stack, fns: dict[str, RieProcess]) -> None:
    held = write_in(stack, fns, "Hal <hal@corp.example>", 1)
    assert held["status"] == "quarantined"
    approve = address_of(stack, "approve", "hal@corp.example")
    decline = address_of(stack, "decline", "hal@corp.example")
    forged = screener_address(
        "approve", JOBS, "hal@corp.example", "another-secret-of-16+", stack.cfg.thread_domain
    )
    edited = "approve." + decline.split(".", 1)[1]  # a decline address turned into an approval
    for address in (forged, edited):
        result = owner_mail(stack, fns, address)
        assert (result["status"], result["reason"]) == ("rejected", "no thread address with a valid tag")
    # a genuine address for a pair nobody screened (the owner's tag, but no held sender)
    unknown = screener_address(
        "approve", JOBS, "ivy@corp.example", stack.cfg.thread_secret, stack.cfg.thread_domain
    )
    result = owner_mail(stack, fns, unknown)
    assert (result["status"], result["reason"]) == ("rejected", "screener address names no screened sender")
    # the genuine address, from someone who is not the owner; and from the sender itself
    for source in ("m@evil.example", "hal@corp.example"):
        result = owner_mail(stack, fns, approve, source=source)
        assert (result["status"], result["reason"]) == ("rejected", "envelope sender is not the owner")
    # the owner's envelope with DMARC failing (a forged owner)
    raw = mail(sender=OWNER, to=approve, subject="ok", text="")
    result = fns["reply-handler"].invoke(
        stack.receipt(raw, next_id("r"), to=approve, source="owner@example.net", verdicts={"dmarc": "FAIL"})
    )
    assert result["status"] == "rejected"
    assert listing(stack, f"hal@corp.example to {JOBS}") is None
    assert records.get(stack.cfg, records.quarantine_id(held["messageId"]))["status"] == records.HELD
    flush(stack, fns)
    assert [m.message["Subject"] for m in to(stack, "owner@example.net")] == [
        f"Screener: a new sender wrote to {JOBS}"
    ]
