"""inbound-handler under the real RIE against a real moto server: policy, records, ack, forward."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from common.delivery.compose import FOOTER_MARKER, FORWARD_MARKER
from common.mail.threads import verify_thread_address
from common.runtime.log import pseudonym
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail

SES_ID = "0000000000000000000000000000000000000001"


@pytest.fixture(scope="module")
def inbound(rie_module: Callable[..., RieProcess]) -> RieProcess:
    # TTL 0: each test's keyword-list edits apply to the next mail (the cache itself is unit-tested).
    return rie_module("inbound-handler", env={"SPAM_RULES_TTL_SECONDS": "0"})


@pytest.fixture(scope="module")
def forward_sender(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"})


@pytest.fixture(scope="module")
def ack_sender(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("ack-sender", env={"RETRY_DELAYS_SECONDS": "0"})


def deliver(stack: Stack, inbound: RieProcess, raw: bytes, mid: str = SES_ID, **kwargs: Any) -> Any:
    return inbound.invoke(stack.receipt(raw, mid, **kwargs))


def log_lines(fn: RieProcess, message: str) -> list[dict]:
    return [
        d
        for d in (json.loads(line) for line in fn.output().splitlines() if line.startswith("{"))
        if d.get("message") == message
    ]


def test_first_contact_records_archives_acks_and_forwards(stack: Stack, inbound: RieProcess) -> None:
    raw = mail(text="Hello!\n" + "x" * 2000)
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded" and result["firstContact"] and result["ack"]
    cid = "jane-at-corp.example"
    record = stack.conversation(cid)
    assert record["senderEmail"] == "jane@corp.example" and record["displayName"] == "Jane Smith"
    assert record["emailDomain"] == "corp.example" and record["subject"] == "Hello"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["timestamp"])
    assert record["firstContactDate"] == record["timestamp"]
    assert len(record["lastMessageBody"]) == 1000 and record["lastMessageBody"].startswith("Hello!")
    assert stack.s3_keys("conversations/") == [f"conversations/{cid}/{SES_ID}.eml"]
    assert stack.s3_body(f"conversations/{cid}/{SES_ID}.eml") == raw
    assert stack.s3_keys("staging/") == []
    [ack] = stack.peek(stack.cfg.ack_queue)
    assert ack.to == ["jane@corp.example"] and ack.headers["Auto-Submitted"] == "auto-replied"
    assert ack.idempotency_key == f"ack:{SES_ID}" and "Hello Jane," in ack.text
    [fwd] = stack.peek(stack.cfg.forward_queue)
    assert fwd.to == ["owner@example.net"] and fwd.idempotency_key == f"forward:{SES_ID}"
    logged = log_lines(inbound, "mail forwarded")[-1]  # who, as a pseudonym; never the subject or text
    assert logged["sender"] == pseudonym("jane@corp.example") and logged["conversation_id"] == pseudonym(cid)
    assert (logged["subject_chars"], logged["body_chars"]) == (5, 2008) and "subject" not in logged


def test_follow_up_is_forwarded_without_ack_and_keeps_first_contact_date(
    stack: Stack, inbound: RieProcess
) -> None:
    deliver(stack, inbound, mail(subject="First"), "0000000000000000000000000000000000000010")
    first = stack.conversation("jane-at-corp.example")
    result = deliver(stack, inbound, mail(subject="Second"), "0000000000000000000000000000000000000011")
    assert result["status"] == "forwarded" and not result["firstContact"] and not result["ack"]
    record = stack.conversation("jane-at-corp.example")
    assert record["firstContactDate"] == first["firstContactDate"] and record["subject"] == "Second"
    assert record["lastSesMessageId"] == "0000000000000000000000000000000000000011"
    assert len(stack.peek(stack.cfg.ack_queue)) == 1 and len(stack.peek(stack.cfg.forward_queue)) == 2


def test_event_delivered_twice_gives_one_ack_and_one_forward(
    stack: Stack, inbound: RieProcess, ack_sender: RieProcess, forward_sender: RieProcess
) -> None:
    raw = mail()
    deliver(stack, inbound, raw)
    # SES/Lambda retried the same event before the first run deleted staging (e.g. it crashed there).
    second = deliver(stack, inbound, raw)
    assert second["firstContact"] and second["ack"]  # a retried first contact is still the first contact
    assert len(stack.peek(stack.cfg.ack_queue)) == 2  # two queue messages, one idempotency key
    for fn, queue in ((ack_sender, stack.cfg.ack_queue), (forward_sender, stack.cfg.forward_queue)):
        assert all(not r.failed for r in stack.run_sender(fn, queue))
        assert stack.depth(queue) == 0
    assert sorted(m.destinations[0] for m in stack.sent()) == ["jane@corp.example", "owner@example.net"]
    assert "idempotency key already completed" in ack_sender.output()


def test_linkedin_sender_is_acked_once_across_messages(stack: Stack, inbound: RieProcess) -> None:
    sender = "Jane Smith <s-2kfv@bounce.linkedin.com>"
    r1 = deliver(stack, inbound, mail(sender=sender), "0000000000000000000000000000000000000020")
    r2 = deliver(stack, inbound, mail(sender=sender), "0000000000000000000000000000000000000021")
    assert r1["conversationId"] == r2["conversationId"]
    assert re.fullmatch(r"jane-smith-linkedin-[0-9a-f]{6}", r1["conversationId"])
    assert r1["ack"] and not r2["ack"]


@pytest.mark.parametrize(
    ("kwargs", "status", "reason"),
    [
        ({"verdicts": {"virus": "FAIL", "spam": "FAIL"}}, "dropped", "virus verdict FAIL"),
        ({"verdicts": {"spam": "FAIL"}}, "quarantined", "spam verdict FAIL"),
        (
            {"verdicts": {"dmarc": "FAIL"}, "dmarc_policy": "reject"},
            "quarantined",
            "DMARC FAIL with sender policy reject",
        ),
        ({"to": "someone-else@example.org"}, "dropped", "recipient is not the public address"),
    ],
)
def test_ses_verdict_rules(
    stack: Stack, inbound: RieProcess, kwargs: dict[str, Any], status: str, reason: str
) -> None:
    result = deliver(stack, inbound, mail(), **kwargs)
    assert (result["status"], result["reason"]) == (status, reason)
    assert stack.s3_keys("staging/") == [] and stack.s3_keys("conversations/") == []
    assert stack.peek(stack.cfg.forward_queue) == [] and stack.peek(stack.cfg.ack_queue) == []
    if status == "quarantined":
        [key] = stack.s3_keys("spam/")
        assert re.fullmatch(rf"spam/\d{{4}}-\d\d-\d\d/{SES_ID}.eml", key) and result["key"] == key
        [line] = stack.spam_log()
        assert (
            line["reason"] == reason
            and line["key"] == key
            and line["sender"] == pseudonym("jane@corp.example")
        )
        assert "subject" not in line and "jane" not in json.dumps(line)
        assert log_lines(inbound, "mail quarantined")[-1]["reason"] == reason
    else:
        assert stack.s3_keys("spam/") == []
        assert log_lines(inbound, "mail dropped")[-1]["reason"] == reason


@pytest.mark.parametrize(
    ("kwargs", "banner"),
    [
        ({"verdicts": {"dmarc": "FAIL"}, "dmarc_policy": "none"}, "DMARC check failed"),
        ({"verdicts": {"dmarc": "FAIL"}, "dmarc_policy": "quarantine"}, "DMARC check failed"),
        ({"verdicts": {"spf": "FAIL"}}, "SPF check failed"),
    ],
)
def test_soft_authentication_failures_are_forwarded_with_a_banner(
    stack: Stack, inbound: RieProcess, kwargs: dict[str, Any], banner: str
) -> None:
    result = deliver(stack, inbound, mail(html="<html><body><p>Hi</p></body></html>"), **kwargs)
    assert (
        result["status"] == "forwarded" and not result["ack"]
    )  # never auto-reply to a possibly forged sender
    [fwd] = stack.peek(stack.cfg.forward_queue)
    assert fwd.text.startswith(f"{FORWARD_MARKER}\n[!] {banner}")
    assert banner in fwd.html and fwd.html.index(banner) < fwd.html.index("<p>Hi</p>")


def _set_rules(stack: Stack, text: str) -> None:
    from common.aws import client

    client("s3").put_object(Bucket=stack.cfg.bucket, Key="config/owner-rules.txt", Body=text.encode())
    client("ssm").put_parameter(
        Name=stack.cfg.spam_rules_parameter, Value="config/owner-rules.txt", Overwrite=True, Type="String"
    )


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (mail(sender="x@mx.spam-domain.example"), "blocked sender domain spam-domain.example"),
        (mail(subject="A CRYPTO investment for you"), "subject matches 'crypto investment'"),
        (mail(html="<p>Please do a <b>wire transfer</b></p>", text=None), "body matches 'wire transfer'"),
    ],
)
def test_owner_keyword_lists_from_s3_named_in_ssm(
    stack: Stack, inbound: RieProcess, message: bytes, reason: str
) -> None:
    _set_rules(
        stack,
        "# owner list\n[blocked_sender_domains]\nspam-domain.example\n"
        "[subject_patterns]\n(unclosed\ncrypto investment\n[body_patterns]\nwire(?= now)\nwire transfer\n",
    )
    result = deliver(stack, inbound, message)
    assert (result["status"], result["reason"]) == ("quarantined", reason)
    # The bad pattern and the one RE2 refuses (lookahead) are logged and skipped, each with its reason.
    details = [line["detail"] for line in log_lines(inbound, "spam rule skipped")]
    assert any("(unclosed" in d and "missing )" in d for d in details), details
    assert any("wire(?= now)" in d and "linear-time engine" in d for d in details), details
    assert stack.spam_log()[0]["reason"] == reason


@pytest.mark.parametrize(
    ("headers", "sender", "why"),
    [
        ({"Auto-Submitted": "auto-generated"}, None, "Auto-Submitted: auto-generated"),
        ({"Auto-Submitted": "auto-replied"}, None, "Auto-Submitted: auto-replied"),
        ({"Precedence": "bulk"}, None, "Precedence: bulk"),
        ({"Precedence": "list"}, None, "Precedence: list"),
        ({"List-Unsubscribe": "<mailto:unsub@corp.example>"}, None, "mailing list headers"),
        ({}, "Jobs <no-reply@corp.example>", "no-reply sender"),
        ({}, "Jobs <noreply@corp.example>", "no-reply sender"),
    ],
)
def test_rfc3834_no_ack_cases_are_still_forwarded(
    stack: Stack, inbound: RieProcess, headers: dict[str, Any], sender: str | None, why: str
) -> None:
    result = deliver(stack, inbound, mail(headers=headers, sender=sender or "Jane Smith <jane@corp.example>"))
    assert result["status"] == "forwarded" and result["firstContact"] and not result["ack"]
    assert log_lines(inbound, "mail forwarded")[-1]["ack_skipped_reason"] == why
    assert stack.peek(stack.cfg.ack_queue) == []


def test_auto_submitted_no_is_acked(stack: Stack, inbound: RieProcess) -> None:
    assert deliver(stack, inbound, mail(headers={"Auto-Submitted": "no"}))["ack"]


def test_forward_mime_through_the_sender(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess
) -> None:
    pdf = b"%PDF-1.4 test"
    raw = mail(
        sender='"Zoë O\'Brien" <zoe@corp.example>',
        subject="Fwd: Fwd: Role",
        html="<html><body><p>Hi <b>there</b></p></body></html>",
        attachments=[
            ("../../etc/CV (2026).PDF", pdf, "application/pdf"),
            ("setup.exe", b"MZ", "application/octet-stream"),
        ],
    )
    result = deliver(stack, inbound, raw)
    cid = "zoe-at-corp.example"
    assert result["attachments"] == [f"attachments/{cid}/{SES_ID}/CV (2026).PDF"]
    assert result["skipped"] == ["setup.exe (denied type .exe)"]
    assert stack.s3_body(f"attachments/{cid}/{SES_ID}/CV (2026).PDF") == pdf
    assert [r.failed for r in stack.run_sender(forward_sender, stack.cfg.forward_queue)] == [[]]
    [sent] = stack.sent()
    msg = sent.message
    assert sent.source == "hello@example.com" and sent.destinations == ["owner@example.net"]
    assert msg["From"].addresses[0].display_name == "Zoë O'Brien via example.com"
    assert msg["From"].addresses[0].addr_spec == "hello@example.com"
    assert msg["Subject"] == "Fwd: Fwd: Role"  # the original, with nothing stacked on it
    assert msg["X-Correlation-ID"] == f"forward-{SES_ID}"
    reply_to = msg["Reply-To"].addresses[0].addr_spec
    assert verify_thread_address(reply_to, stack.cfg.thread_secret, stack.cfg.thread_domain) == cid
    tampered = reply_to.replace(cid, "mallory-at-corp.example")
    assert verify_thread_address(tampered, stack.cfg.thread_secret, stack.cfg.thread_domain) is None
    assert verify_thread_address(reply_to, "another-secret-of-16+", stack.cfg.thread_domain) is None
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert "talk about a role" in text and "<b>there</b>" in html
    footer = text[text.index(FOOTER_MARKER) :]
    assert "From: Zoë O'Brien <zoe@corp.example>" in footer and f"Conversation: {cid}" in footer
    assert (
        f"setup.exe (denied type .exe; stored at s3://{stack.cfg.bucket}/withheld/{cid}/{SES_ID}/setup.exe)"
        in footer
    )
    [att] = list(msg.iter_attachments())
    assert att.get_filename() == "CV (2026).PDF" and att.get_content() == pdf


def test_delivery_status_notifications_are_archived_and_dropped(stack: Stack, inbound: RieProcess) -> None:
    dsn = mail(sender="Mail Delivery Subsystem <mailer-daemon@corp.example>", subject="Undelivered Mail")
    for n, source in enumerate(("", "MAILER-DAEMON@corp.example")):
        mid = f"00000000000000000000000000000000000000d{n}"
        result = deliver(stack, inbound, dsn, mid, source=source)
        assert (
            result["status"] == "dsn"
            and result["key"].startswith("bounces/")
            and result["key"].endswith(mid + ".eml")
        )
    assert stack.peek(stack.cfg.ack_queue) == [] and stack.peek(stack.cfg.forward_queue) == []
    assert stack.conversation("mailer-daemon-at-corp.example") is None


def test_the_owners_automatic_reply_to_the_public_address_is_archived_not_forwarded(
    stack: Stack, inbound: RieProcess
) -> None:
    """The owner's out-of-office answers the daily digest (From: PUBLIC_EMAIL): forwarded, it would come back
    to the owner as a conversation with themselves every day. A person's mail from the owner still goes."""
    ooo = mail(
        sender="Owner <Owner@Example.net>",
        subject="Out of office: Quarantine digest",
        headers={"Auto-Submitted": "auto-replied"},
    )
    result = deliver(stack, inbound, ooo, "00000000000000000000000000000000000000a1")
    assert result["status"] == "dsn" and result["key"].startswith("bounces/")
    assert result["reason"] == "automatic mail from the owner's own mailbox (Auto-Submitted: auto-replied)"
    assert stack.peek(stack.cfg.ack_queue) == [] and stack.peek(stack.cfg.forward_queue) == []
    written = deliver(
        stack, inbound, mail(sender="Owner <owner@example.net>"), "00000000000000000000000000000000000000a2"
    )
    assert written["status"] == "forwarded" and not written["ack"]


