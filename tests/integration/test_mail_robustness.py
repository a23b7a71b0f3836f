"""Malformed and hostile mail (docs/inbound.md, parsing received mail) through inbound-handler under
the real RIE against moto, each from a minimal message of the failing shape (tests/support/mailgen),
and the forwards and acks they produce built by the real senders."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from common.mail import limits
from common.mail.threads import MAX_ID, conversation_id, thread_address
from deploy.functions import BY_NAME
from local.rie import RieProcess
from tests.support import caps
from tests.support import mailgen as g
from tests.support.harness import Stack

SES_ID = "0000000000000000000000000000000000000a01"


@pytest.fixture(scope="module")
def inbound(rie_module: Callable[..., RieProcess]) -> RieProcess:
    fn = rie_module("inbound-handler")
    return fn


@pytest.fixture(scope="module")
def senders(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        name: rie_module(name, env={"RETRY_DELAYS_SECONDS": "0"}) for name in ("forward-sender", "ack-sender")
    }


def deliver(stack: Stack, inbound: RieProcess, raw: bytes, mid: str = SES_ID, **kwargs: Any) -> Any:
    return inbound.invoke(stack.receipt(raw, mid, **kwargs))


def send_all(stack: Stack, senders: dict[str, RieProcess]) -> None:
    for name, queue in (("forward-sender", stack.cfg.forward_queue), ("ack-sender", stack.cfg.ack_queue)):
        assert all(not r.failed for r in stack.run_sender(senders[name], queue)), name
        assert stack.depth(queue + "-dlq") == 0, f"{name}: a message went to the DLQ"


def surrogate_free(value: object) -> bool:
    return not re.search("[\ud800-\udfff]", repr(value))


# --- 8-bit headers and crashes never lose a mail ------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "address", "name"),
    [
        (g.eight_bit_from(), "jd@corp.example", "Jürgen Döe"),
        (g.eight_bit_from("Jürgen Döe".encode("latin-1")), "jd@corp.example", "Jürgen Döe"),
        (g.rfc6532_from(), "jdöe@mächine.example", ""),
    ],
    ids=["utf8-display-name", "latin1-display-name", "rfc6532-address"],
)
def test_8bit_from_is_recorded_forwarded_and_never_stuck_in_staging(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess], raw: bytes, address: str, name: str
) -> None:
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded", result
    record = stack.conversation(result["conversationId"])
    assert (
        record["senderEmail"] == address and record.get("displayName", "") == name and surrogate_free(record)
    )
    assert stack.s3_keys("staging/") == []
    send_all(stack, senders)
    [forward] = [m for m in stack.sent() if m.destinations == ["owner@example.net"]]
    assert address in forward.message.get_body(("plain",)).get_content()
    if not address.isascii():  # SES cannot send SMTPUTF8: no ack is attempted, so none fails
        assert not result["ack"] and len(stack.sent()) == 1


def test_noncharacters_from_a_stranger_reach_the_owner(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess]
) -> None:
    # U+FFFF from an encoded-word Subject, U+FFFE and U+FFFF from UTF-8 bytes in the body: SQS refuses
    # a body holding them unescaped (InvalidMessageContents; the emulator too), so the forward could
    # never be queued and the mail was lost on every attempt.
    raw = g.raw(
        [*g.basic(subject=b"=?utf-8?b?77+/?= Offer"), ("Content-Type", "text/plain; charset=utf-8")],
        "Body \ufffe and \uffff and \x01.\r\n".encode(),
    )
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded" and result["ack"], result
    send_all(stack, senders)
    [fwd] = [m.message for m in stack.sent() if m.destinations == ["owner@example.net"]]
    assert (
        fwd["Subject"] == "\uffff Offer"
        and "Body \ufffe and \uffff and" in fwd.get_body(("plain",)).get_content()
    )


def test_deep_nesting_is_archived_and_forwarded_with_the_original(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess]
) -> None:
    raw = g.nested(400)  # 1,000 deep is over the MIME part cap: quarantined unparsed (test_caps_hold_…)
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded" and stack.s3_keys("staging/") == []
    assert stack.s3_body(f"conversations/{result['conversationId']}/{SES_ID}.eml") == raw
    [fwd] = stack.peek(stack.cfg.forward_queue)
    assert "could not be parsed" in fwd.text and fwd.subject == "Nested"
    send_all(stack, senders)


# --- who the sender is, and ids that are safe and never shared -----------------------------


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("a@x.example <b@y.example>", "b@y.example"),
        ("Big Bug bb@bug.example", "bb@bug.example"),
        ("=?utf-8?q?owner=40example.net?= <c@d.example>", "c@d.example"),
    ],
)
def test_the_from_mailbox_is_the_angle_addr_and_the_ack_goes_there(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess], value: str, address: str
) -> None:
    result = deliver(stack, inbound, g.from_field(value))
    assert result["status"] == "forwarded" and result["ack"], result
    assert stack.conversation(result["conversationId"])["senderEmail"] == address
    send_all(stack, senders)
    assert sorted(m.destinations[0] for m in stack.sent()) == sorted([address, "owner@example.net"])


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('"john doe"@x.example', "quoted local part"),
        ("a..b@x.example", "local part is not a dot-atom"),
        ("=?utf-8?q?x@evil.example?=", "encoded word in address"),
        ("Jane <jane@[192.0.2.1]>", "IP-literal domain"),
        ("a" * 3000 + "@x.example", "local part longer than 64 octets"),
    ],
)
def test_unusable_addresses_are_quarantined_with_the_reason(
    stack: Stack, inbound: RieProcess, value: str, reason: str
) -> None:
    result = deliver(stack, inbound, g.from_field(value))
    assert (result["status"], result["reason"]) == ("quarantined", f"sender address unusable: {reason}")
    assert stack.s3_keys("staging/") == [] and stack.peek(stack.cfg.forward_queue) == []
    assert stack.peek(stack.cfg.ack_queue) == []  # never thanked


@pytest.mark.parametrize(
    "address",
    [
        "a/b@x.example",
        "o'brien+jobs@corp.example",
        "firstname.lastname.department@subsidiary.company.example.com",
    ],
)
def test_odd_but_valid_addresses_get_a_safe_id_and_a_working_thread_address(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess], address: str
) -> None:
    result = deliver(stack, inbound, g.from_field(f"Odd <{address}>"))
    cid = result["conversationId"]
    assert (
        result["status"] == "forwarded" and re.fullmatch(r"[a-z0-9][a-z0-9._-]*", cid) and len(cid) <= MAX_ID
    )
    assert stack.s3_keys("conversations/") == [f"conversations/{cid}/{SES_ID}.eml"]  # no extra path segment
    send_all(stack, senders)
    [fwd] = [m for m in stack.sent() if m.destinations == ["owner@example.net"]]
    reply_to = fwd.message["Reply-To"].addresses[0].addr_spec
    assert reply_to == thread_address(cid, stack.cfg.thread_secret, stack.cfg.thread_domain)
    assert len(reply_to.split("@")[0]) <= 64


def test_colliding_addresses_get_two_conversations(stack: Stack, inbound: RieProcess) -> None:
    victim = deliver(stack, inbound, g.from_field("Victim <x@cat-at-work.example>"), "0" * 39 + "1")
    attacker = deliver(stack, inbound, g.from_field("Attacker <x-at-cat@work.example>"), "0" * 39 + "2")
    assert victim["conversationId"] != attacker["conversationId"]
    assert stack.conversation(victim["conversationId"])["senderEmail"] == "x@cat-at-work.example"
    assert stack.conversation(attacker["conversationId"])["senderEmail"] == "x-at-cat@work.example"


def test_an_existing_conversation_never_changes_its_sender(stack: Stack, inbound: RieProcess) -> None:
    """Should two addresses ever share an id (a hash collision), the second is quarantined, not merged."""
    from common.aws import dynamodb

    cid = conversation_id("jane@corp.example", "", stack.cfg.opaque_relay_domains)
    dynamodb.put(stack.cfg.conversations_table, {"conversationId": cid, "senderEmail": "victim@else.example"})
    result = deliver(stack, inbound, g.from_field("Jane <jane@corp.example>"))
    assert (
        result["status"] == "quarantined"
        and f"conversation id {cid} already belongs to another sender" in result["reason"]
    )
    assert stack.conversation(cid)["senderEmail"] == "victim@else.example"
    assert stack.peek(stack.cfg.forward_queue) == [] and stack.peek(stack.cfg.ack_queue) == []


# --- threading headers in what the senders build ------------------------------------------------------


def test_long_message_ids_reach_the_forward_and_the_ack_unencoded(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess]
) -> None:
    raw = g.long_ids()
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded" and result["ack"]
    send_all(stack, senders)
    msg_id = re.search(rb"Message-ID: (<[^>]+>)", raw).group(1).decode()
    for sent in stack.sent():
        head = sent.raw.split(b"\n\n", 1)[0].replace(b"\r\n", b"\n")
        assert b"=?" not in head.split(b"\nSubject:")[0] + b"\n".join(
            line
            for line in head.split(b"\n")
            if line.lower().startswith((b"in-reply-to", b"references", b" <"))
        )
        assert msg_id in sent.message["References"].split()
        assert sent.message["In-Reply-To"] == msg_id if sent.destinations != ["owner@example.net"] else True


# --- boundaries and charsets -----------------------------------------------------------------------


def test_outlook_express_mail_keeps_its_body_and_its_jpeg(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess]
) -> None:
    result = deliver(stack, inbound, g.outlook_express())
    assert result["status"] == "forwarded" and [k.rsplit("/", 1)[1] for k in result["attachments"]] == [
        "photo.jpg"
    ]
    send_all(stack, senders)
    [fwd] = [m.message for m in stack.sent() if m.destinations == ["owner@example.net"]]
    assert "See the picture." in fwd.get_body(("plain",)).get_content()
    [jpeg] = [p for p in fwd.iter_attachments() if p.get_filename() == "photo.jpg"]
    assert jpeg.get_content_type() == "image/jpeg" and jpeg.get_content().startswith(b"\xff\xd8\xff")


def test_outlook_2000_8bit_subject_file_name_and_body(
    stack: Stack, inbound: RieProcess, senders: dict[str, RieProcess]
) -> None:
    result = deliver(stack, inbound, g.outlook2000_latin1(subject="Bewerbung – Köln", declare_body=False))
    record = stack.conversation(result["conversationId"])
    assert record["subject"] == "Bewerbung – Köln" and record["lastMessageBody"] == "Grüße aus Köln"
    assert [k.rsplit("/", 1)[1] for k in result["attachments"]] == ["Lebenslauf Müller.pdf"]
    send_all(stack, senders)
    [fwd] = [m.message for m in stack.sent() if m.destinations == ["owner@example.net"]]
    assert fwd["Subject"] == "Bewerbung – Köln" and "\ufffd" not in fwd.get_body(("plain",)).get_content()


# --- attachment types from the name and the bytes
# ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "declared", "stored"),
    [
        ("mismatch.pdf", b"%PDF-1.7\n%real pdf", "text/html", "application/pdf"),
        (
            "svg.png",
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "image/svg+xml",
            "application/octet-stream",
        ),
    ],
)
def test_attachment_type_is_derived_not_claimed(
    stack: Stack,
    inbound: RieProcess,
    senders: dict[str, RieProcess],
    name: str,
    data: bytes,
    declared: str,
    stored: str,
) -> None:
    from common.aws import client

    result = deliver(stack, inbound, g.attachment_mail(name, data, declared))
    [key] = result["attachments"]
    assert client("s3").head_object(Bucket=stack.cfg.bucket, Key=key)["ContentType"] == stored
    send_all(stack, senders)
    [fwd] = [m.message for m in stack.sent() if m.destinations == ["owner@example.net"]]
    [part] = [p for p in fwd.iter_attachments() if p.get_filename() == name]
    assert part.get_content_type() == stored and part.get_content() == data


def test_long_attachment_names_keep_their_extension(stack: Stack, inbound: RieProcess) -> None:
    result = deliver(stack, inbound, g.attachment_mail("Q" * 300 + ".pdf", b"%PDF-1.4", "application/pdf"))
    [key] = result["attachments"]
    name = key.rsplit("/", 1)[1]
    assert name.endswith(".pdf") and len(name) <= 120


# --- S3: caps before parsing, each measured (time, peak RSS of the runtime process)
# ----------------------------


@pytest.mark.skipif(not caps.can_measure(), reason="peak RSS is read from Linux /proc")
@pytest.mark.parametrize("case", caps.CASES, ids=[c.name for c in caps.CASES])
def test_caps_hold_in_time_and_memory(stack: Stack, inbound: RieProcess, case: caps.Case) -> None:
    inbound.invoke(
        stack.receipt(g.from_field("Warm <warm@corp.example>"), "f" * 40)
    )  # the runtime is started and warm
    measured = caps.measure(inbound, stack.receipt(case.build(), SES_ID))
    result = measured.result
    assert result["status"] == case.status and case.reason in result.get("reason", ""), result
    assert stack.s3_keys("staging/") == []
    if case.status == "quarantined":
        assert result["reason"].startswith("not parsed: ") is not case.parsed
    if case.status == "forwarded":
        [forward] = [
            m for m in stack.peek(stack.cfg.forward_queue) if m.idempotency_key == f"forward:{SES_ID}"
        ]
        assert ("This message could not be parsed" in forward.text) is case.minimal
    function = BY_NAME["inbound-handler"]
    memory = function.memory_mb
    on_lambda = caps.lambda_seconds(measured.cpu_seconds, memory)
    print(
        f"\n[caps] {case.name}: {measured.seconds:.2f} s, CPU {measured.cpu_seconds:.2f} s "
        f"(~{on_lambda:.1f} s at Lambda's CPU share), peak RSS {measured.peak_mb:.0f} MB "
        f"(baseline {measured.baseline_mb:.0f} MB, function memory {memory} MB)"
    )
    assert measured.peak_mb < min(memory, case.peak_mb), f"{case.name}: peak RSS {measured.peak_mb:.0f} MB"
    assert measured.seconds < 20, f"{case.name}: {measured.seconds:.1f} s"
    assert on_lambda * caps.TIMEOUT_MARGIN < function.timeout_s, f"{case.name}: ~{on_lambda:.1f} s on Lambda"


def test_stored_attachments_are_capped(stack: Stack, inbound: RieProcess) -> None:
    result = deliver(stack, inbound, g.many_parts(limits.MAX_STORED_ATTACHMENTS + 20, allowed=True))
    assert result["status"] == "forwarded" and len(result["attachments"]) == limits.MAX_STORED_ATTACHMENTS
    assert len(stack.s3_keys("attachments/")) == limits.MAX_STORED_ATTACHMENTS
    over = [s for s in result["skipped"] if "only in the archived original" in s]
    assert len(over) == 20
    [fwd] = stack.peek(stack.cfg.forward_queue)
    assert "only in the archived original" in fwd.text


def test_html_past_the_conversion_bound_is_forwarded_whole(stack: Stack, inbound: RieProcess) -> None:
    from common.aws import client
    from common.mail import htmldoc, htmlsafe
    from common.mail.htmldoc import MAX_HTML_CHARS, MAX_HTML_TAGS
    from common.mail.parse import parse

    raw = g.bold_html(MAX_HTML_CHARS + 500_000)
    read = htmldoc.cut(parse(raw).html)  # the tag cap comes first on the densest markup
    result = deliver(stack, inbound, raw)
    assert result["status"] == "forwarded", result
    [fwd] = stack.peek(stack.cfg.forward_queue)
    assert f"the text below was converted from its first {read:,} only" in fwd.text
    # What was converted (the first MAX_HTML_TAGS tags, 124 bold x to a line) is there.
    assert fwd.text.count("x" * 124 + "\n") >= MAX_HTML_TAGS // 2 // 124 - 1
    [html] = [a for a in fwd.attachments if a.filename == "message.html"]
    stored = client("s3").get_object(Bucket=stack.cfg.bucket, Key=html.key)["Body"].read()
    # Made safe like the body (trackers out, closed) as far as it is read; the archived original has the rest.
    kept = stored.decode().replace("\r\n", "\n")
    assert kept.startswith("<b>x</b>") and len(kept) <= MAX_HTML_CHARS
    assert htmlsafe.sanitize(kept).html == kept  # already canonical: closed where it was cut
    assert "left out" in fwd.text and "made safe and without trackers" in fwd.text
