"""reply-handler under the real RIE and a real moto server: only the owner, only to the stored sender."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from common.aws import client
from common.mail.threads import thread_address
from common.reply import auth
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
CID = "jane-at-corp.example"
REPLY_ID = "0000000000000000000000000000000000000r01"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        name: rie_module(name, env={"RETRY_DELAYS_SECONDS": "0"})
        for name in ("inbound-handler", "reply-handler", "reply-sender")
    }


@pytest.fixture
def thread(stack: Stack, fns: dict[str, RieProcess]) -> str:
    """A real conversation: Jane writes in, the forward's Reply-To is the thread address."""
    fns["inbound-handler"].invoke(
        stack.receipt(
            mail(subject="Role", message_id="<jane-1@corp.example>"),
            "0000000000000000000000000000000000000j01",
        )
    )
    [fwd] = stack.peek(stack.cfg.forward_queue)
    return fwd.reply_to


def alerts(stack: Stack) -> list[dict]:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="test-reply-alerts")["QueueUrl"]
    return [
        json.loads(m["Body"])
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    ]


@pytest.fixture
def alert_queue(stack: Stack) -> None:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="test-reply-alerts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    client("sns").subscribe(
        TopicArn=f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.alert_topic}",
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"},
    )


def reply(
    stack: Stack,
    fns: dict[str, RieProcess],
    to: str,
    sender: str = OWNER,
    source: str = "owner@example.net",
    verdicts: dict[str, str] | None = None,
    mid: str = REPLY_ID,
    **kw: Any,
) -> Any:
    raw = mail(sender=sender, to=to, subject=kw.pop("subject", "Re: Role"), **kw)
    # SES lists only the recipients its receipt rule matched (the thread domain), never the Cc.
    event = stack.receipt(raw, mid, to=to.split(",")[0], source=source, verdicts=verdicts)
    result = fns["reply-handler"].invoke(event)
    # The public rule names the thread domain too: SES hands inbound-handler the same recipients,
    # and it leaves the mail to reply-handler (common/store/staging.py).
    assert fns["inbound-handler"].invoke(event)["status"] == "thread-only"
    return result


def send_all(stack: Stack, fns: dict[str, RieProcess]) -> list[SentMail]:
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    return stack.sent()


def test_owner_reply_reaches_the_stored_sender_clean_and_threaded(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    text = (
        "Hi Jane, let's talk Tuesday.\n[company: Acme]\n[job_id: 42]\n\nOwner\nowner@example.net\n\n"
        "On Mon, 3 Nov 2026 at 10:00, Jane <hello@example.com> wrote:\n> Hi, I would like to talk\n"
    )
    result = reply(
        stack, fns, thread, text=text, attachments=[("Offer.PDF", b"%PDF-1.4 offer", "application/pdf")]
    )
    assert result["status"] == "queued" and result["metadata"] == {"companyName": "Acme", "jobId": "42"}
    [sent] = send_all(stack, fns)
    msg = sent.message
    assert sent.destinations == ["jane@corp.example"] and sent.source == "hello@example.com"
    assert msg["From"].addresses[0].addr_spec == "hello@example.com" and msg["Subject"] == "Re: Role"
    assert msg["In-Reply-To"] == "<jane-1@corp.example>"
    assert msg["References"].split() == [
        "<jane-1@corp.example>",
        "<0000000000000000000000000000000000000j01@email.amazonses.com>",
    ]
    body = msg.get_body(("plain",)).get_content()
    assert body == "Hi Jane, let's talk Tuesday.\n\nOwner\nhello@example.com\n"
    assert b"owner@example.net" not in sent.raw.lower()  # nowhere: headers or body
    [att] = list(msg.iter_attachments())
    assert att.get_filename() == "Offer.PDF" and att.get_content() == b"%PDF-1.4 offer"
    assert stack.s3_keys(f"reply-attachments/{CID}/") == [f"reply-attachments/{CID}/{REPLY_ID}/Offer.PDF"]
    record = stack.conversation(CID)
    assert record["companyName"] == "Acme" and record["jobId"] == "42"
    assert stack.s3_keys("staging/") == []


def test_extra_to_and_cc_recipients_are_never_used(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    result = reply(
        stack,
        fns,
        f"{thread}, attacker2@evil.example",
        headers={"Cc": "attacker@evil.example"},
        text="Sure, let's talk.",
    )
    assert result["status"] == "queued"
    [sent] = send_all(stack, fns)
    assert sent.destinations == ["jane@corp.example"]
    assert "attacker" not in sent.raw.decode()


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        (
            {"sender": "Jane <jane@corp.example>", "source": "jane@corp.example"},
            "envelope sender is not the owner",
        ),
        ({"sender": "Mallory <mallory@evil.example>"}, "From is not the owner"),
        ({"verdicts": {"spf": "FAIL", "dkim": "FAIL", "dmarc": "FAIL"}}, auth.UNAUTHENTICATED),
        ({"verdicts": {"dmarc": "FAIL"}}, auth.UNAUTHENTICATED),
        ({"verdicts": {"virus": "FAIL"}}, "spam or virus verdict FAIL"),
    ],
)
def test_anything_but_the_authenticated_owner_is_rejected_silently(
    stack: Stack,
    fns: dict[str, RieProcess],
    thread: str,
    alert_queue: None,
    kwargs: dict[str, dict[str, str]] | dict[str, str],
    reason: str,
) -> None:
    result = reply(stack, fns, thread, **kwargs)
    assert (result["status"], result["reason"]) == ("rejected", reason)
    assert stack.peek(stack.cfg.reply_queue) == [] and send_all(stack, fns) == []
    assert stack.s3_keys("rejected/") == [result["key"]] and stack.s3_keys("staging/") == []
    [alert] = alerts(stack)
    assert alert["reason"] == reason


