"""Build test mail the way real clients send it (EmailMessage), plus raw odd-ball messages."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import make_msgid


def mail(
    sender: str = "Jane Smith <jane@corp.example>",
    to: str = "hello@example.com",
    subject: str = "Hello",
    text: str | None = "Hi, I would like to talk about a role.",
    html: str | None = None,
    attachments: Sequence[tuple[str, bytes, str]] = (),
    headers: dict[str, str] | None = None,
    message_id: str | None = None,
) -> bytes:
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


# --- raw failure shapes: bytes no well-behaved client would write ------------------


def raw(
    headers: list[tuple[str, bytes | str]], body: bytes | str = b"Hello.\r\n", linesep: bytes = b"\r\n"
) -> bytes:
    """A message exactly as given: header values are written as they are (8-bit bytes, folds, junk)."""
    lines = [name.encode() + b": " + (v.encode() if isinstance(v, str) else v) for name, v in headers]
    return linesep.join(lines) + linesep + linesep + (body.encode() if isinstance(body, str) else body)


Fields = list[tuple[str, bytes | str]]


def basic(
    sender: bytes | str = b"Jane <jane@corp.example>", subject: bytes | str = b"Hello", **extra: bytes | str
) -> Fields:
    return [
        ("From", sender),
        ("To", "hello@example.com"),
        ("Subject", subject),
        ("Message-ID", "<m1@corp.example>"),
        ("Date", "Mon, 2 Nov 2026 10:00:00 +0000"),
        *((k.replace("_", "-"), v) for k, v in extra.items()),
    ]


def eight_bit_from(display: bytes = "Jürgen Döe".encode(), address: bytes = b"jd@corp.example") -> bytes:
    """Raw UTF-8 (or any 8-bit) display name, no encoded word, no declared charset."""
    return raw(basic(display + b" <" + address + b">"))


def rfc6532_from(address: str = "jdöe@mächine.example") -> bytes:
    """An SMTPUTF8 (RFC 6532) message: the address itself in raw UTF-8."""
    return raw(
        [*basic(address.encode(), "Grüße".encode()), ("Content-Type", "text/plain; charset=utf-8")],
        "Grüße aus Köln\r\n".encode(),
    )


def outlook2000_latin1(
    subject: str = "Bewerbung für Köln",
    filename: str = "Lebenslauf Müller.pdf",
    body: str = "Grüße aus Köln",
    declare_body: bool = True,
) -> bytes:
    """Raw 8-bit (cp1252) in Subject and in the attachment's file name (Outlook 2000), body likewise."""
    ctype = b'text/plain; charset="iso-8859-1"' if declare_body else b"text/plain"
    parts = (
        b"--b1\r\nContent-Type: "
        + ctype
        + b"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
        + body.encode("cp1252")
        + b'\r\n--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename="'
        + filename.encode("cp1252")
        + b'"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b1--\r\n'
    )
    return raw(
        [
            *basic(b"Hans <hans@corp.example>", subject.encode("cp1252")),
            ("MIME-Version", "1.0"),
            ("Content-Type", 'multipart/mixed; boundary="b1"'),
        ],
        parts,
    )


def wrong_charset_body(text: str, declared: str, actual: str) -> bytes:
    """A body encoded in ``actual`` but labelled ``declared``."""
    return raw(
        [
            *basic(),
            ("MIME-Version", "1.0"),
            ("Content-Type", f"text/plain; charset={declared}"),
            ("Content-Transfer-Encoding", "8bit"),
        ],
        text.encode(actual) + b"\r\n",
    )


def from_field(value: bytes | str) -> bytes:
    """Any From value as written."""
    return raw(basic(value))


def outlook_express(jpeg: bytes = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 32) -> bytes:
    """Outlook Express's unquoted boundary (``=`` and ``_`` in it)."""
    import base64

    b = b"----=_NextPart_000_0007_01C2A9A6.8E3A1C60"
    body = (
        b"This is a multi-part message in MIME format.\r\n\r\n--" + b + b"\r\nContent-Type: text/plain;\r\n"
        b'\tcharset="iso-8859-1"\r\nContent-Transfer-Encoding: 7bit\r\n\r\nSee the picture.\r\n\r\n--'
        + b
        + b'\r\nContent-Type: image/jpeg;\r\n\tname="photo.jpg"\r\nContent-Transfer-Encoding: base64\r\n'
        b'Content-Disposition: attachment;\r\n\tfilename="photo.jpg"\r\n\r\n'
        + base64.encodebytes(jpeg)
        + b"\r\n--"
        + b
        + b"--\r\n"
    )
    return raw(
        [
            *basic(b"Old Timer <old@corp.example>", b"Picture"),
            ("MIME-Version", "1.0"),
            ("Content-Type", b"multipart/mixed;\r\n\tboundary=" + b),
            ("X-Mailer", "Microsoft Outlook Express 6.00"),
        ],
        body,
    )


