"""A contact's HTML made into a closed fragment for the forward, trackers removed on the way.

The HTML is parsed once by the HTML5 parser (``common.mail.htmldoc``: lexbor, the tree a browser
builds), the tree is rewritten in place and written out by the library's serialiser, so every element
is closed, every attribute quoted and escaped, and nothing the contact wrote can reach outside the
fragment: the system's banner and footer around it cannot be put in a comment, a raw-text element,
an attribute or an unclosed element. What the rewrite leaves out:
- comments (conditional ones included), doctypes, CDATA and processing instructions (the parser
  makes the last two comments);
- ``script``, ``iframe``, ``noembed``, ``noframes``, ``title`` and the whole ``svg``, ``math`` and
  ``template`` subtrees (foreign content and template contents serialise in ways another parser
  reads differently: the mutation-XSS shapes); ``base``, ``meta``, ``link``, ``embed``, ``frame``;
- the tags of ``html``, ``head``, ``body``, ``noscript``, ``object``, ``applet``, ``frameset``,
  ``form`` and of elements with a name outside ``[a-z][a-z0-9-]*`` (their content stays);
- ``xmp`` and ``plaintext`` become ``pre`` text; ``style`` text is the contact's CSS rewritten by
  ``common.mail.cssscope`` with no ``<`` (written as the CSS escape ``\\3c``), so it cannot end early;
- elements deeper than MAX_DEPTH (their content stays);
- event-handler attributes, ``action``/``formaction``, attribute names outside
  ``[a-z_:][a-z0-9_:.-]*``, ``javascript:``/``vbscript:`` URLs, and CSS declarations calling
  ``expression()`` or loading such a URL.
Trackers (``common.mail.trackers``): an image or ``<input type=image>`` that is a known tracker, a
pixel, hidden, or inside a hidden element is removed; every other URL a mail client loads by itself
(``src``, ``srcset``, ``background``, ``poster``, ``lowsrc``, CSS ``url()`` and ``@import`` in
``style`` attributes and elements) is dropped when it is a known tracker or its element is hidden;
known click redirects are unwrapped. What a dropped element would have loaded is counted too.

At most what ``common.mail.htmldoc`` reads is sanitised; past it the rest is left out and
``Sanitized.left_unread`` says how much, for the banner.
"""

from __future__ import annotations

import email
import email.encoders
import email.policy
import re
from dataclasses import dataclass

from selectolax.lexbor import LexborNode

from common.errors import EmailHandlerError
from common.mail import htmldoc, trackers
from common.mail.cssscope import declarations, rewrite
from common.mail.htmldoc import MAX_HTML_CHARS, MAX_HTML_TAGS, HtmlDoc

MAX_DEPTH = 256  # open elements; browsers stop nesting at about 512 (Blink), mail needs a few dozen

VOID = frozenset(
    {
        "area",
        "br",
        "col",
        "hr",
        "img",
        "input",
        "source",
        "track",
        "wbr",
        "param",
        "keygen",
        "basefont",
        "bgsound",
    }
)
# Dropped with their content (raw text, or a subtree another parser would read differently).
_DROP = frozenset({"script", "iframe", "noembed", "noframes", "title", "svg", "math", "template"})
_DROP |= {"base", "meta", "link", "embed", "frame"}
# Dropped, their content kept.
_UNWRAP = frozenset({"html", "head", "body", "noscript", "object", "applet", "frameset", "form"})
_AS_PRE = frozenset({"xmp", "plaintext"})
_TAG_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")
_ATTR_NAME = re.compile(r"[a-z_:][a-z0-9_:.-]{0,63}")
_URL_ATTRS = (
    "src",
    "background",
    "poster",
    "lowsrc",
    "dynsrc",
    "href",
    "cite",
    "longdesc",
    "xlink:href",
)
_DROP_ATTRS = frozenset({"action", "formaction"})  # where a form would post the owner's input
_LOADS = ("src", "background", "poster", "lowsrc", "dynsrc")  # fetched by the client without a click


@dataclass(frozen=True, slots=True)
class Sanitized:
    html: str
    removed: int  # trackers removed or unwrapped
    read: int  # characters of the input read
    total: int

    @property
    def left_unread(self) -> int:
        return self.total - self.read


def _url_scheme_unsafe(value: str) -> bool:
    head = value.strip(trackers._CONTROLS).translate(trackers._TAB_NEWLINE)[:16].lower()
    return head.startswith(("javascript:", "vbscript:"))