def test_forged_and_tampered_thread_tags_are_rejected(
    stack: Stack, fns: dict[str, RieProcess], thread: str, alert_queue: None
) -> None:
    cfg = stack.cfg
    forged = f"mallory-at-evil.example.0123456789abcdef@{cfg.thread_domain}"
    tampered = thread.replace(CID, "bob-at-corp.example")
    wrong_key = thread_address(CID, "some-other-secret-value", cfg.thread_domain)
    for n, address in enumerate((forged, tampered, wrong_key, "jane-at-corp.example@" + cfg.thread_domain)):
        result = reply(stack, fns, address, mid=f"000000000000000000000000000000000000f0{n}")
        assert (result["status"], result["reason"]) == ("rejected", "no thread address with a valid tag")
    assert send_all(stack, fns) == []
    assert len(alerts(stack)) == 1  # at most one alert per hour per reason


def test_unknown_conversation_is_archived_and_alerted(
    stack: Stack, fns: dict[str, RieProcess], alert_queue: None
) -> None:
    address = thread_address("nobody-at-corp.example", stack.cfg.thread_secret, stack.cfg.thread_domain)
    result = reply(stack, fns, address)
    assert (result["status"], result["reason"]) == ("rejected", "unknown conversation")
    assert stack.s3_keys("staging/") == [] and alerts(stack)[0]["reason"] == "unknown conversation"


