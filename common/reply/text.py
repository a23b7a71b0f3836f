"""Turn the owner's reply into what the contact should read: metadata commands out, quoted history out.

The owner's text is kept unless it is proven to be the contact's (docs/reply.md, "What is the owner's
own text"); an unquoted line removed without proof is reported for the owner's notice, and every
command is read from the lines :func:`command_lines` names. Pure functions (no AWS), each pass linear,
unit-tested against Gmail-, Outlook- and Apple Mail-style replies and the reply corpus.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from common.delivery.compose import FOOTER_MARKER, FORWARD_MARKER
from common.mail.htmldoc import HtmlDoc
from common.mail.htmltext import convert
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
WRAPPED_CHARS = 60  # a quoted line this long may have been wrapped by the client (its tail lost its ">")
KNOWN_BLOCK_LINES = 50  # lines of a quote block looked at for the contact's own lines below an attribution
MARKER_HEADER_LINES = 12  # non-blank lines between the forward's marker and its "From:" row (the banner)


_PREFIX = re.compile(r"^[ \t]*(?:(?:re|fwd?|aw|wg|sv|vs|antw)[ \t]*(?:\[\d{1,6}\][ \t]*)?:[ \t]*)+", re.I)


def normalise(line: str) -> str:
    """A line as compared with what the contact sent: no quote marks, bold stars or spacing
    differences, NFKC, case-folded."""
    line = unicodedata.normalize("NFKC", line.lstrip(" \t>")).casefold().replace("*", "")
    return " ".join(line.split())


# The forward's own markers (common.delivery.compose), each a whole line the system writes above the
# header block's "From:" row: the forward's text opens with one, the footer with the other.
_MARKERS = frozenset(" ".join(m.casefold().split()) for m in (FORWARD_MARKER, FOOTER_MARKER))


def known_lines(*texts: str) -> frozenset[str]:
    """The normalised lines of what a contact sent (the evidence that a line of a reply is quote)."""
    return frozenset(n for text in texts for line in text.splitlines() if len(n := normalise(line)) >= 2)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What proves a line of the owner's reply is quote: the lines the contact sent (archived mail,
    the record's lastMessageBody) and this system's own addresses (a quote header names them)."""

    contact_lines: frozenset[str] = frozenset()
    system_addresses: tuple[str, ...] = ()
    # This conversation's parties, exactly: the contact's address, the public addresses, the thread
    # domain. A quote header naming one is proven (a whole domain of the owner's is not: the owner
    # may quote a colleague there).
    party_addresses: tuple[str, ...] = ()
    complete: bool = True  # False: the conversation's mail was not all read within the reading budget


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
    removed: tuple[str, ...] = ()  # the owner's unquoted lines removed without proof: the owner is told

    @property
    def commands_withheld(self) -> bool:
        """Command lines the owner's reply holds that :func:`command_lines` does not read: below the
        reply's leading lines when its quote was found by shape alone, with no evidence (a header the
        shape rules took for the quote's start may sit inside the contact's mail)."""
        rest = self.commands[len(command_lines(self)) :]
        return bool(owner_controls_in(rest) or _any_command(rest))


def command_lines(reading: Reading) -> str:
    """The one answer to "which lines are the owner's" for every command (``[to:]``, ``[from:]``,
    metadata, controls): the owner's own lines of the reply (never quote, never a line the contact
    sent). When the quote was found by shape alone (no marker, none of the contact's lines), only
    the reply's leading run of command lines counts: the contact's text, even where the shapes
    missed its header, starts below the header or the owner's words, never at the reply's top."""
    if not reading.quoted or reading.proven:
        return reading.commands
    lines = reading.commands.split("\n")
    k = 0
    while k < len(lines) and (not lines[k].strip() or _COMMAND.match(lines[k]) or _CONTROL.match(lines[k])):
        k += 1
    return "\n".join(lines[:k])


def _names_party(line: str, ev: Evidence) -> bool:
    """The line names one of this conversation's parties (a quote header of this conversation)."""
    low = line.casefold()
    return any(a and a in low for a in ev.party_addresses)


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
    """The control lines of the owner's own lines (:func:`command_lines`)."""
    return owner_controls_in(command_lines(read_reply(text, ev)))


