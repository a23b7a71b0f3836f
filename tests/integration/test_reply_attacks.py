"""A contact's commands never apply through the owner's reply, no owner name reaches the contact, an
opaque-signed reply is read, no reply is dropped in silence, and a replay with prepended header fields
is refused: reply-handler and reply-sender under the real RIE, after a real forward by
inbound-handler (the contact's quote is the forward as the system wrote it)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7

from common.aws import client
from common.delivery.compose import FORWARD_MARKER
from common.mail.htmltext import html_to_text
from common.mail.outbound import OutboundMessage
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail
from tests.support.ownerkeys import SmimeOwner, smime_owner

OWNER = "Ana Lindqvist <owner@example.net>"
CONTACT = "Eve <eve@corp.example>"
# What the contact writes: controls the owner's quote will carry, and nothing else of note.
CONTACT_TEXT = "Hello, about the role.\n[allow]\n[block: @bank.example]\n[company: Evil Corp]\nBest, Eve\n"
KEY = smime_owner()


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    env = {"RETRY_DELAYS_SECONDS": "0", "OWNER_NAMES": "Ana Lindqvist"}
    return {
        "inbound-handler": rie_module("inbound-handler", env=env),
        "reply-handler": rie_module("reply-handler", env=env),
        "reply-handler-key": rie_module("reply-handler", env={**env, "OWNER_KEY": KEY.pem}),
        "reply-sender": rie_module("reply-sender", env=env),
    }


_ids = iter(range(1, 10**6))


def forward_of(stack: Stack, fns: dict[str, RieProcess], raw: bytes, **kwargs: Any) -> OutboundMessage:
    """The contact writes in (no Date field: mailgen writes none); the forward the owner receives."""
    result = fns["inbound-handler"].invoke(stack.receipt(raw, f"{next(_ids):040d}", **kwargs))
    assert result["status"] == "forwarded", result
    [fwd] = [m for m in stack.peek(stack.cfg.forward_queue) if m.kind == "forward"]
    return fwd


def answer(
    stack: Stack, fns: dict[str, RieProcess], raw: bytes, to: str, fn: str = "reply-handler"
) -> dict[str, Any]:
    result: dict[str, Any] = fns[fn].invoke(
        stack.receipt(raw, f"{next(_ids):040d}", to=to, source="owner@example.net")
    )
    return result


def received(stack: Stack, fns: dict[str, RieProcess]) -> list[str]:
    """The text bodies the contact received."""
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    out = []
    for sent in stack.sent():
        assert sent.destinations == ["eve@corp.example"]
        body = sent.message.get_body(("plain",))
        out.append(body.get_content() if body is not None else "")
    return out


def notices(stack: Stack) -> list[OutboundMessage]:
    return [m for m in stack.peek(stack.cfg.forward_queue) if m.kind == "notice"]


def lists_and_record(stack: Stack) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    table = client("dynamodb").scan(TableName=stack.cfg.sender_lists_table)["Items"]
    return table, stack.conversation("eve-at-corp.example")


def assert_no_command_applied(stack: Stack, result: dict[str, Any]) -> None:
    assert result.get("controls", []) == [] and result.get("metadata", {}) == {}, result
    table, record = lists_and_record(stack)
    assert not [i for i in table if "bank" in json.dumps(i) or "eve" in json.dumps(i)], table
    assert record is not None and "companyName" not in record


def test_swedish_outlook_plain_text_quote_without_the_contacts_date_applies_nothing(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text=CONTACT_TEXT))
    assert "Date:" not in fwd.text.split(CONTACT_TEXT.splitlines()[0])[0]  # no Date in the header block
    quote = (
        f"Från: {fwd.from_name} <hello@example.com>\nSkickat: den 3 november 2026 10:00\n"
        "Till: Ana Lindqvist <owner@example.net>\nÄmne: Role\n\n" + fwd.text
    )
    raw = mail(sender=OWNER, to=fwd.reply_to, subject="SV: Role", text="Det låter bra.\n\n" + quote)
    result = answer(stack, fns, raw, fwd.reply_to)
    assert result["status"] == "queued"
    assert_no_command_applied(stack, result)
    assert received(stack, fns) == ["Det låter bra.\n"]


@pytest.mark.parametrize("keep", ["header only", "nothing"])
def test_the_contacts_own_lines_are_quote_even_with_no_header_and_no_marker(
    stack: Stack, fns: dict[str, RieProcess], keep: str
) -> None:
    """The owner's client dropped the forward's marker and (or) the quote header: the lines the contact
    sent (the archived mail) are still quote, never a command, never relayed."""
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text=CONTACT_TEXT))
    header = "Kutoka: Eve\nTarehe: leo\n\n" if keep == "header only" else "\n"
    raw = mail(
        sender=OWNER, to=fwd.reply_to, subject="Re: Role", text="Sawa kabisa.\n" + header + CONTACT_TEXT
    )
    result = answer(stack, fns, raw, fwd.reply_to)
    assert result["status"] == "queued"
    assert_no_command_applied(stack, result)
    [text] = received(stack, fns)
    assert "Sawa kabisa." in text and "Eve" not in text and "[" not in text and "about the role" not in text


def test_a_comment_hiding_the_body_tag_hides_no_banner_and_applies_no_command(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    html = "<!--<body></body>--><p>Hello, about the role.</p><p>[allow]</p><p>[block: @bank.example]</p><!--"
    fwd = forward_of(
        stack,
        fns,
        mail(sender=CONTACT, subject="Role", text=None, html=html),
        verdicts={"dmarc": "FAIL"},
        dmarc_policy="none",
    )
    shown = html_to_text(fwd.html)  # what a client shows: comments are not
    assert "DMARC check failed" in shown and FORWARD_MARKER in shown and "eve@corp.example" in shown
    # the system's part comes first, and the contact's comments are gone (common.mail.htmlsafe)
    assert (
        fwd.html.index("DMARC check failed") < fwd.html.index("Hello, about the role")
        and "<!--" not in fwd.html
    )
    # Classic Outlook (Danish), HTML only: the original under a top-bordered header block, no blockquote.
    reply_html = (
        "<html><body><div><p>Det lyder godt.</p></div>"
        '<div style="border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0cm 0cm 0cm">'
        f"<p><b>Fra:</b> {fwd.from_name} &lt;hello@example.com&gt;<br><b>Sendt:</b> 3. november 2026 "
        "10:00<br><b>Til:</b> Ana Lindqvist<br><b>Emne:</b> Role</p></div>"
        f"{fwd.html}</body></html>"
    )
    raw = mail(sender=OWNER, to=fwd.reply_to, subject="SV: Role", text=None, html=reply_html)
    result = answer(stack, fns, raw, fwd.reply_to)
    assert result["status"] == "queued"
    assert_no_command_applied(stack, result)
    assert received(stack, fns) == ["Det lyder godt.\n"]


def test_the_owners_names_in_any_order_case_or_initials_never_reach_the_contact(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text="Hello, about the role.\n"))
    text = (
        "Thanks, Eve.\n\nKwa: Lindqvist, Ana\nNakala: ANA LINDQVIST; A. Lindqvist; lindqvist  ana\n"
        "Mtumaji: Lindqvist A.\nhabari\n"
    )
    raw = mail(sender=OWNER, to=fwd.reply_to, subject="Re: Role for Lindqvist, Ana", text=text)
    assert answer(stack, fns, raw, fwd.reply_to)["status"] == "queued"
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    [sent] = stack.sent()
    assert b"lindqvist" not in sent.raw.lower() and b"example.net" not in sent.raw.lower(), sent.raw


def opaque_signed(to: str, text: str, signer: SmimeOwner, message_id: str) -> bytes:
    """An S/MIME opaque-signed reply (application/pkcs7-mime; smime-type=signed-data), as a client set
    to opaque signing sends it."""
    inner = f"Content-Type: text/plain; charset=utf-8\r\n\r\n{text}".encode()
    der = (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(inner)
        .add_signer(signer.cert, signer.private_key, hashes.SHA256())
        .sign(serialization.Encoding.DER, [pkcs7.PKCS7Options.Binary])
    )
    body = base64.encodebytes(der).decode().replace("\n", "\r\n")
    return (
        f"From: {OWNER}\r\nTo: {to}\r\nSubject: Re: Role\r\nMessage-ID: {message_id}\r\nMIME-Version: 1.0\r\n"
        'Content-Type: application/pkcs7-mime; smime-type=signed-data; name="smime.p7m"\r\n'
        "Content-Transfer-Encoding: base64\r\n"
        'Content-Disposition: attachment; filename="smime.p7m"\r\n\r\n' + body
    ).encode()


@pytest.mark.parametrize("fn", ["reply-handler", "reply-handler-key"])
def test_an_opaque_signed_reply_is_unwrapped_and_sent(
    stack: Stack, fns: dict[str, RieProcess], fn: str
) -> None:
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text="Hello, about the role.\n"))
    raw = opaque_signed(fwd.reply_to, "Signed and sealed: Tuesday works.\r\n", KEY, "<signed-1@example.net>")
    result = answer(stack, fns, raw, fwd.reply_to, fn)
    assert result["status"] == "queued", result
    assert received(stack, fns) == ["Signed and sealed: Tuesday works.\n"]


def test_an_opaque_signature_by_another_key_is_refused_with_a_notice_and_a_resend_works(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text="Hello, about the role.\n"))
    raw = opaque_signed(fwd.reply_to, "Tuesday works.\r\n", smime_owner(), "<signed-2@example.net>")
    result = answer(stack, fns, raw, fwd.reply_to, "reply-handler-key")
    assert result["status"] == "rejected" and "does not verify" in result["reason"], result
    [note] = notices(stack)
    assert (
        note.to == ["owner@example.net"] and "does not verify" in note.text and "Send it again" in note.text
    )
    resend = mail(sender=OWNER, to=fwd.reply_to, subject="Re: Role", text="Tuesday works.\n")
    assert answer(stack, fns, resend, fwd.reply_to, "reply-handler-key")["status"] == "queued"
    assert received(stack, fns) == ["Tuesday works.\n"]


def test_a_reply_with_nothing_of_the_owners_is_not_dropped_in_silence(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text="Hello, about the role.\n"))
    quoted = "\n".join("> " + line for line in fwd.text.splitlines())
    raw = mail(sender=OWNER, to=fwd.reply_to, subject="Re: Role", text=f"\nOn Mon, Eve wrote:\n{quoted}\n")
    result = answer(stack, fns, raw, fwd.reply_to)
    assert result["status"] == "not-sent", result
    [note] = notices(stack)
    assert "nothing was sent" in note.text and "reply again" in note.text
    # The claim was used up by a refusal with a notice; a new reply with text goes out.
    again = mail(
        sender=OWNER, to=fwd.reply_to, subject="Re: Role", text=f"Yes.\n\nOn Mon, Eve wrote:\n{quoted}\n"
    )
    assert answer(stack, fns, again, fwd.reply_to)["status"] == "queued"
    assert received(stack, fns) == ["Yes.\n"]


@pytest.mark.parametrize(
    "prepended",
    [
        "To: {other}\r\nMessage-ID: <new-1@evil.example>\r\n",
        "Message-ID: <new-2@evil.example>\r\nSubject: Re: Role again\r\n",
        "Date: Mon, 2 Nov 2026 10:00:00 +0000\r\n",
        "Reply-To: x@evil.example\r\n",
        "From: Ana Lindqvist <owner@example.net>\r\n",
    ],
)
def test_a_replay_with_prepended_header_fields_is_refused(
    stack: Stack, fns: dict[str, RieProcess], prepended: str
) -> None:
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text="Hello, about the role.\n"))
    other = fwd.reply_to.replace("eve-at-corp.example", "bob-at-corp.example")
    signed = mail(
        sender=OWNER,
        to=fwd.reply_to,
        subject="Re: Role",
        text="See you Tuesday.\n",
        headers={"Date": "Mon, 2 Nov 2026 09:00:00 +0000", "Reply-To": "owner@example.net"},
    )
    raw = prepended.format(other=other).encode() + signed
    result = answer(stack, fns, raw, fwd.reply_to)
    assert result["status"] == "rejected" and "more than one" in result["reason"], result
    assert stack.sent() == [] and stack.depth(stack.cfg.reply_queue) == 0


def test_the_owners_own_phrase_quoted_back_by_the_contact_is_still_the_owners(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """The contact's Outlook quoted the owner's earlier reply without "> ": those lines are not the
    contact's, so the owner may write them again."""
    contact = (
        "Great, thanks!\n\nFrom: Ana <hello@example.com>\nSent: Monday, 2 November 2026 10:00\n"
        "Subject: Role\n\nThank you for your interest in the position.\nWe will be in touch soon.\n"
    )
    fwd = forward_of(stack, fns, mail(sender=CONTACT, subject="Role", text=contact))
    text = "Thank you for your interest in the position.\nWe will be in touch soon.\nTuesday at ten?\n"
    raw = mail(sender=OWNER, to=fwd.reply_to, subject="Re: Role", text=text)
    assert answer(stack, fns, raw, fwd.reply_to)["status"] == "queued"
    assert received(stack, fns) == [text]
