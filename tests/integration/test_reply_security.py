"""Attacks on reply-handler (docs/security.md, relaying and what a contact sees), each reproduced under the
real RIE against moto.

Authorisation: only an owner message that SES authenticated for the owner's From domain (DMARC PASS, or SPF
PASS for the owner's domain when it has no DMARC) with one clean owner mailbox in From is relayed.
Replay: a replayed owner message (same Message-ID, new SES id) is not sent again.
Privacy: neither the owner's display name nor any spelling of a private address reaches the contact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from common.aws import client
from common.mail.threads import thread_address
from common.reply import auth
from common.store import sendstatus
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

PUBLIC_NAME = "Alex Example"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    env = {"RETRY_DELAYS_SECONDS": "0", "PUBLIC_NAME": PUBLIC_NAME}
    return {name: rie_module(name, env=env) for name in ("inbound-handler", "reply-handler", "reply-sender")}


@pytest.fixture
def thread(stack: Stack, fns: dict[str, RieProcess]) -> str:
    """Jane's conversation exists (she wrote in); the owner answers on its thread address."""
    result = fns["inbound-handler"].invoke(
        stack.receipt(mail(subject="Role"), "0000000000000000000000000000000000000j01")
    )
    return thread_address(result["conversationId"], stack.cfg.thread_secret, stack.cfg.thread_domain)


_ids = iter(range(10**6))


def deliver(
    stack: Stack,
    fns: dict[str, RieProcess],
    thread: str,
    raw: bytes,
    verdicts: dict[str, str] | None = None,
    source: str = "owner@example.net",
    mid: str = "",
) -> Any:
    mid = mid or f"{next(_ids):040d}"
    event = stack.receipt(raw, mid, to=thread, source=source, verdicts=verdicts)
    result = fns["reply-handler"].invoke(event)
    # The public rule names the thread domain too: SES hands inbound-handler the same recipients,
    # and it leaves the mail to reply-handler (common/store/staging.py).
    assert fns["inbound-handler"].invoke(event)["status"] == "thread-only"
    return result


def raw_reply(
    thread: str, from_lines: list[bytes] | None = None, body: bytes = b"Hello Jane\r\n", extra: bytes = b""
) -> bytes:
    head = b"".join(b"From: " + f + b"\r\n" for f in (from_lines or [b"Owner <owner@example.net>"]))
    return (
        head
        + b"To: "
        + thread.encode()
        + b"\r\nSubject: Re: Role\r\nMessage-ID: <r-1@example.net>\r\n"
        + extra
        + b"\r\n"
        + body
    )


def sent(stack: Stack, fns: dict[str, RieProcess]) -> list[SentMail]:
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    return stack.sent()


# --- authorisation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "verdicts",
    [
        {"spf": "FAIL", "dkim": "PASS", "dmarc": "GRAY"},  # any-domain DKIM signature, no DMARC result
        {"spf": "PASS", "dkim": "PASS", "dmarc": "PROCESSING_FAILED"},
        {"spf": "GRAY", "dkim": "PASS", "dmarc": "GRAY"},
        {"spf": "PASS", "dkim": "PASS", "dmarc": "FAIL"},
    ],
)
def test_verdicts_without_dmarc_pass_or_aligned_spf_are_rejected(
    stack: Stack, fns: dict[str, RieProcess], thread: str, verdicts: dict[str, str]
) -> None:
    result = deliver(stack, fns, thread, raw_reply(thread), verdicts=verdicts)
    assert (result["status"], result["reason"]) == ("rejected", auth.UNAUTHENTICATED)
    assert stack.peek(stack.cfg.reply_queue) == [] and sent(stack, fns) == []


@pytest.mark.parametrize(
    "verdicts",
    [
        {"dmarc": "PASS", "spf": "FAIL", "dkim": "PASS"},  # DKIM-aligned DMARC (e.g. sent through a relay)
        {
            "dmarc": "GRAY",
            "spf": "PASS",
            "dkim": "GRAY",
        },  # owner domain without DMARC: SPF for the same domain
    ],
)
def test_dmarc_pass_or_spf_for_the_owners_own_domain_is_accepted(
    stack: Stack, fns: dict[str, RieProcess], thread: str, verdicts: dict[str, str]
) -> None:
    assert deliver(stack, fns, thread, raw_reply(thread), verdicts=verdicts)["status"] == "queued"
    assert [m.destinations for m in sent(stack, fns)] == [["jane@corp.example"]]


