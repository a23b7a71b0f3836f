"""A public address with ``hide_correspondent`` (docs/owner.md, "Hide who wrote from your mailbox
provider"): its forwards, as SES sent them (what the owner's mailbox provider stores), show nothing of
the contact outside the encryption; decrypted, the owner sees the real From, To and Subject as
protected header fields (RFC 9788); the owner's reply to the opaque thread address reaches the contact
from the public address, and a forged or tampered opaque address is refused. S/MIME and OpenPGP, as
tests/integration/test_owner_encryption.py covers both.

Each function runs under the real RIE with its own role's credentials on the moto server (IAM
enforced); the senders consume their queues as the event-source mapping would."""

from __future__ import annotations

import re
from collections.abc import Callable
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest

from common.mail.outbound import OutboundMessage
from common.mail.threads import OPAQUE_CHARS, conversation_id, verify_thread_address
from common.store.sendqueue import enqueue
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.ownerkeys import PgpOwner, SmimeOwner, body_text, pgp_owner, smime_owner

OWNER = "Owner Name <owner@example.net>"
CONTACT = "jane.smith@corp.example"
NAME = "Jane Smith"
SUBJECT = "A role you may like"
MESSAGE_ID = "<first-contact-1@corp.example>"
FIRST_CONTACT = (
    f"From: {NAME} <{CONTACT}>\r\nTo: jobs@example.com\r\nSubject: {SUBJECT}\r\n"
    f"Message-ID: {MESSAGE_ID}\r\nDate: Wed, 25 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n\r\nHello, we have a senior role in Lisbon. Interested?\r\n"
).encode()
# jobs@ hides its correspondents; hello@ (the default) does not
ADDRESSES = (
    '{"jobs@example.com":{"label":"jobs","ack_subject":"Thanks for your application",'
    '"hide_correspondent":true}}'
)
KEYS: dict[str, SmimeOwner | PgpOwner] = {}


def owner_of(kind: str) -> SmimeOwner | PgpOwner:
    if kind not in KEYS:  # one key per kind for the module: the functions started with it keep it
        KEYS[kind] = smime_owner() if kind == "smime" else pgp_owner()
    return KEYS[kind]


def key_text(owner: SmimeOwner | PgpOwner) -> str:
    return owner.pem if isinstance(owner, SmimeOwner) else owner.armored


@pytest.fixture(scope="module")
def started(rie_module: Callable[..., RieProcess]) -> Callable[[str], dict[str, RieProcess]]:
    """The functions of one kind of owner key, started once for the module."""
    cache: dict[str, dict[str, RieProcess]] = {}

    def start(kind: str) -> dict[str, RieProcess]:
        if kind not in cache:
            env = {
                "RETRY_DELAYS_SECONDS": "0",
                "PUBLIC_ADDRESSES": ADDRESSES,
                "OWNER_KEY": key_text(owner_of(kind)),
            }
            cache[kind] = {
                name: rie_module(name, env=env)
                for name in ("inbound-handler", "forward-sender", "reply-handler", "reply-sender")
            }
        return cache[kind]

    return start


def forwards(stack: Stack) -> list[SentMail]:
    return [m for m in stack.sent() if m.destinations == ["owner@example.net"]]


def outside(raw: bytes) -> str:
    """What of the sent message is not ciphertext: the outer header section, and the PGP/MIME control
    part and armor lines (the S/MIME body is the enveloped data alone)."""
    head, _, body = raw.partition(b"\r\n\r\n") if b"\r\n\r\n" in raw else raw.partition(b"\n\n")
    text = head.decode("ascii")
    message = message_from_bytes(raw, policy=policy.default)
    if message.get_content_type() == "multipart/encrypted":
        control, data = message.iter_parts()
        armored = str(data.get_payload())
        lines = [line for line in armored.splitlines() if line.startswith("-----")]
        text += "\n" + control.as_string() + "\n" + "\n".join(lines) + "\n" + str(data.items())
    return text


def owner_reply(stack: Stack, fns: dict[str, RieProcess], thread: str, n: int, text: str) -> dict[str, Any]:
    raw = (
        f"From: {OWNER}\r\nTo: {thread}\r\nSubject: Re: {SUBJECT}\r\nMessage-ID: <owner-{n}@example.net>\r\n"
        f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text}\r\n"
    ).encode()
    result: dict[str, Any] = fns["reply-handler"].invoke(
        stack.receipt(raw, f"r{n:039d}", to=thread, source="owner@example.net")
    )
    return result