def test_oversize_mail_is_forwarded_truncated_with_the_archive_key(
    stack: Stack, rie_function: Callable[..., RieProcess], forward_sender: RieProcess
) -> None:
    small = rie_function("inbound-handler", env={"MAX_FORWARD_BYTES": "400000"})
    big = bytes(range(256)) * 1200  # ~300 KB: over the limit once base64-encoded with the body
    raw = mail(
        text="Please see attached.\n" + "words " * 40000,
        attachments=[("big.pdf", big, "application/pdf"), ("small.pdf", b"%PDF small", "application/pdf")],
    )
    result = small.invoke(stack.receipt(raw, SES_ID))
    assert result["status"] == "forwarded"
    [fwd] = stack.peek(stack.cfg.forward_queue)
    assert [a.filename for a in fwd.attachments] == ["small.pdf"]
    archive = f"s3://{stack.cfg.bucket}/conversations/jane-at-corp.example/{SES_ID}.eml"
    assert archive in fwd.text and "big.pdf (too large to forward; stored at s3://" in fwd.text
    assert [r.failed for r in stack.run_sender(forward_sender, stack.cfg.forward_queue)] == [[]]
    [sent] = stack.sent()
    assert len(sent.raw) < 400_000


def test_the_links_an_oversize_forward_carries_open_the_stored_copies(
    stack: Stack, rie_function: Callable[..., RieProcess], forward_sender: RieProcess
) -> None:
    """The owner's path: a part left out for size and the archived original are named with a presigned
    GET link signed by inbound-handler's own role; taken from the sent forward, the links fetch the
    bytes under local IAM, which verifies query-string SigV4 (signature, expiry) as S3 does."""
    import boto3
    import requests
    from botocore.config import Config

    from local.env import function_credentials

    small = rie_function("inbound-handler", env={"MAX_FORWARD_BYTES": "400000"})
    big = bytes(range(256)) * 1200
    raw = mail(text="Please see attached.", attachments=[("big.pdf", big, "application/pdf")])
    assert small.invoke(stack.receipt(raw, SES_ID))["status"] == "forwarded"
    assert [r.failed for r in stack.run_sender(forward_sender, stack.cfg.forward_queue)] == [[]]
    [sent] = stack.sent()
    text = sent.message.get_body(("plain",)).get_content()
    part = re.search(
        r"big\.pdf \(too large to forward; stored at s3://([^/]+)/(\S+); "
        r"download until (\d{4}-\d\d-\d\d \d\d:\d\d) UTC at the latest: (\S+)\)",
        text,
    )
    archive = re.search(
        r"archived at s3://\S+/conversations/jane-at-corp\.example/"
        + SES_ID
        + r"\.eml \(download until [^:]+:\d\d UTC at the latest: (\S+)\)",
        text,
    )
    assert part is not None and archive is not None, text
    assert "stop working when those expire" in text  # signed with temporary (role) credentials, and says so
    url = part[4]
    # signed by the function's role session (temporary credentials: 12 hours at most, common.aws.s3)
    assert (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url
        and "X-Amz-Security-Token=" in url
        and "X-Amz-Expires=43200" in url
    )
    signer = function_credentials(stack.cfg, "inbound-handler", ensure_role=False)["AWS_ACCESS_KEY_ID"]
    assert f"X-Amz-Credential={signer}%2F" in url
    got = requests.get(url, timeout=10)
    assert (got.status_code, got.content) == (200, big)
    got = requests.get(archive[1], timeout=10)
    assert (got.status_code, got.content) == (200, raw)
    tampered = requests.get(url.replace("big.pdf", "small.pdf"), timeout=10)
    assert tampered.status_code == 403 and b"SignatureDoesNotMatch" in tampered.content
    # expiry and SigV2, with the tools' own credentials: the emulator refuses both as S3 does
    bucket, key = part[1], part[2]
    s3 = boto3.client("s3", config=Config(signature_version="s3v4"))
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=1)
    time.sleep(2)
    refused = requests.get(expired, timeout=10)
    assert refused.status_code == 403 and b"AccessDenied" in refused.content
    sigv2 = boto3.client("s3", config=Config(signature_version="s3")).generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}
    )
    assert requests.get(sigv2, timeout=10).status_code == 403


