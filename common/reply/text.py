"""Turn the owner's reply into what the contact should read: metadata commands out, quoted history out.

Pure functions (no AWS), unit-tested against Gmail-, Outlook- and Apple Mail-style replies.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from common.delivery import MARKER_TEXT
from common.mail import convert
from common.reply.scrub import hide_addresses

# [key: value] command lines -> conversation attributes (docs/CONTRACT.md)
METADATA_KEYS = {
    "company": "companyName",
    "title": "title",
    "type": "type",
    "location": "location",
    "salary_range": "salaryRange",
    "job_id": "jobId",
    "notes": "notes",
}
# Linear: the key is at most 32 characters, the value runs to the line's last "]" (stripped in code).
_COMMAND = re.compile(r"[ \t]*\[([A-Za-z_ -]{1,32}):([^\n]*)\][ \t]*$")
# Owner controls (docs/CONTRACT.md): [block], [block: domain], [allow], [unblock], optionally naming
# an address or @domain instead of the contact; removed from the outgoing body like metadata.
_CONTROL = re.compile(r"[ \t]*\[[ \t]*(block|allow|unblock)[ \t]*(?::([^\]]*))?\][ \t]*$", re.I)
_TO = re.compile(r"[ \t]*\[[ \t]*to[ \t]*:([^\]]*)\][ \t]*$", re.I)
_QUOTED = re.compile(r"^[ \t]*>")
# Shapes of a quote header in any language (docs/reply.md, "What is the owner's own text"). Every
# pattern is linear: bounded repeats, no nested or overlapping quantifiers.
# "Label: value" as a client's header block writes it: "From:", "*Från:*", "Envoyé le :", "送信日時:".
_LABEL = re.compile(r"[ \t]{0,8}\*{0,2}[^\W\d_](?:[^\W\d_]|[ .'-]){0,24}[:：]\*{0,2}(?![/\\])")
# A date: a year 1800-2099, a time "10:07", or a numeric date "11/03/2026", "13-02-2014".
_DATE = re.compile(r"\b(?:1[89]|20)\d\d\b|\d:[0-5]\d|\b\d{1,2}[./-]\d{1,2}[./-]\d{2,4}\b")
_ADDRESS = re.compile(r"[\w.+-]@[\w-]")
ATTRIBUTION_MAX_LINES = 4  # "On … / <addr> / wrote:" and Polymail's four-line form
ATTRIBUTION_MAX_CHARS = 300  # per line: a longer line is prose
HEADER_WALK_LINES = (
    8  # header lines above the forward's marker or the contact's text: From/Sent/To/Cc/Subject
)
KNOWN_MIN_CHARS = 16  # a line of the contact's this long is quote even alone; shorter ones count in pairs
# The forward's own marker (common.delivery.compose): it opens the forward's text and stands outside
# the contact's HTML, so whatever follows it in a reply is the forward quoted.
_MARKER = " ".join(MARKER_TEXT.casefold().split())


_PREFIX = re.compile(r"^[ \t]*(?:(?:re|fwd?|aw|wg|sv|vs|antw)[ \t]*(?:\[\d{1,6}\][ \t]*)?:[ \t]*)+", re.I)


def normalise(line: str) -> str:
    """A line as compared with what the contact sent: no quote marks, bold stars or spacing
    differences, NFKC, case-folded."""
    line = unicodedata.normalize("NFKC", line.lstrip(" \t>")).casefold().replace("*", "")
    return " ".join(line.split())


def known_lines(*texts: str) -> frozenset[str]:
    """The normalised lines of what a contact sent (the evidence that a line of a reply is quote)."""
    return frozenset(n for text in texts for line in text.splitlines() if len(n := normalise(line)) >= 2)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What proves a line of the owner's reply is quote: the lines the contact sent (archived mail,
    the record's lastMessageBody) and this system's own addresses (a quote header names them)."""

    contact_lines: frozenset[str] = frozenset()
    system_addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reading:
    """The owner's reply, read: ``own`` is the owner's text (quotes out, command lines still in),
    ``commands`` the lines commands may be taken from. ``quoted``: the reply quotes without "> "
    marks, found only by the shape of a quote header; ``proven``: the forward's marker or the
    contact's own lines were found (a "> " prefix is evidence of its own: those lines never count)."""

    own: str
    commands: str
    quoted: bool
    proven: bool

    @property
    def commands_withheld(self) -> bool:
        """An unmarked quote found by shape alone, and no evidence: a command line above it could be
        the contact's (a header the shape rules took for the quote's start may be the contact's)."""
        return (
            self.quoted
            and not self.proven
            and bool(owner_controls_in(self.commands) or _any_command(self.commands))
        )