class _Rewrite:
    """One walk over the tree deciding each node's fate; the changes are made after it (the walk
    follows the tree's links, which must not change under it)."""

    def __init__(self, remove_trackers: bool, scope: str) -> None:
        self.scope = scope
        self.remove_trackers = remove_trackers
        self.removed = 0
        self.depth = 0
        self.hidden = 0  # open kept elements that hide their content
        self.open: list[tuple[bool, bool]] = []  # per element being read: (counts in depth, hides)
        self.drop: list[LexborNode] = []
        self.unwrap: list[LexborNode] = []
        self.attrs: list[tuple[LexborNode, dict[str, str]]] = []
        self.style: list[tuple[LexborNode, str]] = []
        self.pre: list[LexborNode] = []

    def enter(self, node: LexborNode) -> bool:
        if node.is_text_node:
            return False
        if not node.is_element_node:
            self.drop.append(node)  # a comment, a doctype, a processing instruction
            return False
        counted, hides, descend = self._decide(node)
        self.depth += counted
        self.hidden += hides
        self.open.append((counted, hides))
        return descend

    def leave(self, node: LexborNode) -> None:
        counted, hides = self.open.pop()
        self.depth -= counted
        self.hidden -= hides

    def _decide(self, node: LexborNode) -> tuple[bool, bool, bool]:
        """What becomes of an element: (counts in the depth, hides its content, read its children)."""
        name = node.tag or ""
        attrs = {k: v or "" for k, v in node.attributes.items()}
        if name in _DROP:
            self._count_dropped(node, attrs)
            self.drop.append(node)
            return False, False, False
        if name in _UNWRAP or not _TAG_NAME.fullmatch(name) or (self.depth >= MAX_DEPTH and name not in VOID):
            if self.remove_trackers and attrs and trackers.loads_tracker(attrs):
                self.removed += 1  # a browser would have loaded it: counted as removed
            self.unwrap.append(node)
            return False, False, True
        hidden_here = trackers.hides(attrs)
        kept = self._attributes(name, attrs, self.hidden > 0 or hidden_here)
        if kept is None:  # the element was a tracker
            self.removed += 1
            self.drop.append(node)
            return False, False, False
        if kept != attrs:
            self.attrs.append((node, kept))
        if name == "style":
            self.style.append((node, self._css(node.text(deep=True))))
            return False, False, False
        if name in _AS_PRE:
            self.pre.append(node)
            return False, False, False
        return True, hidden_here, True

    def _count_dropped(self, node: LexborNode, attrs: dict[str, str]) -> None:
        """What a dropped element and its subtree would have loaded, counted as removed."""
        if not self.remove_trackers:
            return
        self.removed += bool(attrs) and trackers.loads_tracker(attrs)
        for el in node.traverse(include_text=False):
            if el.mem_id != node.mem_id and el.is_element_node:
                found = {k: v or "" for k, v in el.attributes.items()}
                self.removed += bool(found) and trackers.loads_tracker(found)

    def _attributes(self, name: str, attrs: dict[str, str], hidden: bool) -> dict[str, str] | None:
        """The attributes to keep; None when the element itself is a tracker to remove."""
        image = name == "img" or (name == "input" and attrs.get("type", "").strip().lower() == "image")
        if self.remove_trackers and image:
            # Removed whole when no one is meant to see it (a pixel, hidden) or what it shows is a
            # tracker; a tracker among its other candidates (srcset, lowsrc) goes alone, below.
            loads = [attrs.get(a, "") for a in ("src", "lowsrc", "dynsrc")]
            loads += [u for u, _ in trackers.srcset_urls(attrs.get("srcset", ""))]
            urls = [u for u in map(trackers.remote, loads) if u is not None]
            src = trackers.remote(attrs.get("src", ""))
            if urls and (hidden or trackers.is_pixel(attrs) or (src is not None and trackers.open_rule(src))):
                return None
        out: dict[str, str] = {}
        for key, value in attrs.items():
            if not _ATTR_NAME.fullmatch(key) or key.startswith("on") or key in _DROP_ATTRS:
                continue
            if key in _URL_ATTRS and _url_scheme_unsafe(value):
                continue
            if key == "style":
                value = self._inline_css(value, hidden)
                if not value:
                    continue
            elif key in ("srcset", "imagesrcset"):
                value = self._srcset(value, hidden)
                if not value:
                    continue
            elif self.remove_trackers:
                if key in _LOADS and (url := trackers.remote(value)) is not None:
                    if hidden or trackers.open_rule(url):
                        self.removed += 1
                        continue
                elif key == "href" and name == "a" and (target := trackers.unwrap(value)):
                    value = target
                    self.removed += 1
            out[key] = value
        return out

    def _inline_css(self, value: str, hidden: bool) -> str:
        """A style attribute's declarations as the scoper writes them (common.mail.cssscope: no
        ``expression()``, no script URL), without trackers when they are removed."""
        if self.remove_trackers:
            value, gone = trackers.clean_css(value, remove_all_remote=hidden)
            self.removed += gone
            return value
        return declarations(value)[0] if trackers.may_load(value) else value

    def _srcset(self, value: str, hidden: bool) -> str:
        """The candidates kept: no script URL, and no tracker when they are removed."""
        kept = []
        for url, descriptor in trackers.srcset_urls(value):
            if _url_scheme_unsafe(url):
                continue
            found = trackers.remote(url) if self.remove_trackers else None
            if found is not None and (hidden or trackers.open_rule(found)):
                self.removed += 1
                continue
            kept.append(f"{url} {descriptor}".strip())
        return ", ".join(kept)

    def _css(self, css: str) -> str:
        if self.remove_trackers:
            css, gone = trackers.clean_stylesheet(css, self.scope)
            self.removed += gone
        else:
            css = rewrite(css, self.scope)[0]
        return css.replace("<", "\\3c ")

    def apply(self, doc: HtmlDoc) -> None:
        """The decisions made on the tree: children before their parents."""
        tree = doc.tree
        for node, attrs in self.attrs:
            for key in list(node.attributes):
                if key not in attrs:
                    del node.attrs[key]
            for key, value in attrs.items():
                node.attrs[key] = value
        for node, css in self.style:
            for child in htmldoc.children(node):
                child.decompose()
            if css:
                node.insert_child(css)
        for node in self.pre:
            pre = tree.create_node("pre")
            text = node.text(deep=True)
            if text:
                pre.insert_child(text)
            node.replace_with(pre)
        for node in reversed(self.drop):
            node.decompose()
        for node in reversed(self.unwrap):
            node.unwrap(delete_empty=True)


