"""Delivery reports recognised by content as well as type (common.inbound.policy.delivery_report):
the formats docs/inbound.md#delivery-reports lists, and a person's mail from postmaster@ that is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.inbound.policy import Action, Rules, assess_mail, delivery_report
from common.mail.parse import parse
from common.runtime.events import SesReceipt
from local.events import receipt_event

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


# Reports recognised by structure (common/mail/reports.py), each in a layout a vendor list would miss.
STRUCTURAL = {
    "post_master with an SMTP reply": mail(
        "From: post_master@vtext.example\nSubject: Re:Test message",
        "Error: Invalid user address\r\n\r\nError message below:\r\n550 - Requested action not taken\r\n",
    ),
    "MAILER-DAEMON <> with a returned header": mail(
        "From: MAILER-DAEMON <>\nSubject: Nachricht",
        "Zustellung fehlgeschlagen.\r\n\r\nReceived: from root (uid 0)\r\n\tby df.example\r\n"
        "Subject: Nyaan\r\nMessage-Id: <1@df.example>\r\n",
    ),
    "no-reply with the returned mail attached": mail(
        "From: no-reply@mail.example.jp\nSubject: =?UTF-8?B?44Oh44O844Or44Ko44Op44O8?=\n"
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b",
        "--b\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\n\xe9\x80\x81\xe4\xbf\xa1\r\n"
        "--b\r\nContent-Type: message/rfc822\r\n\r\n"
        "From: a@corp.example\r\nSubject: x\r\n\r\nhi\r\n--b--\r\n",
    ),
    "list server notice answering a mail": mail(
        "From: neko-admin@lists.example\nX-MLServer: fml [fml 4.0.3]\nReferences: <1@corp.example>\n"
        "Subject: You are not member (neko ML)",
        "You are not a member of this mailing list.\r\n",
    ),
    "SES's SNS notification as mail": mail(
        "From: AWS Notifications <no-reply@sns.amazonaws.com>\nSubject: AWS Notification Message",
        '{"notificationType":"Bounce","bounce":{"bounceType":"Permanent"},\r\n"mail":{"source":"a@b"}}\r\n'
        "--\r\nIf you wish to stop receiving notifications ...\r\n",
    ),
    "a bounce of ours in an unknown layout": mail(
        "From: Zustellsystem <zustellung@relay.corp.example>\nSubject: Ihre Nachricht",
        "Nicht zustellbar.\r\n\r\nReturn-Path: <hello@example.com>\r\nFrom: Hello <hello@example.com>\r\n"
        "Message-ID: <x@email.amazonses.com>\r\nX-Correlation-ID: ack-0001\r\n",
    ),
}
COMPLAINTS = {
    "ARF": mail(
        "From: fbl@isp.example\nSubject: report\nMIME-Version: 1.0\n"
        'Content-Type: multipart/report; report-type="feedback-report"; boundary=b',
        "--b\r\nContent-Type: text/plain\r\n\r\nspam report\r\n"
        "--b\r\nContent-Type: message/feedback-report\r\n\r\n"
        "Feedback-Type: abuse\r\nUser-Agent: x/1\r\nVersion: 1\r\n--b--\r\n",
    ),
    "feedback part without a report-type": mail(
        "From: fbl@isp.example\nSubject: report\nMIME-Version: 1.0\n"
        "Content-Type: multipart/report; boundary=b",
        "--b\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n--b--\r\n",
    ),
    "SES complaint notification": mail(
        "From: no-reply@sns.amazonaws.com\nSubject: AWS Notification Message",
        '{"notificationType":"Complaint","complaint":{},"mail":{"source":"hello@example.com"}}\r\n',
    ),
}


@pytest.mark.parametrize("name", STRUCTURAL)
def test_reports_are_recognised_by_structure_not_vendor(name: str) -> None:
    raw = STRUCTURAL[name]
    decision = assess_mail(receipt(raw), parse(raw), Rules(), own=lambda a: a.endswith("@example.com"))
    assert decision.action == Action.DSN, decision


@pytest.mark.parametrize("name", COMPLAINTS)
def test_abuse_complaints_are_their_own_outcome(name: str) -> None:
    raw = COMPLAINTS[name]
    decision = assess_mail(receipt(raw), parse(raw), Rules())
    assert decision.action == Action.COMPLAINT and "complaint" in decision.reason


def test_a_persons_mail_from_postmaster_is_forwarded_even_with_a_postmaster_envelope() -> None:
    from common.inbound.policy import is_dsn

    raw = mail("From: Bob <postmaster@corp.example>\nSubject: Lunch?", "Shall we meet on Friday?\r\n")
    event = receipt_event(raw, "m1", ["hello@example.com"], source="postmaster@corp.example")
    assert not is_dsn(SesReceipt.from_event(event))
    assert assess_mail(SesReceipt.from_event(event), parse(raw), Rules()).action == Action.FORWARD
    for source in ("", "<>", "MAILER-DAEMON@mx.corp.example"):
        assert is_dsn(SesReceipt.from_event(receipt_event(raw, "m1", ["hello@example.com"], source=source)))


def test_a_person_forwarding_a_bounce_is_forwarded_but_not_acked() -> None:
    from common.mail.reports import carried_report

    raw = mail(
        "From: Jane <jane@corp.example>\nSubject: Fwd: Returned mail",
        "Look at this:\r\n\r\n> Diagnostic-Code: smtp; 550 5.1.1 user unknown\r\n",
    )
    assert assess_mail(receipt(raw), parse(raw), Rules()).action == Action.FORWARD
    assert carried_report(parse(raw))


def test_the_report_patterns_are_linear_on_hostile_text() -> None:
    import time

    from common.mail import reports

    hostile = [
        "550 " * 50_000,
        "#5." * 50_000,
        ">" * 200_000,
        " " * 200_000 + "x",
        "a:" * 100_000,
        "\n\t" * 100_000,
        "Received: x\n" * 20_000,
        "{" * 100_000,
    ]
    for text in hostile:
        started = time.perf_counter()
        reports._SMTP.search(text[: reports.SCAN_CHARS])
        reports._returned_block(text[: reports.SCAN_CHARS])
        reports._BOUNCE_BODY.search(text[:20_000])
        reports._LIST_ADMIN.match(text[:3000])
        reports._ADDRESS.findall(text[:2000])
        assert time.perf_counter() - started < 0.5, text[:20]


def test_a_postmaster_attaching_a_mail_is_forwarded_unless_the_text_names_its_recipient() -> None:
    attached = (
        "--b\r\nContent-Type: message/rfc822\r\n\r\nFrom: spammer@else.example\r\nTo: joe@corp.example\r\n"
        "Subject: offer\r\nMessage-ID: <s@else.example>\r\n\r\nbuy\r\n--b--\r\n"
    )
    head = (
        "From: Bob <postmaster@corp.example>\nSubject: {}\n"
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b"
    )
    person = mail(
        head.format("Look at this"),
        "--b\r\nContent-Type: text/plain\r\n\r\nDid this come from you?\r\n" + attached,
    )
    bounce = mail(
        head.format("Mail could not be delivered"),
        "--b\r\nContent-Type: text/plain\r\n\r\nUnable to deliver message to <joe@corp.example>.\r\n"
        + attached,
    )
    assert assess_mail(receipt(person), parse(person), Rules()).action == Action.FORWARD
    assert assess_mail(receipt(bounce), parse(bounce), Rules()).action == Action.DSN