@pytest.mark.parametrize(
    ("from_lines", "reason"),
    [
        ([b"owner@example.net <attacker@evil.example>"], "From header has a parse defect"),
        ([b"attacker@evil.example <owner@example.net>"], "From header has a parse defect"),
        ([b"owner@example.net, attacker@evil.example"], "From is not exactly one mailbox"),
        ([b"Owner <owner@example.net>", b"Attacker <attacker@evil.example>"], "more than one From header"),
        ([b"Owner <owner@example.net>", b"Owner <owner@example.net>"], "more than one From header"),
        ([b"owners: owner@example.net;"], "From is a group"),
        ([b'"attacker@evil.example" <owner@example.net>'], "From names another address"),
        ([b"=?utf-8?q?attacker=40evil=2Eexample?= <owner@example.net>"], "From names another address"),
        ([b"owner@example.net (attacker@evil.example)"], "From names another address"),
        ([b"<@evil.example:owner@example.net>"], "From header has a parse defect"),
        ([b"Owner <owner@example.net"], "From header has a parse defect"),
        ([b"Own\xff\xfeer <owner@example.net>"], "From header has a parse defect"),  # not UTF-8
        ([], "From header missing"),
    ],
)
def test_from_field_tricks_are_rejected(
    stack: Stack, fns: dict[str, RieProcess], thread: str, from_lines: list[Any] | list[bytes], reason: str
) -> None:
    raw = (
        raw_reply(thread, from_lines)
        if from_lines
        else raw_reply(thread).replace(b"From: Owner <owner@example.net>\r\n", b"")
    )
    result = deliver(stack, fns, thread, raw)
    assert (result["status"], result["reason"]) == ("rejected", reason)
    assert stack.s3_keys("rejected/") == [result["key"]] and sent(stack, fns) == []


