"""A contact's HTML made into a closed fragment for the forward, trackers removed on the way.

The HTML is read by the one tokenizer (``common.mail.htmltoken``) and written out again in a form
every HTML5 parser reads the same way, so nothing the contact wrote can reach outside it: the
system's banner and footer around it cannot be put in a comment, a raw-text element, an attribute or
an unclosed element. What comes out:
- text with ``&``, ``<`` and ``>`` escaped; every attribute double-quoted and escaped; names checked;
- no comments (conditional ones included), doctypes, CDATA or processing instructions;
- no ``html``/``head``/``body``/``noscript``/``object`` tags (their content stays), no ``script``,
  ``iframe``, ``noembed``, ``noframes``, ``title``, ``base``, ``meta``, ``link``, ``embed``,
  ``frame(set)``, ``applet`` and no ``svg``/``math``/``template`` subtree;
- ``xmp`` and ``plaintext`` as ``pre`` text; ``textarea`` content escaped; ``style`` content with no
  ``<`` (written as the CSS escape ``\\3c``), so it cannot end early;
- every element it opened closed at its end, at most MAX_DEPTH deep (deeper start tags are dropped);
- event-handler attributes and ``javascript:`` URLs dropped.
Trackers (``common.mail.trackers``): an image or ``<input type=image>`` that is a known tracker, a
pixel, hidden, or inside a hidden element is removed; every other URL a mail client loads by itself
(``src``, ``srcset``, ``background``, ``poster``, ``lowsrc``, CSS ``url()`` and ``@import`` in
``style`` attributes and elements) is dropped when it is a known tracker or its element is hidden;
known click redirects are unwrapped.

At most ``MAX_HTML_CHARS`` are read (the cost is per token, about 1-2 us each in CPython); past it the
rest is left out and ``Sanitized.left_unread`` says how much, for the banner.
"""

from __future__ import annotations

import email
import email.encoders
import email.policy
import html as htmllib
import re
from collections import Counter
from dataclasses import dataclass

from common.mail import trackers
from common.mail.cssscope import scope_css
from common.mail.htmltext import MAX_HTML_CHARS
from common.mail.htmltoken import RAW, START, TEXT, tokens

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
_DROP_RAW = frozenset({"script", "iframe", "noembed", "noframes", "title"})
_DROP_SUBTREE = frozenset({"svg", "math", "template"})
# Dropped, their content kept.
_DROP_TAG = frozenset({"html", "head", "body", "noscript", "object", "frameset"})
_DROP_VOID = frozenset({"base", "meta", "link", "embed", "frame", "applet"})
_TAG_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")
_ATTR_NAME = re.compile(r"[a-z_:][a-z0-9_:.-]{0,63}")
_URL_ATTRS = (
    "src",
    "background",
    "poster",
    "lowsrc",
    "dynsrc",
    "href",
    "action",
    "formaction",
    "cite",
    "longdesc",
)
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


def _text(raw: str) -> str:
    if "&" in raw:
        raw = htmllib.unescape(raw)
    return raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\x00", "")


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _url_scheme_unsafe(value: str) -> bool:
    head = value.strip(trackers._CONTROLS).translate(trackers._TAB_NEWLINE)[:16].lower()
    return head.startswith(("javascript:", "vbscript:"))


