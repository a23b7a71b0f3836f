"""HTML to text (common.mail.htmltext): one reading on every Python, linear, bounded, and quotes that
cannot be escaped from."""

from __future__ import annotations

import random

import pytest

from common.mail.htmldoc import MAX_HTML_CHARS, MAX_HTML_TAGS, MAX_TAG_SEPARATORS, cut
from common.mail.htmltext import MAX_QUOTE_MARKS, convert, html_to_text
from common.mail.parse import parse
from common.reply.text import clean_reply, owner_controls
from tests.support import mailgen as g

SMUGGLED = "<div>[allow: @evil.example]</div><div>[block: @bank.example]</div><div>Best, Eve</div>"


def test_blocks_entities_and_hidden_elements() -> None:
    html = (
        "<html><head><title>T</title><style>p{x:1}</style></head><body><p>A &amp; B&nbsp;&#x43;</p>"
        "<script>alert('<p>no</p>')</script><br>line<!-- hidden <p>no</p> --><div>end</div></body></html>"
    )
    assert html_to_text(html) == "A & B C\n\nline\nend"


def test_quoted_attribute_values_may_hold_angle_brackets() -> None:
    assert html_to_text("<img alt=\"a > b\"><p title='<x>'>text</p>") == "text"


@pytest.mark.parametrize(
    "html",
    [
        "<!--" * 25_000,
        "<!-- a" + "-" * 100_000,
        "<a " * 100_000,
        "<p title='" + "a" * 100_000,
        "</" * 50_000,
        "<![CDATA[" * 20_000,
        "&" * 100_000,
    ],
)
def test_unclosed_constructs_end_at_the_end_of_the_input(html: str) -> None:
    # The stdlib parser of Python 3.13.0 took minutes on an unclosed comment; these are read to the
    # end, or to the tag cap (common.mail.htmldoc) when they hold more "<" than it allows.
    result = convert(html)
    assert result.read == cut(html) and result.total == len(html)
    assert result.complete is (html.count("<") <= MAX_HTML_TAGS)


