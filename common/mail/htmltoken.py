"""The one HTML tokenizer: text extraction (``htmltext``) and the forward's sanitiser and tracker
removal (``htmlsafe``) read a stranger's HTML through it, so what one sees the other sees.

It follows the HTML5 tokenizer's states where they decide what is markup and what is text: tag and
attribute names end only at white space, "/", ">" (and "=" for attributes), so ``alt=">"`` is a
value and ``<img a"b=">">`` one tag; a tag or quoted value cut off by the end of the input is
dropped as a browser drops it; comments end at "-->" or "--!>" ("<!-->" is an empty comment);
``<!...>``, ``<?...>`` and ``</ non-letter ...>`` are bogus comments to the next ">"; the contents of
script, style, xmp, iframe, noembed, noframes, title and textarea are raw text up to their end tag,
of plaintext everything to the end; ``<image>`` is ``<img>``. Character references are left in text
(``html.unescape`` reads them as a browser does) and decoded in attribute values by the attribute
rules (``&copy=1`` in a URL stays as written).

Linear: each token is one regular-expression match that only moves forward (possessive repeats,
every alternative consumes what it reads), and each attribute one more.
"""

from __future__ import annotations

import html as htmllib
import re
from collections.abc import Iterator
from html.entities import html5 as entities

TEXT, START, END, RAW = 0, 1, 2, 3

_DATA = re.compile(
    r"(?P<text>[^<]++)"
    r"|<(?P<simple>[A-Za-z][^\t\n\f\r />]*+)>"  # a start tag without attributes
    r"|</(?P<close>[A-Za-z][^\t\n\f\r />]*+)>"  # an end tag without attributes
    r"|<(?P<slash>/?)(?P<tag>[A-Za-z][^\t\n\f\r />]*+)"  # a tag with more: attributes read next
    r"|<!--(?:-?>|.*?(?:--!?>|\Z))"  # a comment ("<!-->" and "<!--->" are empty ones)
    r"|</>"  # nothing
    r"|<[!?/][^>]*+(?:>|\Z)"  # a bogus comment: <!DOCTYPE>, <![CDATA[, <?xml, </3>
    r"|(?P<lt><)",  # text
    re.S,
)
# From the "before attribute name" state: white space and stray "/" skipped, then the tag's end, the
# input's end (the tag is dropped), or one attribute: a name (its first character may be "="),
# optionally "=" and a value, double-quoted, single-quoted or unquoted.
_ATTR = re.compile(
    r"[\t\n\f\r /]*+"
    r"(?:(?P<gt>>)|(?P<eof>\Z)|"
    r"(?P<name>[^\t\n\f\r />][^\t\n\f\r />=]*+)"
    r"(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+"
    r"(?:\"(?P<dq>[^\"]*+)(?P<dqe>\"?)|'(?P<sq>[^']*+)(?P<sqe>'?)|(?P<uq>[^\t\n\f\r >]*+)))?)"
)
RAWTEXT = frozenset({"script", "style", "xmp", "iframe", "noembed", "noframes", "title", "textarea"})
_RAW_END = {tag: re.compile(rf"</{tag}(?=[\t\n\f\r />])", re.I) for tag in RAWTEXT}
# A character reference in an attribute value: named ones without ";" followed by "=" or an
# alphanumeric are not references there (HTML5 "named character reference state").
_REF = re.compile(r"&(?:#[0-9]++;?|#[xX][0-9A-Fa-f]++;?|[A-Za-z][A-Za-z0-9]*+;?)")

Attrs = dict[str, str]


def unescape_attr(value: str) -> str:
    """An attribute value's character references decoded as a browser decodes them."""
    if "&" not in value:
        return value

    def one(m: re.Match[str]) -> str:
        ref = m.group(0)
        if ref[1] == "#" or ref.endswith(";"):
            return htmllib.unescape(ref)
        # A legacy name without ";": decoded only when the whole name is one and no "=" follows.
        following = value[m.end() : m.end() + 1]
        return entities[ref[1:]] if ref[1:] in entities and following != "=" else ref

    return _REF.sub(one, value)


def _attributes(source: str, pos: int) -> tuple[Attrs, int, bool]:
    """The attributes from ``pos``, where the tag's end is, and whether it ends before the input."""
    attrs: Attrs = {}
    match = _ATTR.match
    while True:
        m = match(source, pos)
        assert m is not None  # every alternative can match here
        pos = m.end()
        if m.group("gt") is not None:
            return attrs, pos, True
        if m.group("eof") is not None:
            return attrs, pos, False
        name = m.group("name").lower()
        if (value := m.group("dq")) is not None:
            if not m.group("dqe"):
                return attrs, len(source), False
        elif (value := m.group("sq")) is not None:
            if not m.group("sqe"):
                return attrs, len(source), False
        else:
            value = m.group("uq") or ""
        if name not in attrs:  # the first of a name wins
            attrs[name] = unescape_attr(value) if "&" in value else value


Token = tuple[int, str, Attrs | None]
_NO_ATTRS: Attrs = {}


def tokens(source: str) -> Iterator[Token]:
    """(kind, data, attrs): TEXT with the text as written (references not decoded), START with the
    lowercase tag name and its attributes, END with the name, RAW with a raw-text element's content
    (right after its START). Comments, doctypes and other declarations yield nothing."""
    pos, end = 0, len(source)
    match = _DATA.match
    while pos < end:
        m = match(source, pos)
        assert m is not None  # every position starts some token (a lone "<" at worst)
        pos = m.end()
        if (text := m.group("text")) is not None:
            yield TEXT, text, None
            continue
        if m.group("lt") is not None:
            yield TEXT, "<", None
            continue
        if (name := m.group("simple")) is not None:
            attrs = _NO_ATTRS
        elif (name := m.group("close")) is not None:
            yield END, _name(name), None
            continue
        elif (name := m.group("tag")) is not None:
            attrs, pos, closed = _attributes(source, pos)
            if not closed:
                return  # a tag the input ends inside: a browser drops it
            if m.group("slash"):
                yield END, _name(name), None
                continue
        else:
            continue  # a comment or declaration
        name = _name(name)
        yield START, name, attrs
        if name == "plaintext":
            yield RAW, source[pos:], None
            return
        if name in RAWTEXT:
            after = _RAW_END[name].search(source, pos)
            stop = after.start() if after else end
            yield RAW, source[pos:stop], None
            pos = stop


def _name(name: str) -> str:
    name = name.lower()
    return "img" if name == "image" else name
