"""Build the outgoing MIME message from a queue message (EmailMessage + headerregistry only).

The sender decides From (always the public address) and validates every address and message id;
display names and subjects are cleaned of control characters, so nothing in a queue message can
add a header.
"""

from __future__ import annotations

import email.policy
import re
from collections.abc import Callable
from dataclasses import replace
from email.headerregistry import Address, BaseHeader, HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any, cast
from urllib.parse import unquote

from common.errors import EventError
from common.mail.headers import idna_domain
from common.mail.limits import MAX_SUBJECT_CHARS
from common.mail.outbound import OutboundMessage
from common.mail.sanitize import MESSAGE_ID, clean_header_text, display_filename, is_message_id

_CID_URL = re.compile(r"""\bcid:([^"'\s<>)]+)""", re.I)
_CONTENT_ID = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.@-]{1,200}")  # what may stand between < and > safely


class MessageIdsHeader(UnstructuredHeader):
    """In-Reply-To / References written as they are: msg-ids are never RFC 2047-encoded (the stdlib
    encodes a word longer than the line, which breaks threading for Exchange's long ids), and a
    long list folds only between ids."""

    @classmethod
    def parse(cls, value: str, kwds: dict[str, Any]) -> None:
        super().parse(" ".join(MESSAGE_ID.findall(str(value))), kwds)

    def fold(self, *, policy: Any) -> str:
        name = str(getattr(self, "name"))  # BaseHeader, which the registry mixes in  # noqa: B009
        lines = [f"{name}:"]
        for msg_id in str(self).split():
            if len(lines[-1]) + 1 + len(msg_id) > policy.max_line_length and lines[-1] != f"{name}:":
                lines.append("")
            lines[-1] += " " + msg_id
        return str(policy.linesep).join(lines) + str(policy.linesep)


_REGISTRY = HeaderRegistry()
_REGISTRY.map_to_type("in-reply-to", cast("type[BaseHeader]", MessageIdsHeader))
_REGISTRY.map_to_type("references", cast("type[BaseHeader]", MessageIdsHeader))
POLICY = email.policy.default.clone(header_factory=_REGISTRY)


def address(addr_spec: str, display_name: str = "") -> Address:
    """An address SES can send to: ASCII local part (SES has no SMTPUTF8), domain in IDNA form."""
    local, at, domain = addr_spec.strip().rpartition("@")
    if not local.isascii():
        raise EventError("invalid address in queue message: non-ASCII local part (SES cannot send SMTPUTF8)")
    ascii_domain = idna_domain(domain) if at else ""
    if not ascii_domain:
        raise EventError(f"invalid address in queue message: bad domain {domain[:100]!r}")
    try:
        return Address(display_name=clean_header_text(display_name, 200), addr_spec=f"{local}@{ascii_domain}")
    except (ValueError, IndexError) as exc:
        raise EventError(f"invalid address in queue message: {exc}") from None


