"""Trackers out of a forward's HTML: remote open-tracking pixels removed, click-tracking redirects that
carry their target unwrapped, real content images left alone. The rules are data
(``common/data/trackers.json``); what is not remote (``cid:`` parts, data: URIs) is never touched.

Safe on hostile HTML of any size: one pass of a regex whose tag match stops at the next ``<`` or
``>`` (so no two attempts rescan the same text) and is bounded in length, and an attribute scanner
whose every alternative always consumes what it reads (an unterminated quote runs to the tag's end
instead of backtracking): linear time, no catastrophic backtracking (tests/unit/test_trackers.py
times a hostile document).
"""

from __future__ import annotations

import functools
import html
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from common.runtime.log import get_logger

log = get_logger("trackers")

# A tag longer than this is left as it is: no real <img> or <a> needs 16 KB of attributes.
MAX_TAG_CHARS = 16 * 1024
MAX_TAGS = 20_000  # images and candidate links examined per body (clean())
_TAG = re.compile(rf"<(img|a)(?=[\s/>])([^<>]{{0,{MAX_TAG_CHARS}}})>", re.I)
# name[=value]; else one character of junk. Every branch consumes what it reads: linear.
_ATTR = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*("[^"]*(?:"|$)|'[^']*(?:'|$)|[^\s"'>]*))?|[\s\S]""")
_PX = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:px)?\s*$", re.I)
_STYLE_SIZE = re.compile(
    r"(?:^|;)\s*(width|height)\s*:\s*(\d+(?:\.\d+)?)\s*(?:px)?\s*(?:!important)?\s*(?=;|$)", re.I
)
_STYLE_HIDDEN = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\b", re.I)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    host: str  # the URL's host ends with it ("" = any host)
    path: str  # the URL's path starts with it
    param: str = ""  # click: the query parameter holding the target ("" = the next path segment)

    def matches(self, host: str, path: str) -> bool:
        return (not self.host or host == self.host or host.endswith("." + self.host)) and path.startswith(
            self.path
        )


@functools.cache
def rules() -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(open-tracking pixel rules, click-redirect rules) from common/data/trackers.json."""
    data: dict[str, Any] = json.loads(resources.files("common").joinpath("data/trackers.json").read_text())
    fields = ("id", "host", "path", "param")
    return (
        tuple(Rule(**{k: v for k, v in r.items() if k in fields}) for r in data["open"]),
        tuple(Rule(**{k: v for k, v in r.items() if k in fields}) for r in data["click"]),
    )


def _attrs(inner: str) -> dict[str, tuple[str, int, int]]:
    """Attribute name (lowercase) -> (unescaped value, value start, value end) in ``inner``; the first
    wins."""
    found: dict[str, tuple[str, int, int]] = {}
    for m in _ATTR.finditer(inner):
        name = m.group(1)
        if name is None or name.lower() in found:
            continue
        raw, start, end = m.group(2) or "", m.start(2), m.end(2)
        if raw[:1] in ("'", '"'):
            start, raw = start + 1, raw[1:]
            if raw.endswith(m.group(2)[0]):
                raw, end = raw[:-1], end - 1
        found[name.lower()] = (html.unescape(raw), start, end)
    return found


def _remote(url: str) -> tuple[str, str] | None:
    """(host, path) of an http(s) or scheme-relative URL; None for anything else (cid:, data:, relative)."""
    url = url.strip()
    if not re.match(r"(?:https?:)?//", url, re.I):
        return None
    try:
        parts = urlsplit(url if not url.startswith("//") else "https:" + url)
    except ValueError:
        return None
    return (parts.hostname or "").lower(), parts.path or "/"


def _tiny(value: str | None) -> bool:
    m = _PX.match(value or "")
    return m is not None and float(m.group(1)) <= 1


def is_pixel(attrs: dict[str, tuple[str, int, int]]) -> bool:
    """A remote image that is an open tracker: a known open-tracking URL, 1x1 (or 0) by its attributes
    or its style, or hidden."""
    remote = _remote(attrs.get("src", ("", 0, 0))[0])
    if remote is None:
        return False
    if any(rule.matches(*remote) for rule in rules()[0]):
        return True
    width, height = (attrs.get(n, ("", 0, 0))[0] for n in ("width", "height"))
    style = attrs.get("style", ("", 0, 0))[0][:2048]
    sizes = {name.lower(): float(value) for name, value in _STYLE_SIZE.findall(style)}
    width_tiny = _tiny(width) or sizes.get("width", 2) <= 1
    height_tiny = _tiny(height) or sizes.get("height", 2) <= 1
    zero = any((m := _PX.match(v)) is not None and float(m.group(1)) == 0 for v in (width, height))
    return (width_tiny and height_tiny) or zero or "hidden" in attrs or bool(_STYLE_HIDDEN.search(style))


def unwrap(url: str) -> str:
    """The target of a known click-tracking redirect ('' when ``url`` is none, or its target is not
    http(s))."""
    remote = _remote(url)
    if remote is None:
        return ""
    rule = next((r for r in rules()[1] if r.matches(*remote)), None)
    if rule is None:
        return ""
    parts = urlsplit(url.strip())
    if rule.param:
        values = parse_qs(parts.query).get(rule.param) or [""]
        target = values[0]
    else:  # the target is the path segment after the rule's path, percent-encoded
        target = unquote(parts.path[len(rule.path) :].split("/", 1)[0])
    target = target.strip()
    return target if re.match(r"https?://[^\s\"'<>]+$", target, re.I) else ""


@functools.cache
def _click_hosts() -> re.Pattern[str]:
    """Any click rule's host, to pass over every other link without parsing it."""
    return re.compile("|".join(re.escape(r.host) for r in rules()[1]), re.I)


def clean(body: str) -> tuple[str, int]:
    """``body`` without tracking pixels and with known redirects unwrapped; and how many trackers went.
    At most MAX_TAGS images and candidate links are examined (a newsletter has a few hundred): the scan
    stays linear, but each examined tag costs tens of microseconds in Python, and a hostile 40 MB page
    of tags must not use up the handler's time (the rest is left as it is, and logged)."""
    removed = examined = 0
    hosts = _click_hosts()

    def tag(m: re.Match[str]) -> str:
        nonlocal removed, examined
        name, inner = m.group(1).lower(), m.group(2)
        if name == "a" and not hosts.search(inner):
            return m.group(0)
        examined += 1
        if examined > MAX_TAGS:
            return m.group(0)
        attrs = _attrs(inner)
        if name == "img":
            if is_pixel(attrs):
                removed += 1
                return ""
            return m.group(0)
        href = attrs.get("href")
        target = unwrap(href[0]) if href else ""
        if not href or not target:
            return m.group(0)
        removed += 1
        _, start, end = href
        return f"<{m.group(1)}{inner[:start]}{html.escape(target, quote=True)}{inner[end:]}>"

    cleaned = _TAG.sub(tag, body)
    if examined > MAX_TAGS:
        log.warning(
            "tracker removal stopped",
            extra={"examined": MAX_TAGS, "tags_left": examined - MAX_TAGS, "removed": removed},
        )
    return cleaned, removed


def banner(count: int) -> str:
    """The forward's note, as Firefox Relay words it."""
    return f"{count} tracker{'s' if count != 1 else ''} removed"
