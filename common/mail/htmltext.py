"""Plain text from HTML mail bodies: for previews, records, forwards and the owner's HTML-only replies.

Read by the one tokenizer the forward's sanitiser and tracker removal also use
(``common.mail.htmltoken``, HTML5's tokenizer states, linear on any input), not the stdlib's
``html.parser``: that parser changed between the Python versions this code runs on (CVE-2025-6069's
fix for quadratic time on unclosed comments, and HTML5 end-of-file handling, came in 3.13.5 and
3.12.11), so the host's Python and the image's read the same mail differently, and an older one took
minutes on 100 KB (``bench/html_text.py`` measures it against the stdlib).
At most ``MAX_HTML_CHARS`` are read; the caller attaches the whole HTML when that was not all of it.
"""

from __future__ import annotations

import html as htmllib
import re
from dataclasses import dataclass

from common.mail.htmltoken import RAW, START, TEXT, tokens

# HTML read for the text body: 2 M characters of the densest markup ("<b>x</b>" repeated) take
# about 1.5 s and 60 MB (bench/html_text.py); real HTML mail is far smaller. Past it, the forward
# carries the text read so far and the whole HTML attached (common.delivery.compose).
MAX_HTML_CHARS = 2_000_000

_BLOCK = frozenset(
    {
        "p",
        "div",
        "br",
        "tr",
        "li",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "pre",
        "table",
        "ul",
        "ol",
        "section",
        "article",
        "header",
        "footer",
        "hr",
    }
)
# Raw-text elements whose content is never shown (common.mail.htmltoken reads them to their end tag
# or the end of the input); and <head>, whose text is never shown either.
_HIDDEN_RAW = frozenset({"script", "style", "title", "iframe", "noembed", "noframes"})
_HEAD_CONTENT = frozenset(
    {
        "head",
        "meta",
        "link",
        "base",
        "title",
        "style",
        "script",
        "noscript",
        "template",
        "basefont",
        "bgsound",
    }
)
# Where a mail client puts the quoted or forwarded original of a reply written in HTML: any
# <blockquote>, and the wrappers Gmail (gmail_quote), Yahoo (yahoo_quoted), Thunderbird
# (moz-cite-prefix, moz-forward-container), Outlook (divRplyFwdMsg, appendonsend, OutlookMessageHeader)
# and Proton Mail (protonmail_quote) write around it.
_QUOTE_MARK = re.compile(
    r"gmail_quote|gmail_attr|yahoo_quoted|moz-cite-prefix|moz-forward-container|divrplyfwdmsg|"
    r"appendonsend|outlookmessageheader|protonmail_quote|zmail_extra",
    re.I,
)
MAX_QUOTE_MARKS = 20
_SPACE = re.compile(r"[ \t\r\f\v\u00a0]+")


@dataclass(frozen=True, slots=True)
class HtmlText:
    text: str
    complete: bool  # False: only the first ``read`` characters of the HTML were converted
    read: int
    total: int


def convert(html: str, limit: int = MAX_HTML_CHARS, *, own_text_only: bool = False) -> HtmlText:
    """``html`` as text, a line written inside a <blockquote> starting with "> " per level (as mail
    clients quote plain text). ``own_text_only``: only what stands before the first quote or
    forward wrapper (an owner's HTML-only reply: nothing below it is the owner's own text, however
    the quotes inside are nested or closed)."""
    source = html[:limit] if len(html) > limit else html
    parts: list[tuple[str, int]] = []
    quoted = 0
    in_head = False
    shown_raw = True  # whether the next RAW token is shown (xmp, plaintext, textarea) or not
    for kind, data, attrs in tokens(source):
        if kind == TEXT:
            if in_head and data.strip(" \t\n\f\r"):
                in_head = False  # text a browser shows ends the head, as an unclosed <head> would
            if not in_head:
                parts.append((htmllib.unescape(data) if "&" in data else data, quoted))
        elif kind == RAW:
            if shown_raw and not in_head:
                parts.append((data if data.isascii() and "&" not in data else htmllib.unescape(data), quoted))
        elif kind == START:
            assert attrs is not None
            shown_raw = data not in _HIDDEN_RAW
            in_head = _in_head_after(data, in_head)
            if own_text_only and (
                data == "blockquote" or (attrs and _QUOTE_MARK.search(" ".join(attrs.values())))
            ):
                break
            if data in _BLOCK:
                parts.append(("\n", quoted))
                if data == "blockquote":
                    # Real depth, never capped: a capped count that still falls by one per
                    # </blockquote> let text after 25 nested quotes come out unquoted.
                    quoted += 1
        else:  # END
            if data == "head":
                in_head = False
            elif data in _BLOCK:
                parts.append(("\n", quoted))
                if data == "blockquote":
                    quoted = max(0, quoted - 1)
    return HtmlText(_text(parts), complete=len(source) == len(html), read=len(source), total=len(html))


def _in_head_after(start_tag: str, in_head: bool) -> bool:
    """Whether the document is in its head after ``start_tag``: <body>, or any element of the body,
    ends the head (HTML5 "in head")."""
    if start_tag == "head":
        return True
    return in_head and start_tag in _HEAD_CONTENT


def _text(parts: list[tuple[str, int]]) -> str:
    out: list[str] = []
    line: list[str] = []
    depth = -1  # the quote depth of the current line: where its first visible text was written
    for text, quoted in parts:
        pieces = text.split("\n")
        for n, piece in enumerate(pieces):
            if n:
                out.append(_prefix(depth) + "".join(line))
                line, depth = [], -1
            if piece:
                line.append(piece)
                if depth < 0 and piece.strip(" \t\r\f\v\u00a0"):
                    depth = quoted
    out.append(_prefix(depth) + "".join(line))
    lines = [_SPACE.sub(" ", line).strip() for line in out]
    lines = [line for line in lines if line.strip("> ") or not line.startswith(">")]  # empty quoted lines
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _prefix(depth: int) -> str:
    """The quote marks of a line; deeper levels show as MAX_QUOTE_MARKS (a million nested quotes in
    4 MB must not write a million marks per line)."""
    return "> " * min(max(depth, 0), MAX_QUOTE_MARKS)


def html_to_text(html: str) -> str:
    return convert(html).text
