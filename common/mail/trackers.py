"""What is a tracker in a forward's HTML: the rules (``common/data/trackers.json``, host and path
together), URLs read as a browser reads them, pixels by size and visibility, CSS ``url()`` and
``@import``, ``srcset``. The HTML itself is parsed once (``common.mail.htmldoc``) and rewritten by
``common.mail.htmlsafe``, which asks these functions about each element of the tree
(``htmlsafe.clean`` removes trackers from a body).

URLs are normalised the way the WHATWG URL parser does before any rule sees them: leading and
trailing controls and spaces stripped, tabs and newlines removed anywhere, the scheme lowercased,
"\\" read as "/" and any number of slashes after ``http(s):`` (``https:host``, ``https:\\\\host``,
``//host``), user info and port dropped, the host percent-decoded, lowercased, IDNA-encoded and
without a final dot; the path percent-decoded for matching.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote

from common.mail import cssscope, csstoken

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*+):")
_CONTROLS = "".join(chr(c) for c in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    host: str  # the URL's host is it or ends with "." + it (never empty: host and path together)
    path: str  # the URL's path starts with it
    param: str = ""  # click: the query parameter holding the target ("" = the next path segment)

    def matches(self, host: str, path: str) -> bool:
        return (host == self.host or host.endswith("." + self.host)) and path.startswith(self.path.lower())


@functools.cache
def rules() -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(open-tracking rules, click-redirect rules) from common/data/trackers.json."""
    data: dict[str, Any] = json.loads(resources.files("common").joinpath("data/trackers.json").read_text())
    fields = ("id", "host", "path", "param")
    found = tuple(
        tuple(Rule(**{k: v for k, v in r.items() if k in fields}) for r in data[kind])
        for kind in ("open", "click")
    )
    assert all(r.host for kind in found for r in kind), "every tracker rule names a host"
    return found[0], found[1]


@dataclass(frozen=True, slots=True)
class Url:
    host: str
    path: str  # percent-decoded
    query: str
    text: str  # the normalised URL


def remote(url: str) -> Url | None:
    """``url`` as a browser would fetch it, if it is an http(s) URL ('' scheme with "//" included);
    None for anything else (cid:, data:, relative, javascript:)."""
    url = url.strip(_CONTROLS).translate(_TAB_NEWLINE)
    m = _SCHEME.match(url)
    if m:
        if m.group(1).lower() not in ("http", "https"):
            return None
        rest = url[m.end() :]
    elif url[:2] in ("//", "\\\\", "/\\", "\\/"):
        rest = url
    else:
        return None
    rest = rest.replace("\\", "/").lstrip("/")
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    host = authority.rpartition("@")[2]
    if not host.startswith("["):
        host = host.partition(":")[0]
    host = unquote(host).lower().rstrip(".")
    if not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            pass
    path, _, query = tail.partition("#")[0].partition("?")
    return Url(host, _path(path), query, f"https://{host}{tail}")


def _path(raw: str) -> str:
    """The path as matched: percent-decoded, "." and ".." segments resolved as the URL parser does,
    empty segments collapsed (servers read "//a" as "/a"), lowercase."""
    out: list[str] = []
    segments = unquote(raw).lower().split("/")
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment not in ("", "."):
            out.append(segment)
    trailing = "/" if segments[-1] in ("", ".", "..") and out else ""
    return "/" + "/".join(out) + trailing


def open_rule(url: Url) -> Rule | None:
    return next((r for r in rules()[0] if r.matches(url.host, url.path)), None)


def is_tracker_url(value: str) -> bool:
    """A known open-tracking URL (host and path of a rule)."""
    url = remote(value)
    return url is not None and open_rule(url) is not None


def loads_tracker(attrs: dict[str, str]) -> bool:
    """Whether any attribute of an element (a URL, a srcset, a style) names a known tracker: what a
    dropped element would have loaded, for the count."""
    for key, value in attrs.items():
        if key == "style":
            if clean_css(value)[1]:
                return True
        elif key.endswith("srcset"):
            if any(is_tracker_url(u) for u, _ in srcset_urls(value)):
                return True
        elif ("/" in value or "\\" in value) and is_tracker_url(value):
            return True
    return False


def unwrap(value: str) -> str:
    """The target of a known click-tracking redirect ('' when ``value`` is none, or its target is not
    http(s))."""
    url = remote(value)
    if url is None:
        return ""
    rule = next((r for r in rules()[1] if r.matches(url.host, url.path)), None)
    if rule is None:
        return ""
    if rule.param:
        target = (parse_qs(url.query).get(rule.param) or [""])[0]
    else:  # the target is the path segment after the rule's path, percent-encoded
        raw_path = url.text.partition(url.host)[2].partition("?")[0]
        target = unquote(raw_path[len(rule.path) :].split("/", 1)[0])
    target = target.strip()
    return target if re.match(r"https?://[^\s\"'<>]++$", target, re.I) else ""


