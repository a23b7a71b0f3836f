"""Plain text from HTML mail bodies (stdlib only; good enough for previews, records and replies)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCK = frozenset({"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre",
                    "table", "ul", "ol", "section", "article", "header", "footer", "hr"})
_SKIP = frozenset({"script", "style", "head", "title"})


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _Text()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # HTMLParser is lenient; anything it still rejects becomes tag-stripped text
        return re.sub(r"<[^>]*>", " ", html).strip()
    lines = [re.sub(r"[ \t\r\f\v\u00a0]+", " ", line).strip() for line in "".join(parser.parts).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