CORPUS = sorted((__import__("pathlib").Path(__file__).parents[1] / "fixtures" / "mail").glob("*.eml"))


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_odd_real_world_messages_end_forwarded_or_quarantined(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess, path: Path
) -> None:
    raw = path.read_bytes()
    result = deliver(stack, inbound, raw)
    assert result["status"] in ("forwarded", "quarantined"), result
    if result["status"] == "quarantined":
        assert result["reason"] and stack.s3_body(result["key"]) == raw
        return
    assert stack.s3_body(f"conversations/{result['conversationId']}/{SES_ID}.eml") == raw
    assert [r.failed for r in stack.run_sender(forward_sender, stack.cfg.forward_queue)] == [[]]
    [sent] = stack.sent()
    msg = sent.message
    headers = sent.raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0].lower()
    assert sent.destinations == ["owner@example.net"] and b"\nbcc:" not in headers and "Bcc" not in msg
    footer = msg.get_body(("plain",)).get_content().split(FOOTER_MARKER)[1]
    assert f"Conversation: {result['conversationId']}\n" in footer


def test_corpus_expectations(stack: Stack, inbound: RieProcess) -> None:
    """What the odd messages must become, beyond not crashing."""
    fixtures = {p.stem: p.read_bytes() for p in CORPUS}
    r = deliver(stack, inbound, fixtures["no-from"], "c1" * 20)
    assert (r["status"], r["reason"]) == ("quarantined", "From header has no usable address")
    r = deliver(stack, inbound, fixtures["nested-multiparts"], "c2" * 20)
    assert sorted(a.rsplit("/", 1)[1] for a in r["attachments"]) == [
        "Résumé.pdf",
        "forwarded message.eml",
        "logo.png",
    ]
    assert r["skipped"] == []
    r = deliver(stack, inbound, fixtures["latin1-charsets"], "c3" * 20)
    record = stack.conversation(r["conversationId"])
    assert record["displayName"] == "François" and record["subject"] == "Café “quotes”"
    assert record["lastMessageBody"] == "Café crème “bientôt”"
    r = deliver(stack, inbound, fixtures["only-html"], "c4" * 20)
    assert stack.conversation(r["conversationId"])["lastMessageBody"] == "Title\n\nOnly & HTML"
    r = deliver(stack, inbound, fixtures["header-injection"], "c5" * 20)
    assert r["status"] == "forwarded", r
    record = stack.conversation(r["conversationId"])
    assert "\r" not in record["displayName"] and "\n" not in record["subject"]


