"""MIME structure through the path a user's mail takes: SES receipt -> inbound-handler under the real
RIE -> forward-sender -> SES (moto), for the shapes a public corpus showed: folded and trailing-text
boundaries, named parts, deep nesting, bounces that are not multipart/report, an address without @."""

from __future__ import annotations

from collections.abc import Callable
from email.message import EmailMessage, Message

import pytest

from common.delivery.compose import FOOTER_MARKER
from local.rie import RieProcess
from tests.support import mailgen as g
from tests.support.harness import Stack

SES_ID = "0000000000000000000000000000000000000b01"
HEAD = b"From: Jane <jane@corp.example>\r\nTo: hello@example.com\r\nSubject: Parts\r\nMIME-Version: 1.0\r\n"


@pytest.fixture(scope="module")
def inbound(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("inbound-handler")


@pytest.fixture(scope="module")
def forward_sender(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"})


def forwarded(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess, raw: bytes
) -> tuple[EmailMessage, str, list[str]]:
    result = inbound.invoke(stack.receipt(raw, SES_ID))
    assert result["status"] == "forwarded", result
    assert all(not r.failed for r in stack.run_sender(forward_sender, stack.cfg.forward_queue))
    [sent] = [m for m in stack.sent() if m.destinations == ["owner@example.net"]]
    msg = sent.message
    text = msg.get_body(("plain",)).get_content()
    names = [p.get_filename() for p in msg.walk() if p.get_filename()]
    return msg, text, names


def folded(delimiter: bytes = b"--simple boundary") -> bytes:
    d = delimiter
    body = (
        b"preamble\r\n"
        + d
        + b"\r\nContent-Type: text/plain\r\n\r\nThe body text.\r\n"
        + d
        + b'\r\nContent-Type: text/plain; name="one.txt"\r\n\r\nfirst file\r\n'
        + d
        + b'\r\nContent-Type: text/x-myown; name="two.my"\r\n\r\nsecond file\r\n'
        + d
        + b"\r\nContent-Type: message/rfc822\r\n\r\nFrom: inner@x.example\r\nSubject: Inner\r\n\r\ninner "
        b"body\r\n" + b"--simple boundary--\r\n"
    )
    return HEAD + b'Content-Type: multipart/mixed; boundary="simple\r\n boundary"\r\n\r\n' + body


@pytest.mark.parametrize("delimiter", [b"--simple boundary", b"--simple boundary trailing text"])
def test_a_folded_boundary_is_split_and_every_part_forwarded_by_name(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess, delimiter: bytes
) -> None:
    msg, text, names = forwarded(stack, inbound, forward_sender, folded(delimiter))
    assert "The body text." in text and "--simple" not in text and "Content-Type" not in text
    assert names == ["one.txt", "two.my", "forwarded message.eml"]
    [inner] = [p for p in msg.walk() if p.get_content_type() == "message/rfc822"]
    payload = inner.get_payload()
    assert isinstance(payload, list)
    [carried] = payload
    assert isinstance(carried, Message) and carried["Subject"] == "Inner"


def test_a_named_inline_html_part_is_forwarded_as_a_file_not_as_the_html_body(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess
) -> None:
    raw = HEAD + (
        b'Content-Type: multipart/mixed; boundary="m"\r\n\r\n--m\r\nContent-Type: text/plain\r\n\r\n'
        b'See the pull request.\r\n--m\r\nContent-Type: text/html; name="Pull3.html"\r\n'
        b"Content-Disposition: inline\r\n\r\n<p>pull three</p>\r\n--m--\r\n"
    )
    msg, text, names = forwarded(stack, inbound, forward_sender, raw)
    assert "See the pull request." in text and names == ["Pull3.html"]
    assert msg.get_body(("html",)) is None  # the owner's client shows the text, and the file beside it


def test_a_hundred_levels_of_nesting_are_forwarded_in_full(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess
) -> None:
    _, text, _ = forwarded(stack, inbound, forward_sender, g.nested(100))
    assert "Deep inside." in text and "could not be parsed" not in text


def test_past_the_nesting_cap_the_banner_and_the_footer_agree(
    stack: Stack, inbound: RieProcess, forward_sender: RieProcess
) -> None:
    _, text, names = forwarded(stack, inbound, forward_sender, g.nested(400))
    banner = [line for line in text.splitlines() if line.startswith("[!] ")]
    footer = text.rpartition(FOOTER_MARKER)[2]
    assert any("could not be parsed" in line for line in banner)
    attached = "original message.eml" in names
    assert any(
        ("the original is attached" if attached else "the original is not attached") in line
        for line in banner
    )
    assert ("original message.eml (" in footer.partition("Not attached: ")[2]) is not attached


@pytest.mark.parametrize(
    "raw",
    [
        b"Return-Path: <>\r\nFrom: Mail Delivery Subsystem <mailer-daemon@googlemail.com>\r\n"
        b"To: hello@example.com\r\nSubject: Delivery Status Notification (Failure)\r\n"
        b"\r\nDelivery to the following recipient failed permanently:\r\n",
        b"From: MAILER-DAEMON@mx.corp.example\r\nTo: hello@example.com\r\n"
        b"Subject: failure notice\r\n\r\nHi. This is the qmail-send program at mx.corp.example.\r\n",
    ],
)
def test_bounces_that_are_not_multipart_report_are_archived_without_forward_or_ack(
    stack: Stack, inbound: RieProcess, raw: bytes
) -> None:
    # the envelope sender is an ordinary address: only the content says it is a bounce
    result = inbound.invoke(stack.receipt(raw, SES_ID, source="bounces-relay@corp.example"))
    assert result["status"] == "dsn" and result["key"].startswith("bounces/"), result
    assert stack.peek(stack.cfg.forward_queue) == [] and stack.peek(stack.cfg.ack_queue) == []


def test_a_from_without_a_domain_is_quarantined_for_that_reason(stack: Stack, inbound: RieProcess) -> None:
    raw = (
        b"From: Moderator-Address <moderator>\r\n"
        b"To: hello@example.com\r\nSubject: Moderated\r\n\r\nHello.\r\n"
    )
    result = inbound.invoke(stack.receipt(raw, SES_ID, source="list@corp.example"))
    assert result["status"] == "quarantined"
    assert result["reason"] == "sender address unusable: no domain (no @ in the address)"
