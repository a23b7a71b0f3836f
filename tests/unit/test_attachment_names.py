"""Attachment names reach the owner as the sender wrote them: only made safe to show
(common.mail.sanitize.display_filename); the S3 key's safe name is storage, never the forward's name.
A raw UTF-8 name with a broken sequence keeps its valid characters; a part typed ``BINARY;name=…``
is a file."""

from __future__ import annotations

import email
import email.policy

import pytest

from common.mail.build import build
from common.mail.charsets import broken_utf8
from common.mail.outbound import Attachment, OutboundMessage
from common.mail.parse import parse
from common.mail.sanitize import display_filename, safe_filename

LONG = "Quarterly report " * 8 + "final.pdf"  # 145 characters: over the S3 key's 120, under 255


def mixed(*parts: bytes) -> bytes:
    head = (
        b"From: Jane <jane@corp.example>\r\nSubject: files\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nHello.\r\n"
    )
    return head + b"".join(b"--b\r\n" + p + b"\r\n" for p in parts) + b"--b--\r\n"


def named(disposition: bytes, data: bytes = b"x") -> bytes:
    return (
        b"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; "
        + disposition
        + (b"\r\n\r\n" + data)
    )


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("nyan cat ✔.gif", "nyan cat ✔.gif"),
        ("N° 12.pdf", "N° 12.pdf"),
        ("two  spaces.txt", "two  spaces.txt"),
        (LONG, LONG),
        ("x" * 300 + ".pdf", "x" * 251 + ".pdf"),
        ("..\\..\\windows\\evil.txt", "evil.txt"),
        ("dir/sub/", "sub"),
        ("invoice\u202egpj.exe", "invoicegpj.exe"),
        ("line\r\nbreak.txt", "line break.txt"),
        ("\x00", "attachment"),
        ("..", "attachment"),
    ],
)
def test_display_filename_changes_only_what_is_unsafe_to_show(name: str, shown: str) -> None:
    assert display_filename(name) == shown


def test_forward_names_are_the_senders_and_keys_stay_safe() -> None:
    mail = parse(
        mixed(
            named(b"filename*=utf-8''nyan%20cat%20%E2%9C%94.gif"),
            named(b'filename="=?UTF-8?Q?Facture_N=C2=B0_42.pdf?="'),
            named(b'filename="notes.txt"'),
            named(b'filename="notes.txt"'),
            named(b'filename="' + LONG.encode() + b'"'),
        )
    )
    assert [a.filename for a in mail.attachments] == [
        "nyan cat ✔.gif",
        "Facture N° 42.pdf",
        "notes.txt",
        "notes.txt",
        LONG,
    ]
    assert [a.safe_name for a in mail.attachments][:2] == ["nyan cat _.gif", "Facture N_ 42.pdf"]
    assert (
        len(mail.attachments[-1].safe_name) == 120 and safe_filename(LONG) == mail.attachments[-1].safe_name
    )


def test_the_built_forward_carries_each_name_byte_for_byte() -> None:
    names = ["nyan cat ✔.gif", "two  spaces.txt", "notes.txt", "notes.txt", LONG, "Résumé N° 3.pdf"]
    msg = OutboundMessage(
        kind="forward",
        idempotency_key="forward:m",
        correlation_id="forward-m",
        to=["owner@example.net"],
        subject="s",
        text="t",
        attachments=[Attachment(f"attachments/c/m/{i}", n, "application/pdf") for i, n in enumerate(names)],
    )
    raw = build(msg, "hello@example.com", "example.com", "attachments/", lambda key: b"%PDF-1.4").as_bytes()
    back = email.message_from_bytes(raw, policy=email.policy.default)
    assert [p.get_filename() for p in back.iter_attachments()] == names


def test_a_raw_utf8_name_with_one_broken_sequence_keeps_its_valid_characters() -> None:
    mail = parse(mixed(named(b'filename="caf\xc3\xa9 r\xc3\xa9sum\xc3 \xe6\x97\xa5.pdf"')))
    assert mail.attachments[0].filename == "café résum\ufffd 日.pdf"  # as the stdlib's "replace" reads it
    rfc2231 = parse(mixed(named(b"filename*=utf-8''caf%C3%A9%20r%C3%A9sum%C3.pdf")))
    assert rfc2231.attachments[0].filename == "café résum\ufffd.pdf"


def test_latin_1_and_shift_jis_names_are_not_mistaken_for_broken_utf8() -> None:
    assert (
        parse(mixed(named(b'filename="M\xfcller Caf\xe9.doc"'))).attachments[0].filename == "Müller Café.doc"
    )
    sjis = "テスト資料.pdf".encode("cp932")
    body = b'Content-Type: application/pdf; charset=shift_jis\r\nContent-Disposition: attachment; filename="'
    mail = parse(
        b"From: a@corp.example\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"
        b"--b\r\nContent-Type: text/plain; charset=shift_jis\r\n\r\n" + "本文".encode("cp932") + b"\r\n"
        b"--b\r\n" + body + sjis + b'"\r\n\r\nx\r\n--b--\r\n'
    )
    assert mail.attachments[0].filename == "テスト資料.pdf"
    assert broken_utf8(b"M\xfcller") is None and broken_utf8("テスト".encode("cp932")) is None


def test_a_part_typed_binary_with_a_name_is_attached_not_shown_as_the_body() -> None:
    mail = parse(
        mixed(b'Content-Type: BINARY;name="Alices_PDP-10"\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC')
    )
    assert mail.text.strip() == "Hello."
    (part,) = mail.attachments
    assert (part.filename, part.content_type, part.data) == (
        "Alices_PDP-10",
        "application/octet-stream",
        b"\0\1\2",
    )
    alone = parse(b'From: a@corp.example\r\nContent-Type: BINARY;name="Alices_PDP-10"\r\n\r\nbinary data\r\n')
    assert alone.text == "" and [a.filename for a in alone.attachments] == ["Alices_PDP-10"]
