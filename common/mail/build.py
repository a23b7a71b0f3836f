"""Build the outgoing MIME message from a queue message (EmailMessage + headerregistry only).

The sender decides From (always the public address) and validates every address and message id;
display names and subjects are cleaned of control characters, so nothing in a queue message can
add a header.
"""

from __future__ import annotations

from collections.abc import Callable
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from common.mail.sanitize import clean_header_text, is_message_id
from common.runtime.errors import EventError
from common.store.sendqueue import OutboundMessage


def address(addr_spec: str, display_name: str = "") -> Address:
    try:
        return Address(display_name=clean_header_text(display_name, 200), addr_spec=addr_spec.strip())
    except (ValueError, IndexError) as exc:
        raise EventError(f"invalid address in queue message: {exc}") from None


def build(msg: OutboundMessage, sender: str, domain: str, attachment_prefix: str,
          fetch: Callable[[str], bytes]) -> EmailMessage:
    """``fetch(key)`` returns an attachment's bytes; keys outside ``attachment_prefix`` are refused."""
    m = EmailMessage()
    m["From"] = address(sender, msg.from_name)
    m["To"] = [address(a) for a in msg.to]
    if msg.reply_to:
        m["Reply-To"] = address(msg.reply_to)
    m["Subject"] = clean_header_text(msg.subject) or "(no subject)"
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
    for att in msg.attachments:
        if not attachment_prefix or not att.key.startswith(attachment_prefix) or ".." in att.key:
            raise EventError(f"attachment {att.key!r} is outside this sender's prefix {attachment_prefix!r}")
        maintype, _, subtype = (att.content_type or "application/octet-stream").partition("/")
        if not subtype or maintype == "multipart":
            maintype, subtype = "application", "octet-stream"
        m.add_attachment(fetch(att.key), maintype=maintype, subtype=subtype,
                         filename=clean_header_text(att.filename, 255) or "attachment")
    return m