def test_header_injection_in_subject_adds_no_header_and_in_from_is_refused(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    raw = (
        b"From: Owner <owner@example.net>\r\nTo: "
        + thread.encode()
        + b"\r\nSubject: =?utf-8?q?Re=3A_Role=0D=0ABcc=3A_y=40evil=2Eexample?=\r\n\r\nHello\r\n"
    )
    result = fns["reply-handler"].invoke(stack.receipt(raw, REPLY_ID, to=thread, source="owner@example.net"))
    assert result["status"] == "queued"
    [sent] = send_all(stack, fns)
    header_names = [
        line.split(b":", 1)[0].lower()
        for line in sent.raw.split(b"\n\n", 1)[0].splitlines()
        if line[:1] not in (b" ", b"\t")
    ]
    assert b"bcc" not in header_names and sent.destinations == ["jane@corp.example"]
    assert sent.message["Subject"] == "Re: Role Bcc: y@evil.example"  # folded into the subject text, inert
    raw = (
        b"From: =?utf-8?q?Owner=0D=0ABcc=3A_x=40evil=2Eexample?= <owner@example.net>\r\n"
        b"To: " + thread.encode() + b"\r\nSubject: Re: Role\r\n\r\nHello\r\n"
    )
    result = fns["reply-handler"].invoke(
        stack.receipt(raw, "0000000000000000000000000000000000000r02", to=thread, source="owner@example.net")
    )
    assert (result["status"], result["reason"]) == ("rejected", "From header has a parse defect")


def test_html_only_reply_gets_a_text_body(stack: Stack, fns: dict[str, RieProcess], thread: str) -> None:
    reply(
        stack,
        fns,
        thread,
        text=None,
        html="<div>Hello <b>Jane</b></div><div class=gmail_quote><blockquote>&gt; old</blockquote></div>",
    )
    [sent] = send_all(stack, fns)
    assert sent.message.get_body(("plain",)).get_content().startswith("Hello Jane")


def test_a_contacts_text_quoted_in_an_html_only_reply_is_never_an_owner_command(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """A contact writes control lines in a mail without a Date (so the forward's header block is no cut
    marker) and the owner answers from a client that sends HTML only, quoting in a <blockquote> with no
    attribution line: the quoted lines were read as the owner's own ([allow: …] applied, [notes: …]
    stored, the quote sent back to the contact)."""
    from common.aws import dynamodb
    from tests.support.mailgen import raw as raw_mail

    contact = raw_mail(
        [
            ("From", "Jane Smith <jane@corp.example>"),
            ("To", "hello@example.com"),
            ("Subject", "Role"),
            ("Message-ID", "<jane-2@corp.example>"),
        ],
        "Hi!\r\n[allow: @evil.example]\r\n[notes: injected by the contact]\r\n",
    )
    fns["inbound-handler"].invoke(stack.receipt(contact, "0000000000000000000000000000000000000j02"))
    [fwd] = stack.peek(stack.cfg.forward_queue)
    quoted = "".join(f"<div>{line or '<br>'}</div>" for line in fwd.text.splitlines())
    result = reply(
        stack,
        fns,
        fwd.reply_to,
        text=None,
        html=f"<div>Thanks Jane, let us talk.</div><blockquote>{quoted}</blockquote>",
    )
    assert (result["status"], result["controls"], result["metadata"]) == ("queued", [], {})
    assert dynamodb.get(stack.cfg.sender_lists_table, {"entry": "@evil.example"}) is None
    assert "notes" not in stack.conversation(CID)
    [sent] = send_all(stack, fns)
    assert sent.message.get_body(("plain",)).get_content() == "Thanks Jane, let us talk.\n"


def test_only_the_owners_files_reach_the_contact(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    """The owner's client may add inline text fragments and an S/MIME signature: not attachments for Jane."""
    import email.message

    msg = email.message.EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = OWNER, thread, "Re: Role"
    msg.set_content("Hi Jane, the offer is attached.\n")
    msg.add_attachment(b"%PDF-1.4 offer", maintype="application", subtype="pdf", filename="Offer.pdf")
    msg.add_attachment("Sent from my phone\n", disposition="inline")  # Apple Mail's trailing text fragment
    msg.add_attachment(
        b"0\x82\x01\x00signature", maintype="application", subtype="pkcs7-signature", filename="smime.p7s"
    )
    result = fns["reply-handler"].invoke(
        stack.receipt(msg.as_bytes(), REPLY_ID, to=thread, source="owner@example.net")
    )
    assert result["status"] == "queued" and [k.rsplit("/", 1)[1] for k in result["attachments"]] == [
        "Offer.pdf"
    ]
    [sent] = send_all(stack, fns)
    assert [p.get_filename() for p in sent.message.iter_attachments()] == ["Offer.pdf"]


OOO = "I am out of the office until Monday, 24 November. For urgent matters call +1 555 0100.\n"
MDN = (
    "Content-Type: multipart/report; report-type=disposition-notification; boundary=b\r\n"
    "\r\n--b\r\nContent-Type: text/plain\r\n\r\nThe message was displayed.\r\n--b\r\n"
    "Content-Type: message/disposition-notification\r\n\r\nFinal-Recipient: rfc822; owner@example.net\r\n"
    "Disposition: manual-action/MDN-sent-manually; displayed\r\n--b--\r\n"
)


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"Auto-Submitted": "auto-replied"}, "Auto-Submitted: auto-replied"),
        ({"Auto-Submitted": "auto-generated"}, "Auto-Submitted: auto-generated"),
        ({"X-Autoreply": "yes"}, "X-Autoreply: yes"),
        ({"X-Autorespond": "vacation"}, "X-Autorespond: vacation"),
        ({"Precedence": "auto_reply"}, "Precedence: auto_reply"),
    ],
    ids=["gmail-vacation", "exchange-oof", "x-autoreply", "x-autorespond", "precedence"],
)
def test_an_out_of_office_reply_from_the_owner_is_archived_never_relayed(
    stack: Stack,
    fns: dict[str, RieProcess],
    thread: str,
    alert_queue: None,
    headers: dict[str, str],
    why: str,
) -> None:
    """The owner's autoresponder answers the forward's Reply-To (the thread address); it must
    not reach the contact from the public address."""
    result = reply(stack, fns, thread, text=OOO, subject="Automatic reply: Role", headers=headers)
    reason = f"automatic mail from the owner's mailbox ({why}); not relayed"
    assert (result["status"], result["reason"]) == ("rejected", reason)
    assert stack.peek(stack.cfg.reply_queue) == [] and send_all(stack, fns) == []
    assert stack.s3_keys("rejected/") == [result["key"]] and stack.s3_keys("staging/") == []
    assert [a["reason"] for a in alerts(stack)] == [reason]