@pytest.mark.parametrize("kind", ["smime", "pgp"])
def test_the_provider_sees_nothing_of_the_contact_and_the_owner_sees_and_answers_them(
    stack: Stack, started: Callable[[str], dict[str, RieProcess]], kind: str
) -> None:
    fns, owner = started(kind), owner_of(kind)
    result = fns["inbound-handler"].invoke(stack.receipt(FIRST_CONTACT, f"{1:040d}", to="jobs@example.com"))
    assert result["status"] == "forwarded", result
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    [forward] = forwards(stack)
    raw = forward.raw

    # --- what the mailbox provider stores -------------------------------------------------------
    seen = outside(raw)
    for secret in ("jane", "smith", "corp", "role you may", "lisbon", "first-contact"):
        assert secret not in seen.lower(), (secret, seen)
    # and nowhere in the raw bytes: each of these has a character no base64 or armor line holds
    for secret in (CONTACT, "corp.example", NAME, SUBJECT, MESSAGE_ID):
        assert secret.encode() not in raw and secret.lower().encode() not in raw.lower()
    outer = message_from_bytes(raw, policy=policy.default)
    assert isinstance(outer, EmailMessage)
    assert forward.source == "jobs@example.com" and str(outer["From"]) == "jobs@example.com"
    assert str(outer["To"]) == "owner@example.net" and outer["Subject"] == "[...]"
    thread = outer["Reply-To"].addresses[0].addr_spec
    local, _, domain = thread.partition("@")
    assert domain == stack.cfg.thread_domain and len(local) == OPAQUE_CHARS and "." not in local
    cid = conversation_id(CONTACT, NAME, stack.cfg.opaque_relay_domains)
    assert verify_thread_address(thread, stack.cfg.thread_secret, stack.cfg.thread_domain) == cid
    # threading stays, by keyed digests of the contact's Message-IDs
    assert re.fullmatch(rf"<[0-9a-f]{{32}}@{re.escape(stack.cfg.thread_domain)}>", str(outer["References"]))

    # --- what the owner's client shows once it decrypts: the protected header fields ------------
    inner = owner.decrypt(raw)
    assert inner["Subject"] == SUBJECT and inner["To"] == "owner@example.net"
    assert inner["From"].addresses[0].display_name == f"{NAME} via example.com"
    assert inner.get_param("hp") == "cipher" and inner.get_param("protected-headers") == "v1"
    assert {str(v) for v in inner.get_all("HP-Outer") or []} >= {
        "From: jobs@example.com",
        "Subject: [...]",
        f"Reply-To: {thread}",
    }
    text = body_text(inner)
    assert f"From: {NAME} <{CONTACT}>" in text and "senior role in Lisbon" in text

    # --- the owner answers the opaque address: the contact gets it from the public address -------
    answered = owner_reply(stack, fns, thread, 1, "[company: Acme Corp]\nTuesday works for me.")
    assert answered["status"] == "queued", answered
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    [reply] = [m for m in stack.sent() if m.destinations == [CONTACT] and "Re:" in str(m.message["Subject"])]
    assert reply.source == "jobs@example.com"
    assert reply.message["From"].addresses[0].addr_spec == "jobs@example.com"
    body = reply.message.get_body(("plain",))
    assert body is not None and "Tuesday works for me." in body.get_content()
    assert "[company" not in body.get_content()  # the owner's command was taken, not sent
    record = stack.conversation(cid)
    assert record is not None and record["companyName"] == "Acme Corp"

    # --- a forged or tampered opaque address is refused -----------------------------------------
    swapped = "b" if local[10] == "a" else "a"
    tampered = f"{local[:10]}{swapped}{local[11:]}@{domain}"
    forged = f"{'a' * OPAQUE_CHARS}@{domain}"
    for n, address in enumerate((tampered, forged), 2):
        refused = owner_reply(stack, fns, address, n, "Sent to a made-up address.")
        assert (refused["status"], refused["reason"]) == ("rejected", "no thread address with a valid tag")
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    assert not [m for m in stack.sent() if b"made-up address" in m.raw]


def test_other_addresses_keep_their_readable_thread_address(
    stack: Stack, started: Callable[[str], dict[str, RieProcess]]
) -> None:
    fns = started("smime")
    raw = FIRST_CONTACT.replace(b"To: jobs@example.com", b"To: hello@example.com")
    result = fns["inbound-handler"].invoke(stack.receipt(raw, f"{2:040d}", to="hello@example.com"))
    assert result["status"] == "forwarded", result
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    [forward] = forwards(stack)
    outer = forward.message
    cid = conversation_id(CONTACT, NAME, stack.cfg.opaque_relay_domains)
    assert outer["Reply-To"].addresses[0].addr_spec.startswith(f"{cid}.")  # as before
    assert outer["From"].addresses[0].display_name == f"{NAME} via example.com"
    assert outer["Subject"] == "[...]"  # still encrypted, subject neutral: ENCRYPTED_SUBJECT's default


def test_a_hidden_forward_is_never_sent_in_clear(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    """A forward-sender with no owner key (the configuration refuses that at deploy; this is the
    sender's own guard) dead-letters the hidden forward instead of sending it."""
    sender = rie_function("forward-sender", env={"RETRY_DELAYS_SECONDS": "0", "MAX_RECEIVE_COUNT": "1"})
    hidden = OutboundMessage(
        kind="forward",
        idempotency_key="forward:hidden-1",
        correlation_id="forward-hidden-1",
        to=["owner@example.net"],
        subject=SUBJECT,
        text="Hello from Jane.",
        from_name=f"{NAME} via example.com",
        from_address="jobs@example.com",
        hide_correspondent=True,
    )
    enqueue(stack.cfg.forward_queue, hidden, stack.cfg.bucket, stack.cfg.claim_check_bytes)
    stack.run_sender(sender, stack.cfg.forward_queue)
    assert stack.sent() == []
    assert "HideNeedsEncryption" in sender.output()
