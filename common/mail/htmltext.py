"""Plain text from HTML mail bodies (stdlib only; good enough for previews, records and replies)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCK = frozenset({"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre",
                    "table", "ul", "ol", "section", "article", "header", "footer", "hr"})
_SKIP = frozenset({"script", "style", "head", "title"})


class _Text(HTMLParser):
    """Text runs with the <blockquote> depth they were written at."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[tuple[str, int]] = []
        self.skipping = 0
        self.quoted = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCK:
            self.parts.append(("\n", self.quoted))
            if tag == "blockquote":
                self.quoted = min(self.quoted + 1, MAX_QUOTE_DEPTH)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCK:
            self.parts.append(("\n", self.quoted))
            if tag == "blockquote":
                self.quoted = max(0, self.quoted - 1)

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append((data, self.quoted))

    def lines(self) -> list[str]:
        """The text as lines; a line written inside a <blockquote> starts with "> " per level, as mail
        clients quote (so reply-handler drops the quoted history of an HTML-only reply, and an owner's
        control never comes from a contact's quoted text)."""
        out: list[str] = []
        line: list[str] = []
        depth = -1  # the quote depth of the current line: where its first visible text was written
        for text, quoted in self.parts:
            pieces = text.split("\n")
            for n, piece in enumerate(pieces):
                if n:
                    out.append(("> " * max(depth, 0)) + "".join(line))
                    line, depth = [], -1
                if piece:
                    line.append(piece)
                    if depth < 0 and piece.strip(" \t\r\f\v\u00a0"):
                        depth = quoted
        out.append(("> " * max(depth, 0)) + "".join(line))
        return out


MAX_QUOTE_DEPTH = 20


def html_to_text(html: str) -> str:
    parser = _Text()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # HTMLParser is lenient; anything it still rejects becomes tag-stripped text
        return re.sub(r"<[^>]*>", " ", html).strip()
    lines = [re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip() for line in parser.lines()]
    lines = [line for line in lines if line.strip("> ") or not line.startswith(">")]  # empty quoted lines
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
