"""Caps checked on the raw bytes before anything parses them (docs/security.md, the caps table).

Mail comes from anyone, and parsing costs are set by the sender: a mail over any cap is
quarantined unparsed (with the reason) instead of being parsed. :func:`screen` is a few linear
scans in C (regular expressions over bytes), so it costs milliseconds even at SES's 40 MB.
The values and their measured cost are in docs/security.md (Parsing caps) and ``bench/mail_caps.py``.
"""

from __future__ import annotations

import re

from common.mail.headers import MAX_COMMENT_DEPTH, MAX_ENCODED_WORDS

# Exchange Online refuses header blocks over 256 KB; no mail that passed a big provider is larger.
MAX_HEADER_BYTES = 256 * 1024
MAX_HEADER_FIELDS = 1000  # real mail has < 100 (a long Received chain plus DKIM/ARC sets)
MAX_HEADER_FIELD_BYTES = 64 * 1024  # one field, folded lines included
# The Subject reaches the owner whole (the generator folds it): a cap below the field's would cut the
# subject a sender wrote. Other header values are cut at one line's 998 characters.
MAX_SUBJECT_CHARS = MAX_HEADER_FIELD_BYTES
MAX_MIME_PARTS = 500  # Content-Type fields anywhere in the message
# Lines starting with "--" anywhere in the message: every part opens with one and every multipart
# closes with one, whether or not the part has a Content-Type (a part of "--b", a blank line and
# "x" has none: 200,000 of them took the parser 10 s and 94 MB).
MAX_DELIMITER_LINES = 2 * MAX_MIME_PARTS
MAX_STORED_ATTACHMENTS = 100  # per mail; the rest stay in the archive and are named in the forward
# What the deny-list check (common/mail/withhold.py) reads inside a part before it gives up and withholds it:
MAX_ARCHIVE_NAMES = 10_000  # names in a zip's central directory; more: withheld unread
MAX_NESTED_ARCHIVE_BYTES = (
    32 * 1024 * 1024
)  # .zip members of a zip decompressed to read their names, per part
MAX_MESSAGE_NESTING = 3  # forwarded messages inside forwarded messages that are parsed for their parts
# The owner's daily quarantine digest (common/delivery/compose.build_digest): bounded whatever the
# day's volume
DIGEST_MAX_ENTRIES = 100  # listed with their release addresses; the rest are counted ("and N more")
# Held mail is offered by the digests for a week (then only `email-handler quarantine list` shows it):
# what a digest reads stays bounded by a week of held mail, and a flood never makes the digest stale.
DIGEST_WINDOW_DAYS = 7
DIGEST_SENDER_CHARS = 120
DIGEST_SUBJECT_CHARS = 150
DIGEST_REASON_CHARS = 200

# The feed parser ends a line at CRLF, CR or LF, so the header block ends at the first empty line
# under any of them, and fields are read after the same split (a bare-CR header block must not be
# screened as one field).
_BREAK = rb"(?:\r\n|\r(?!\n)|\n)"
_BLANK_LINE = re.compile(_BREAK + _BREAK)
_LINE_ENDS = re.compile(rb"\r\n?")
_FIELD = re.compile(rb"^([^ \t\r\n:]{1,200}):([^\n]*+(?:\n[ \t][^\n]*+)*+)", re.M)
_FIELD_START = re.compile(rb"^[^ \t\r\n]", re.M)
# Spelled out in character classes after a literal line end: ten times faster than IGNORECASE|MULTILINE
# (or a [\r\n] class) over 40 MB of base64. Fields after a bare CR count too (the feed parser splits there).
_CONTENT_TYPES = tuple(
    re.compile(end + rb"[Cc][Oo][Nn][Tt][Ee][Nn][Tt]-[Tt][Yy][Pp][Ee][ \t]*:") for end in (rb"\n", rb"\r")
)
_ENCODED_WORD_START = re.compile(rb"=\?")
_PARENS = re.compile(rb'[()"\\]')
_STRUCTURED = frozenset(
    {
        b"from",
        b"sender",
        b"reply-to",
        b"to",
        b"cc",
        b"bcc",
        b"resent-from",
        b"resent-sender",
        b"content-type",
        b"content-disposition",
        b"message-id",
        b"in-reply-to",
        b"references",
    }
)


def header_block(raw: bytes) -> bytes:
    """The top-level header block (up to the first empty line; all of ``raw`` if none)."""
    m = _BLANK_LINE.search(raw, 0, MAX_HEADER_BYTES + 4)
    return raw[: m.start()] if m else raw[: MAX_HEADER_BYTES + 1]


# The top header block, line by line as the feed parser splits it (CRLF, CR or LF).
_HEADER_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n|$)")
# Fields every mail has or every client reads: one of them after a stray line shows the header goes on.
_KNOWN_FIELD = re.compile(
    rb"(?i)(?:from|to|cc|subject|date|message-id|mime-version|content-[a-z-]+|received|"
    rb"reply-to|references|in-reply-to|return-path|sender|x-[\x21-\x39\x3b-\x7e]*):"
)
_ADDRESS_FIELDS = frozenset({b"from", b"sender", b"reply-to", b"to", b"cc", b"bcc", b"return-path"})
# A line after the first that may be stray (no colon, not a fold, not "--" or "From "): most mail has
# none, and then the screen stays a scan in C.
# A line that is not a field to the feed parser: no field name (printable ASCII, no space) before a
# colon. "by localhost with SMTP; 19 Nov 2014 08:46:08" (a folded Received line that lost its
# indentation) has colons, but in its time, after a space.
_MAYBE_STRAY = re.compile(rb"[\r\n](?![ \t]|--|From |[\x21-\x39\x3b-\x7e]*:)[^\r\n]+(?=[\r\n]|\Z)")
_FIELD_NAME = re.compile(rb"[\x21-\x39\x3b-\x7e]*:")  # a field name and its colon, at a line's start