class _Writer:
    def __init__(self, remove_trackers: bool, scope: str) -> None:
        self.scope = scope
        self.out: list[str] = []
        self.stack: list[tuple[str, bool]] = []
        self.open: Counter[str] = Counter()
        self.hidden = 0  # open elements that hide their content
        self.removed = 0
        self.remove_trackers = remove_trackers

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if len(self.stack) >= MAX_DEPTH and name not in VOID:
            return
        hidden_here = trackers.hides(attrs)
        kept = self._attributes(name, attrs, self.hidden > 0 or hidden_here)
        if kept is None:  # the element was a tracker
            self.removed += 1
            return
        self.out.append(f"<{name}{kept}>")
        if name not in VOID:
            self.stack.append((name, hidden_here))
            self.open[name] += 1
            self.hidden += hidden_here

    def end(self, name: str) -> None:
        if not self.open[name]:
            return
        while self.stack:
            top, hid = self.stack.pop()
            self.open[top] -= 1
            self.hidden -= hid
            self.out.append(f"</{top}>")
            if top == name:
                return

    def close_all(self) -> None:
        while self.stack:
            self.out.append(f"</{self.stack.pop()[0]}>")

    def _attributes(self, name: str, attrs: dict[str, str], hidden: bool) -> str | None:
        """The attributes as written out; None when the element itself is a tracker to remove."""
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
        parts: list[str] = []
        for key, value in attrs.items():
            if not _ATTR_NAME.fullmatch(key) or key.startswith("on"):
                continue
            if key in _URL_ATTRS and _url_scheme_unsafe(value):
                continue
            if self.remove_trackers:
                if key in _LOADS and (url := trackers.remote(value)) is not None:
                    if hidden or trackers.open_rule(url):
                        self.removed += 1
                        continue
                elif key == "srcset" or (key == "imagesrcset"):
                    value = self._srcset(value, hidden)
                    if not value:
                        continue
                elif key == "style":
                    value, gone = trackers.clean_css(value, remove_all_remote=hidden)
                    self.removed += gone
                elif key == "href" and name == "a" and (target := trackers.unwrap(value)):
                    value = target
                    self.removed += 1
            parts.append(f' {key}="{_attr(value)}"')
        return "".join(parts)

    def _srcset(self, value: str, hidden: bool) -> str:
        kept = []
        for url, descriptor in trackers.srcset_urls(value):
            found = trackers.remote(url)
            if found is not None and (hidden or trackers.open_rule(found)):
                self.removed += 1
                continue
            kept.append(f"{url} {descriptor}".strip())
        return ", ".join(kept)

    def start_kept(self, name: str, attrs: dict[str, str]) -> None:
        """A start tag that is kept: style, xmp and plaintext are written with their RAW token."""
        if name in ("style", "xmp", "plaintext"):
            return
        if name == "textarea":
            kept = self._attributes(name, attrs, self.hidden > 0)
            self.out.append(f"<textarea{kept or ''}>")
        else:
            self.start(name, attrs)

    def raw(self, raw_for: str, data: str) -> None:
        """The RAW token after the start tag ``raw_for`` ('' when nothing asked for one)."""
        if raw_for in _DROP_RAW or not raw_for:
            return
        if raw_for == "style":
            self.style(data)
        elif raw_for == "textarea":
            self.out.append(_text(data) + "</textarea>")
        else:  # xmp, plaintext: text in a pre
            self.out.append("<pre>" + _text(data) + "</pre>")

    def style(self, css: str) -> None:
        if self.remove_trackers:
            css, gone = trackers.clean_stylesheet(css, self.scope)
            self.removed += gone
        elif self.scope:
            css = scope_css(css, self.scope)
        self.out.append("<style>" + css.replace("<", "\\3c ") + "</style>")


# The box the contact's part of a forward is drawn in: what is inside cannot be painted outside it
# (negative margins, position: fixed or absolute are clipped to it), so it cannot cover the banner.
SCOPE_STYLE = "overflow:auto;contain:paint;position:relative"


def sanitize(
    html: str, *, remove_trackers: bool = True, limit: int = MAX_HTML_CHARS, scope: str = ""
) -> Sanitized:
    """``html`` as a closed, canonical fragment (see the module's docstring), trackers removed unless
    ``remove_trackers`` is False. At most ``limit`` characters are read. With ``scope`` (a class
    name), the fragment is wrapped in a ``div`` of that class and SCOPE_STYLE, and its ``<style>``
    rules apply only inside it (``common.mail.cssscope``): the contact's CSS cannot hide, move or
    cover what the forward puts around it."""
    source = html[:limit] if len(html) > limit else html
    w = _Writer(remove_trackers, scope)
    out = w.out
    skip = 0  # depth inside a dropped subtree
    skip_name = ""
    raw_for = ""  # what to do with the next RAW token
    for kind, data, attrs in tokens(source):
        if kind == TEXT:
            if not skip:
                out.append(_text(data))
        elif kind == RAW:
            if not skip:
                w.raw(raw_for, data)
            raw_for = ""
        elif kind == START:
            assert attrs is not None
            raw_for = data if data in ("style", "textarea", "xmp", "plaintext") or data in _DROP_RAW else ""
            dropped = bool(
                skip
                or data in _DROP_SUBTREE
                or data in _DROP_RAW
                or data in _DROP_TAG
                or data in _DROP_VOID
                or not _TAG_NAME.fullmatch(data)
            )
            if dropped and w.remove_trackers and attrs and trackers.loads_tracker(attrs):
                w.removed += 1  # a browser would have loaded it: counted as removed
            if skip:
                skip += data == skip_name
                continue
            if data in _DROP_SUBTREE:
                skip, skip_name = 1, data
            elif not dropped:
                w.start_kept(data, attrs)
        else:  # END
            if skip:
                skip -= data == skip_name
                continue
            w.end(data)
    w.close_all()
    body = "".join(out)
    if scope:
        body = f'<div class="{_attr(scope)}" style="{SCOPE_STYLE}">{body}</div>'
    return Sanitized(body, w.removed, len(source), len(html))


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
