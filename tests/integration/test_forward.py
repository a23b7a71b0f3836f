"""The forward to the owner, through inbound-handler and forward-sender under the real RIE and SES (moto):
every attachment type but the dangerous ones, inline images kept inline, the original's header block,
message/rfc822, message/partial, S/MIME and PGP parts as they are, and SESv2's 40 MB size.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

import pytest

from common.delivery.compose import FOOTER_MARKER, FORWARD_MARKER
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail, zip_of

SES_ID = "0000000000000000000000000000000000000f01"
CID = "jane-at-corp.example"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        "inbound": rie_module("inbound-handler"),
        "sender": rie_module("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"}),
    }


def forward(stack: Stack, fns: dict[str, RieProcess], raw: bytes, mid: str = SES_ID) -> Any:
    """Deliver ``raw`` as SES would, run forward-sender, return (handler result, the sent forward)."""
    result = fns["inbound"].invoke(stack.receipt(raw, mid))
    assert result["status"] == "forwarded", result
    assert [r.failed for r in stack.run_sender(fns["sender"], stack.cfg.forward_queue)] == [[]]
    [sent] = stack.sent()
    assert sent.destinations == ["owner@example.net"]
    return result, sent.message


def parts(msg: EmailMessage) -> dict[str, EmailMessage]:
    return {p.get_filename(): p for p in msg.walk() if p.get_filename()}


def footer(msg: EmailMessage) -> str:
    return msg.get_body(("plain",)).get_content().split(FOOTER_MARKER)[1]


PE = b"MZ" + b"\0" * 0x3A + (0x40).to_bytes(4, "little") + b"PE\0\0" + b"\0" * 64  # a minimal PE header


def test_every_ordinary_type_is_forwarded(stack: Stack, fns: dict[str, RieProcess]) -> None:
    files = [
        ("notes.txt", b"plain notes", "text/plain"),
        ("data.csv", b"a,b\n1,2\n", "text/csv"),
        ("bundle.zip", zip_of(["report.pdf", "img/photo.jpg"]), "application/zip"),
        ("old.doc", b"\xd0\xcf\x11\xe0 doc", "application/msword"),
        (
            "deck.pptx",
            zip_of(["ppt/presentation.xml"]),
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        ),
        ("anim.gif", b"GIF89a....", "image/gif"),
        ("photo.heic", b"\0\0\0\x18ftypheic", "image/heic"),
    ]
    result, msg = forward(stack, fns, mail(attachments=files))
    assert result["skipped"] == []
    got = parts(msg)
    for name, data, ctype in files:
        assert got[name].get_content_type() == ctype and got[name].get_content() in (
            data,
            data.decode(errors="ignore"),
        )
    assert "Not attached" not in footer(msg)


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("setup.exe", b"MZ", "denied type .exe"),
        ("INVOICE.PDF.js", b"alert(1)", "denied type .js"),
        ("run.ps1", b"Get-Item", "denied type .ps1"),
        ("tools.zip", zip_of(["readme.txt", "bin/tool.exe"]), "archive contains tool.exe (denied type .exe)"),
        ("invoice.pdf", PE, "Windows executable"),
        ("server.crt", b"-----BEGIN CERTIFICATE-----", "Amazon SES does not send .crt files"),
    ],
)
def test_dangerous_parts_are_withheld_stored_and_named(
    stack: Stack, fns: dict[str, RieProcess], name: str, data: bytes, reason: str
) -> None:
    result, msg = forward(
        stack,
        fns,
        mail(
            attachments=[
                (name, data, "application/octet-stream"),
                ("cv.pdf", b"%PDF-1.4 cv", "application/pdf"),
            ]
        ),
    )
    key = f"withheld/{CID}/{SES_ID}/{name}"
    assert result["skipped"] == [f"{name} ({reason})"]
    assert stack.s3_body(key) == data
    assert list(parts(msg)) == ["cv.pdf"]
    assert f"{name} ({reason}; stored at s3://{stack.cfg.bucket}/{key})" in footer(msg)


def test_forwarded_message_containing_an_executable_is_withheld(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    import email
    import email.policy

    inner = email.message_from_bytes(
        mail(subject="inner", attachments=[("payload.vbs", b"WScript", "text/plain")]),
        policy=email.policy.default,
    )
    outer = EmailMessage()
    outer["From"], outer["To"], outer["Subject"] = (
        "Jane <jane@corp.example>",
        "hello@example.com",
        "See below",
    )
    outer.set_content("forwarding this")
    outer.add_attachment(inner, filename="fwd.eml")
    result, msg = forward(stack, fns, outer.as_bytes())
    assert result["skipped"] == ["fwd.eml (forwarded message contains payload.vbs (denied type .vbs))"]


def attached_mail(*files: tuple[str, bytes, str], encoded_names: bool = False) -> bytes:
    """A mail Jane forwards as an attachment; ``encoded_names``: its file names as RFC 2047 words
    (Outlook)."""
    import base64

    raw = mail(
        sender="Recruiter <r@agency.example>", to="jane@corp.example", subject="inner", attachments=files
    )
    if encoded_names:
        for name, _, _ in files:
            word = f"=?utf-8?b?{base64.b64encode(name.encode()).decode()}?="
            raw = raw.replace(f'filename="{name}"'.encode(), f'filename="{word}"'.encode())
    return raw


def with_message_part(inner: bytes, filename: str = "fwd.eml", ctype: str = "message/rfc822") -> bytes:
    """Jane's mail carrying ``inner`` as a forwarded-as-attachment part, written as a client writes it."""
    part = (
        f'Content-Type: {ctype}\r\nContent-Disposition: attachment; filename="{filename}"\r\n\r\n'
    ).encode()
    return (
        b"From: Jane Smith <jane@corp.example>\r\nTo: hello@example.com\r\nSubject: See below\r\n"
        b'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b1"\r\n\r\n--b1\r\n'
        b"Content-Type: text/plain\r\n\r\nforwarding this\r\n--b1\r\n"
        + part
        + inner.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        + b"\r\n--b1--\r\n"
    )