def new_conversation_recipient(text: str) -> str:
    """ADDRESS from a first non-blank line ``[to: ADDRESS]`` ('' when the first line is anything else)."""
    first = next((line for line in text.replace("\r\n", "\n").split("\n") if line.strip()), "")
    match = _TO.match(first)
    return match.group(1).strip().strip("<>").strip() if match else ""


def read_reply(text: str, ev: Evidence | None = None) -> Reading:
    """Split the owner's reply into the owner's own text and quote (docs/reply.md, "What is the
    owner's own text"). Removed: the forward below its own marker, ``>``-quoted blocks, what follows
    an unquoted quote header, and lines the contact wrote (each such line alone, never the start of
    a cut). An unquoted line between two quote blocks is the owner's answer. Unquoted lines removed
    without proof are listed in ``Reading.removed`` (the owner is told). One pass, linear."""
    r = _Lines(text, ev or Evidence())
    cut, proven = r.marker_cut()
    cut, proven = r.scan(cut, proven)
    lines, drop, known = r.lines, r.drop, r.known
    removed = [lines[k] for k in range(cut) if drop[k] and r.unproven[k] and lines[k].strip()]
    if cut < len(lines):
        proven_cut = r.cut_proven(cut, proven)
        removed += (
            r.unknown_below(cut)
            if proven_cut
            else [ln for ln in lines[cut:] if ln.strip() and not _QUOTED.match(ln)]
        )
    if r.run_in and not _names_party(r.run_in, r.ev):
        removed.append(r.run_in)
    own = [line for k, line in enumerate(lines[:cut]) if not drop[k] and not known[k]]
    commands = [
        line for k, line in enumerate(lines[:cut]) if not drop[k] and r.norm[k] not in r.ev.contact_lines
    ]
    body = "\n".join(own).strip("\n").rstrip() + "\n"
    return Reading(body, "\n".join(commands), cut < len(lines), proven, tuple(removed))