# The box the contact's part of a forward is drawn in: what is inside cannot be painted outside it
# (negative margins, position: fixed or absolute are clipped to it), so it cannot cover the banner.
SCOPE_STYLE = "overflow:auto;contain:paint;position:relative"


def sanitize(
    html: str | HtmlDoc, *, remove_trackers: bool = True, limit: int = MAX_HTML_CHARS, scope: str = ""
) -> Sanitized:
    """``html`` (or its parsed tree, which this rewrites) as a closed, canonical fragment (see the
    module's docstring), trackers removed unless ``remove_trackers`` is False. At most ``limit``
    characters are read. With ``scope`` (a class name), the fragment is wrapped in a ``div`` of that
    class and SCOPE_STYLE, and its ``<style>`` rules apply only inside it (``common.mail.cssscope``):
    the contact's CSS cannot hide, move or cover what the forward puts around it."""
    doc = html if isinstance(html, HtmlDoc) else htmldoc.read(html, limit, MAX_HTML_TAGS)
    if doc.sanitized:
        raise EmailHandlerError("this tree was sanitised already: parse the body again for a second forward")
    rewrite = _Rewrite(remove_trackers, scope)
    for section in htmldoc.sections(doc):  # html, head, body: their tags go, what they load is counted
        attrs = {k: v or "" for k, v in section.attributes.items()}
        rewrite.removed += remove_trackers and bool(attrs) and trackers.loads_tracker(attrs)
    nodes = htmldoc.top(doc)
    htmldoc.walk(nodes, rewrite.enter, rewrite.leave)
    rewrite.apply(doc)
    doc.sanitized = True
    body = "".join(node.html or "" for node in htmldoc.top(doc))
    if scope:
        body = f'<div class="{_attr(scope)}" style="{SCOPE_STYLE}">{body}</div>'
    return Sanitized(body, rewrite.removed, doc.read, doc.total)


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def clean(body: str) -> tuple[str, int]:
    """``body`` sanitised with its trackers removed; how many went."""
    result = sanitize(body)
    return result.html, result.removed


def cut_note(result: Sanitized) -> str:
    """The banner line of HTML read only in part: what the owner sees and where the rest is."""
    return (
        f"This mail's HTML is {result.total:,} characters; only its first {result.read:,} were read for "
        "trackers and made safe to show, so the rest is left out of this forward (the archived "
        "original has it)."
    )


def clean_part(
    data: bytes, charset: str = "utf-8", *, remove_trackers: bool = True
) -> tuple[bytes, int, int]:
    """An attached HTML file as the forward carries it: sanitised like the body, UTF-8; with how many
    trackers went and how many characters were left out past the cap."""
    text = data.decode(charset or "utf-8", "replace")
    result = sanitize(text, remove_trackers=remove_trackers)
    return result.html.encode("utf-8"), result.removed, result.left_unread


def clean_message(data: bytes, *, remove_trackers: bool = True) -> tuple[bytes, int, int]:
    """An attached message (message/rfc822) with each HTML part in it sanitised (``clean_part``), at
    any depth; unchanged when it has none. The same counts as ``clean_part``."""

    msg = email.message_from_bytes(data, policy=email.policy.compat32)
    removed = unread = changed = 0
    for part in msg.walk():
        if part.is_multipart() or part.get_content_type() != "text/html":
            continue
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        cleaned, gone, left = clean_part(
            payload, part.get_content_charset() or "utf-8", remove_trackers=remove_trackers
        )
        removed, unread, changed = removed + gone, unread + left, changed + 1
        del part["Content-Transfer-Encoding"]
        part.set_payload(cleaned)
        part.set_param("charset", "utf-8")
        email.encoders.encode_base64(part)
    return (msg.as_bytes() if changed else data), removed, unread
