"""Ack backscatter and RFC 3834 (docs/security.md, acks), under the real RIE against moto.

Every attack here used to produce an ack; each now produces the forward only, with the reason the
ack was skipped in the log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail

PUBLIC_NAME = "Alex Example"


@pytest.fixture(scope="module")
def inbound(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module(
        "inbound-handler",
        env={"ACK_LIMIT_PER_HOUR": "5", "ACK_LIMIT_PER_DOMAIN_PER_HOUR": "3", "PUBLIC_NAME": PUBLIC_NAME},
    )


@pytest.fixture(scope="module")
def ack_sender(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("ack-sender", env={"RETRY_DELAYS_SECONDS": "0", "PUBLIC_NAME": PUBLIC_NAME})


_ids = iter(range(10**6))


def deliver(stack: Stack, inbound: RieProcess, raw: bytes, **kw: Any) -> dict:
    return inbound.invoke(stack.receipt(raw, f"{next(_ids):040d}", **kw))


def skipped_reasons(inbound: RieProcess) -> list[str]:
    lines = [json.loads(line) for line in inbound.output().splitlines() if line.startswith("{")]
    return [
        d["ack_skipped_reason"]
        for d in lines
        if d.get("message") == "mail forwarded" and d.get("ack_skipped_reason")
    ]


def test_forged_first_contacts_get_at_most_the_ack_budget(stack: Stack, inbound: RieProcess) -> None:
    # Forged first contacts that all pass (a spammer's own DMARC-passing domains): 5 acks an hour in all,
    # 3 to any one domain; every mail is still forwarded.
    results = []
    for domain, n in (("one.example", 4), ("two.example", 4), ("three.example", 1)):
        for i in range(n):
            results.append(
                deliver(stack, inbound, mail(sender=f"S <s{i}@{domain}>"), source=f"s{i}@{domain}")
            )
    assert all(r["status"] == "forwarded" and r["firstContact"] for r in results)
    assert [r["ack"] for r in results] == [True, True, True, False, True, True, False, False, False]
    assert len(stack.peek(stack.cfg.ack_queue)) == 5 and len(stack.peek(stack.cfg.forward_queue)) == 9
    reasons = skipped_reasons(inbound)[-4:]
    assert reasons == [
        "ack budget for one.example used up (3 per hour)",
        "global ack budget used up (5 per hour)",
        "global ack budget used up (5 per hour)",
        "global ack budget used up (5 per hour)",
    ]


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        # SPF passed, but for the attacker's envelope domain; DMARC has no verdict for the forged From.
        (
            {"source": "bulk@evil.example", "verdicts": {"spf": "PASS", "dkim": "GRAY", "dmarc": "GRAY"}},
            "sender not authenticated (DMARC GRAY, SPF PASS for another domain)",
        ),
        (
            {
                "source": "jane@corp.example",
                "verdicts": {"spf": "GRAY", "dkim": "PASS", "dmarc": "PROCESSING_FAILED"},
            },
            "sender not authenticated (DMARC PROCESSING_FAILED, SPF GRAY)",
        ),
    ],
)
def test_unauthenticated_from_gets_no_ack(
    stack: Stack, inbound: RieProcess, kw: dict[str, Any], reason: str
) -> None:
    result = deliver(stack, inbound, mail(), **kw)
    assert result["status"] == "forwarded" and result["firstContact"] and not result["ack"]
    assert stack.peek(stack.cfg.ack_queue) == [] and len(stack.peek(stack.cfg.forward_queue)) == 1
    assert skipped_reasons(inbound)[-1] == reason


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (mail(sender="Google <gmail-noreply@google.com>"), "no-reply sender"),
        (mail(sender="Shop <orders-donotreply@shop.example>"), "no-reply sender"),
        (
            mail(
                sender="Jane <jane@corp.example>",
                text=None,
                headers={
                    "Content-Type": "multipart/report; report-type=disposition-notification; boundary=b"
                },
            ),
            "report or notification (multipart/report)",
        ),
        # every autoresponder marker of RFC 3834 and the common vendor headers, through the handler
        (mail(headers={"Auto-Submitted": "auto-replied"}), "Auto-Submitted: auto-replied"),
        (
            mail(headers={"Auto-Submitted": "auto-generated; owner-email=x@corp.example"}),
            "Auto-Submitted: auto-generated",
        ),
        (mail(headers={"X-Autoreply": "yes"}), "X-Autoreply: yes"),
        (mail(headers={"X-Autorespond": "Out of office"}), "X-Autorespond: Out of office"),
        (mail(headers={"Precedence": "bulk"}), "Precedence: bulk"),
        (mail(headers={"Precedence": "list"}), "Precedence: list"),
        (mail(headers={"Precedence": "auto_reply"}), "Precedence: auto_reply"),
        (mail(headers={"List-Id": "Jobs <jobs.corp.example>"}), "mailing list headers"),
        (mail(headers={"List-Unsubscribe": "<mailto:leave@corp.example>"}), "mailing list headers"),
        (mail(headers={"X-Auto-Response-Suppress": "All"}), "X-Auto-Response-Suppress: All"),
    ],
)
def test_rfc3834_senders_and_reports_get_no_ack(
    stack: Stack, inbound: RieProcess, raw: bytes, reason: str
) -> None:
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded" and not result["ack"]
    assert skipped_reasons(inbound)[-1] == reason


def from_fields(*values: str) -> bytes:
    head = "".join(f"From: {v}\r\n" for v in values)
    return (
        head + "To: hello@example.com\r\nSubject: Hello\r\nMessage-ID: <m@corp.example>\r\n\r\nHi there.\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("raw", "defect"),
    [
        (from_fields("Jane <jane@corp.example>, Victim <victim@other.example>"), "several mailboxes"),
        (from_fields("victim@other.example, jane@corp.example"), "several mailboxes"),
        (from_fields("Jane <jane@corp.example>", "Victim <victim@other.example>"), "several From fields"),
        (from_fields("Team: jane@corp.example;"), "group syntax"),
        (from_fields("Team: jane@corp.example, victim@other.example;"), "group syntax; several mailboxes"),
        (from_fields("jane@corp.example victim@other.example"), "several addresses without angle brackets"),
        (from_fields("Jane <jane@corp.example> <victim@other.example>"), "several angle addresses"),
    ],
    ids=[
        "two-mailboxes",
        "two-bare-addresses",
        "two-from-fields",
        "group",
        "group-of-two",
        "two-words",
        "two-angles",
    ],
)
def test_a_from_with_several_mailboxes_or_a_group_gets_no_ack(
    stack: Stack, inbound: RieProcess, raw: bytes, defect: str
) -> None:
    """Which mailbox did DMARC verify? None is acked; the mail is still forwarded."""
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded" and result["firstContact"] and not result["ack"], result
    assert stack.peek(stack.cfg.ack_queue) == [] and len(stack.peek(stack.cfg.forward_queue)) == 1
    assert skipped_reasons(inbound)[-1] == f"unverifiable sender (From: {defect})"


def test_a_quarantined_multi_from_mail_gets_no_ack_either(stack: Stack, inbound: RieProcess) -> None:
    result = deliver(
        stack,
        inbound,
        from_fields("Jane <jane@corp.example>", "V <victim@other.example>"),
        verdicts={"spam": "FAIL"},
    )
    assert result["status"] == "quarantined" and stack.peek(stack.cfg.ack_queue) == []


def test_delivery_report_with_a_real_envelope_is_archived_as_a_dsn(stack: Stack, inbound: RieProcess) -> None:
    raw = (
        b"From: Mail Delivery System <mailer@mx.corp.example>\r\nTo: hello@example.com\r\n"
        b"Subject: Undelivered\r\nContent-Type: multipart/report; report-type=delivery-status; "
        b"boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nCould not deliver.\r\n--b\r\n"
        b"Content-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.corp.example\r\n\r\n"
        b"Final-Recipient: rfc822; x@corp.example\r\nAction: failed\r\nStatus: 5.1.1\r\n--b--\r\n"
    )
    result = deliver(stack, inbound, raw, source="mailer@mx.corp.example")
    assert result["status"] == "dsn" and result["key"].startswith("bounces/")
    assert stack.peek(stack.cfg.ack_queue) == [] and stack.peek(stack.cfg.forward_queue) == []


def test_display_name_is_never_reflected_beyond_one_short_word(
    stack: Stack, inbound: RieProcess, ack_sender: RieProcess
) -> None:
    url = "https://evil.example/" + "a" * 180
    # Written raw: Python's generator folds this name without its quotes, and "https:" unquoted reads
    # as a group (no ack at all, test_a_from_with_several_mailboxes_or_a_group_gets_no_ack).
    deliver(stack, inbound, from_fields(f'"{url}" <jane@corp.example>'))
    deliver(stack, inbound, mail(sender="José Ramírez <jose@corp.example>"))
    stack.run_sender(ack_sender, stack.cfg.ack_queue)
    sent = {m.destinations[0]: m for m in stack.sent()}
    jane = sent["jane@corp.example"].message
    assert jane.get_body(("plain",)).get_content().startswith("Hello,\n")
    assert "evil" not in sent["jane@corp.example"].raw.decode()
    assert sent["jose@corp.example"].message.get_body(("plain",)).get_content().startswith("Hello José,\n")
    assert jane["From"].addresses[0].display_name == PUBLIC_NAME and jane["Auto-Submitted"] == "auto-replied"


@pytest.mark.parametrize(
    "sender", ["hello+x@example.com", "HELLO@example.com.", "owner+jobs@example.net", "ops@mail.example.com"]
)
def test_a_spelling_of_our_own_address_gets_no_ack(stack: Stack, inbound: RieProcess, sender: str) -> None:
    result = deliver(stack, inbound, mail(sender=f"Me <{sender.rstrip('.')}>"), source=sender)
    assert result["status"] in ("forwarded", "dsn") and not result.get("ack"), result
    assert stack.peek(stack.cfg.ack_queue) == []
    if result["status"] == "forwarded":
        assert skipped_reasons(inbound)[-1] == "sender is one of our own addresses"