class _Lines:
    """One reply's lines and what each is, computed once: every question the reading asks of a line
    (the next non-blank line, the next quoted one, a quote block's first line, is it the contact's)
    is a lookup, so a reading is linear in the reply's size whatever the reply or the evidence holds."""

    def __init__(self, text: str, ev: Evidence) -> None:
        self.ev = ev
        self.lines = lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        n = len(lines)
        self.quoted = quoted = [bool(_QUOTED.match(line)) for line in lines]
        self.norm = [
            normalise(line) if line and len(line) <= 4 * ATTRIBUTION_MAX_CHARS and not line.isspace() else ""
            for line in lines
        ]
        self.nonblank = [n] * (n + 1)  # the first non-blank line at or after i
        self.next_quoted = [n] * (n + 1)  # the first quoted line at or after i
        for i in range(n - 1, -1, -1):
            self.nonblank[i] = i if lines[i].strip() else self.nonblank[i + 1]
            self.next_quoted[i] = i if quoted[i] else self.next_quoted[i + 1]
        self.block = [0] * n  # the first line of the quote block a quoted line is in
        for i in range(n):
            self.block[i] = self.block[i - 1] if i and quoted[i] and quoted[i - 1] else i
        self.known = self._contact_lines(ev.contact_lines)
        self.drop = [False] * n
        self.unproven = [False] * n  # a dropped unquoted line whose removal nothing proves
        self.run_in = ""  # the attribution and quote cut off a line of the owner's (_run_in)

    def _contact_lines(self, contact: frozenset[str]) -> list[bool]:
        """Which lines are the contact's: one of 16 characters or more, or a shorter one next to
        another line the contact sent (a short line alone proves nothing: the owner says "Thanks!")."""
        n, norm = len(self.lines), self.norm
        sent = [bool(x) and x in contact for x in norm]
        before, out = n, []
        for i in range(n):
            after = self.nonblank[i + 1] if i + 1 < n else n
            pair = (before < n and sent[before]) or (after < n and sent[after])
            out.append(sent[i] and (len(norm[i]) >= KNOWN_MIN_CHARS or pair))
            if self.lines[i].strip():
                before = i
        return out

    def _marker(self, i: int) -> bool:
        """The forward's own marker as the system wrote it: the whole line, followed within a few lines
        by the header block's "From:" row the system writes under it (a contact's display name is
        never a line of its own followed by that row)."""
        if self.norm[i] not in _MARKERS:
            return False
        k = i + 1
        for _ in range(MARKER_HEADER_LINES):
            k = self.nonblank[k] if k < len(self.lines) else k
            if k >= len(self.lines):
                return False
            if self.norm[k].startswith("from:"):
                return True
            k += 1
        return False

    def marker_cut(self) -> tuple[int, bool]:
        """Where the forward quoted without ``>`` starts (its marker, with the quote header above it),
        the quote headers of ``>``-quoted forwards and of quote blocks holding the contact's lines
        marked for dropping; and whether any such evidence was found. Each block is handled once."""
        proven, done = False, set()
        for i in range(len(self.lines)):
            marker = self._marker(i)
            if not marker and not (self.quoted[i] and self.known[i]):
                continue
            proven = True
            if not self.quoted[i]:
                return _head_start(self.lines, i, self.ev), proven
            top = self.block[i]
            if top not in done:  # a quoted forward: the header above its block goes, the answers stay
                done.add(top)
                for k in range(_head_start(self.lines, top, self.ev), top):
                    self.drop[k] = True
        return len(self.lines), proven

    def unknown_below(self, cut: int) -> list[str]:
        """Below a proven cut, the unquoted lines that are neither the contact's nor the quote's frame
        (the quote header at the cut, a header row, the forward's marker or banner, a separator): the
        owner's answers typed into an unmarked quote (Outlook's inline answers), shown to the owner."""
        n, k = len(self.lines), cut
        while k < n and k - cut < HEADER_BLOCK_MAX_LINES and self._frame(k, header=True):
            k += 1
        return [self.lines[j] for j in range(k, n) if not self._frame(j)]

    def _frame(self, k: int, header: bool = False) -> bool:
        line, norm = self.lines[k], self.norm[k]
        if not line.strip() or self.quoted[k] or norm in self.ev.contact_lines or norm in _MARKERS:
            return True
        if norm.startswith("[!]") or _LABEL.match(line) or _separator(line):
            return True
        return header and (_names(line, self.ev) or line.rstrip().endswith((":", "：")))

    def cut_proven(self, cut: int, proven: bool) -> bool:
        """What follows the cut is proven quote: the forward's marker, a quote header naming one of
        this conversation's parties, or the contact's own lines below it."""
        if (
            proven
            and cut < len(self.lines)
            and any(self._marker(k) for k in range(cut, min(cut + HEADER_WALK_LINES + 1, len(self.lines))))
        ):
            return True
        head = range(cut, min(cut + HEADER_BLOCK_MAX_LINES, len(self.lines)))
        return any(_names_party(self.lines[k], self.ev) for k in head) or any(self.known[cut:])

    def scan(self, cut: int, proven: bool) -> tuple[int, bool]:
        """Down the owner's part (above ``cut``): ``>`` lines dropped, the first quote header by shape."""
        lines, quoted, drop = self.lines, self.quoted, self.drop
        seen_quote = False
        first_text = self.nonblank[0]
        for i in range(cut):
            if quoted[i]:
                if (broken := _broken_attribution(lines, quoted, i, self.ev)) is not None:
                    return broken, proven
                if not (_lone_marked(lines, quoted, i) and not drop[i - 1] and not self.known[i]):
                    drop[i] = True
                seen_quote = True
                continue
            if self.known[i]:  # a line of the contact's: that line only, never the start of a cut
                drop[i], self.unproven[i] = True, True
                self._header_over(i)
                continue
            if seen_quote and self.next_quoted[i + 1] < cut:
                # Between two quote blocks: the owner's answer, whatever it names (a time, an address,
                # one word), except a wrapped piece of a quoted link that lost its ">".
                if _quote_fragment(lines, quoted, i):
                    drop[i], self.unproven[i] = True, True
                continue
            if (run_in := self._run_in(i)) is not None:
                return run_in, proven
            if _separator(lines[i]) or _header_block(lines, quoted, i):
                above = _next_nonblank_up(lines, i - 1)
                top = above >= 0 and (lines[above].rstrip().endswith((":", "：")) or _rule(lines[above]))
                return (above if top else i), proven
            if (start := _attribution_start(lines, quoted, i, self.ev)) is not None:
                found = self._attribution(start, i, first_text)
                if found is not None:
                    return found, proven
        return cut, proven

    def _run_in(self, i: int) -> int | None:
        """An attribution run together on one line with the owner's words before it and the quote
        after it ("Thanks! On …, Jane <jane@x> wrote: > Hi", or on the reply's last line "… Jane
        <jane@x> schrieb am …, 10:00: Hi"): the line keeps the owner's words, the cut falls after it,
        and what was cut off the line is kept in ``run_in`` (shown to the owner unless it names one
        of this conversation's parties)."""
        line = self.lines[i]
        last = (self.nonblank[i + 1] if i + 1 < len(self.lines) else len(self.lines)) >= len(self.lines)
        if len(line) > 4 * ATTRIBUTION_MAX_CHARS or (start := _run_in_start(line, last)) is None:
            return None
        if start == 0 and i <= self.nonblank[0]:  # the reply's only words: the owner's, whatever they name
            return None
        self.lines[i], self.run_in = line[:start].rstrip(), line[start:]
        self.drop[i] = not self.lines[i].strip()
        return i + 1

    def _header_over(self, i: int) -> None:
        """The quote header over a run of the contact's lines (two or more, starting at ``i``): the
        header-shaped lines right above it (a label, a date, an address, a trailing colon, a rule)
        go with it, shown to the owner like the run. Each run is looked at once, from its top."""
        n = len(self.lines)
        above = _next_nonblank_up(self.lines, i - 1)
        below = self.nonblank[i + 1] if i + 1 < n else n
        if (above >= 0 and self.known[above]) or below >= n or not self.known[below]:
            return
        for k in range(_head_start(self.lines, i, self.ev), i):
            if not self.quoted[k] and self.lines[k].strip():
                self.drop[k], self.unproven[k] = True, True

    def _attribution(self, start: int, end: int, first_text: int) -> int | None:
        """An attribution at ``start``..``end``: dropped when a quote block follows it (the cut is
        ``None``), else the cut. Its removal is proven when it names this system's or the contact's
        address or the block below holds the contact's lines; otherwise the owner is told."""
        lines = self.lines
        after = self.nonblank[end + 1] if end + 1 < len(lines) else len(lines)
        shared = _shared_line(lines, start, end, first_text)
        if shared:  # "reply On … wrote:": the reply shares the attribution's line
            lines[start] = shared
            start += 1
        if not (after < len(lines) and self.quoted[after]):
            return start
        block_end = after
        while block_end < len(lines) and self.quoted[block_end] and block_end - after < KNOWN_BLOCK_LINES:
            block_end += 1
        proof = any(_names_party(lines[k], self.ev) for k in range(start, end + 1)) or any(
            self.known[after:block_end]
        )
        for k in range(start, end + 1):
            self.drop[k], self.unproven[k] = True, not proof
        return None


