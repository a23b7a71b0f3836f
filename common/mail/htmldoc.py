"""A contact's HTML parsed once, as a browser parses it, for every step that reads it.

The parser is lexbor (through selectolax's ``LexborHTMLParser``), a C implementation of the WHATWG
HTML parsing algorithm: tokenizer, tree construction, error recovery, entities and foreign content
exactly as a browser builds its DOM (docs/decisions.md, "Reading HTML mail"). One :class:`HtmlDoc`
per mail body is read by the text conversion (``common.mail.htmltext``) and then by the forward's
sanitiser (``common.mail.htmlsafe``), which removes trackers, scopes the contact's CSS and writes the
tree out again with the library's serialiser.

What is read is capped twice, and past either cap the rest is left out as before
(``HtmlDoc.read`` says how much was read; the forward's banner names the rest):
- ``MAX_HTML_CHARS`` characters;
- ``MAX_HTML_TAGS`` "<" characters. HTML5's tree construction checks, for most start tags, whether
  a ``<p>`` is open "in button scope", walking the stack of open elements: n nested ``<div>`` cost
  n²/2 steps in every spec-compliant parser (lexbor, html5lib, html5ever; browsers cap DOM depth
  but walk the stack too). The number of open elements can never exceed the number of "<" read, so
  this bounds the worst case (about 1 s of CPU on the benchmark host at 25,000 nested elements)
  while a real mail of that many tags is about 1 MB of markup;
- ``MAX_TAG_SEPARATORS`` characters that can separate one attribute from the next (white space, "/",
  quotes) between a "<" and the next "<". Every HTML5 parser checks each new attribute's name against
  the element's others: n distinct attributes on one element cost n²/2 comparisons (lexbor: 2.4 s of
  CPU at 40,000, about 130 s at the 2 M-character cap). An element's attributes all lie between its
  "<" and the next "<" (one inside a quoted value only starts a new stretch, which is counted too), and
  each attribute after the first needs one of these characters before it, so this bounds every
  element's attributes. A stretch of text or CSS with more than 20,000 white-space characters and no
  tag in it is cut there as well (the test corpora's largest: 1,775): the rest is attached, as past
  the other caps.
Counting characters is not reading HTML: the parser alone decides what is markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

# HTML read for the text body and the forward: 2 M characters of the densest markup
# ("<b>x</b>" repeated, cut at MAX_HTML_TAGS first) are parsed in well under a second
# (bench/html_text.py); real HTML mail is far smaller. Past it, the forward carries the text read so
# far and the whole HTML attached (common.delivery.compose).
MAX_HTML_CHARS = 2_000_000
MAX_HTML_TAGS = 25_000
MAX_TAG_SEPARATORS = 20_000
SEPARATORS = " \t\n\f\r/\"'"


@dataclass(slots=True)
class HtmlDoc:
    """A parsed body: the tree, and how much of the source it holds."""

    tree: LexborHTMLParser
    read: int  # characters of the source parsed
    total: int  # characters of the source
    sanitized: bool = False  # the sanitiser has rewritten the tree (common.mail.htmlsafe)

    @property
    def complete(self) -> bool:
        return self.read == self.total

    @property
    def left_unread(self) -> int:
        return self.total - self.read


def cut(html: str, limit: int = MAX_HTML_CHARS, tags: int = MAX_HTML_TAGS) -> int:
    """How many characters of ``html`` are read: at most ``limit``, no further than just before the
    (``tags`` + 1)-th "<", and no further than just before a "<" whose stretch to the next "<" holds
    more than ``MAX_TAG_SEPARATORS`` attribute separators. Linear: each character is counted once per
    separator kind."""
    end = min(len(html), limit)
    pos = html.find("<", 0, end)
    seen = 0
    while pos != -1:
        seen += 1
        if seen > tags:
            return pos
        after = html.find("<", pos + 1, end)
        stop = end if after == -1 else after
        if sum(html.count(c, pos, stop) for c in SEPARATORS) > MAX_TAG_SEPARATORS:
            return pos
        pos = after
    return end


def read(html: str, limit: int = MAX_HTML_CHARS, tags: int = MAX_HTML_TAGS) -> HtmlDoc:
    """``html`` parsed as a document, as a mail client with scripting off builds it, within the caps."""
    end = cut(html, limit, tags)
    return HtmlDoc(LexborHTMLParser(html[:end] if end < len(html) else html), end, len(html))


def top(doc: HtmlDoc) -> list[LexborNode]:
    """The nodes whose content is the mail: the children of ``head`` and then of ``body`` (or of a
    ``frameset``): what stands in place of the document's own ``html``, ``head`` and ``body``."""
    root = doc.tree.root
    out: list[LexborNode] = []
    if root is None:
        return out
    for section in children(root):
        if section.is_element_node and section.tag in ("head", "body", "frameset"):
            out += children(section)
        else:
            out.append(section)
    return out


def sections(doc: HtmlDoc) -> list[LexborNode]:
    """The document's own ``html``, ``head`` and ``body`` (or ``frameset``) elements."""
    root = doc.tree.root
    if root is None:
        return []
    return [root] + [n for n in children(root) if n.is_element_node and n.tag in ("head", "body", "frameset")]


def children(node: LexborNode) -> list[LexborNode]:
    out = []
    child = node.child
    while child is not None:
        out.append(child)
        child = child.next
    return out


def walk(
    nodes: list[LexborNode], enter: Callable[[LexborNode], bool], leave: Callable[[LexborNode], None]
) -> None:
    """Every node of ``nodes`` and of their subtrees in document order: ``enter(node)`` says whether
    to read the node's children, ``leave(element)`` follows an element's subtree (or the element, when
    its children were skipped). Iterative, by the tree's own links: the sender chooses the depth.
    The tree must not change during the walk."""
    for start in nodes:
        stop = start.mem_id
        node: LexborNode | None = start
        while node is not None:
            child = node.child if enter(node) and node.is_element_node else None
            if child is not None:
                node = child
                continue
            while node is not None:
                if node.is_element_node:
                    leave(node)
                if node.mem_id == stop:
                    node = None
                    break
                if (after := node.next) is not None:
                    node = after
                    break
                node = node.parent
