"""Several mailboxes for one public address (docs/owner.md, "Several mailboxes"), on the embedded stack
with IAM enforced: hello@example.com goes to two partners' mailboxes, jobs@example.com to a recruiter's,
the catch-all to the owner (PRIVATE_EMAIL, owner@example.net).

Each function runs under the real RIE with its own role's credentials; the senders consume their
queues as the event-source mapping would; what went out is read back from SES."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from common.mail.threads import release_address, thread_address
from common.store import quarantine as records
from common.store import senderlists
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

P1, P2, RECRUITER, OWNER = (
    "p1@partner1.example",
    "p2@partner2.example",
    "r@recruit.example",
    "owner@example.net",
)
ADDRESSES = {
    "hello@example.com": {"forward_to": [P1, P2]},
    "jobs@example.com": {
        "label": "jobs",
        "ack_subject": "Thanks for your application",
        "forward_to": [RECRUITER],
    },
}
ENV = {"PUBLIC_ADDRESSES": json.dumps(ADDRESSES), "RETRY_DELAYS_SECONDS": "0"}
FUNCTIONS = ("inbound-handler", "reply-handler", "ack-sender", "forward-sender", "reply-sender")
QUEUES = {"ack-sender": "ack_queue", "forward-sender": "forward_queue", "reply-sender": "reply_queue"}
JANE, BOB = "jane-at-corp.example", "bob-at-corp.example"
counter = iter(range(10_000))


def next_id(prefix: str) -> str:
    return f"{prefix}{next(counter):039d}"[-40:]


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {name: rie_module(name, env=ENV) for name in FUNCTIONS}


@pytest.fixture
def boxes(moto_server: str, local_defaults: dict[str, str]) -> Stack:
    """The stack, provisioned for this configuration (the tools' view of it: the digest, the lists)."""
    return Stack(moto_server, {**local_defaults, **ENV}).reset()


def flush(stack: Stack, fns: dict[str, RieProcess]) -> None:
    for name, queue in QUEUES.items():
        stack.run_sender(fns[name], getattr(stack.cfg, queue))


def write_in(stack: Stack, fns: dict[str, RieProcess], sender: str, to: str, subject: str, **kw: Any) -> Any:
    raw = mail(sender=sender, to=to, subject=subject, text=f"Hello, {subject}.")
    return fns["inbound-handler"].invoke(stack.receipt(raw, next_id("i"), to=to, **kw))


def from_mailbox(
    stack: Stack, fns: dict[str, RieProcess], box: str, to: str, text: str, subject: str = "Re: Mail"
) -> Any:
    """``box`` writes to a thread-domain address, authenticated (DMARC PASS) as any owner reply."""
    raw = mail(sender=f"Someone <{box}>", to=to, subject=subject, text=text)
    return fns["reply-handler"].invoke(stack.receipt(raw, next_id("r"), to=to, source=box))


def sent_to(stack: Stack, who: str) -> list[SentMail]:
    return [m for m in stack.sent() if who in m.destinations]


def body(m: SentMail) -> str:
    return str(m.message.get_body(("plain",)).get_content())


def thread(stack: Stack, cid: str) -> str:
    return thread_address(cid, stack.cfg.thread_secret, stack.cfg.thread_domain)


def test_each_mailbox_gets_its_own_forward_with_the_same_thread_address_once(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    assert (
        write_in(boxes, fns, "Jane <jane@corp.example>", "hello@example.com", "Mail 1")["status"]
        == "forwarded"
    )
    queued = [m for m in boxes.peek(boxes.cfg.forward_queue) if m.kind == "forward"]
    assert sorted(m.to[0] for m in queued) == [P1, P2]
    assert {m.reply_to for m in queued} == {thread(boxes, JANE)}  # one conversation, one thread address
    assert len({m.idempotency_key for m in queued}) == 2 and len({m.correlation_id for m in queued}) == 2
    # every forward queued twice (an SQS redelivery, a retried invocation): each mailbox still gets one
    from common.store.sendqueue import enqueue

    for m in queued:
        enqueue(boxes.cfg.forward_queue, m, boxes.cfg.bucket, boxes.cfg.claim_check_bytes)
    flush(boxes, fns)
    for box in (P1, P2):
        [forward] = [m for m in sent_to(boxes, box) if m.message["Subject"] == "Mail 1"]
        assert forward.source == "hello@example.com"
        assert forward.message["Reply-To"].addresses[0].addr_spec == thread(boxes, JANE)
        assert f"Sent to every mailbox of hello@example.com: {P1}, {P2}" in body(forward)
    assert sent_to(boxes, OWNER) == []  # hello@ has its own mailboxes: the owner's is not one of them
    # jobs@ to the recruiter alone, the catch-all to the owner (its default)
    assert (
        write_in(boxes, fns, "Bob <bob@corp.example>", "jobs@example.com", "Mail 2")["status"] == "forwarded"
    )
    assert (
        write_in(boxes, fns, "Carl <carl@shop.example>", "x@example.com", "Mail 3")["status"] == "forwarded"
    )
    flush(boxes, fns)
    assert [m.message["Subject"] for m in sent_to(boxes, RECRUITER)] == ["Mail 2"]
    assert [m.message["Subject"] for m in sent_to(boxes, OWNER)] == ["Mail 3"]


def test_a_reply_from_one_mailbox_reaches_the_contact_and_the_other_gets_a_copy(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    assert (
        write_in(boxes, fns, "Jane <jane@corp.example>", "hello@example.com", "Mail 1")["status"]
        == "forwarded"
    )
    flush(boxes, fns)
    text = f"Thanks Jane, Tuesday works.\n\nP2 ({P2})\n"
    assert from_mailbox(boxes, fns, P2, thread(boxes, JANE), text)["status"] == "queued"
    flush(boxes, fns)
    [reply] = [m for m in sent_to(boxes, "jane@corp.example") if m.message["Subject"] == "Re: Mail"]
    assert reply.source == "hello@example.com"
    assert "Tuesday works" in body(reply) and "partner2" not in reply.raw.decode(errors="replace")
    [copy] = [m for m in sent_to(boxes, P1) if m.message["Subject"] == "Re: Mail"]
    assert f"Sent by {P2} from hello@example.com to jane@corp.example" in body(copy)
    assert "Tuesday works" in body(copy)
    assert copy.message["Reply-To"].addresses[0].addr_spec == thread(boxes, JANE)
    assert [m for m in sent_to(boxes, P2) if m.message["Subject"] == "Re: Mail"] == []  # not to the writer
    # the owner may answer on every address; then both of hello@'s mailboxes get a copy
    assert from_mailbox(boxes, fns, OWNER, thread(boxes, JANE), "From the owner.")["status"] == "queued"
    flush(boxes, fns)
    for box in (P1, P2):
        assert any(f"Sent by {OWNER}" in body(m) for m in sent_to(boxes, box))


def test_a_mailbox_of_another_address_cannot_answer_and_is_told_why(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    assert (
        write_in(boxes, fns, "Jane <jane@corp.example>", "hello@example.com", "Mail 1")["status"]
        == "forwarded"
    )
    flush(boxes, fns)
    before = len(sent_to(boxes, "jane@corp.example"))
    refused = from_mailbox(boxes, fns, RECRUITER, thread(boxes, JANE), "I answer for hello@.")
    assert refused["status"] == "rejected"
    assert refused["reason"].startswith(f"{RECRUITER} is not a mailbox of hello@example.com")
    # a forged thread address (another secret) is refused as any other
    forged = thread_address(JANE, "another-secret-of-16+", boxes.cfg.thread_domain)
    assert from_mailbox(boxes, fns, RECRUITER, forged, "x")["reason"] == "no thread address with a valid tag"
    flush(boxes, fns)
    assert len(sent_to(boxes, "jane@corp.example")) == before  # nothing reached the contact
    [told] = [m for m in sent_to(boxes, RECRUITER) if m.message["Subject"].startswith("About your reply")]
    assert "is not a mailbox of hello@example.com" in body(told)
    assert [m for m in sent_to(boxes, P1) if "answer for hello@" in body(m)] == []  # no copy either
    # and hello@'s mailbox cannot answer a jobs@ conversation
    assert (
        write_in(boxes, fns, "Bob <bob@corp.example>", "jobs@example.com", "Mail 2")["status"] == "forwarded"
    )
    assert from_mailbox(boxes, fns, P1, thread(boxes, BOB), "x")["status"] == "rejected"
    assert from_mailbox(boxes, fns, RECRUITER, thread(boxes, BOB), "Hi Bob")["status"] == "queued"


def test_commands_act_only_for_the_mailboxs_own_address(boxes: Stack, fns: dict[str, RieProcess]) -> None:
    # release: a mail held for hello@ is not the recruiter's to release; hello@'s mailbox may
    held = write_in(
        boxes, fns, "Jane <jane@corp.example>", "hello@example.com", "Held", verdicts={"spam": "FAIL"}
    )
    qid = records.quarantine_id(held["messageId"])
    release = release_address(qid, boxes.cfg.thread_secret, boxes.cfg.thread_domain)
    refused = from_mailbox(boxes, fns, RECRUITER, release, "", subject=f"Release {qid}")
    assert refused["status"] == "rejected" and "cannot release mail held for it" in refused["reason"]
    assert records.get(boxes.cfg, qid)["status"] == "held"
    flush(boxes, fns)  # the refused mailbox is told why, as for a refused reply
    [told] = [m for m in sent_to(boxes, RECRUITER) if m.message["Subject"].startswith("About your reply")]
    assert "cannot release mail held for it" in body(told)
    assert from_mailbox(boxes, fns, P1, release, "", subject=f"Release {qid}")["status"] == "released"

    # new@: the recruiter writes from jobs@ (its own address by default), never from hello@
    new = f"new@{boxes.cfg.thread_domain}"
    picked = from_mailbox(
        boxes, fns, RECRUITER, new, "[to: dan@other.example]\n[from: hello@example.com]\nHi\n"
    )
    assert picked["status"] == "rejected" and "cannot write from hello@example.com" in picked["reason"]
    assert boxes.conversation("dan-at-other.example") is None
    started = from_mailbox(boxes, fns, RECRUITER, new, "[to: eve@other.example]\nHi Eve\n", subject="Role")
    assert started["status"] == "started"
    assert boxes.conversation("eve-at-other.example")["publicAddress"] == "jobs@example.com"

    # [block] from a mailbox lists the contact for its own address only; the owner's is global
    assert (
        write_in(boxes, fns, "Bob <bob@corp.example>", "jobs@example.com", "Mail 2")["status"] == "forwarded"
    )
    done = from_mailbox(boxes, fns, RECRUITER, thread(boxes, BOB), "[block]\n")
    assert done["controls"] == ["block bob@corp.example to jobs@example.com"]
    scoped_away = from_mailbox(
        boxes, fns, RECRUITER, thread(boxes, BOB), "[block: @x.example to hello@example.com]\n"
    )
    assert scoped_away["controls"] == [
        "block refused: a mailbox of jobs@example.com may only list senders for jobs@example.com"
    ]
    assert [e.entry for e in senderlists.entries(boxes.cfg)] == ["bob@corp.example to jobs@example.com"]
    assert (
        write_in(boxes, fns, "Bob <bob@corp.example>", "hello@example.com", "Mail 3")["status"] == "forwarded"
    )
    assert (
        write_in(boxes, fns, "Bob <bob@corp.example>", "jobs@example.com", "Mail 4")["status"]
        == "quarantined"
    )


def test_the_digest_goes_to_each_addresss_mailboxes_for_its_own_mail(
    boxes: Stack, fns: dict[str, RieProcess]
) -> None:
    write_in(
        boxes, fns, "Jane <jane@corp.example>", "hello@example.com", "To hello", verdicts={"spam": "FAIL"}
    )
    write_in(boxes, fns, "Bob <bob@corp.example>", "jobs@example.com", "To jobs", verdicts={"spam": "FAIL"})
    from common.delivery.quarantine import send_digest

    assert send_digest(boxes.cfg)["count"] == 2
    flush(boxes, fns)
    digests = {
        box: [body(m) for m in sent_to(boxes, box) if m.message["Subject"].startswith("Quarantine")]
        for box in (P1, P2, RECRUITER, OWNER)
    }
    for box in (P1, P2):
        [text] = digests[box]
        assert "Subject:  To hello" in text and "To jobs" not in text
    [text] = digests[RECRUITER]
    assert "Subject:  To jobs" in text and "To hello" not in text
    assert digests[OWNER] == []
    assert send_digest(boxes.cfg)["status"] == "nothing-quarantined"


def test_status_lists_each_mailbox_with_its_verification_and_hold(boxes: Stack) -> None:
    from common.aws import client
    from common.store import holds
    from ops.status import _mailboxes

    ses = client("ses")
    ses.verify_email_identity(EmailAddress=P1)  # moto verifies at once: SES would wait for the link
    holds.hold(boxes.cfg, P2, "permanent bounce (General)")
    found = _mailboxes(boxes.cfg, ses)
    assert found[P1] == {"addresses": ["hello@example.com"], "status": "Success", "held": ""}
    assert found[P2]["status"] == "not an identity" and found[P2]["held"] == "permanent bounce (General)"
    assert found[RECRUITER]["addresses"] == ["jobs@example.com"] and OWNER not in found