def _shared_line(lines: list[str], start: int, end: int, first_text: int) -> str:
    """The owner's words in front of an attribution on the same line ("reply--- On …", "reply On …"),
    when nothing else of the owner's stands above it: before a run of dashes, or before the first
    capitalised word that follows a lower-case one ahead of the date."""
    line = lines[start]
    if (dashes := line.find("---")) > 0:
        return line[:dashes].rstrip()
    if start != end or first_text < start:
        return ""
    words = line.split(" ")
    for k in range(1, len(words)):
        before = " ".join(words[:k])
        if _DATE.search(before) or _ADDRESS.search(before):
            return ""
        if words[k][:1].isupper() and words[k - 1][:1].islower():
            return before.rstrip()
    return ""


_BRACKETED = re.compile(r"<[\w.+-]{1,64}@[\w.-]{1,255}>")
RUN_IN_COLONS = 8  # colons of a line tried as the end of a run-in attribution
_RUN_IN_MARKS = (": >", ":>", "： >", "：>")


def _run_in_start(line: str, last: bool) -> int | None:
    """Where an attribution run together with the quote starts on ``line``: its colon is followed by a
    quote mark (": >"), or, on the reply's last line, by text; the words before the colon name a date
    and an address; it starts after the last sentence the owner ended before them (or at the line's
    start). A plain scan and the bounded patterns, on a line of bounded length."""
    colons = [at for at in (line.find(m) for m in _RUN_IN_MARKS) if at >= 0]
    bracketed = not colons  # without a quote mark, only a header's "<address>" tells it from prose
    if last and not colons:
        at, found = line.find(": "), 0
        while at >= 0 and found < RUN_IN_COLONS:
            colons.append(at)
            at, found = line.find(": ", at + 2), found + 1
    for colon in sorted(colons):
        head = line[:colon]
        date, address = _DATE.search(head), _ADDRESS.search(head)
        if not (date and address) or (bracketed and not _BRACKETED.search(head)):
            continue
        first = min(date.start(), address.start())
        end = max(head.rfind(mark, 0, first) for mark in (". ", "! ", "? "))
        start = end + 2 if end >= 0 else 0
        return start if colon - start <= ATTRIBUTION_MAX_CHARS else None
    return None


