"""Parse received mail defensively: any bytes in, a :class:`ParsedMail` out, never an exception.

Headers come from strangers, so every access is guarded: a header that does not parse is treated
as absent (and noted in ``problems``) instead of crashing the handler. Header values are cleaned of
control characters before they are used anywhere else (CR/LF injection).
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from email.utils import getaddresses

from common.mail.htmltext import html_to_text
from common.mail.sanitize import MESSAGE_ID, clean_header_text, safe_filename

_NOREPLY = re.compile(r"^(no[-_.]?reply|do[-_.]?not[-_.]?reply|mailer[-_.]?daemon|postmaster|bounces?)([-+._].*)?$", re.I)


@dataclass(slots=True)
class Attachment:
    filename: str  # as sent, cleaned of control characters (for display)
    safe_name: str
    content_type: str
    data: bytes
    disposition: str = ""  # "inline" | "attachment" | "" (Content-Disposition)
    content_id: str = ""  # Content-ID without <>: what an HTML body's cid: URLs name


@dataclass(slots=True)
class ParsedMail:
    raw_size: int
    from_address: str = ""
    display_name: str = ""
    subject: str = ""
    message_id: str = ""
    references: list[str] = field(default_factory=list)
    text: str = ""
    html: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names, cleaned values
    problems: list[str] = field(default_factory=list)

    @property
    def body_text(self) -> str:
        """The text body, or text derived from the HTML body when the mail has only HTML."""
        return self.text if self.text.strip() else html_to_text(self.html)

    @property
    def is_noreply(self) -> bool:
        return bool(_NOREPLY.match(self.from_address.partition("@")[0]))

    def has_list_headers(self) -> bool:
        return any(name.startswith("list-") for name in self.headers)


def parse(raw: bytes) -> ParsedMail:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    mail = ParsedMail(raw_size=len(raw))
    for name in set(msg.keys()):
        mail.headers[name.lower()] = clean_header_text(_header(msg, name, mail))
    mail.from_address, mail.display_name = _from(msg, mail)
    mail.subject = mail.headers.get("subject", "")
    ids = MESSAGE_ID.findall(mail.headers.get("message-id", ""))
    mail.message_id = ids[0] if ids else ""
    mail.references = MESSAGE_ID.findall(mail.headers.get("references", ""))[-20:]
    text_part = _body(msg, "plain")
    html_part = _body(msg, "html")
    mail.text = part_text(text_part) if text_part is not None else ""
    mail.html = part_text(html_part) if html_part is not None else ""
    _collect_attachments(msg, {id(p) for p in (text_part, html_part) if p is not None}, mail)
    return mail


def _header(msg: EmailMessage, name: str, mail: ParsedMail) -> str:
    try:
        return str(msg.get(name, ""))
    except Exception as exc:  # the header registry raises on some malformed structured headers
        mail.problems.append(f"header {name!r} unparseable: {type(exc).__name__}")
        raw = next((str(v) for k, v in msg.raw_items() if k.lower() == name.lower()), "")
        try:  # decode encoded words by hand; the result is cleaned of CR/LF by the caller
            return str(make_header(decode_header(raw)))
        except Exception:
            return raw


def _from(msg: EmailMessage, mail: ParsedMail) -> tuple[str, str]:
    try:
        header = msg["From"]
        addresses = list(getattr(header, "addresses", ()) or ())
        if addresses and addresses[0].addr_spec and "@" in addresses[0].addr_spec:
            return addresses[0].addr_spec.strip().lower(), clean_header_text(addresses[0].display_name, 200)
    except Exception as exc:
        mail.problems.append(f"From unparseable: {type(exc).__name__}")
    # Malformed From: take the address from the raw (undecoded) header, so text hidden in an
    # encoded display name ("Bcc: ..." after decoding) can never become the address.
    raw = next((str(v) for k, v in msg.raw_items() if k.lower() == "from"), "")
    angle = re.findall(r"<\s*([^<>\s]+@[^<>\s]+)\s*>", raw)
    if angle:
        display = raw[: raw.rfind("<")].strip().strip('"')
        try:
            display = str(make_header(decode_header(display)))
        except Exception:
            pass
        return angle[-1].lower(), clean_header_text(display, 200)
    for name, addr in getaddresses([clean_header_text(raw)]):
        if "@" in addr:
            return addr.strip().lower(), clean_header_text(name, 200)
    return "", ""


def _body(msg: EmailMessage, kind: str) -> Message | None:
    try:
        return msg.get_body(preferencelist=(kind,))
    except Exception:
        return None


def part_text(part: Message) -> str:
    try:
        content = part.get_content()  # type: ignore[attr-defined]
        if isinstance(content, str):
            return content
    except Exception:  # unknown charset, bad transfer encoding, ...: decode by hand below
        pass
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")


def _collect_attachments(part: Message, body_ids: set[int], mail: ParsedMail, depth: int = 0) -> None:
    if depth > 20:
        mail.problems.append("multipart nesting deeper than 20 levels ignored")
        return
    ctype = part.get_content_type()
    if part.is_multipart() and ctype != "message/rfc822":
        for sub in part.get_payload() or []:
            if isinstance(sub, Message):
                _collect_attachments(sub, body_ids, mail, depth + 1)
        return
    if id(part) in body_ids:
        return
    try:
        filename = part.get_filename() or ""
    except Exception:
        filename = ""
    disposition = (part.get_content_disposition() or "") if hasattr(part, "get_content_disposition") else ""
    if not filename and ctype.startswith("text/") and disposition != "attachment":
        return  # an alternative body we did not choose, or a calendar/inline fragment
    if ctype == "message/rfc822":
        inner = part.get_payload()
        data = inner[0].as_bytes() if isinstance(inner, list) and inner and isinstance(inner[0], Message) else b""
        filename = filename or "forwarded message.eml"
    else:
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
    if not filename:
        filename = f"unnamed.{ctype.rpartition('/')[2] or 'bin'}"
    cleaned = clean_header_text(filename, 255)
    try:
        content_id = clean_header_text(part.get("Content-ID", ""), 250).strip("<> ")
    except Exception:  # a malformed Content-ID only costs the part its inline placement
        content_id = ""
    mail.attachments.append(Attachment(cleaned, safe_filename(cleaned), ctype, data, disposition, content_id))
