"""What is a tracker in a forward's HTML: the rules (``common/data/trackers.json``, host and path
together), URLs read as a browser reads them, pixels by size and visibility, CSS ``url()`` and
``@import``, ``srcset``. The HTML itself is read and rewritten by ``common.mail.htmlsafe`` (one
tokenizer for text and trackers; ``htmlsafe.clean`` removes trackers from a body).

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

_NUMBER = re.compile(r"[\t\n\f\r ]*+\+?([0-9]*+\.?[0-9]*+)")
_CSS_ESCAPE = re.compile(r"\\(?:([0-9A-Fa-f]{1,6})[\t\n\f\r ]?|(.))", re.S)
_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.S)
# A declaration of a size or visibility in (unescaped, lowercase) CSS text.
_CSS_DECL = re.compile(
    r"(?<![\w-])(display|visibility|opacity|width|height|max-width|max-height|content-visibility)"
    r"[\t\n\f\r ]*+:[\t\n\f\r ]*+([^;}!]*+)"
)


def css_plain(css: str) -> str:
    """CSS text with its escapes decoded and comments removed, lowercase: what rules are read from."""
    css = _CSS_COMMENT.sub(" ", css) if "/*" in css else css

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            code = int(m.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
        return m.group(2) if m.group(2) != "\n" else ""

    return (_CSS_ESCAPE.sub(one, css) if "\\" in css else css).lower()


def _number(value: str) -> float | None:
    m = _NUMBER.match(value)
    digits = m.group(1) if m else ""
    try:
        return float(digits) if digits.strip(".") else None
    except ValueError:
        return None


def style_facts(style: str) -> tuple[bool, float | None, float | None]:
    """(hidden, width px, height px) from an element's style attribute."""
    hidden, width, height = False, None, None
    for name, value in _CSS_DECL.findall(css_plain(style)):
        value = value.strip()
        if (
            (name == "display" and value.startswith("none"))
            or (name == "visibility" and value.startswith(("hidden", "collapse")))
            or (name == "content-visibility" and value.startswith("hidden"))
            or (name == "opacity" and _number(value) == 0)
        ):
            hidden = True
        elif name in ("width", "max-width", "height", "max-height"):
            size = _number(value)
            if size is not None and (value.endswith("px") or value.rstrip("0123456789.") == "" or size == 0):
                if "width" in name:
                    width = size if width is None else min(width, size)
                else:
                    height = size if height is None else min(height, size)
    return hidden, width, height


def hides(attrs: dict[str, str]) -> bool:
    """Whether an element is hidden (and everything in it): ``hidden``, or its style says so."""
    return "hidden" in attrs or ("style" in attrs and style_facts(attrs["style"])[0])


def is_pixel(attrs: dict[str, str]) -> bool:
    """A remote image no one is meant to see: 1x1 or smaller, 0 in either dimension, or hidden."""
    hidden, sw, sh = style_facts(attrs.get("style", ""))
    w = _number(attrs["width"]) if "width" in attrs else None
    h = _number(attrs["height"]) if "height" in attrs else None
    w = sw if w is None else (w if sw is None else min(w, sw))
    h = sh if h is None else (h if sh is None else min(h, sh))
    tiny = w is not None and h is not None and w <= 1 and h <= 1
    return hidden or "hidden" in attrs or tiny or w == 0 or h == 0


# --- URLs inside CSS and srcset ---------------------------------------------------------------------

_CSS_CHUNK = re.compile(r"[^;{}]++|[;{}]")
_CSS_URL = re.compile(r"url\([\t\n\f\r ]*+([\"']?)([^\"')]*+)|([\"'])([^\"']*+)")


def css_urls(plain: str) -> list[str]:
    """Every URL-like value in plain CSS: ``url(...)`` contents and quoted strings (@import,
    image-set)."""
    return [m.group(2) if m.group(2) is not None else m.group(4) for m in _CSS_URL.finditer(plain)]


def clean_css(css: str, remove_all_remote: bool = False) -> tuple[str, int]:
    """``css`` without the declarations and rules that load a tracker (or, ``remove_all_remote``, any
    remote URL: a hidden element's background is seen by no one); and how many went. Decided on
    the CSS as a browser decodes it (escapes, comments), cut in the text as written."""
    if "/" not in css and "\\" not in css:
        return css, 0
    out: list[str] = []
    removed = 0
    for chunk in _CSS_CHUNK.findall(css):
        found = (
            sum(
                (url := remote(u)) is not None and (remove_all_remote or open_rule(url) is not None)
                for u in css_urls(css_plain(chunk))
            )
            if len(chunk) > 1
            else 0
        )
        if found:
            removed += found  # each tracker URL of the declaration (or rule) that goes
            continue
        out.append(chunk)
    return "".join(out), removed


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