def _lone_marked(lines: list[str], quoted: list[bool], i: int) -> bool:
    """One line opening with ">>" or of marks alone (">>> link <<<" art), with unquoted text directly
    above and below it: no client quotes one line two levels deep alone. A "> " line with words there
    is the contact's question, answered inline."""
    return (
        0 < i < len(lines) - 1
        and (lines[i].lstrip().startswith(">>") or not any(c.isalnum() for c in lines[i]))
        and not quoted[i - 1]
        and not quoted[i + 1]
        and bool(lines[i - 1].strip())
        and bool(lines[i + 1].strip())
    )


def _quote_fragment(lines: list[str], quoted: list[bool], i: int) -> bool:
    """A piece of a quoted line that a client's wrapping left without its "> ": one unquoted line
    between two quoted ones that is a link's tail (one word under a quoted line ending in a link's
    start, or a line ending in ">"), or that goes on, in lower case, from a quoted line long enough
    to have been wrapped. Anything else there is the owner's answer ("Yes.", "OK", "Confirmed.",
    "10:00 at jane@corp.example"); what this removes is shown to the owner (``Reading.removed``)."""
    if not (0 < i < len(lines) - 1 and quoted[i - 1] and quoted[i + 1]):
        return False
    s, above = lines[i].strip(), lines[i - 1].lstrip(" \t>").rstrip()
    if not s:
        return False
    last = above.rsplit(None, 1)[-1].lower() if above.split() else ""
    link = "://" in last or last.startswith(("www.", "<http", "<www", "<mailto:"))
    wrapped = s[0].islower() and len(above) >= WRAPPED_CHARS
    return (link and len(s.split()) == 1) or s.endswith(">") or wrapped


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
    _, metadata = extract_metadata(command_lines(reading))
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return hide_addresses(body, private_addresses, public_address), metadata


def reply_subject(subject: str) -> str:
    """Exactly one 'Re: ' in front of the original subject (no 'Re: Fwd: Re:' chains)."""
    rest = _PREFIX.sub("", subject or "").strip()
    return f"Re: {rest}" if rest else "Re: your message"


def reply_text(text: str, html: str | HtmlDoc) -> str:
    """What the owner wrote, as text to read with :func:`read_reply`: the text body, or for an
    HTML-only reply (its HTML or the parsed tree, ``ParsedMail.html_doc``) the text before its first
    quote or quote wrapper (common.mail.htmltext), with horizontal rules and top-bordered blocks shown
    as separators. Text below an HTML quote is not read: the quote holds the contact's markup, which
    may close it early (docs/reply.md)."""
    if text and not text.isspace():
        return text
    return convert(html, own_text_only=True, rules=True).text if html else ""


def unread_html_lines(
    text: str, html: str | HtmlDoc, reading: Reading, ev: Evidence | None = None
) -> tuple[str, ...]:
    """For an HTML-only reply, the unquoted lines below its first HTML quote that :func:`reply_text`
    does not read (the owner's answers typed under a quote, or the contact's markup that closed the
    quote early): never sent, so shown to the owner (no silent loss). One more reading of the tree."""
    if (text and not text.isspace()) or not html:
        return ()
    sent = set(reading.own.split("\n"))
    below = read_reply(convert(html, rules=True).text, ev).own
    return tuple(line for line in below.split("\n") if line.strip() and line not in sent)