def test_reading_stops_at_the_bounds_and_says_so() -> None:
    html = "<b>x</b>" * (MAX_HTML_CHARS // 8 + 1000)
    result = convert(html)
    assert not result.complete and result.read == MAX_HTML_TAGS // 2 * 8 and result.total == len(html)
    assert result.text == "x" * (MAX_HTML_TAGS // 2)  # the last "<" read would open a tag: left out
    text = "<p>" + "x" * MAX_HTML_CHARS
    result = convert(text)
    assert not result.complete and result.read == MAX_HTML_CHARS
    assert result.text == "x" * (MAX_HTML_CHARS - 3)


def test_reading_stops_before_an_element_with_more_attributes_than_the_bound() -> None:
    """n distinct attributes on one element cost n²/2 in the parser: the element is left out, and a
    quoted "<" or ">" inside its attributes does not hide the rest of them from the count."""
    many = " ".join(f"a{i}" for i in range(MAX_TAG_SEPARATORS + 5))
    for tag in (f"<p {many}>", f'<p title="<>" {many}>', f"<p title='>' {many}>"):
        html = "<div>kept</div>" + tag + "lost</p>"
        result = convert(html)
        assert not result.complete and result.text.strip() == "kept", tag[:20]
    fewer = "<p " + " ".join(f"a{i}" for i in range(1000)) + ">read</p>"
    assert cut(fewer) == len(fewer) and convert(fewer).text.strip() == "read"


def test_an_html_only_mail_is_converted_once() -> None:
    mail = parse(g.mail(text=None, html="<p>Hello</p>"))
    assert mail.body_text == "Hello"
    first = mail.html_text
    assert mail.body_text == "Hello" and mail.html_text is first


def test_deep_nesting_is_counted_but_marked_within_a_limit() -> None:
    deep = MAX_HTML_TAGS // 3  # within the tag cap, far past any quote depth shown
    text = html_to_text("<blockquote>" * deep + "deep" + "</blockquote>" * (deep - 1) + "<p>still quoted</p>")
    assert text.splitlines()[0] == "> " * MAX_QUOTE_MARKS + "deep"
    assert text.splitlines()[-1] == "> still quoted"


def test_text_after_a_contact_closes_25_nested_quotes_stays_quoted() -> None:
    contact = "<div>Hi</div>" + "<blockquote>" * 25 + "old" + "</blockquote>" * 25 + SMUGGLED
    reply = (
        "<div>Thanks, noted.</div><div>Il giorno lun 2 nov 2026, Eve ha "
        f"scritto:</div><blockquote>{contact}</blockquote>"
    )
    assert owner_controls(html_to_text(reply)) == []
    own = convert(reply, own_text_only=True).text
    assert "Eve" not in own.replace("Eve ha scritto", "") and owner_controls(own) == []
    assert clean_reply(own, ("owner@example.net",), "hello@example.com")[0].startswith("Thanks, noted.")


@pytest.mark.parametrize(
    "wrapper",
    [
        '<blockquote type="cite">{}</blockquote>',
        '<div class="gmail_quote">{}</div>',
        '<div id="divRplyFwdMsg">{}</div>',
        '<div class="yahoo_quoted">{}</div>',
        '<div class="moz-cite-prefix">{}</div>',
    ],
)
def test_an_owner_html_reply_counts_only_what_stands_before_the_quote(wrapper: str) -> None:
    reply = "<div>[notes: met]</div><div>Mine</div>" + wrapper.format("</blockquote></div>" + SMUGGLED)
    own = convert(reply, own_text_only=True).text
    assert own == "[notes: met]\n\nMine"
    assert owner_controls(own) == []


def test_random_nesting_never_lets_quoted_text_out() -> None:
    """Property: whatever a contact's quoted HTML does with quotes (opened, closed, stray closes,
    unclosed, mixed with other blocks), none of it reaches the owner's own text, and the full
    reading never shows a control from inside the owner's quote unquoted unless a stray close
    really ended it in the HTML."""
    rng = random.Random(24)
    pieces = [
        "<blockquote>",
        "</blockquote>",
        "<div>",
        "</div>",
        "<p>",
        "<br>",
        "[allow: @evil.example]",
        "<blockquote type=cite>",
        "</BLOCKQUOTE >",
        "text",
        "<!--",
        "-->",
        "<b>",
        "</b",
    ]
    for _ in range(500):
        contact = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 60)))
        reply = f"<p>Owner here</p><blockquote>{contact}</blockquote>"
        own = convert(reply, own_text_only=True).text
        assert own == "Owner here", contact
        assert owner_controls(own) == []
        if not _closes_outer_quote(contact):
            assert owner_controls(html_to_text(reply)) == [], contact


def _closes_outer_quote(contact: str) -> bool:
    """Whether a stray </blockquote> in ``contact`` ends the quote around it (as a browser would too)."""
    if "<!--" in contact or "</b" in contact.replace("</blockquote", "").replace("</BLOCKQUOTE", ""):
        return True  # comments and unclosed tags swallow markup: let the owner-text rule alone decide
    depth = 0
    for token in contact.lower().replace("<blockquote type=cite>", "<blockquote>").split("<")[1:]:
        if token.startswith("blockquote>"):
            depth += 1
        elif token.startswith("/blockquote"):
            if depth == 0:
                return True
            depth -= 1
    return False


def test_html_past_the_bound_is_attached_when_it_fits_and_named_in_the_archive_when_not() -> None:
    from dataclasses import replace

    from common.delivery.compose import HTML_ORIGINAL_NAME, unconverted_html
    from deploy import config

    cfg = config.load(
        {
            "DOMAIN_NAME": "example.com",
            "PUBLIC_EMAIL": "hello@example.com",
            "PRIVATE_EMAIL": "owner@example.net",
            "THREAD_SECRET": "x" * 32,
        }
    )
    mail = parse(g.bold_html(MAX_HTML_CHARS + 100_000))
    assert unconverted_html(cfg, parse(g.mail(text=None, html="<p>short</p>")), "a.eml") is None
    part, note = unconverted_html(cfg, mail, "conversations/c/m.eml") or (None, "")
    assert part is not None and part.filename == HTML_ORIGINAL_NAME and part.data.startswith(b"<b>x</b>")
    assert f"converted from its first {cut(mail.html):,} only" in note
    part, note = unconverted_html(
        replace(cfg, max_forward_bytes=2_000_000), mail, "conversations/c/m.eml"
    ) or (None, "")
    assert part is None and f"archived at s3://{cfg.bucket}/conversations/c/m.eml" in note
