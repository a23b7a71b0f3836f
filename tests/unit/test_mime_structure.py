"""MIME structure as tolerant readers see it: header parameters (RFC 2045, 2231, 5322) folded, quoted
or continued; delimiters with trailing text; named parts kept as parts (common.mail.parse)."""

from __future__ import annotations

import email
import email.policy

import pytest

from common.mail.parse import mend_boundaries, parse, parse_params

HEAD = b"From: Jane <jane@corp.example>\r\nTo: hello@example.com\r\nSubject: Parts\r\nMIME-Version: 1.0\r\n"


def mail(content_type: bytes, body: bytes) -> bytes:
    return HEAD + b"Content-Type: " + content_type + b"\r\n\r\n" + body


def three_named(boundary: bytes, delimiter: bytes | None = None) -> bytes:
    d = delimiter or b"--" + boundary
    return (
        b"preamble\r\n"
        + d
        + b"\r\nContent-Type: text/plain\r\n\r\nThe body text.\r\n"
        + d
        + b'\r\nContent-Type: text/plain; name="one.txt"\r\n\r\nfirst file\r\n'
        + d
        + b'\r\nContent-Type: text/x-myown; name="two.my"\r\n\r\nsecond file\r\n'
        + d
        + b"\r\nContent-Type: message/rfc822\r\n\r\nFrom: inner@x.example\r\nSubject: Inner\r\n\r\ninner "
        b"body\r\n" + b"--" + boundary + b"--\r\n"
    )


@pytest.mark.parametrize(
    "content_type",
    [
        # folded inside the quotes: unfold removes CRLF only
        b'multipart/mixed; boundary="simple\r\n boundary"',
        b'multipart/mixed;\r\n\tboundary="simple\r\n boundary"',  # and the field folded before it
        b'multipart/mixed; boundary=\r\n "simple\r\n boundary"',  # and between the = and the quote
        b'multipart/mixed; boundary*0="simple"; boundary*1=" boundary"',  # RFC 2231 continuation
    ],
)
def test_a_folded_or_continued_boundary_splits_the_multipart(content_type: bytes) -> None:
    parsed = parse(mail(content_type, three_named(b"simple boundary")))
    assert not parsed.parse_failed and parsed.text.strip() == "The body text."
    assert [a.filename for a in parsed.attachments] == ["one.txt", "two.my", "forwarded message.eml"]
    assert b"Subject: Inner" in parsed.attachments[2].data and "--simple" not in parsed.text


def test_folded_parameters_read_as_unfolded() -> None:
    assert parse_params('multipart/mixed; boundary="simple\r\n boundary"') == (
        "multipart/mixed",
        {"boundary": "simple boundary"},
    )
    assert parse_params('text/plain;\r\n name="a\r\n b.txt"; charset=utf-8')[1] == {
        "name": "a b.txt",
        "charset": "utf-8",
    }
    assert parse_params("text/plain; name*0*=utf-8''%C3%A9t%C3%A9; name*1=.txt")[1] == {"name": "été.txt"}


def test_mending_changes_only_the_folded_parameter() -> None:
    raw = mail(b'multipart/mixed; boundary="a\r\n b"', b"--a b\r\n\r\nx\r\n--a b--\r\n")
    mended, notes = mend_boundaries(raw)
    assert mended == raw.replace(b'"a\r\n b"', b'"a b"') and len(notes) == 1
    plain = mail(b'multipart/mixed; boundary="ab"', b"--ab\r\n\r\nx\r\n--ab--\r\n-- \r\nsig\r\n")
    assert mend_boundaries(plain) == (plain, [])


def test_a_delimiter_with_trailing_text_is_a_delimiter() -> None:
    raw = mail(b'multipart/mixed; boundary="tb"', three_named(b"tb", b"--tb trailing text"))
    parsed = parse(raw)
    assert parsed.text.strip() == "The body text." and len(parsed.attachments) == 3
    assert any("trailing" in p or "text after" in p for p in parsed.problems)


def test_a_boundary_differing_by_trailing_whitespace_is_the_boundary() -> None:
    parsed = parse(mail(b'multipart/mixed; boundary="ws "', three_named(b"ws", b"--ws \t")))
    assert parsed.text.strip() == "The body text." and len(parsed.attachments) == 3