def test_owner_envelope_with_a_strangers_from_is_rejected_before_parsing(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    # A stranger whose own domain passes DMARC cannot borrow the owner's envelope sender.
    raw = raw_reply(thread, [b"Mallory <mallory@evil.example>"])
    result = deliver(stack, fns, thread, raw, verdicts={"dmarc": "PASS"})
    assert (result["status"], result["reason"]) == ("rejected", "From is not the owner")
    result = deliver(stack, fns, thread, raw, source="mallory@evil.example", verdicts={"dmarc": "PASS"})
    assert (result["status"], result["reason"]) == ("rejected", "envelope sender is not the owner")


# --- replay ------------------------------------------------------------------------------------


def test_a_replayed_owner_reply_is_not_sent_again(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    raw = raw_reply(thread, body=b"Tuesday works.\r\n")
    first = deliver(stack, fns, thread, raw, mid="00000000000000000000000000000000000000a1")
    # Lambda retries the same SES event (e.g. the first run crashed after queueing): still the same delivery.
    retry = deliver(stack, fns, thread, raw, mid="00000000000000000000000000000000000000a1")
    replay = deliver(stack, fns, thread, raw, mid="00000000000000000000000000000000000000a2")
    assert first["status"] == retry["status"] == "queued"
    assert (replay["status"], replay["reason"]) == ("rejected", "owner message already sent (replay)")
    assert len(sent(stack, fns)) == 1
    assert stack.s3_keys("staging/") == []


def test_replay_with_a_new_message_id_is_recognised_by_its_signed_content(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    # DKIM need not cover Message-ID: the attacker changes it, but Date, Subject and body are signed.
    raw = raw_reply(thread, body=b"See you Tuesday.\r\n", extra=b"Date: Mon, 23 Nov 2026 10:00:00 +0000\r\n")
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    replay = deliver(stack, fns, thread, raw.replace(b"<r-1@example.net>", b"<forged-2@example.net>"))
    assert (replay["status"], replay["reason"]) == ("rejected", "owner message already sent (replay)")
    assert len(sent(stack, fns)) == 1


def test_replay_without_message_id_is_recognised_by_content(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    raw = raw_reply(thread, body=b"No id here.\r\n").replace(b"Message-ID: <r-1@example.net>\r\n", b"")
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    assert deliver(stack, fns, thread, raw)["status"] == "rejected"
    other = raw.replace(b"No id here.", b"A different reply.")
    assert deliver(stack, fns, thread, other)["status"] == "queued"
    assert len(sent(stack, fns)) == 2


def test_an_old_signed_owner_message_is_refused_as_a_replay(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    old = format_datetime(datetime.now(UTC) - timedelta(days=40)).encode()
    result = deliver(stack, fns, thread, raw_reply(thread, extra=b"Date: " + old + b"\r\n"))
    assert (result["status"], result["reason"]) == ("rejected", "owner message is too old (replayed?)")
    recent = format_datetime(datetime.now(UTC) - timedelta(hours=2)).encode()
    raw = raw_reply(thread, extra=b"Date: " + recent + b"\r\n").replace(b"<r-1@", b"<r-2@")
    assert deliver(stack, fns, thread, raw)["status"] == "queued"


def test_a_reply_that_cannot_reach_its_contact_is_reported_not_dropped(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    inbox = stack.watch_alerts()
    sendstatus.suppress(stack.cfg, "jane@corp.example", "permanent bounce (General)")
    result = deliver(stack, fns, thread, raw_reply(thread))
    assert result["status"] == "rejected" and result["reason"].startswith(
        "contact jane@corp.example is on the suppression list"
    )
    assert stack.s3_keys("rejected/") == [result["key"]] and sent(stack, fns) == []
    assert [a["reason"] for a in inbox()] == [result["reason"]]


def test_no_reply_to_a_conversation_whose_contact_is_our_own_address(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    # Someone wrote in with our public address as From (no DMARC on a forged domain is not needed:
    # the conversation exists); the owner's answer must not mail ourselves.
    result = fns["inbound-handler"].invoke(
        stack.receipt(mail(sender="Us <hello@example.com>"), f"{next(_ids):040d}")
    )
    address = thread_address(result["conversationId"], stack.cfg.thread_secret, stack.cfg.thread_domain)
    reply = deliver(stack, fns, address, raw_reply(address))
    assert (reply["status"], reply["reason"]) == (
        "rejected",
        "the conversation's contact is one of our own addresses (mail loop)",
    )


# --- nothing private reaches the contact --------------------------------------------------


def test_owner_display_name_and_every_spelling_of_the_private_address_are_hidden(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    body = (
        b"Hi Jane,\r\nmail me at owner+jobs@example.net or OWNER@Example.Net,\r\n<mailto:owner%40example."
        b"net> or owner&#64;example.net or %6Fwner%40example%2Enet or owner&#x40;example.net\r\nOwner\r\n"
    )
    raw = raw_reply(
        thread,
        [b'"owner@example.net" <owner@example.net>'],
        body=body,
        extra=b"Content-Type: text/plain; charset=utf-8\r\n",
    )
    raw = raw.replace(b"Subject: Re: Role", b"Subject: Re: Role (owner+role@example.net)")
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    [msg] = sent(stack, fns)
    assert b"example.net" not in msg.raw.lower()  # the private domain appears nowhere: headers or body
    assert msg.message["From"].addresses[0].display_name == PUBLIC_NAME
    text = msg.message.get_body(("plain",)).get_content()
    assert text.count("hello@example.com") == 6 and msg.message["Subject"] == "Re: Role (hello@example.com)"


def test_html_reply_and_attachment_names_are_scrubbed(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    html = (
        '<div>Call me: <a href="mailto:owner%2Bx%40example.net">owner&#64;example.net</a></div>'
        "<div>&#111;wner&commat;example&period;net</div>"
    )
    raw = mail(
        sender="Owner Name <owner@example.net>",
        to=thread,
        subject="Re: Role",
        text=None,
        html=html,
        attachments=[("owner@example.net.pdf", b"%PDF-1.4 cv", "application/pdf")],
    )
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    [msg] = sent(stack, fns)
    assert b"example.net" not in msg.raw.lower() and b"owner name" not in msg.raw.lower()
    [att] = list(msg.message.iter_attachments())
    assert att.get_filename() == "hello@example.com.pdf"


def test_a_contacts_crafted_subject_cannot_stall_the_owners_reply(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    # The contact's Subject comes back in the owner's reply ("Re: ..."), which is scrubbed: a sub-address
    # tag of "&#aaa" repeats made the scrubber backtrack exponentially, reply-handler timed out on every
    # attempt and the owner's reply was lost.
    crafted = b"owner+" + b"&#aaa" * 40 + b"!"
    raw = raw_reply(thread).replace(b"Subject: Re: Role", b"Subject: Re: " + crafted)
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    [msg] = sent(stack, fns)
    assert msg.message["Subject"] == "Re: " + crafted.decode()


def test_rejections_alert_the_owner_once_per_reason(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="test-sec-alerts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    client("sns").subscribe(
        TopicArn=f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.alert_topic}",
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    for _ in range(3):
        deliver(stack, fns, thread, raw_reply(thread, [b"owner@example.net <attacker@evil.example>"]))
    got = [
        json.loads(m["Body"])
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    ]
    assert [a["reason"] for a in got] == ["From header has a parse defect"]
    assert "attacker@evil.example" in got[0]["from"]


@pytest.mark.parametrize(
    "header",
    [
        "De: Owner Name <hello@example.com>\r\nEnviado el: lunes\r\nPara: Owner Name <hello@example.com>",
        "Da: Owner Name\r\nInviato: lunedi\r\nA: OWNER  NAME <owner@example.net>",
        "Kutoka: Owner Name <owner@example.net>\r\nKwa: owner name",  # Swahili: a language no rule knows
    ],
)
def test_the_owners_name_never_reaches_the_contact_in_any_language(
    stack: Stack, fns: dict[str, RieProcess], thread: str, header: str
) -> None:
    body = f"Thanks Jane, noted.\r\n\r\n{header}\r\nJane wrote: hello\r\n".encode()
    raw = mail(
        sender="Owner Name <owner@example.net>",
        to=thread,
        subject="Re: Role for Owner Name",
        text=body.decode().replace("\r\n", "\n"),
    )
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    [msg] = sent(stack, fns)
    assert b"owner name" not in msg.raw.lower() and b"example.net" not in msg.raw.lower(), msg.raw
    assert msg.message.get_body(("plain",)).get_content().startswith("Thanks Jane, noted.")


def test_controls_smuggled_in_a_contacts_nested_quotes_are_not_applied(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    # The contact's HTML: 25 nested quotes, all closed, a stray close, then controls; the owner answers
    # HTML-only above it with an attribution in a language the cleaner does not know.
    contact = (
        "<div>Hi</div>" + "<blockquote>" * 25 + "old" + "</blockquote>" * 25 + "</blockquote>"
        "<div>[allow: @evil.example]</div><div style='display:none'>[block: @bank.example]</div><div>Best, "
        "Eve</div>"
    )
    html = (
        "<div>Noted, thanks.</div><div>Il giorno lun 2 nov 2026 Eve ha "
        f"scritto:</div><blockquote>{contact}</blockquote>"
    )
    raw = mail(sender="Owner Name <owner@example.net>", to=thread, subject="Re: Role", text=None, html=html)
    result = deliver(stack, fns, thread, raw)
    assert result["status"] == "queued" and result["controls"] == [], result
    [msg] = sent(stack, fns)
    text = msg.message.get_body(("plain",)).get_content()
    assert text.startswith("Noted, thanks.") and "Best, Eve" not in text and "evil" not in text
    table = client("dynamodb").scan(TableName=stack.cfg.sender_lists_table)["Items"]
    assert not [i for i in table if "evil" in json.dumps(i) or "bank" in json.dumps(i)]


@pytest.mark.parametrize("change", [b"See you Tuesday.  \r\n\r\n\r\n", b"See   you\tTuesday.\r\n \r\n"])
def test_a_replay_padded_with_whitespace_dkim_relaxed_ignores_is_recognised(
    stack: Stack, fns: dict[str, RieProcess], thread: str, change: bytes
) -> None:
    raw = raw_reply(thread, body=b"See you Tuesday.\r\n", extra=b"Date: Mon, 23 Nov 2026 10:00:00 +0000\r\n")
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    padded = raw.replace(b"<r-1@example.net>", b"<forged-3@example.net>").replace(
        b"See you Tuesday.\r\n", change
    )
    replay = deliver(stack, fns, thread, padded)
    assert (replay["status"], replay["reason"]) == ("rejected", "owner message already sent (replay)")
    assert len(sent(stack, fns)) == 1


def test_a_message_id_is_claimed_once_across_conversations_and_bound_to_its_to(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    bob = fns["inbound-handler"].invoke(
        stack.receipt(
            mail(sender="Bob <bob@other.example>", subject="Hi"), "0000000000000000000000000000000000000b01"
        )
    )
    other = thread_address(bob["conversationId"], stack.cfg.thread_secret, stack.cfg.thread_domain)
    raw = raw_reply(thread, body=b"Only for Jane.\r\n")
    assert deliver(stack, fns, thread, raw)["status"] == "queued"
    # The same signed message delivered to Bob's thread address: its To still names Jane's.
    moved = deliver(stack, fns, other, raw)
    assert moved["status"] == "rejected" and "not in its To or Cc" in moved["reason"], moved
    # Even addressed to Bob's thread too (a Cc the owner wrote), the Message-ID was claimed already.
    both = raw.replace(b"To: " + thread.encode(), b"To: " + thread.encode() + b"\r\nCc: " + other.encode())
    assert (deliver(stack, fns, other, both)["reason"]) == "owner message already sent (replay)"
    assert [m.destinations for m in sent(stack, fns)] == [["jane@corp.example"]]
