"""Delivery reports recognised by content as well as type (common.inbound.policy.delivery_report):
the formats docs/inbound.md#delivery-reports lists, and a person's mail from postmaster@ that is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.inbound.policy import Action, Rules, assess_mail, delivery_report
from common.local.events import receipt_event
from common.mail.parse import parse
from common.runtime.events import SesReceipt

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def receipt(raw: bytes) -> SesReceipt:
    return SesReceipt.from_event(receipt_event(raw, "m1", ["hello@example.com"], source="relay@corp.example"))


def mail(head: str, body: str = "Hello.\r\n") -> bytes:
    return (head.replace("\n", "\r\n") + "\r\n\r\n" + body).encode()


REPORTS = {
    "null sender": mail("Return-Path: <>\nFrom: Someone <someone@corp.example>\nSubject: Re: your mail"),
    "exim": mail(
        "From: Mail Delivery System <Mailer-Daemon@mx.corp.example>\nX-Failed-Recipients: "
        "gone@corp.example\nSubject: Mail delivery failed: returning message to sender",
        "This message was created automatically by mail delivery software.\r\n",
    ),
    "qmail": mail(
        "From: MAILER-DAEMON@mx.corp.example\nSubject: failure notice",
        "Hi. This is the qmail-send program at mx.corp.example.\r\nI'm afraid I wasn't able to deliver\r\n",
    ),
    "gmail": mail(
        "From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>\n"
        "Subject: Delivery Status Notification (Failure)",
        "Delivery to the following recipient failed permanently:\r\n\r\n     gone@corp.example\r\n",
    ),
    "postmaster": mail(
        "From: Mail Administrator <Postmaster@challenge.example>\nSubject: Mail System Error - Returned Mail",
        "This Message was undeliverable due to the following reason:\r\n",
    ),
    "postmaster, bounce text only": mail(
        "From: postmaster@corp.example\nSubject: Your mail",
        "Your message wasn't delivered to gone@corp.example.\r\n",
    ),
    "delivery-status part in mixed": mail(
        "From: ops@corp.example\nSubject: Notice\n"
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b",
        "--b\r\nContent-Type: text/plain\r\n\r\nnotice\r\n--b\r\nContent-Type: message/delivery-status\r\n"
        "\r\nReporting-MTA: dns; mx.corp.example\r\n\r\nFinal-Recipient: rfc822; "
        "gone@corp.example\r\nAction: failed\r\nStatus: 5.1.1\r\n--b--\r\n",
    ),
}


@pytest.mark.parametrize("name", REPORTS)
def test_delivery_reports_by_content_are_archived_not_forwarded(name: str) -> None:
    parsed = parse(REPORTS[name])
    assert delivery_report(parsed)
    decision = assess_mail(receipt(REPORTS[name]), parsed, Rules())
    assert decision.action == Action.DSN and decision.reason == delivery_report(parsed)


@pytest.mark.parametrize(
    "raw",
    [
        mail(
            "From: Pat Postmaster <postmaster@corp.example>\nSubject: Question about your service",
            "Hi, I run the mail for corp.example and would like to ask about your pricing.\r\n",
        ),
        mail(
            "From: Jane <jane@corp.example>\nSubject: Undeliverable: my last mail",
            "My last mail bounced; here it is again.\r\n",
        ),  # a person's subject alone proves nothing
        mail(
            "From: Jane <jane@corp.example>\nSubject: Fwd: bounce",
            "This message was created automatically by mail delivery software.\r\n",
        ),  # a person forwarding a bounce
    ],
)
def test_a_persons_mail_is_not_a_delivery_report_without_a_mail_systems_evidence(raw: bytes) -> None:
    parsed = parse(raw)
    assert delivery_report(parsed) == ""
    assert assess_mail(receipt(raw), parsed, Rules()).action == Action.FORWARD


@pytest.mark.parametrize(
    "path", ["enmime/mail--multipart-wo-boundary.raw", "mime4j/mimetools-testmsgs--badbound.msg"]
)
def test_corpus_bounces_are_reports(path: str) -> None:
    assert delivery_report(parse((CORPUS / path).read_bytes()))