# --- sizes and visibility --------------------------------------------------------------------------

_NUMBER = re.compile(r"[\t\n\f\r ]*+\+?([0-9]*+\.?[0-9]*+)(%?)")
# What one unit of each CSS length renders as, in CSS px (CSS Values 4, 6.1 and 6.2), for an image
# nothing else sizes: fonts at the browsers' default 16 px, a viewport (and a container) of
# VIEWPORT px, which is also what a percentage is read against. An image that renders under
# PIXEL_PX at this size is a pixel: no one is meant to see it.
VIEWPORT = (1280.0, 800.0)
PIXEL_PX = 2.0
_FONT = {"em": 16.0, "rem": 16.0, "ex": 8.0, "rex": 8.0, "ch": 8.0, "rch": 8.0, "cap": 11.2, "rcap": 11.2}
_FONT |= {"ic": 16.0, "ric": 16.0, "lh": 19.2, "rlh": 19.2}
_ABSOLUTE = {
    "px": 1.0,
    "pt": 96 / 72,
    "pc": 16.0,
    "in": 96.0,
    "cm": 96 / 2.54,
    "mm": 96 / 25.4,
    "q": 96 / 101.6,
}
_VIEWPORT_UNITS = {
    f"{prefix}{axis}": size / 100
    for prefix in ("", "s", "l", "d")
    for axis, size in (
        ("vw", VIEWPORT[0]),
        ("vi", VIEWPORT[0]),
        ("vh", VIEWPORT[1]),
        ("vb", VIEWPORT[1]),
        ("vmin", min(VIEWPORT)),
        ("vmax", max(VIEWPORT)),
    )
}
_CONTAINER = {f"cq{u}": _VIEWPORT_UNITS[f"v{u}"] for u in ("w", "h", "i", "b", "min", "max")}
UNIT_PX = {**_FONT, **_ABSOLUTE, **_VIEWPORT_UNITS, **_CONTAINER}
_HIDING = {
    "display": ("none",),
    "visibility": ("hidden", "collapse"),
    "content-visibility": ("hidden",),
}


def _number(value: str, axis: int = 0) -> float | None:
    """An HTML ``width``/``height`` attribute in px (HTML's dimension value: digits, then "%" or
    anything ignored)."""
    m = _NUMBER.match(value)
    digits = m.group(1) if m else ""
    try:
        size = float(digits) if digits.strip(".") else None
    except ValueError:
        return None
    if size is not None and m and m.group(2):
        size = size * VIEWPORT[axis] / 100
    return size


def length_px(tok: csstoken.Token, axis: int = 0) -> float | None:
    """A CSS length token in px as rendered at VIEWPORT (a unitless number as px, as quirks mode
    reads one); None for what is not a length."""
    if tok.kind == csstoken.NUMBER:
        return tok.number
    if tok.kind == csstoken.PERCENT:
        return tok.number * VIEWPORT[axis] / 100
    if tok.kind == csstoken.DIMENSION and tok.value in UNIT_PX:
        return tok.number * UNIT_PX[tok.value]
    return None


def _declarations(style: str) -> list[tuple[str, list[csstoken.Token]]]:
    """(lowercase name, value tokens without white space) of each declaration of a style attribute."""
    toks = csstoken.tokenize(style)
    out: list[tuple[str, list[csstoken.Token]]] = []
    i, n = 0, len(toks)
    while i < n:
        j = i
        while j < n and toks[j].kind != csstoken.SEMI:
            j = csstoken.skip(toks, j)
        part = [t for t in toks[i : min(j, n)] if t.kind != csstoken.WS]
        if len(part) >= 2 and part[0].kind == csstoken.IDENT and part[1].kind == csstoken.COLON:
            out.append((part[0].value, part[2:]))
        i = j + 1
    return out


def style_facts(style: str) -> tuple[bool, float | None, float | None]:
    """(hidden, width px, height px) from an element's style attribute, read by the CSS tokenizer:
    escapes and comments as a browser reads them, a size in any length unit (UNIT_PX)."""
    hidden = False
    size: list[float | None] = [None, None]
    for name, value in _declarations(style):
        first = value[0] if value else None
        if first is None:
            continue
        if name in _HIDING:
            hidden = hidden or (first.kind == csstoken.IDENT and first.value in _HIDING[name])
        elif name == "opacity":
            hidden = hidden or (first.kind in (csstoken.NUMBER, csstoken.PERCENT) and first.number == 0)
        elif name in ("width", "max-width", "height", "max-height"):
            axis = 0 if "width" in name else 1
            px = length_px(first, axis)
            if px is not None:
                old = size[axis]
                size[axis] = px if old is None else min(old, px)
    return hidden, size[0], size[1]