def test_a_read_receipt_from_the_owner_is_not_relayed(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    head = (
        f"From: {OWNER}\r\nTo: {thread}\r\nSubject: Read: Role\r\nMessage-ID: <mdn-1@example.net>\r\n"
        "MIME-Version: 1.0\r\n"
    )
    raw = (head + MDN).encode()
    result = fns["reply-handler"].invoke(stack.receipt(raw, REPLY_ID, to=thread, source="owner@example.net"))
    assert (result["status"], result["reason"]) == (
        "rejected",
        "automatic mail from the owner's mailbox (report or notification (multipart/report)); not relayed",
    )
    assert send_all(stack, fns) == []


def test_an_autoreply_to_new_starts_no_conversation(stack: Stack, fns: dict[str, RieProcess]) -> None:
    new = f"new@{stack.cfg.thread_domain}"
    result = reply(
        stack, fns, new, text="[to: bob@other.example]\n" + OOO, headers={"Auto-Submitted": "auto-replied"}
    )
    assert result["status"] == "rejected" and "automatic mail" in result["reason"]
    assert stack.conversation("bob-at-other.example") is None and send_all(stack, fns) == []


def test_an_alert_whose_publish_failed_is_sent_on_the_retry_not_throttled_away(
    stack: Stack, fns: dict[str, RieProcess], thread: str
) -> None:
    """The hourly throttle is claimed before SNS publishes; a failed publish kept the claim, so
    the retry of the same event (and every rejection for an hour) sent no alert at all."""
    from local.rie import InvokeError

    sns = client("sns")
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.alert_topic}"
    sns.delete_topic(TopicArn=topic)  # SNS fails the publish
    raw = mail(sender="Mallory <mallory@evil.example>", to=thread)
    event = stack.receipt(raw, REPLY_ID, to=thread, source="mallory@evil.example")
    with pytest.raises(InvokeError):
        fns["reply-handler"].invoke(event)
    assert stack.s3_keys("staging/") == [f"staging/{REPLY_ID}"]  # kept for the retry
    sns.create_topic(Name=stack.cfg.alert_topic)
    inbox = stack.watch_alerts()
    result = fns["reply-handler"].invoke(event)  # Lambda's retry of the same event
    assert (result["status"], result["alerted"]) == ("rejected", True)
    assert [a["reason"] for a in inbox()] == ["envelope sender is not the owner"]


ENCRYPTED_REPLIES = {
    "pgp": (
        'multipart/encrypted; protocol="application/pgp-encrypted"; boundary="e"',
        "--e\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n"
        "--e\r\nContent-Type: application/octet-stream\r\n\r\n-----BEGIN PGP "
        "MESSAGE-----\r\n\r\nwcBMA0\r\n-----END PGP MESSAGE-----\r\n--e--\r\n",
        "PGP/MIME (multipart/encrypted)",
    ),
    "smime": (
        'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"',
        "MIIBhwYJKoZIhvcNAQcDoIIBeDCCAXQCAQAxggEw\r\n",
        "S/MIME (application/pkcs7-mime; smime-type=enveloped-data)",
    ),
}


@pytest.mark.parametrize("kind", sorted(ENCRYPTED_REPLIES))
def test_a_reply_encrypted_to_the_owners_own_key_is_refused_with_a_notice(
    stack: Stack, fns: dict[str, RieProcess], thread: str, alert_queue: None, kind: str
) -> None:
    ctype, body, what = ENCRYPTED_REPLIES[kind]
    cte = "Content-Transfer-Encoding: base64\r\n" if kind == "smime" else ""
    raw = (
        f"From: {OWNER}\r\nTo: {thread}\r\nSubject: Re: Role\r\nMessage-ID: <enc-{kind}@example.net>\r\n"
        f"MIME-Version: 1.0\r\nContent-Type: {ctype}\r\n{cte}\r\n{body}"
    ).encode()
    result = fns["reply-handler"].invoke(stack.receipt(raw, REPLY_ID, to=thread, source="owner@example.net"))
    reason = (
        f"the reply is encrypted ({what}) and cannot be relayed: send it again unencrypted (signing is fine)"
    )
    assert (result["status"], result["reason"]) == ("rejected", reason)
    assert stack.peek(stack.cfg.reply_queue) == [] and send_all(stack, fns) == []
    assert stack.s3_keys("rejected/") == [result["key"]]  # kept, not lost
    assert [a["reason"] for a in alerts(stack)] == [reason]  # the owner is told