def test_a_duplicate_ses_delivery_is_already_processed_under_the_production_role(
    stack: Stack, inbound: RieProcess
) -> None:
    """SES and Lambda deliver at least once. Under the role's policy a missing staging key is a 403
    (no unconditional s3:ListBucket), which must still read as "already processed", not an error."""
    event = stack.receipt(mail(), SES_ID)
    assert inbound.invoke(event)["status"] == "forwarded"
    assert inbound.invoke(event) == {"status": "already-processed", "messageId": SES_ID}


def test_only_authenticated_mail_updates_a_conversations_facts(stack: Stack, inbound: RieProcess) -> None:
    genuine = mail(sender="Jane Smith <jane@corp.example>", message_id="<genuine@corp.example>")
    assert deliver(stack, inbound, genuine, "a" * 40)["status"] == "forwarded"
    before = stack.conversation("jane-at-corp.example")
    spoof = mail(
        sender="Jane (urgent) <jane@corp.example>",
        message_id="<forged@evil.example>",
        subject="Wire it",
        text="New bank details: send the invoice amount to IBAN XX00 0000.",
    )
    result = deliver(
        stack,
        inbound,
        spoof,
        "b" * 40,
        source="x@evil.example",
        verdicts={"spf": "FAIL", "dkim": "FAIL", "dmarc": "FAIL"},
    )
    assert result["status"] == "forwarded"  # no p=reject: still the owner's to judge, with a warning
    record = stack.conversation("jane-at-corp.example")
    assert record == before  # not its subject, last message, time or expiry: nothing at all
    assert record["displayName"] == "Jane Smith" and record["lastMessageId"] == "<genuine@corp.example>"
    assert record["lastSesMessageId"] == "a" * 40
    later = mail(sender="Jane S. <jane@corp.example>", message_id="<later@corp.example>")
    deliver(stack, inbound, later, "c" * 40)
    record = stack.conversation("jane-at-corp.example")
    assert record["displayName"] == "Jane S." and record["lastMessageId"] == "<later@corp.example>"
