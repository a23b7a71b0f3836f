"""Build test mail the way real clients send it (EmailMessage), plus raw odd-ball messages."""

from __future__ import annotations

from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import make_msgid


def mail(sender: str = "Jane Smith <jane@corp.example>", to: str = "hello@example.com", subject: str = "Hello",
         text: str | None = "Hi, I would like to talk about a role.", html: str | None = None,
         attachments: Sequence[tuple[str, bytes, str]] = (), headers: dict[str, str] | None = None,
         message_id: str | None = None) -> bytes:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = message_id or make_msgid(domain="corp.example")
    for name, value in (headers or {}).items():
        msg[name] = value
    if text is not None:
        msg.set_content(text)
    if html is not None:
        if text is None:
            msg.set_content(html, subtype="html")
        else:
            msg.add_alternative(html, subtype="html")
    for filename, data, ctype in attachments:
        maintype, subtype = ctype.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    return msg.as_bytes()