def nested(depth: int) -> bytes:
    """Multiparts nested ``depth`` deep around one text part."""
    body = b"Content-Type: text/plain\r\n\r\nDeep inside.\r\n"
    for i in range(depth):
        b = b"n%d" % i
        body = (
            b"Content-Type: multipart/mixed; boundary="
            + b
            + b"\r\n\r\n--"
            + b
            + b"\r\n"
            + body
            + b"\r\n--"
            + b
            + b"--\r\n"
        )
    head = raw([*basic(b"Deep <deep@corp.example>", b"Nested"), ("MIME-Version", "1.0")], b"")
    return head[:-2] + body  # the outermost part's Content-Type joins the top-level header block


def long_ids(n: int = 3) -> bytes:
    """Exchange / Office 365 style Message-IDs (longer than a folded line) in the thread headers."""
    ids = [f"<AM0PR0702MB{i:04d}{'A' * 60}{i}@AM0PR0702MB3603.eurprd07.prod.outlook.com>" for i in range(n)]
    return raw([*basic(), ("In-Reply-To", ids[-1]), ("References", " ".join(ids))]).replace(
        b"<m1@corp.example>", ids[0].replace("AM0", "MSG").encode()
    )


def attachment_mail(name: str, data: bytes, declared: str, sender: str = "Jane <jane@corp.example>") -> bytes:
    """One attachment whose declared type and name are the sender's claims."""
    import base64

    body = (
        b"--b1\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n--b1\r\nContent-Type: "
        + declared.encode()
        + b'\r\nContent-Disposition: attachment; filename="'
        + name.encode()
        + b'"\r\nContent-Transfer-Encoding: base64\r\n\r\n'
        + base64.encodebytes(data)
        + b"--b1--\r\n"
    )
    return raw(
        [
            *basic(sender.encode()),
            ("MIME-Version", "1.0"),
            ("Content-Type", 'multipart/mixed; boundary="b1"'),
        ],
        body,
    )


def windows_jis(lines: int) -> bytes:
    """ISO-2022-JP as Outlook writes it: each line a JIS X 0208 section of 37 characters, 14 of them
    from NEC's row 13 (which Python's iso2022_jp codecs refuse); the body is ``windows_jis_text(lines)``."""
    line = b"\x1b$B" + b'$3$s-!-"$3$s-#$K' * 4 + b'$3$s-!-"$3\x1b(B\r\n'
    return raw(
        [*basic(), ("MIME-Version", "1.0"), ("Content-Type", "text/plain; charset=ISO-2022-JP")], line * lines
    )


def windows_jis_text(lines: int) -> str:
    return ("こん①②こん③に" * 4 + "こん①②こ\r\n") * lines


# S3: one generator per cap; ``n`` picks the size (tests use just under and over the cap).


def encoded_words(n: int, field: str = "Subject", word: str = "=?utf-8?q?abcdefgh?=") -> bytes:
    return raw([(k, v) for k, v in basic() if k != field] + [(field, " ".join([word] * n))])


def stray_encoded_words(n: int) -> bytes:
    """A Subject broken without folds (MimeKit's bug report github.com/jstedfast/MimeKit/issues/358): ``n``
    lines of one encoded word each and
    no colon, then a Date field. The parser reads them as one field (limits.mend_header)."""
    fields = [(k, v) for k, v in basic() if k not in ("Subject", "Date")]
    lines = "\r\n".join(f"=?utf-8?q?w{i}?=" for i in range(n))
    return raw([*fields, ("Subject", "hi\r\n" + lines), ("Date", "Mon, 2 Nov 2026 10:00:00 +0000")])


def comments(depth: int, repeat: int = 1) -> bytes:
    return from_field(("(" * depth + "x" + ")" * depth) * repeat + " <jane@corp.example>")


def many_headers(n: int) -> bytes:
    return raw([*basic(), *((f"X-Filler-{i}", "v") for i in range(n))])