DOS_HEADER = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + b"\0" * 60  # MZ, no PE header after it


@pytest.mark.parametrize(
    ("raw", "name", "reason"),
    [
        (
            with_message_part(
                attached_mail(("setup.exe", b"x", "application/octet-stream"), encoded_names=True)
            ),
            "fwd.eml",
            "forwarded message contains setup.exe (denied type .exe)",
        ),
        (
            with_message_part(attached_mail(("invoice.pdf", DOS_HEADER, "application/pdf"))),
            "fwd.eml",
            "forwarded message contains invoice.pdf (Windows executable)",
        ),
        (
            with_message_part(attached_mail(("a.zip", zip_of({"run.vbs": b"x"}), "application/zip"))),
            "fwd.eml",
            "forwarded message contains a.zip (archive contains run.vbs (denied type .vbs))",
        ),
        (
            with_message_part(attached_mail(("run.js", b"1", "text/javascript")), ctype="message/global"),
            "fwd.eml",
            "forwarded message contains run.js (denied type .js)",
        ),
        (with_message_part(attached_mail(), filename="notes.scr"), "notes.scr", "denied type .scr"),
        (
            mail(attachments=[("invoice.pdf", DOS_HEADER, "application/pdf")]),
            "invoice.pdf",
            "Windows executable",
        ),
        (
            mail(
                attachments=[
                    ("photos.zip", zip_of({"a/inner.zip": zip_of({"b/tool.exe": b"x"})}), "application/zip")
                ]
            ),
            "photos.zip",
            "archive contains inner.zip (archive contains tool.exe (denied type .exe))",
        ),
        (
            mail(
                attachments=[
                    (
                        "backup.dat",
                        zip_of({"setup.exe.": b"x"}, prefix=b"\0" * 4096),
                        "application/octet-stream",
                    )
                ]
            ),
            "backup.dat",
            "archive contains setup.exe. (denied type .exe)",
        ),
    ],
    ids=[
        "message-encoded-name",
        "message-mz-as-pdf",
        "message-zip",
        "message-global",
        "message-part-named-scr",
        "mz-as-pdf",
        "zip-in-zip",
        "zip-with-prefix-trailing-dot",
    ],
)
def test_denied_files_are_withheld_however_they_are_wrapped_or_named(
    stack: Stack, fns: dict[str, RieProcess], raw: bytes, name: str, reason: str
) -> None:
    """A denied file inside a forwarded message, behind a lying name or type, or in a nested
    or prefixed zip is withheld, stored under withheld/ and named in the forward's footer."""
    result, msg = forward(stack, fns, raw)
    key = f"withheld/{CID}/{SES_ID}/{name}"
    assert result["skipped"] == [f"{name} ({reason})"]
    assert stack.s3_keys("withheld/") == [key]
    assert list(parts(msg)) == []
    assert f"{name} ({reason}; stored at s3://{stack.cfg.bucket}/{key})" in footer(msg)