def test_a_multipart_that_cannot_be_split_is_never_shown_as_text() -> None:
    body = b"--zz 1\r\nContent-Type: text/plain\r\n\r\nhello\r\n--zz 1--\r\n"
    parsed = parse(mail(b'multipart/mixed; boundary="nowhere"', body))
    assert parsed.parse_failed and "Content-Type" not in parsed.text
    assert [a.role for a in parsed.attachments] == ["message"]
    # no MIME inside at all: the text is the body, as mail clients show it
    assert parse(mail(b'multipart/mixed; boundary="nowhere"', b"just words\r\n")).text.strip() == "just words"


def test_a_named_inline_html_part_in_mixed_is_an_attachment_not_the_html_body() -> None:
    body = (
        b"--m\r\nContent-Type: text/plain\r\n\r\nSee the pull request.\r\n"
        b'--m\r\nContent-Type: text/html; name="Pull3.html"\r\nContent-Disposition: inline\r\n\r\n'
        b"<p>pull</p>\r\n--m--\r\n"
    )
    parsed = parse(mail(b'multipart/mixed; boundary="m"', body))
    assert parsed.text.strip() == "See the pull request." and parsed.html == ""
    [att] = parsed.attachments
    assert att.filename == "Pull3.html" and att.data.strip() == b"<p>pull</p>"


def test_unnamed_alternatives_are_the_body_and_named_ones_stay_attachments() -> None:
    body = (
        b"--a\r\nContent-Type: text/plain\r\n\r\nplain\r\n"
        b"--a\r\nContent-Type: text/html\r\n\r\n<b>html</b>\r\n"
        b'--a\r\nContent-Type: text/html; name="extra.html"\r\n\r\n<i>file</i>\r\n--a--\r\n'
    )
    parsed = parse(mail(b'multipart/alternative; boundary="a"', body))
    assert (
        parsed.text.strip() == "plain"
        and "html" in parsed.html
        and [a.filename for a in parsed.attachments] == ["extra.html"]
    )


def test_a_mail_that_is_only_a_named_text_part_shows_it_and_keeps_its_name() -> None:
    parsed = parse(mail(b'text/plain; name="notes.txt"', b"the notes\r\n"))
    assert parsed.text.strip() == "the notes" and [a.filename for a in parsed.attachments] == ["notes.txt"]


def test_top_level_unknown_text_and_message_wrappers_are_kept() -> None:
    parsed = parse(mail(b"text/x-myown; charset=us-ascii", b"my own format\r\n"))
    assert [a.declared_type for a in parsed.attachments] == ["text/x-myown"] and parsed.text == ""
    wrapped = parse(mail(b"message/rfc822", b"From: inner@x.example\r\nSubject: Wrapped\r\n\r\ninside\r\n"))
    [att] = wrapped.attachments
    assert (
        att.role == "message"
        and email.message_from_bytes(att.data, policy=email.policy.default)["Subject"] == "Wrapped"
    )


def test_html_beside_the_text_in_mixed_is_a_part_not_the_texts_alternative() -> None:
    body = (
        b"--m\r\nContent-Type: text/html\r\n\r\n<p>first</p>\r\n"
        b"--m\r\nContent-Type: text/plain\r\n\r\nsecond\r\n--m--\r\n"
    )
    parsed = parse(mail(b'multipart/mixed; boundary="m"', body))
    assert parsed.text.strip() == "second" and parsed.html == ""
    assert [(a.declared_type, a.role) for a in parsed.attachments] == [("text/html", "text")]
    # an empty text part beside it: the HTML is the body, as the stdlib and mail clients show it
    empty = parse(mail(b'multipart/mixed; boundary="m"', body.replace(b"second", b"")))
    assert "first" in empty.html and empty.attachments == []


def test_a_folded_line_that_lost_its_indent_is_read_as_a_continuation_even_with_a_colon() -> None:
    # php-mime-mail-parser's issue84: a Received field folded without indentation; its time has colons
    raw = (
        b"Received: from unknown (HELO lists.php.net) (127.0.0.1)\r\nby localhost with "
        b"SMTP; 19 Nov 2014 08:46:08 -0000\r\nFrom: tyra3l@gmail.com (Ferenc Kovacs)\r\n"
        b"Subject: Re: constructors\r\nContent-Type: text/plain\r\n\r\nThe reply.\r\n"
    )
    parsed = parse(raw)
    assert parsed.text.strip() == "The reply." and parsed.from_address == "tyra3l@gmail.com"
    assert parsed.subject == "Re: constructors"
