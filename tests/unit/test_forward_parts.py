"""What the forward withholds, and how the builder carries inline and message/* parts (pure logic)."""

from __future__ import annotations

import email
import email.message
import email.policy
import zipfile

import pytest

from common.mail import limits
from common.mail.build import build
from common.mail.outbound import Attachment, OutboundMessage
from common.store.attachments import SES_UNSUPPORTED, withhold_reason
from tests.support.mailgen import zip_of

DENY = frozenset({"exe", "js", "jar", "bat"})


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("report.pdf", b"%PDF-1.7", ""),
        ("REPORT.EXE", b"", "denied type .exe"),
        ("a.tar.gz", b"\x1f\x8b", ""),
        ("noext", b"plain", ""),
        ("lib.jar", b"PK\x03\x04", "denied type .jar"),
        ("cert.der", b"0\x82", "Amazon SES does not send .der files"),
        ("photos.zip", zip_of(["a.jpg", "b/c.png"]), ""),
        (
            "setup.zip",
            zip_of(["docs/readme.txt", "docs/install.BAT"]),
            "archive contains install.BAT (denied type .bat)",
        ),
        ("broken.zip", b"PK\x03\x04 not really a zip", ""),  # unreadable: nothing cheap to see, forwarded
        (
            "picture.png",
            b"MZ" + b"\0" * 0x3A + (0x40).to_bytes(4, "little") + b"PE\0\0",
            "Windows executable",
        ),
        ("letter.txt", b"MZ is how this text starts", ""),  # text, not a binary DOS header
    ],
)
def test_withhold_reason(name: str, data: bytes, reason: str) -> None:
    assert withhold_reason(name, "application/octet-stream", data, DENY) == reason


def forwarded(*attachments: tuple[str, bytes, str], encoded_names: bool = False) -> bytes:
    """A mail as a client writes it, to be forwarded as an attachment (its bytes are a message/rfc822
    part)."""
    inner = email.message.EmailMessage()
    inner["From"], inner["Subject"] = "Jane <jane@corp.example>", "inner"
    inner.set_content("see attached")
    for name, data, ctype in attachments:
        inner.add_attachment(data, maintype=ctype.split("/")[0], subtype=ctype.split("/")[1], filename=name)
    raw = inner.as_bytes()
    if encoded_names:  # Outlook and Thunderbird write non-ASCII names as RFC 2047 encoded words
        for name, _, _ in attachments:
            import base64

            word = f"=?utf-8?b?{base64.b64encode(name.encode()).decode()}?="
            raw = raw.replace(f'filename="{name}"'.encode(), f'filename="{word}"'.encode())
    return raw


DOS = (
    b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + b"\0" * 60
)  # a DOS header, no PE header after it


@pytest.mark.parametrize(
    ("name", "ctype", "data", "reason"),
    [
        # forwarded-as-attachment mail is checked part by part, names decoded as a client does
        (
            "fwd.eml",
            "message/rfc822",
            forwarded(("setup.exe", b"x", "application/octet-stream"), encoded_names=True),
            "forwarded message contains setup.exe (denied type .exe)",
        ),
        (
            "fwd.eml",
            "message/rfc822",
            forwarded(("invoice.pdf", DOS, "application/pdf")),
            "forwarded message contains invoice.pdf (Windows executable)",
        ),
        (
            "fwd.eml",
            "message/rfc822",
            forwarded(("a.zip", zip_of({"run.bat": b"x"}), "application/zip")),
            "forwarded message contains a.zip (archive contains run.bat (denied type .bat))",
        ),
        (
            "fwd.eml",
            "message/global",
            forwarded(("a.js", b"1", "text/javascript")),
            "forwarded message contains a.js (denied type .js)",
        ),
        (
            "fwd.eml",
            "message/rfc822",
            forwarded(("fwd2.eml", forwarded(("x.exe", b"x", "application/octet-stream")), "message/rfc822")),
            "forwarded message contains fwd2.eml (forwarded message contains x.exe (denied type .exe))",
        ),
        ("fwd.eml", "message/rfc822", forwarded(("cv.pdf", b"%PDF-1.4", "application/pdf")), ""),
        (
            "setup.exe",
            "message/rfc822",
            forwarded(),
            "denied type .exe",
        ),  # a message/* part with a denied name
        # the bytes decide, not the name or the declared type
        ("invoice.pdf", "application/pdf", DOS, "Windows executable"),
        ("letter.txt", "text/plain", b"MZ, the initials, start this letter.", ""),
        # zips: with anything prepended (unzip tools read from the end), nested one level, trailing dots and
        # spaces
        (
            "photos.dat",
            "application/octet-stream",
            zip_of({"tool.exe": b"x"}, prefix=b"junk" * 100),
            "archive contains tool.exe (denied type .exe)",
        ),
        (
            "outer.zip",
            "application/zip",
            zip_of({"docs/inner.zip": zip_of({"a/run.vbs": b"x"})}),
            "archive contains inner.zip (archive contains run.vbs (denied type .vbs))",
        ),
        (
            "outer.zip",
            "application/zip",
            zip_of({"inner.zip": zip_of({"a.txt": b"x"}), "b.pdf": b"%PDF"}),
            "",
        ),
        (
            "a.zip",
            "application/zip",
            zip_of({"setup.exe.": b"x"}),
            "archive contains setup.exe. (denied type .exe)",
        ),
        (
            "a.zip",
            "application/zip",
            zip_of({"setup.exe ": b"x"}),
            "archive contains setup.exe  (denied type .exe)",
        ),
        ("dir\\setup.exe.", "application/octet-stream", b"x", "denied type .exe"),
    ],
)
def test_withhold_reason_sees_through_messages_lying_names_and_archives(
    name: str, ctype: str, data: bytes, reason: str
) -> None:
    assert withhold_reason(name, ctype, data, DENY | {"vbs"}) == reason