def test_the_deny_list_is_configurable(
    stack: Stack, rie_function: Callable[..., RieProcess], fns: dict[str, RieProcess]
) -> None:
    strict = rie_function("inbound-handler", env={"ATTACHMENT_DENY_TYPES": "zip,exe"})
    result = strict.invoke(
        stack.receipt(
            mail(
                attachments=[
                    ("a.zip", zip_of(["x.txt"]), "application/zip"),
                    ("b.jar", b"PK", "application/java-archive"),
                    ("c.js", b"1", "text/javascript"),
                ]
            ),
            SES_ID,
        )
    )
    # .jar is no longer on the owner's list (forwarded); .zip is; SES's own list cannot be configured away.
    assert result["skipped"] == ["a.zip (denied type .zip)", "c.js (Amazon SES does not send .js files)"]
    assert result["attachments"] == [f"attachments/{CID}/{SES_ID}/b.jar"]


def related_mail() -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "Jane Smith <jane@corp.example>", "hello@example.com", "Logo"
    msg["Message-ID"] = make_msgid(domain="corp.example")
    msg.set_content("See our logo.")
    msg.add_alternative(
        '<html><body><p>Our logo:</p><img src="cid:logo.1@corp.example"></body></html>', subtype="html"
    )
    msg.get_body(("html",)).add_related(
        b"\x89PNG\r\n\x1a\nlogo",
        maintype="image",
        subtype="png",
        cid="<logo.1@corp.example>",
        filename="logo.png",
    )
    msg.add_attachment(b"%PDF-1.4 brochure", maintype="application", subtype="pdf", filename="brochure.pdf")
    return msg.as_bytes()


def test_inline_images_stay_inline_beside_the_html(stack: Stack, fns: dict[str, RieProcess]) -> None:
    _, msg = forward(stack, fns, related_mail())
    related = next(p for p in msg.walk() if p.get_content_type() == "multipart/related")
    html, image = list(related.iter_parts())
    assert html.get_content_type() == "text/html" and 'src="cid:logo.1@corp.example"' in html.get_content()
    assert image["Content-ID"] == "<logo.1@corp.example>" and image.get_content_disposition() == "inline"
    assert image.get_content() == b"\x89PNG\r\n\x1a\nlogo"
    assert [p.get_filename() for p in msg.iter_attachments()] == ["brochure.pdf"]  # the only download