def build(
    msg: OutboundMessage, sender: str, domain: str, attachment_prefix: str, fetch: Callable[[str], bytes]
) -> EmailMessage:
    """``fetch(key)`` returns an attachment's bytes; keys outside ``attachment_prefix`` are refused."""
    m = EmailMessage(policy=POLICY)
    m["From"] = address(sender, msg.from_name)
    m["To"] = [address(a) for a in msg.to]
    if msg.reply_to:
        m["Reply-To"] = address(msg.reply_to)
    m["Subject"] = clean_header_text(msg.subject, MAX_SUBJECT_CHARS) or "(no subject)"
    m["Date"] = formatdate(usegmt=True)
    m["Message-ID"] = make_msgid(domain=domain)  # SES replaces it; kept for non-SES transports
    if is_message_id(msg.in_reply_to):
        m["In-Reply-To"] = msg.in_reply_to
    references = [r for r in msg.references if is_message_id(r)]
    if references:
        m["References"] = " ".join(references[-20:])
    m["X-Correlation-ID"] = clean_header_text(msg.correlation_id, 200)
    for name, value in msg.headers.items():
        m[name] = clean_header_text(value)
    m.set_content(msg.text)
    if msg.html:
        m.add_alternative(msg.html, subtype="html")
    related = _related(msg) if msg.html else set()
    for att in msg.attachments:
        if not attachment_prefix or not att.key.startswith(attachment_prefix) or ".." in att.key:
            raise EventError(f"attachment {att.key!r} is outside this sender's prefix {attachment_prefix!r}")
        maintype, _, subtype = (att.content_type or "application/octet-stream").lower().partition("/")
        if not subtype or maintype == "multipart":
            maintype, subtype = "application", "octet-stream"
        filename = display_filename(att.filename)  # the sender's name, spacing and all: only made safe
        data = fetch(att.key)
        if att.key in related:  # beside the HTML that names it: multipart/related, as the sender built it
            html_part = m.get_body(("html",))
            assert html_part is not None
            html_part.add_related(
                data,
                maintype=maintype,
                subtype=subtype,
                cid=f"<{att.content_id}>",
                filename=filename,
                disposition="inline",
            )
        elif maintype == "message":
            _attach_message(m, data, subtype, filename)
        else:
            m.add_attachment(
                data,
                maintype=maintype,
                subtype=subtype,
                filename=filename,
                disposition="inline" if att.inline else "attachment",
                params=_text_params(maintype, data),
            )
    return m


def _related(msg: OutboundMessage) -> set[str]:
    """Keys of the parts the HTML body refers to by ``cid:`` (whatever their disposition says: a
    referenced part is part of the page)."""
    named = {unquote(c).lower() for c in _CID_URL.findall(msg.html)}
    return {
        a.key
        for a in msg.attachments
        if _CONTENT_ID.fullmatch(a.content_id or "") and a.content_id.lower() in named
    }


def _text_params(maintype: str, data: bytes) -> dict[str, str] | None:
    """A text part keeps its bytes; it is labelled UTF-8 when it is (ASCII and UTF-8 need no guess)."""
    if maintype != "text":
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return {"charset": "utf-8"}


def _attach_message(m: EmailMessage, data: bytes, subtype: str, filename: str) -> None:
    """A message/* part (a forwarded mail, a digest entry, a message/partial fragment) with the bytes
    it arrived with. RFC 2046 allows only 7bit, 8bit or binary for these: a 7-bit part with lines SMTP
    can carry is sent as it is. Anything else (8-bit bytes, over-long lines) goes as a base64
    ``application/octet-stream`` under its .eml name, byte for byte: SES advises 7-bit content, a
    base64 message/rfc822 is not standard (Python's own parser cannot open one), and every client
    opens an .eml file."""
    body = data.replace(b"\r\n", b"\n")
    if not body.isascii() or any(len(line) > 998 for line in body.split(b"\n")):
        m.add_attachment(data, maintype="application", subtype="octet-stream", filename=filename)
        return
    part = EmailMessage()
    part["Content-Type"] = f"message/{subtype}"
    part["Content-Disposition"] = "attachment"
    part.set_param("filename", filename, header="Content-Disposition")
    part["Content-Transfer-Encoding"] = "7bit"
    part.set_payload(body.decode("ascii"))
    if m.get_content_type() != "multipart/mixed":
        m.make_mixed()
    m.attach(part)


def unbuildable(msg: OutboundMessage, sender: str, domain: str) -> str:
    """Why ``msg`` could never be sent ('' when it can): a producer checks before queueing, so a
    deterministic failure is handled at once instead of in the sender after an ack went out."""
    try:
        build(replace(msg, attachments=[]), sender, domain, "", lambda key: b"").as_bytes()
    except Exception as exc:  # whatever the builder or the generator refuses is deterministic
        return f"{type(exc).__name__}: {exc}"
    return ""