def big_header(size: int, field: str = "X-Big") -> bytes:
    line = "a" * 76
    value = "\r\n ".join([line] * max(1, size // 79))
    return raw([*basic(), (field, value)])


def many_parts(n: int, allowed: bool = False) -> bytes:
    """``n`` attachments (tiny PDFs when ``allowed``: every one is stored; else text parts)."""
    body = [b"--p\r\nContent-Type: text/plain\r\n\r\nMany parts.\r\n"]
    for i in range(n):
        if allowed:
            body.append(
                b"--p\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; "
                b'filename="f%d.pdf"\r\n'
                b"\r\n%%PDF-1.4 %d\r\n" % (i, i)
            )
        else:
            body.append(b"--p\r\nContent-Type: application/octet-stream\r\n\r\nx\r\n")
    body.append(b"--p--\r\n")
    return raw(
        [*basic(), ("MIME-Version", "1.0"), ("Content-Type", 'multipart/mixed; boundary="p"')], b"".join(body)
    )


def big_attachment(size: int) -> bytes:
    """A real large mail (SES accepts up to 40 MB): memory must stay under the function's size."""
    import os

    return attachment_mail("big.pdf", b"%PDF-1.4\n" + os.urandom(size), "application/pdf")


# Shapes that pass the field caps but made the parser's work grow faster than the mail.


def boundary_only_parts(n: int) -> bytes:
    """``n`` parts that are only a delimiter line, a blank line and one character: no Content-Type at all."""
    return raw(
        [*basic(), ("MIME-Version", "1.0"), ("Content-Type", 'multipart/mixed; boundary="b"')],
        b"--b\r\n\r\nx\r\n" * n + b"--b--\r\n",
    )


def from_commas(n: int) -> bytes:
    """``From: a,a,a,...`` (``n`` names, no address): merging them pairwise was quadratic."""
    return from_field("a," * n + "a")


def related_start(n: int, id_chars: int) -> bytes:
    """multipart/related whose ``start`` names no part, a first part that is not text, then ``n`` text
    parts with ``id_chars``-long Content-IDs: every text part used to compare every sibling's id."""
    parts = [b"--r\r\nContent-Type: application/octet-stream\r\n\r\nzz\r\n"]
    parts += [
        b"--r\r\nContent-Type: text/plain\r\nContent-ID: <%d%s>\r\n\r\nt\r\n" % (i, b"x" * id_chars)
        for i in range(n)
    ]
    return raw(
        [
            *basic(),
            ("MIME-Version", "1.0"),
            ("Content-Type", 'multipart/related; boundary="r"; start="<nomatch@x>"'),
        ],
        b"".join(parts) + b"--r--\r\n",
    )


def early_closed(depth: int, padding: int) -> bytes:
    """``depth`` multiparts, each closed early with the next one in its epilogue, around ``padding``
    bytes of text (no transfer encoding, so no body is cut out): every level re-parsed the rest."""
    body = b"--z\r\nContent-Type: text/plain\r\n\r\n" + (b"p" * 76 + b"\r\n") * (padding // 78) + b"--z--\r\n"
    inner = b"z"
    for k in range(depth, 0, -1):
        bk = b"b%d" % k
        body = (
            b"--"
            + bk
            + b"\r\nContent-Type: text/plain\r\n\r\nlevel %d\r\n--" % k
            + bk
            + b"--\r\n--"
            + bk
            + b'\r\nContent-Type: multipart/mixed; boundary="'
            + inner
            + b'"\r\n\r\n'
            + body
        )
        inner = bk
    return raw(
        [*basic(), ("MIME-Version", "1.0"), ("Content-Type", b'multipart/mixed; boundary="' + inner + b'"')],
        body,
    )


def zip_of(members: dict[str, bytes] | Sequence[str], prefix: bytes = b"") -> bytes:
    """A deflated zip of ``members`` (names alone: each holds "content of <name>"); ``prefix`` goes before
    it (self-extractors and junk hide zips that way)."""
    if not isinstance(members, dict):
        members = {name: b"content of " + name.encode() for name in members}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return prefix + buffer.getvalue()


def bold_html(size: int) -> bytes:
    """An HTML-only mail of ``size`` bytes of "<b>x</b>", in lines of 992 characters (SMTP's 1,000-octet
    line limit): the densest markup a sender can make the text conversion read."""
    return html_only(b"<b>x</b>", size)


def html_only(unit: bytes, size: int) -> bytes:
    """An HTML-only mail of about ``size`` bytes of ``unit`` repeated, in lines under SMTP's 1,000-octet
    limit: the worst shapes for the HTML readers (nested quotes, tags with attributes, ...)."""
    line = unit * (992 // len(unit)) + b"\r\n"
    body = line * (size // len(line))
    return raw(
        [
            *basic(),
            ("MIME-Version", "1.0"),
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Transfer-Encoding", "7bit"),
        ],
        body,
    )