def hides(attrs: dict[str, str]) -> bool:
    """Whether an element is hidden (and everything in it): ``hidden``, or its style says so."""
    return "hidden" in attrs or ("style" in attrs and style_facts(attrs["style"])[0])


def is_pixel(attrs: dict[str, str]) -> bool:
    """A remote image no one is meant to see: hidden, 0 in either dimension, or rendering under
    PIXEL_PX in both (or in the one given: the other follows the image, a pixel's is 1)."""
    hidden, sw, sh = style_facts(attrs.get("style", ""))
    w = _number(attrs["width"], 0) if "width" in attrs else None
    h = _number(attrs["height"], 1) if "height" in attrs else None
    w = sw if w is None else (w if sw is None else min(w, sw))
    h = sh if h is None else (h if sh is None else min(h, sh))
    tiny = (w is not None or h is not None) and all(d is None or d <= PIXEL_PX for d in (w, h))
    return hidden or "hidden" in attrs or tiny or w == 0 or h == 0


# --- URLs inside CSS and srcset ---------------------------------------------------------------------


# Every URL in CSS is a url token or a string: text with neither an opening parenthesis, a quote nor
# an escape (which could spell either) loads nothing.
_MAY_LOAD = re.compile(r"[(\"'\\]")


def css_urls(tokens: list[csstoken.Token]) -> list[str]:
    """Every URL-like value among CSS tokens: ``url(...)`` (either form) and strings (``@import``,
    ``image-set()``, ``src()``)."""
    return [t.value for t in tokens if t.kind in (csstoken.URL, csstoken.STRING)]


def _loads(remove_all_remote: bool) -> cssscope.Filter:
    def loads(tokens: list[csstoken.Token]) -> int:
        return sum(
            (url := remote(u)) is not None and (remove_all_remote or open_rule(url) is not None)
            for u in css_urls(tokens)
        )

    return loads


def may_load(css: str) -> bool:
    """Whether CSS text can hold a URL or a function at all (else it loads nothing and runs nothing)."""
    return bool(_MAY_LOAD.search(css))


def clean_css(css: str, remove_all_remote: bool = False) -> tuple[str, int]:
    """A style attribute's declarations without those that load a tracker (or, ``remove_all_remote``,
    any remote URL: a hidden element's background is seen by no one); and how many tracker URLs the
    result no longer loads. Read token by token (``common.mail.csstoken``) and written out again
    (``common.mail.cssscope.declarations``)."""
    if not _MAY_LOAD.search(css):
        return css, 0
    loads = _loads(remove_all_remote)
    out, _ = cssscope.declarations(css, loads)
    return out, _gone(css, out, loads)


def clean_stylesheet(css: str, scope: str = "") -> tuple[str, int]:
    """A ``<style>`` element's CSS without the declarations that load a tracker, scoped to ``.scope``
    when given (``common.mail.cssscope.rewrite``); and how many tracker URLs it no longer loads."""
    loads = _loads(False)
    out, _ = cssscope.rewrite(css, scope, loads)
    return out, _gone(css, out, loads)


def _gone(before: str, after: str, loads: cssscope.Filter) -> int:
    """The tracker URLs ``before`` loads and ``after`` does not: the count is what was removed,
    whatever removed it (a tracker's declaration, an ``@import``, a rule dropped for its shape)."""
    if not _MAY_LOAD.search(before):
        return 0
    return max(0, loads(csstoken.tokenize(before)) - loads(csstoken.tokenize(after)))


def srcset_urls(value: str) -> list[tuple[str, str]]:
    """(url, descriptor) of each candidate of a srcset (HTML's parsing rules: a URL ends at white
    space; commas end a candidate after it)."""
    out = []
    pos, n = 0, len(value)
    while pos < n:
        while pos < n and value[pos] in " \t\n\f\r,":
            pos += 1
        start = pos
        while pos < n and value[pos] not in " \t\n\f\r":
            pos += 1
        url = value[start:pos]
        if not url:
            break
        if url.endswith(","):
            out.append((url.rstrip(","), ""))
            continue
        start, depth = pos, 0
        while pos < n and (value[pos] != "," or depth):
            depth += value[pos] == "("
            depth -= value[pos] == ")" and depth > 0
            pos += 1
        out.append((url, value[start:pos].strip()))
        pos += 1
    return out


def banner(count: int, left_unread: int = 0) -> str:
    """The forward's note, as Firefox Relay words it; and what past the cap was not read."""
    note = f"{count} tracker{'s' if count != 1 else ''} removed"
    if left_unread:
        note += (
            f"; the HTML's last {left_unread:,} characters were past what is read for trackers and were"
            " left out of this forward (the archived original has them)"
        )
    return note