def mend_header(block: bytes) -> tuple[bytes, int]:
    """The header block with each stray line read as a continuation; and how many.

    A header line without a colon ends the header block for the feed parser (its
    MissingHeaderBodySeparatorDefect), so every field after it, Content-Type included, became body text:
    the owner got the rest of the header and the raw MIME parts. Exchange writes such lines when it breaks
    a long field without folding it (github.com/jstedfast/MimeKit/issues/358). A line is mended (given the
    leading space of a fold) only when it has no colon at all, is not the first line, does not start with
    "--" (a body that begins without the empty line opens with its boundary), does not continue an address
    field (no stray text joins From or Reply-To), and a field every client knows follows it in the block
    before any line starting with "--" (a preamble line before the first boundary, with no empty line
    above it, stays the start of the body). One pass over the block, which :func:`screen` has capped at
    256 KB before it mends.

    :func:`screen` measures the mended block and the parser reads it (:func:`mend_header_block`):
    both see one header, so a field's stray lines count towards that field's caps."""
    if not _MAYBE_STRAY.search(block):
        return block, 0
    lines = [m for m in _HEADER_LINE.finditer(block) if m.end() > m.start()]
    mend: list[int] = []
    known_after = False
    for i in range(len(lines) - 1, 0, -1):
        line = lines[i].group()
        if line.startswith(b"--"):  # the body began without the empty line: what follows are a part's fields
            known_after = False
            continue
        # Without a colon only a continuation or an mbox "From " line is a field to the feed parser.
        if (
            known_after
            and not _FIELD_NAME.match(line)
            and line[:1] not in (b" ", b"\t")
            and not line.startswith(b"From ")
        ):
            mend.append(i)
        known_after = known_after or _KNOWN_FIELD.match(line) is not None
    if not mend:
        return block, 0
    mended: list[bytes] = []
    pos = 0
    for i in reversed(mend):  # in document order
        previous = next(
            (lines[j].group() for j in range(i - 1, -1, -1) if lines[j].group()[:1] not in (b" ", b"\t")), b""
        )
        if previous.split(b":", 1)[0].strip().lower() in _ADDRESS_FIELDS:
            continue
        mended += [block[pos : lines[i].start()], b" "]
        pos = lines[i].start()
    if not mended:
        return block, 0
    return b"".join([*mended, block[pos:]]), len(mended) // 2


def mend_header_block(raw: bytes) -> tuple[bytes, int]:
    """The mail with its top header block mended (:func:`mend_header`); and how many lines were."""
    block = header_block(raw)
    mended, count = mend_header(block)
    return (mended + raw[len(block) :], count) if count else (raw, 0)


def comment_depth(value: bytes) -> int:
    """The deepest nesting of RFC 5322 comments in ``value`` (quoted strings and escapes honoured)."""
    depth = deepest = 0
    quoted = False
    escaped = -1  # position of the character a backslash escapes
    for m in _PARENS.finditer(value):
        pos, ch = m.start(), m.group()
        if pos == escaped:
            continue
        if ch == b"\\":
            escaped = pos + 1
        elif ch == b'"' and depth == 0:
            quoted = not quoted
        elif not quoted and ch == b"(":
            depth += 1
            deepest = max(deepest, depth)
        elif not quoted and ch == b")" and depth:
            depth -= 1
    return deepest


def delimiter_lines(raw: bytes) -> int:
    """Lines that start with "--" (after CRLF, CR or LF), counted in C."""
    return raw.count(b"\n--") + raw.count(b"\r--") + raw.startswith(b"--")


def screen(raw: bytes) -> str:
    """Why ``raw`` must not be parsed ('' when it is within every cap)."""
    block = header_block(raw)
    if len(block) > MAX_HEADER_BYTES:
        return f"header block over {MAX_HEADER_BYTES} bytes"
    block = _LINE_ENDS.sub(b"\n", mend_header(block)[0])  # the header the parser will read
    fields = len(_FIELD_START.findall(block))
    if fields > MAX_HEADER_FIELDS:
        return f"{fields} header fields (limit {MAX_HEADER_FIELDS})"
    for m in _FIELD.finditer(block):
        name, value = m.group(1).lower(), m.group(2)
        if len(value) > MAX_HEADER_FIELD_BYTES:
            return f"header field {name.decode('ascii', 'replace')} over {MAX_HEADER_FIELD_BYTES} bytes"
        words = len(_ENCODED_WORD_START.findall(value))
        if words > MAX_ENCODED_WORDS:
            return f"{words} encoded words in {name.decode('ascii', 'replace')} (limit {MAX_ENCODED_WORDS})"
        if name in _STRUCTURED and b"(" in value:
            depth = comment_depth(value)
            if depth > MAX_COMMENT_DEPTH:
                field = name.decode("ascii", "replace")
                return f"comments nested {depth} deep in {field} (limit {MAX_COMMENT_DEPTH})"
    parts = sum(len(p.findall(raw)) for p in _CONTENT_TYPES) + raw[:13].lower().startswith(b"content-type")
    if parts > MAX_MIME_PARTS:
        return f"{parts} MIME parts (limit {MAX_MIME_PARTS})"
    delimiters = delimiter_lines(raw)
    if delimiters > MAX_DELIMITER_LINES:
        return f"{delimiters} MIME delimiter lines (limit {MAX_DELIMITER_LINES})"
    return ""