def _names(line: str, ev: Evidence) -> bool:
    """The line names a date, an address or one of this system's addresses."""
    low = line.casefold()
    return bool(
        _DATE.search(line) or _ADDRESS.search(line) or any(a and a in low for a in ev.system_addresses)
    )


def _separator(line: str) -> bool:
    """ "-----Original Message-----", "---- On … wrote ----", "-----Oprindelig besked-----", a rule of
    dashes or underscores: the start of a quoted original in any language (no regex: lines are long)."""
    s = line.strip()
    if len(s) > ATTRIBUTION_MAX_CHARS or len(s) < 5:
        return False
    if not s.strip("-_=") and len(s) >= 10:
        return True
    return s.startswith("--") and s.endswith("--") and sum(c.isalpha() for c in s) >= 3


HEADER_BLOCK_MAX_LINES = 16


def _rule(line: str) -> bool:
    """A line drawn of dashes, underscores or equals signs ("====", "-----")."""
    s = line.strip()
    return len(s) >= 4 and not s.strip("-_=")


def _header_block(lines: list[str], quoted: list[bool], i: int) -> bool:
    """A client's header block over a quoted original ("From: … Sent: … To: … Subject: …" in any
    language, a value possibly wrapped onto the next line, as HTML clients write it): two label
    lines naming an address, or four consecutive ones with a date."""
    if quoted[i] or len(lines[i]) > ATTRIBUTION_MAX_CHARS or not _LABEL.match(lines[i]):
        return False
    labels, loose, address, date, blank, gaps = 0, 0, False, False, False, False
    for line in lines[i : i + HEADER_BLOCK_MAX_LINES]:
        if not line.strip():
            blank = True
            continue
        if len(line) > ATTRIBUTION_MAX_CHARS:
            break
        if _LABEL.match(line):
            labels, loose, gaps = labels + 1, 0, gaps or blank
        elif loose:  # a second line that is no label: the block has ended
            break
        else:
            loose = 1  # a value wrapped onto its own line
        address = address or bool(_ADDRESS.search(line))
        date = date or bool(_DATE.search(line))
    return (labels >= 2 and address) or (labels >= 4 and date and not gaps)