def test_an_archive_listing_more_names_than_anyone_mails_is_withheld_unread() -> None:
    names = {f"f{i}.txt": b"" for i in range(10_001)}
    assert (
        withhold_reason("many.zip", "application/zip", zip_of(names), DENY)
        == "archive lists more than 10000 files"
    )


def test_an_archive_whose_end_record_understates_its_names_is_withheld_unopened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # zipfile builds an entry for every central-directory record whatever count the end record states:
    # the cap counts the records themselves, before anything is opened
    archive = bytearray(zip_of([f"{n}.txt" for n in range(limits.MAX_ARCHIVE_NAMES + 1)], prefix=b"junk"))
    at = archive.rfind(b"PK\x05\x06")
    archive[at + 8 : at + 12] = (1).to_bytes(2, "little") * 2  # "1 entry on this disk, 1 in all"

    def opened(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the archive was opened")

    monkeypatch.setattr(zipfile, "ZipFile", opened)
    assert (
        withhold_reason("many.zip", "application/zip", bytes(archive), DENY)
        == "archive lists more than 10000 files"
    )


def test_a_nested_archive_is_read_within_a_byte_budget() -> None:

    bomb = zip_of({"big.zip": b"\0" * (limits.MAX_NESTED_ARCHIVE_BYTES + 1)})
    assert len(bomb) < 100_000
    assert (
        withhold_reason("a.zip", "application/zip", bomb, DENY)
        == "archive contains big.zip (an archive too large to check)"
    )


def test_forwarded_messages_nested_deeper_than_checked_are_withheld() -> None:

    data = forwarded(("cv.pdf", b"%PDF-1.4", "application/pdf"))
    for _ in range(limits.MAX_MESSAGE_NESTING):
        data = forwarded(("fwd.eml", data, "message/rfc822"))
    assert "nested more than 3 deep cannot be checked" in withhold_reason(
        "f.eml", "message/rfc822", data, DENY
    )


def test_ses_list_matches_the_documented_examples() -> None:
    assert {
        "exe",
        "js",
        "crt",
        "url",
        "tmp",
        "mdb",
        "vbs",
    } <= SES_UNSUPPORTED and "zip" not in SES_UNSUPPORTED


def message(attachments: list[Attachment], html: str = "") -> OutboundMessage:
    return OutboundMessage(
        kind="forward",
        idempotency_key="k",
        correlation_id="c",
        to=["owner@example.net"],
        subject="S",
        text="hi",
        html=html,
        attachments=attachments,
    )


def built(msg: OutboundMessage, files: dict[str, bytes]) -> email.message.EmailMessage:
    raw = build(msg, "hello@example.com", "example.com", "attachments/", files.__getitem__).as_bytes()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


def test_cid_url_may_be_percent_encoded_and_unreferenced_parts_stay_attachments() -> None:
    files = {"attachments/x/1/a.png": b"A", "attachments/x/1/b.png": b"B"}
    msg = built(
        message(
            [
                Attachment("attachments/x/1/a.png", "a.png", "image/png", inline=True, content_id="a@x"),
                Attachment("attachments/x/1/b.png", "b.png", "image/png", inline=True, content_id="b@x"),
            ],
            html='<img src="cid:a%40x">',
        ),
        files,
    )
    related = next(p for p in msg.walk() if p.get_content_type() == "multipart/related")
    assert [p["Content-ID"] for p in related.iter_parts()] == [None, "<a@x>"]
    [other] = [p for p in msg.iter_attachments() if p.get_filename() == "b.png"]
    assert other.get_content_disposition() == "inline"  # as the sender marked it, outside the page


def test_a_content_id_that_could_break_the_header_is_not_used() -> None:
    files = {"attachments/x/1/a.png": b"A"}
    msg = built(
        message(
            [Attachment("attachments/x/1/a.png", "a.png", "image/png", content_id="a> b")],
            html='<img src="cid:a> b">',
        ),
        files,
    )
    assert not any(p.get_content_type() == "multipart/related" for p in msg.walk())


@pytest.mark.parametrize(
    ("inner", "ctype", "encoding"),
    [
        (b"From: a@b.example\r\nSubject: hi\r\n\r\nplain\r\n", "message/rfc822", "7bit"),
        (
            "From: a@b.example\r\nSubject: café\r\n\r\ncrème\r\n".encode(),
            "application/octet-stream",
            "base64",
        ),  # 8-bit
        (
            b"From: a@b.example\r\nSubject: caf\xe9\r\n\r\ncr\xe8me\r\n",
            "application/octet-stream",
            "base64",
        ),  # Latin-1
        (
            b"From: a@b.example\r\n\r\n" + b"x" * 1200 + b"\r\n",
            "application/octet-stream",
            "base64",
        ),  # over-long line
    ],
)
def test_message_parts_keep_their_bytes(inner: bytes, ctype: str, encoding: str) -> None:
    msg = built(
        message([Attachment("attachments/x/1/m.eml", "m.eml", "message/rfc822")]),
        {"attachments/x/1/m.eml": inner},
    )
    [part] = list(msg.iter_attachments())
    assert (part.get_content_type(), part["Content-Transfer-Encoding"], part.get_filename()) == (
        ctype,
        encoding,
        "m.eml",
    )
    if encoding == "base64":
        assert part.get_payload(decode=True) == inner  # byte for byte
    else:
        payload = part.get_payload()
        assert isinstance(payload, list)
        [carried] = payload
        assert isinstance(carried, email.message.Message)
        body = carried.get_payload(decode=True)
        assert isinstance(body, bytes)
        assert carried["From"] == "a@b.example" and body.strip() == inner.split(b"\r\n\r\n")[1].strip()


def test_text_attachments_keep_their_bytes_and_say_utf_8_only_when_they_are() -> None:
    files = {"attachments/x/1/u.txt": "naïve".encode(), "attachments/x/1/l.txt": "naïve".encode("latin-1")}
    msg = built(
        message(
            [
                Attachment("attachments/x/1/u.txt", "u.txt", "text/plain"),
                Attachment("attachments/x/1/l.txt", "l.txt", "text/plain"),
            ]
        ),
        files,
    )
    u, latin = list(msg.iter_attachments())
    assert u.get_content_charset() == "utf-8" and u.get_payload(decode=True) == files["attachments/x/1/u.txt"]
    assert (
        latin.get_content_charset() is None
        and latin.get_payload(decode=True) == files["attachments/x/1/l.txt"]
    )


@pytest.mark.parametrize(
    ("data", "charset", "text"),
    [
        ("naïve".encode("latin-1"), "iso-8859-1", "naïve"),
        ("日本".encode("shift_jis"), "Shift_JIS", "日本"),
        ("naïve".encode(), "", "naïve"),  # no charset: UTF-8 if it decodes
        ("naïve".encode("cp1252"), "bogus", "naïve"),  # unknown charset: cp1252
        ("€ “quoted”".encode("cp1252"), "iso-8859-1", "€ “quoted”"),  # the label's superset, as for the body
        # Outlook's ISO-2022-JP with NEC's row 13: 7-bit, so it once passed as UTF-8 and reached the owner as
        # "$B-!…"
        (b"\x1b$B-!2q5D$O-j$G$9\x1b(B\r\n", "iso-2022-jp", "①会議は㈱です\r\n"),
    ],
)
def test_inline_text_parts_become_utf_8(data: bytes, charset: str, text: str) -> None:
    from common.store.attachments import as_utf8

    assert as_utf8(data, charset).decode("utf-8") == text


def test_a_text_part_beside_the_body_is_decoded_under_its_own_charset() -> None:
    from common.mail.parse import parse
    from common.store.attachments import as_utf8
    from tests.support import mailgen as g

    body = (
        b"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSee below.\r\n"
        b'--b\r\nContent-Type: text/plain; charset="ISO-2022-JP"\r\n\r\n\x1b$B-!2q5D$O-j$G$9\x1b(B\r\n'
        b"--b--\r\n"
    )
    mail = parse(
        g.raw([*g.basic(), ("MIME-Version", "1.0"), ("Content-Type", 'multipart/mixed; boundary="b"')], body)
    )
    [part] = mail.attachments
    assert part.role == "text" and part.charset == "ISO-2022-JP"
    assert as_utf8(part.data, part.charset).decode("utf-8") == "①会議は㈱です"
