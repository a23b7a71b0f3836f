"""Plain text from HTML mail bodies: for previews, records, forwards and the owner's HTML-only replies.

Read from the tree the HTML5 parser builds (``common.mail.htmldoc``: lexbor, as a browser builds its
DOM, the same tree the forward's sanitiser then rewrites), not by the stdlib's ``html.parser``: that
parser changed between the Python versions this code runs on (CVE-2025-6069's fix for quadratic time
on unclosed comments, and HTML5 end-of-file handling, came in 3.13.5 and 3.12.11), so the host's
Python and the image's read the same mail differently. At most what ``common.mail.htmldoc`` reads is
converted; the caller attaches the whole HTML when that was not all of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborNode

from common.mail import htmldoc
from common.mail.htmldoc import MAX_HTML_CHARS, HtmlDoc

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
# Elements whose content a mail client never shows (and the head, where the parser keeps only what
# is not shown); void elements, which have no end to write a line break for.
_HIDDEN = frozenset({"head", "script", "style", "title", "iframe", "noembed", "noframes", "template"})
_VOID = frozenset({"br", "hr", "img", "input", "wbr", "area", "col", "embed", "source", "track", "param"})
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


MAX_RULES = 1000  # horizontal rules shown in one conversion
RULE = "_" * 32  # a horizontal rule as text: common.reply.text reads it as a separator


@dataclass(frozen=True, slots=True)
class HtmlText:
    text: str
    complete: bool  # False: only the first ``read`` characters of the HTML were converted
    read: int
    total: int


def convert(
    html: str | HtmlDoc, limit: int = MAX_HTML_CHARS, *, own_text_only: bool = False, rules: bool = False
) -> HtmlText:
    """``html`` (or its parsed tree) as text, a line written inside a <blockquote> starting with
    "> " per level (as mail clients quote plain text). ``own_text_only``: only what stands before
    the first quote or forward wrapper (an owner's HTML-only reply: nothing below it is the owner's
    own text). ``rules``: a line of underscores (RULE) before every ``<hr>`` and every element drawn
    with a top border, how HTML clients separate a quoted original from the reply."""
    doc = html if isinstance(html, HtmlDoc) else htmldoc.read(html, limit)
    reader = _Reader(own_text_only, rules)
    root = doc.tree.root
    if root is not None:
        htmldoc.walk([root], reader.enter, reader.leave)
    return HtmlText(_text(reader.parts), complete=doc.complete, read=doc.read, total=doc.total)


class _Reader:
    def __init__(self, own_text_only: bool, rules: bool) -> None:
        self.parts: list[tuple[str, int]] = []
        self.quoted = 0
        self.stopped = False
        self.own_text_only = own_text_only
        self.rules = MAX_RULES if rules else 0

    def enter(self, node: LexborNode) -> bool:
        if self.stopped:
            return False
        if node.is_text_node:
            self.parts.append((node.text_content or "", self.quoted))
            return False
        if not node.is_element_node:
            return False  # a comment
        tag = node.tag or ""
        if tag in _HIDDEN:
            return False
        attrs = node.attributes
        if self.own_text_only and (
            tag == "blockquote" or (attrs and _QUOTE_MARK.search(" ".join(v for v in attrs.values() if v)))
        ):
            self.stopped = True
            return False
        if self.rules and (tag == "hr" or "border-top" in (attrs.get("style") or "").lower()):
            self.rules -= 1
            self.parts += [("\n", self.quoted), (RULE, self.quoted), ("\n", self.quoted)]
        if tag in _BLOCK:
            self.parts.append(("\n", self.quoted))
            if tag == "blockquote":
                # Real depth, never capped: a capped count that still falls by one per
                # </blockquote> let text after 25 nested quotes come out unquoted.
                self.quoted += 1
        return True

    def leave(self, node: LexborNode) -> None:
        if self.stopped:
            return
        tag = node.tag or ""
        if tag in _BLOCK and tag not in _VOID:
            self.parts.append(("\n", self.quoted))
            if tag == "blockquote":
                self.quoted = max(0, self.quoted - 1)


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


def html_to_text(html: str | HtmlDoc) -> str:
    return convert(html).text