def test_header_block_on_top_in_text_and_html_and_the_subject_untouched(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    subject = "Re: [JIRA-42] Überprüfung — Fwd: offer"
    raw = mail(
        subject=subject,
        html="<html><body><p>Hello</p></body></html>",
        headers={
            "Cc": "Bob <bob@corp.example>, ann@other.example",
            "Date": "Tue, 03 Nov 2026 10:00:00 +0100",
        },
    )
    _, msg = forward(stack, fns, raw)
    assert msg["Subject"] == subject
    text = msg.get_body(("plain",)).get_content()
    assert text.startswith(
        f"{FORWARD_MARKER}\n[!] Written to hello@example.com\n\n"  # several addresses served
        "From: Jane Smith <jane@corp.example>\nDate: Tue, 03 Nov 2026 10:00:00 +0100\n"
        "To: hello@example.com\nCc: Bob <bob@corp.example>, ann@other.example\n\nHi, I would like"
    )
    html = msg.get_body(("html",)).get_content()
    block = html[html.index(FORWARD_MARKER) : html.index("<p>Hello</p>")]
    for value in (
        "From:</b> Jane Smith &lt;jane@corp.example&gt;",
        "Date:</b> Tue, 03 Nov 2026 10:00:00 +0100",
        "To:</b> hello@example.com",
        "Cc:</b> Bob &lt;bob@corp.example&gt;, ann@other.example",
    ):
        assert value in block


def test_forwarded_message_part_arrives_as_message_rfc822(stack: Stack, fns: dict[str, RieProcess]) -> None:
    inner = EmailMessage()
    inner["From"], inner["To"], inner["Subject"] = (
        "Recruiter <r@agency.example>",
        "jane@corp.example",
        "The role",
    )
    inner.set_content("Details of the role.")
    outer = EmailMessage()
    outer["From"], outer["To"], outer["Subject"] = (
        "Jane Smith <jane@corp.example>",
        "hello@example.com",
        "FYI",
    )
    outer.set_content("See the attached mail.")
    outer.add_attachment(inner, filename="The role.eml")
    _, msg = forward(stack, fns, outer.as_bytes())
    part = parts(msg)["The role.eml"]
    assert part.get_content_type() == "message/rfc822" and part["Content-Transfer-Encoding"] == "7bit"
    carried = part.get_content()
    assert carried["Subject"] == "The role" and carried.get_content().strip() == "Details of the role."


def test_a_base64_forwarded_message_arrives_decoded_and_is_checked(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """Python's EmailMessage (and others) base64 a message/rfc822 part; mail clients decode it, so the
    forward carries the message itself (it carried the base64 text) and its parts pass the deny-list."""
    outer = EmailMessage()
    outer["From"], outer["To"], outer["Subject"] = (
        "Jane Smith <jane@corp.example>",
        "hello@example.com",
        "FYI",
    )
    outer.set_content("See the attached mail.")
    outer.add_attachment(
        attached_mail(("cv.pdf", b"%PDF-1.4 cv", "application/pdf")),
        maintype="message",
        subtype="rfc822",
        filename="role.eml",
    )
    assert b"Content-Transfer-Encoding: base64" in outer.as_bytes()
    result, msg = forward(stack, fns, outer.as_bytes())
    assert result["skipped"] == []
    carried = parts(msg)["role.eml"]
    inner = (
        carried.get_content()
        if carried.get_content_type() == "message/rfc822"
        else email.message_from_bytes(carried.get_content(), policy=email.policy.default)
    )
    assert inner["Subject"] == "inner" and [p.get_filename() for p in inner.iter_attachments()] == ["cv.pdf"]
    outer.clear_content()
    outer.set_content("again")
    outer.add_attachment(
        attached_mail(("cv.exe", b"x", "application/octet-stream")),
        maintype="message",
        subtype="rfc822",
        filename="role.eml",
    )
    result = fns["inbound"].invoke(
        stack.receipt(outer.as_bytes(), "0000000000000000000000000000000000000f02")
    )
    assert result["skipped"] == ["role.eml (forwarded message contains cv.exe (denied type .exe))"]


def test_message_partial_is_forwarded_with_a_note(stack: Stack, fns: dict[str, RieProcess]) -> None:
    raw = (
        b"From: Jane Smith <jane@corp.example>\r\nTo: hello@example.com\r\nSubject: Big file (2/3)\r\n"
        b'MIME-Version: 1.0\r\nContent-Type: message/partial; id="abc@corp.example"; number=2; total=3\r\n'
        b"\r\nsecond fragment of the original\r\n"
    )
    result, msg = forward(stack, fns, raw)
    text = msg.get_body(("plain",)).get_content()
    assert "[!] This mail is part 2 of 3 of a message the sender's program split (message/partial)" in text
    assert msg["Subject"] == "Big file (2/3)"


SMIME = (
    b"From: Jane Smith <jane@corp.example>\r\nTo: hello@example.com\r\nSubject: Encrypted\r\n"
    b"MIME-Version: 1.0\r\nContent-Type: application/pkcs7-mime; smime-type=enveloped-data; "
    b"name=smime.p7m\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: "
    b"attachment; filename=smime.p7m\r\n\r\nMIAGCSqGSIb3DQEHA6CAMIACAQAxggE=\r\n"
)
PGP = (
    b"From: Jane Smith <jane@corp.example>\r\nTo: hello@example.com\r\nSubject: PGP\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary="b1"\r\n\r\n'
    b"--b1\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n"
    b'--b1\r\nContent-Type: application/octet-stream; name="encrypted.asc"\r\n'
    b'Content-Disposition: inline; filename="encrypted.asc"\r\n\r\n'
    b"-----BEGIN PGP MESSAGE-----\r\nhQEMA+abc\r\n-----END PGP MESSAGE-----\r\n--b1--\r\n"
)
SIGNED = (
    b"From: Jane Smith <jane@corp.example>\r\n"
    b"To: hello@example.com\r\nSubject: Signed\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: multipart/signed; protocol="application/pgp-signature"; micalg=pgp-sha256; '
    b'boundary="s1"\r\n\r\n'
    b"--s1\r\nContent-Type: text/plain\r\n\r\nSigned words.\r\n"
    b'--s1\r\nContent-Type: application/pgp-signature; name="signature.asc"\r\n\r\n'
    b"-----BEGIN PGP SIGNATURE-----\r\niQEz\r\n-----END PGP SIGNATURE-----\r\n--s1--\r\n"
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (SMIME, {"smime.p7m": "application/pkcs7-mime"}),
        (
            PGP,
            {
                "encrypted.asc": "application/octet-stream",
                "unnamed.pgp-encrypted": "application/pgp-encrypted",
            },
        ),
        (SIGNED, {"signature.asc": "application/pgp-signature"}),
    ],
    ids=["smime-p7m", "pgp-mime-encrypted", "pgp-mime-signed"],
)
def test_smime_and_pgp_parts_are_forwarded_as_they_are(
    stack: Stack, fns: dict[str, RieProcess], raw: bytes, expected: dict[str, str]
) -> None:
    import email
    import email.policy

    original = {
        p.get_filename() or f"unnamed.{p.get_content_subtype()}": p.get_payload(decode=True)
        for p in email.message_from_bytes(raw, policy=email.policy.default).walk()
        if not p.is_multipart()
    }
    result, msg = forward(stack, fns, raw)
    assert result["skipped"] == []
    got = {p.get_filename(): p for p in msg.walk() if p.get_filename()}
    for name, ctype in expected.items():
        assert got[name].get_content_type() == ctype
        assert (
            got[name].get_payload(decode=True) == original[name]
        )  # byte for byte: the owner can decrypt/verify


def test_a_forward_above_sesv1s_10_mb_goes_out_whole(stack: Stack, fns: dict[str, RieProcess]) -> None:
    big = bytes(range(256)) * (12 * 1024 * 1024 // 256)  # 12 MB: 16 MB base64-encoded, over SESv1's 10 MB
    result, msg = forward(stack, fns, mail(attachments=[("scan.pdf", big, "application/pdf")]))
    assert parts(msg)["scan.pdf"].get_content() == big
    assert "shortened" not in msg.get_body(("plain",)).get_content()


def test_inline_text_parts_are_forwarded_inline(stack: Stack, fns: dict[str, RieProcess]) -> None:
    raw = (
        b"From: Jane Smith <jane@corp.example>\r\n"
        b"To: hello@example.com\r\nSubject: Parts\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="m1"\r\n\r\n'
        b"--m1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nFirst part.\r\n--m1\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\nContent-Disposition: inline\r\n\r\nSecond part, "
        b"no name.\r\n--m1\r\nContent-Type: text/enriched\r\n\r\n<bold>Enriched</bold> part.\r\n"
        b'--m1\r\nContent-Type: text/plain; name="notes.txt"\r\nContent-Disposition: inline; '
        b'filename="notes.txt"\r\n\r\n'
        b"Named inline notes.\r\n--m1--\r\n"
    )
    result, msg = forward(stack, fns, raw)
    assert result["skipped"] == []
    # after the banner (the address written to) and the header block
    assert msg.get_body(("plain",)).get_content().split("\n\n", 2)[2].startswith("First part.")
    carried = {
        p.get_payload(decode=True).strip(): p for p in msg.walk() if p.get_content_disposition() == "inline"
    }
    assert set(carried) == {b"Second part, no name.", b"<bold>Enriched</bold> part.", b"Named inline notes."}
    assert carried[b"<bold>Enriched</bold> part."].get_content_type() == "text/enriched"


def test_a_long_body_travels_by_claim_check_and_arrives_whole(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    text = "".join(
        f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(60_000)
    )  # ~3.3 MB
    result, msg = forward(
        stack, fns, mail(text=text, html="<html><body><pre>" + text[:500_000] + "</pre></body></html>")
    )
    [payload] = stack.s3_keys("queue-payloads/")  # the queue message was over 200 KB: its payload went to S3
    assert payload.endswith(".json")
    body = msg.get_body(("plain",)).get_content()
    assert "line 59999: the quick brown fox" in body and "truncated" not in body