def _next_nonblank(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def _attribution_start(lines: list[str], quoted: list[bool], i: int, ev: Evidence) -> int | None:
    """The first line of an attribution ending at line ``i`` ("On …, Jane <jane@x> wrote:", over up to
    four lines, any language): the shortest window ending there that names a date or an address,
    extended upward only over lines that name one too (never over the owner's last line)."""
    line = lines[i].rstrip()
    if quoted[i] or not line or len(line) > ATTRIBUTION_MAX_CHARS:
        return None
    after = _next_nonblank(lines, i + 1)
    both = bool(_DATE.search(line) and _ADDRESS.search(line)) and not line.endswith((".", "!", "?"))
    if not (line.endswith((":", "：")) or (after < len(lines) and quoted[after]) or (both and after > i + 1)):
        return None
    start = None
    for j in range(i, max(i - ATTRIBUTION_MAX_LINES, -1), -1):
        if quoted[j] or not lines[j].strip() or len(lines[j]) > ATTRIBUTION_MAX_CHARS:
            break
        if _names(lines[j], ev):
            start = j
            break
    if start is None:
        return None
    return _attribution_top(lines, quoted, start, i, ev)


def _attribution_top(lines: list[str], quoted: list[bool], start: int, end: int, ev: Evidence) -> int:
    """Up from ``start`` over the lines of the same attribution: a line that supplies what the lines
    so far lack (the date, or the address), ends no sentence, and a line with no letter or digit
    ("<"), with one blank line above such a line (Polymail's wrapping). An attribution names one
    date and one sender: a line above a window that has both is the owner's, even with a time in it."""
    while start > 0 and end - start < ATTRIBUTION_MAX_LINES - 1:
        above = lines[start - 1]
        if not above.strip() and start > 1 and not any(c.isalnum() for c in lines[start]):
            above = lines[start - 2]
            if quoted[start - 2] or not _DATE.search(above) or len(above) > ATTRIBUTION_MAX_CHARS:
                break
            start -= 2
            continue
        window = "\n".join(lines[start : end + 1])
        supplies = (
            (not _DATE.search(window) and _DATE.search(above))
            or (not _ADDRESS.search(window) and _names(above, ev) and not _DATE.search(above))
            or (_DATE.search(above) and above.rstrip().endswith(","))  # "On Nov 21, 2014," / "at 10:18,"
        )
        if (
            quoted[start - 1]
            or not above.strip()
            or len(above) > ATTRIBUTION_MAX_CHARS
            or not (supplies or not any(c.isalnum() for c in above))
            or above.rstrip().endswith((".", "!", "?"))
        ):
            break
        start -= 1
    return start


def _head_start(lines: list[str], start: int, ev: Evidence) -> int:
    """Where the header over a quoted forward starts: up from ``start`` over blank lines and lines
    shaped like a quote header (a label, a date, an address, a trailing colon, a rule)."""
    top, k, steps = start, start - 1, 0
    while k >= 0 and steps < HEADER_WALK_LINES:
        line = lines[k]
        if not line.strip():
            if steps:  # blank lines only between the header and what it introduces
                break
            k -= 1
            continue
        if len(line) > ATTRIBUTION_MAX_CHARS or not (
            _LABEL.match(line) or _names(line, ev) or line.rstrip().endswith((":", "：")) or _separator(line)
        ):
            break
        top, k, steps = k, k - 1, steps + 1
    return top


def _block_start(quoted: list[bool], i: int) -> int:
    while i > 0 and quoted[i - 1]:
        i -= 1
    return i


def extract_metadata(text: str) -> tuple[str, dict[str, str]]:
    """Remove every ``[key: value]`` line; return the text and the known keys as attributes."""
    found: dict[str, str] = {}
    kept = []
    for line in text.splitlines():
        if _CONTROL.match(line):
            continue
        match = _COMMAND.match(line)
        if match:
            key = match.group(1).strip().lower().replace(" ", "_").replace("-", "_")
            if key in METADATA_KEYS and (value := match.group(2).strip()):
                found[METADATA_KEYS[key]] = value
            continue  # unknown keys are ignored, but the command line never goes out
        kept.append(line)
    return "\n".join(kept), found


class ControlAction(StrEnum):
    """An owner control line's verb: ``[block]``, ``[allow]``, ``[unblock]`` (docs/CONTRACT.md, Data)."""

    BLOCK = "block"
    ALLOW = "allow"
    UNBLOCK = "unblock"


@dataclass(frozen=True, slots=True)
class Control:
    action: ControlAction
    target: (
        str  # "" the contact's address, "domain" the contact's domain, else an address or @domain as written
    )


def owner_controls_in(text: str) -> list[Control]:
    found = (_CONTROL.match(line) for line in text.splitlines())
    return [Control(ControlAction(m.group(1).lower()), (m.group(2) or "").strip()) for m in found if m]


def _any_command(text: str) -> bool:
    return any(_COMMAND.match(line) for line in text.splitlines())


def owner_controls(text: str, ev: Evidence | None = None) -> list[Control]:
    """The control lines of the owner's own text (never of the quote, never a line the contact
    sent, and none when the reply quotes without evidence of where the quote starts)."""
    reading = read_reply(text, ev)
    return [] if reading.commands_withheld else owner_controls_in(reading.commands)


def new_conversation_recipient(text: str) -> str:
    """ADDRESS from a first non-blank line ``[to: ADDRESS]`` ('' when the first line is anything else)."""
    first = next((line for line in text.replace("\r\n", "\n").split("\n") if line.strip()), "")
    match = _TO.match(first)
    return match.group(1).strip().strip("<>").strip() if match else ""


def read_reply(text: str, ev: Evidence | None = None) -> Reading:
    """Split the owner's reply into the owner's own text and quote, from evidence first (the
    forward's marker, the contact's own lines), then from the shape of quote headers in any
    language; quoted (``>``) lines are dropped and the owner's text between quote blocks is kept in
    order (bottom-posting, inline answers)."""
    ev = ev or Evidence()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    quoted = [bool(_QUOTED.match(line)) for line in lines]
    norm = [normalise(line) if len(line) <= 4 * ATTRIBUTION_MAX_CHARS else "" for line in lines]
    drop = [False] * len(lines)
    cut, proven = _cut_at_evidence(lines, quoted, norm, drop, ev)
    i = 0
    while i < cut:
        if quoted[i] and (broken := _broken_attribution(lines, quoted, i, ev)) is not None:
            cut = broken
            break
        if (
            quoted[i]
            and _lone_marked(lines, quoted, i)
            and not drop[i - 1]
            and norm[i] not in ev.contact_lines
        ):
            pass  # the owner's own ">>>" line between two lines of text: no client quotes that way
        elif quoted[i] or _quote_fragment(lines, quoted, i):
            drop[i] = True
        elif _separator(lines[i]) or _header_block(lines, quoted, i):
            above = _next_nonblank_up(lines, i - 1)
            top = above >= 0 and (lines[above].rstrip().endswith((":", "：")) or _rule(lines[above]))
            cut = above if top else i
            break
        elif (start := _attribution_start(lines, quoted, i, ev)) is not None:
            after = _next_nonblank(lines, i + 1)
            shared = _shared_line(lines, start, i)
            if shared:  # "reply On … wrote:": the reply shares the attribution's line
                lines[start] = shared
                start += 1
            if after < len(lines) and quoted[after]:
                for k in range(start, i + 1):
                    drop[k] = True
            else:
                cut = start
                break
        i += 1
    own = [
        line
        for k, line in enumerate(lines[:cut])
        if not drop[k] and not (norm[k] in ev.contact_lines and len(norm[k]) >= KNOWN_MIN_CHARS)
    ]
    commands = [line for k, line in enumerate(lines[:cut]) if not drop[k] and norm[k] not in ev.contact_lines]
    body = "\n".join(own).strip("\n").rstrip() + "\n"
    quotes = cut < len(lines)
    return Reading(body, "\n".join(commands), quotes, proven)


def _cut_at_evidence(
    lines: list[str], quoted: list[bool], norm: list[str], drop: list[bool], ev: Evidence
) -> tuple[int, bool]:
    """Where the quote starts by evidence (the forward's marker, a line the contact wrote), marking
    the quote headers of quoted forwards above it in ``drop``; and whether any evidence was found."""

    def known(i: int) -> bool:
        if norm[i] not in ev.contact_lines:
            return False
        j = _next_nonblank(lines, i + 1)
        return len(norm[i]) >= KNOWN_MIN_CHARS or (j < len(lines) and norm[j] in ev.contact_lines)

    proven = False
    for i in range(len(lines)):
        if not (_MARKER in norm[i] or known(i)):
            continue
        proven = True
        if quoted[i]:  # a quoted forward: the quote header above its block goes, the answers stay
            top = _block_start(quoted, i)
            for k in range(_head_start(lines, top, ev), top):
                drop[k] = True
            continue
        return _head_start(lines, i, ev), proven
    return len(lines), proven


def _shared_line(lines: list[str], start: int, end: int) -> str:
    """The owner's words in front of an attribution on the same line ("reply--- On …", "reply On …"),
    when nothing else of the owner's stands above it: before a run of dashes, or before the first
    capitalised word that follows a lower-case one ahead of the date."""
    line = lines[start]
    if (dashes := line.find("---")) > 0:
        return line[:dashes].rstrip()
    if start != end or any(s.strip() for s in lines[:start]):
        return ""
    words = line.split(" ")
    for k in range(1, len(words)):
        before = " ".join(words[:k])
        if _DATE.search(before) or _ADDRESS.search(before):
            return ""
        if words[k][:1].isupper() and words[k - 1][:1].islower():
            return before.rstrip()
    return ""


def _lone_marked(lines: list[str], quoted: list[bool], i: int) -> bool:
    """One ">" line with unquoted text directly above and below it."""
    return (
        0 < i < len(lines) - 1
        and not quoted[i - 1]
        and not quoted[i + 1]
        and bool(lines[i - 1].strip())
        and bool(lines[i + 1].strip())
    )


def _quote_fragment(lines: list[str], quoted: list[bool], i: int) -> bool:
    """A piece of a quoted line that a client's wrapping left without its "> " (a link's tail): one
    unquoted line between two quoted ones, with no space in it, ending in ">", starting in lower case
    or continuing a long quoted line that ends no sentence. The owner's own inline answers are
    sentences, which this leaves alone."""
    if not (0 < i < len(lines) - 1 and quoted[i - 1] and quoted[i + 1]):
        return False
    s, above = lines[i].strip(), lines[i - 1].lstrip(" \t>").rstrip()
    wrapped = len(above) >= 60 and not above.endswith((".", "!", "?", ":"))
    return bool(s) and (" " not in s or s.endswith(">") or s[0].islower() or wrapped)


def _broken_attribution(lines: list[str], quoted: list[bool], i: int, ev: Evidence) -> int | None:
    """An attribution whose last line the client quoted ("<addr>" then "> wrote:") over unquoted
    quote: the line ends with a colon, the next non-blank line is not quoted, and the line above
    names an address."""
    after = _next_nonblank(lines, i + 1)
    if not lines[i].rstrip().endswith((":", "：")) or after >= len(lines) or quoted[after] or i == 0:
        return None
    if quoted[i - 1] or not _ADDRESS.search(lines[i - 1]) or len(lines[i - 1]) > ATTRIBUTION_MAX_CHARS:
        return None
    return _attribution_top(lines, quoted, i - 1, i - 1, ev)


def _next_nonblank_up(lines: list[str], i: int) -> int:
    while i >= 0 and not lines[i].strip():
        i -= 1
    return i


def strip_history(text: str, ev: Evidence | None = None) -> str:
    """The owner's own text of a reply (:func:`read_reply`), command lines still in."""
    return read_reply(text, ev).own


def clean_reply(
    text: str, private_addresses: tuple[str, ...], public_address: str, ev: Evidence | None = None
) -> tuple[str, dict[str, str]]:
    """The text to send and the metadata commands, taken only from the owner's own lines (never
    from quote, never without evidence when the reply quotes)."""
    reading = read_reply(text, ev)
    body, _ = extract_metadata(reading.own)
    _, metadata = extract_metadata(reading.commands)
    if reading.commands_withheld:
        metadata = {}
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return hide_addresses(body, private_addresses, public_address), metadata


def reply_subject(subject: str) -> str:
    """Exactly one 'Re: ' in front of the original subject (no 'Re: Fwd: Re:' chains)."""
    rest = _PREFIX.sub("", subject or "").strip()
    return f"Re: {rest}" if rest else "Re: your message"


MAX_RULES = 1000  # horizontal rules marked in one HTML reply
MAX_RULE_TRIES = 20_000  # "border-top" occurrences examined (each looks back at most RULE_TAG_CHARS)
RULE_TAG_CHARS = 2048  # a style attribute's start is this close to its border-top
_RULE = "<div>" + "_" * 32 + "</div>"


def _mark_rules(html: str) -> str:
    """``html`` with a text rule before every horizontal rule (``<hr>``) and every element drawn with
    a top border (``style="border-top:…"``): how HTML clients separate the quoted original from the
    reply, whatever their language. The text conversion shows them as a line of underscores, which
    :func:`read_reply` reads as a separator. A plain scan, no regular expression."""
    low = html.lower()
    found: list[int] = []
    pos = 0
    while len(found) < MAX_RULES and (pos := low.find("<hr", pos)) >= 0:
        if pos + 3 >= len(low) or not low[pos + 3].isalnum():
            found.append(pos)
        pos += 3
    pos, tries = 0, 0
    while len(found) < MAX_RULES and tries < MAX_RULE_TRIES and (pos := low.find("border-top", pos)) >= 0:
        # The tag it stands in: a "<" at most RULE_TAG_CHARS before it, with no ">" in between.
        floor = max(0, pos - RULE_TAG_CHARS)
        tag = low.rfind("<", floor, pos)
        if tag > low.rfind(">", floor, pos) and low[tag + 1 : tag + 2].isalpha() and "style" in low[tag:pos]:
            found.append(tag)
        pos, tries = pos + 10, tries + 1
    if not found:
        return html
    out, last = [], 0
    for at in sorted(set(found)):
        out += [html[last:at], _RULE]
        last = at
    out.append(html[last:])
    return "".join(out)


def reply_text(text: str, html: str) -> str:
    """What the owner wrote, as text to read with :func:`read_reply`: the text body, or for an
    HTML-only reply the text before its first quote or quote wrapper (common.mail.htmltext), with
    horizontal rules and top-bordered blocks shown as separators. Text below an HTML quote is not
    read: the quote holds the contact's markup, which may close it early (docs/reply.md)."""
    if text and not text.isspace():
        return text
    return convert(_mark_rules(html), own_text_only=True).text if html else ""
