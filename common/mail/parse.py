"""Parse received mail defensively: any bytes in, a :class:`ParsedMail` out, never an exception.

How (and why this way):

* The MIME tree comes from the stdlib's feed parser under ``compat32``, which keeps header values
  as the sender wrote them and reads Outlook Express's unquoted ``boundary=----=_NextPart…``
  whole (``policy.default`` reads ``----`` and loses every part).
* Header values are decoded here, in one pass over each part's fields, in linear time
  (common.mail.headers): raw 8-bit bytes as UTF-8, else the body's charset, else cp1252; encoded
  words under their charset's common superset. The header registry is never run on a sender's
  header, and no header is looked up per field name (that was quadratic in the field count).
* Bodies: the declared charset when the bytes decode under it, then UTF-8, then cp1252 or
  gb18030 (common.mail.charsets). Nothing leaves this module with a lone surrogate.
* Every part the body does not show is kept as an :class:`Attachment` with a ``role``, so the
  forward can carry what the sender meant the owner to read: ``file``, ``text`` (an inline text
  part that is not the body), ``message`` (message/rfc822, message/partial, delivery reports) or
  ``crypto`` (S/MIME and PGP parts). Attachment types come from name + magic bytes
  (common.mail.filetypes), never from the sender's claim.
* The whole parse is guarded: whatever a mail does to the parser (nesting 1,000 deep raises
  RecursionError), the result is a minimal ParsedMail (From, Subject, ids from the top header
  block, the original as a message/rfc822 part) that is still archived and forwarded.

Callers check :func:`common.mail.limits.screen` first: a mail over a cap is never parsed.
"""

from __future__ import annotations

import binascii
import email
import email.policy
import hashlib
import quopri
import re
import urllib.parse
from dataclasses import dataclass, field
from email.generator import BytesGenerator
from email.message import Message
from email.parser import BytesFeedParser
from io import BytesIO

from common.errors import EmailHandlerError
from common.mail import charsets, filetypes, htmldoc, limits
from common.mail.headers import address_problem, decode_words, header_text, parse_mailbox, unfold
from common.mail.htmldoc import HtmlDoc
from common.mail.htmltext import HtmlText, convert
from common.mail.sanitize import MESSAGE_ID, clean_header_text, display_filename, safe_filename

_NOREPLY = re.compile(
    r"^(no[-_.]?reply|do[-_.]?not[-_.]?reply|mailer[-_.]?daemon|postmaster|bounces?)([-+._].*)?$", re.I
)
# MIME nesting the walk follows; a deeper mail is parsed as minimal(). The stdlib's feed parser
# reads far deeper (500 levels, the part cap of limits.screen, in tests/unit/test_mail_parse.py) and
# real test corpora nest about 100 levels, which the forward carries in full.
MAX_DEPTH = 200
_READABLE_TEXT = frozenset({"plain", "html", "enriched", "richtext", "markdown"})
ROLES = ("file", "text", "message", "crypto")
ORIGINAL_NAME = "original message.eml"  # the whole mail, attached by minimal()


@dataclass(slots=True)
class Attachment:
    filename: str  # as sent, decoded and cleaned (for display); long names keep their extension
    safe_name: str  # safe as the last segment of an S3 key
    content_type: str  # from the name and the first bytes (common.mail.filetypes), not the sender's claim
    data: bytes  # decoded content; message/* parts: the embedded message's bytes
    declared_type: str = ""  # what the sender said (type/subtype, lower case)
    mime_header: str = ""  # the original Content-Type value, cleaned (parameters kept)
    role: str = "file"  # one of ROLES
    disposition: str = ""  # "inline" | "attachment" | ""
    content_id: str = ""  # without the angle brackets
    charset: str = ""  # the part's charset parameter as sent ('' when none); text parts are decoded under it


@dataclass(slots=True)
class ParsedMail:
    raw_size: int
    from_address: str = ""  # lower-cased addr-spec of the From mailbox ('' when none)
    display_name: str = ""
    subject: str = ""
    message_id: str = ""
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)
    text: str = ""
    html: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names, first field, decoded, cleaned
    header_counts: dict[str, int] = field(default_factory=dict)  # lower-cased name -> fields with that name
    problems: list[str] = field(default_factory=list)
    from_problem: str = (
        ""  # why from_address cannot be a contact ('' when it can; see headers.address_problem)
    )
    from_defects: list[str] = field(
        default_factory=list
    )  # syntax oddities of the From field (headers.parse_mailbox)
    from_mailboxes: int = 0
    charset: str = ""  # the body's declared charset (the hint for undeclared 8-bit header bytes)
    parse_failed: str = ""  # why the full parse failed and this is the minimal fallback ('' normally)
    _html_text: HtmlText | None = field(default=None, init=False, repr=False, compare=False)
    _html_doc: HtmlDoc | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def html_doc(self) -> HtmlDoc:
        """The HTML body parsed, once (common.mail.htmldoc, within its caps): the text conversion
        reads it, then the forward's sanitiser rewrites it (common.mail.htmlsafe)."""
        if self._html_doc is None or self._html_doc.sanitized:  # a second forward built: read again
            self._html_doc = htmldoc.read(self.html)
        return self._html_doc

    @property
    def html_text(self) -> HtmlText | None:
        """The HTML body as text when the mail has no text body (None when it has one); converted
        once from ``html_doc`` and kept."""
        if self._has_text():
            return None
        if self._html_text is None:
            self._html_text = convert(self.html_doc)
        return self._html_text

    @property
    def body_text(self) -> str:
        """The text body, or text derived from the HTML body when the mail has only HTML."""
        derived = self.html_text
        return self.text if derived is None else derived.text

    @property
    def own_text(self) -> str:
        """What the writer of a reply wrote: the text body, or for an HTML-only mail the text before
        the first quote or forward wrapper (nothing inside or after a quote is the writer's own)."""
        return self.text if self._has_text() else convert(self.html_doc, own_text_only=True).text

    def _has_text(self) -> bool:
        return bool(self.text) and not self.text.isspace()  # (not strip(): that copies a 38 MB body)

    @property
    def is_noreply(self) -> bool:
        return bool(_NOREPLY.match(self.from_address.partition("@")[0]))

    def has_list_headers(self) -> bool:
        """RFC 2369's List-* fields, or the older lists' own: ezmlm's Mailing-List, SmartList's
        X-Mailing-List."""
        return any(
            name.startswith("list-") or name in ("mailing-list", "x-mailing-list") for name in self.headers
        )

    def header_count(self, name: str) -> int:
        return self.header_counts.get(name.lower(), 0)


class GiveUpError(EmailHandlerError):
    """The mail asks the parser for more work than any real mail needs (nesting, re-parsing): the
    owner gets it as :func:`minimal` makes it, the original attached whole."""


def parse(raw: bytes) -> ParsedMail:
    try:
        return _parse(raw)
    except GiveUpError as exc:
        return minimal(raw, str(exc))
    except Exception as exc:  # RecursionError from deep nesting, or anything a mail can provoke
        return minimal(raw, f"{type(exc).__name__}: {str(exc)[:200]}")


def minimal(raw: bytes, why: str) -> ParsedMail:
    """What can be said without the MIME parser: the top header block, and the original attached."""
    mail = ParsedMail(raw_size=len(raw), parse_failed=why)
    mail.problems.append(f"message could not be parsed ({why})")
    try:
        _read_headers(mail, raw_fields(limits.header_block(raw)), ())
    except Exception as exc:  # even the header block: keep going with what we have
        mail.problems.append(f"header block unreadable: {type(exc).__name__}")
    mail.attachments.append(
        Attachment(
            ORIGINAL_NAME,
            ORIGINAL_NAME,
            "message/rfc822",
            raw,
            declared_type="message/rfc822",
            mime_header="message/rfc822",
            role="message",
        )
    )
    return mail


_RAW_FIELD = re.compile(rb"^([^ \t\r\n:]{1,200}):[ \t]*+([^\n]*+(?:\n[ \t][^\n]*+)*+)", re.M)


def raw_fields(block: bytes) -> list[tuple[str, str]]:
    """(name, value) of each field in a header block, values as written (8-bit kept as surrogates)."""
    return [
        (m.group(1).decode("ascii", "replace"), m.group(2).rstrip(b"\r").decode("ascii", "surrogateescape"))
        for m in _RAW_FIELD.finditer(block)
    ]


# Large bodies stay out of the feed parser, which holds about seven times a body's size while it
# splits it into lines (a 40 MB mail took the process past 300 MB): every body over
# SKELETON_THRESHOLD that follows a header block naming a transfer encoding is replaced by a
# placeholder line, and decoded later straight from ``raw``. A body always ends before the next
# line starting with "--" (every boundary line does), so the cut can never hide a boundary.
SKELETON_THRESHOLD = 256 * 1024
_CTE_FIELD = re.compile(
    rb"\n[Cc][Oo][Nn][Tt][Ee][Nn][Tt]-"
    rb"[Tt][Rr][Aa][Nn][Ss][Ff][Ee][Rr]-[Ee][Nn][Cc][Oo][Dd][Ii][Nn][Gg][ \t]*:"
)
_BLANK = re.compile(rb"\r?\n\r?\n")
_PLACEHOLDER = re.compile("\x00seh-body-([0-9]+)\x00\r?\n?")


@dataclass(slots=True)
class _Source:
    raw: bytes
    cuts: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each cut body in raw

    def skeleton(self) -> bytes:
        out: list[bytes] = []
        pos = 0
        for m in _CTE_FIELD.finditer(self.raw):
            if m.start() < pos:
                continue
            blank = _BLANK.search(self.raw, m.end())
            if blank is None:
                break
            start = blank.end()
            end = self.raw.find(b"\n--", start)
            end = len(self.raw) if end < 0 else end + 1
            if end - start < SKELETON_THRESHOLD:
                continue
            out += [self.raw[pos:start], b"\x00seh-body-%d\x00\n" % len(self.cuts)]
            self.cuts.append((start, end))
            pos = end
        if not self.cuts:
            return self.raw
        out.append(self.raw[pos:])
        return b"".join(out)

    def restore(self, text: str) -> bytes:
        """A payload (or regenerated bytes) with every placeholder replaced by the cut bytes."""
        pieces: list[bytes | memoryview] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(text):
            pieces.append(text[pos : m.start()].encode("utf-8", "surrogateescape"))
            start, end = self.cuts[int(m.group(1))]
            pieces.append(memoryview(self.raw)[start:end])
            pos = m.end()
        pieces.append(text[pos:].encode("utf-8", "surrogateescape"))
        return b"".join(pieces)

    def decoded(self, msg: Message) -> bytes | None:
        """``msg.get_payload(decode=True)``, reading cut bodies from ``raw`` (base64 without copying it)."""
        payload = raw_payload(msg)
        if not self.cuts or "\x00seh-body-" not in payload:
            decoded = msg.get_payload(decode=True)
            return decoded if isinstance(decoded, bytes) else None
        cte = str(msg.get("content-transfer-encoding", "")).strip().lower()
        if cte == "base64":
            chunks: list[bytes] = []
            pos = 0
            for m in _PLACEHOLDER.finditer(payload):
                chunks.append(_b64(payload[pos : m.start()].encode("ascii", "replace")))
                start, end = self.cuts[int(m.group(1))]
                chunks.append(_b64(memoryview(self.raw)[start:end]))
                pos = m.end()
            chunks.append(_b64(payload[pos:].encode("ascii", "replace")))
            return b"".join(chunks)
        data = self.restore(payload)
        if cte == "quoted-printable":
            return quopri.decodestring(data)
        return data


def _b64(data: bytes | memoryview) -> bytes:
    try:
        return binascii.a2b_base64(data)  # skips line breaks and other non-alphabet bytes
    except binascii.Error:  # bad padding: decode what forms whole groups
        clean = re.sub(rb"[^A-Za-z0-9+/]", b"", bytes(data))
        return binascii.a2b_base64(clean[: len(clean) - len(clean) % 4]) if len(clean) >= 4 else b""


# A quoted boundary parameter folded inside its quotes (``boundary="simple\r\n boundary"``): unfolding
# removes the CRLF only (RFC 5322 section 2.2.3), so the boundary is "simple boundary"; compat32's
# get_boundary() keeps the line break and the feed parser never finds a delimiter.
_FOLDED_BOUNDARY = re.compile(
    rb'(;[ \t\r\n]*boundary[ \t\r\n]*=[ \t\r\n]*")'
    rb'((?:[^"\\\r\n]|\\.)*+(?:\r?\n[ \t](?:[^"\\\r\n]|\\.)*+)++)"',
    re.I,
)
_BOUNDARY_VALUE = re.compile(
    rb'[;\s]boundary[ \t]*=[ \t]*(?:"((?:[^"\\\r\n]|\\.){1,200})"|([^\s;"]{1,200}))', re.I
)
# A delimiter line with text after the boundary and a space (``--boundary trailing text``): mime4j
# and other tolerant readers take it as the delimiter; the feed parser allows only whitespace there.
_TRAILING_TEXT = re.compile(rb"\n--[^\s]{1,200}(?:--)?[ \t]+[^\s]")  # a literal start: 35 MB in 0.06 s


def mend_boundaries(raw: bytes) -> tuple[bytes, list[str]]:
    """``raw`` with what stops the feed parser from splitting a multipart a mail client splits
    mended, and what was mended: folded boundary parameters unfolded, and delimiter lines of a
    declared boundary with trailing text cut to the delimiter (RFC 2046 section 5.1.1)."""
    notes: list[str] = []
    raw, folded = _FOLDED_BOUNDARY.subn(lambda m: m.group(1) + re.sub(rb"\r?\n", b"", m.group(2)) + b'"', raw)
    if folded:
        notes.append(f"{folded} boundary parameter(s) folded across lines read unfolded")
    if _TRAILING_TEXT.search(raw) is None:
        return raw, notes
    declared = {(m.group(1) or m.group(2)).rstrip() for m in _BOUNDARY_VALUE.finditer(raw)}
    declared.discard(b"")
    if not declared:
        return raw, notes
    # Longest first, so a boundary that extends another is matched whole.
    names = b"|".join(
        re.escape(b) for b in sorted(declared, key=len, reverse=True)[: limits.MAX_DELIMITER_LINES]
    )
    raw, cut = re.subn(rb"(?m)^(--(?:" + names + rb")(?:--)?)[ \t]+[^\s][^\r\n]*", rb"\1", raw)
    if cut:
        notes.append(f"{cut} delimiter line(s) with text after the boundary read as delimiters")
    return raw, notes


def _parse(raw: bytes) -> ParsedMail:
    mail = ParsedMail(raw_size=len(raw))
    raw, mended = limits.mend_header_block(raw)  # as limits.screen read it
    raw, boundary_notes = mend_boundaries(raw)
    mail.problems += boundary_notes
    source = _Source(raw)
    skeleton = source.skeleton()
    msg = email.message_from_bytes(skeleton, policy=email.policy.compat32)
    if mended:
        mail.problems.append(f"{mended} header line(s) without a colon read as folded continuations")
    parts = _walk(msg, mail, _Budget(REPARSE_FACTOR * len(skeleton) + REPARSE_FLOOR))
    mail.charset = charsets.scrub(
        next((p.params["charset"] for p in parts if p.maintype == "text" and p.params.get("charset")), "")
    )[:40]
    hints = (mail.charset,) if mail.charset else ()
    _read_headers(mail, [(str(k), str(v)) for k, v in msg.raw_items()], hints)
    # A named part is a file the sender attached, whatever its type (a named inline text/html in a
    # multipart/mixed is not the HTML rendering of the text beside it). Only when no unnamed part can
    # be the body is a named one shown as the body, and then it is attached as well (its name kept).
    text_part, html_part = _body(parts, "plain", named=False), _body(parts, "html", named=False)
    if text_part is None and html_part is None:
        text_part = _body(parts, "plain", named=True)
        html_part = None if text_part is not None else _body(parts, "html", named=True)
    mail.text = _text(text_part, source) if text_part else ""
    if text_part and html_part and mail.text.strip() and not _alternatives(text_part, html_part):
        html_part = (
            None  # side by side in a multipart/mixed: both are shown, so the HTML is a part of its own
        )
    mail.html = _text(html_part, source) if html_part else ""
    chosen = [p for p in (text_part, html_part) if p is not None]
    _attachments(parts, chosen, mail, hints, source)
    return mail


def _read_headers(mail: ParsedMail, fields: list[tuple[str, str]], hints: tuple[str, ...]) -> None:
    """One pass over the top-level fields: first value of each name, decoded; the From mailbox."""
    raw_first: dict[str, str] = {}
    for name, value in fields:
        key = name.strip().lower()
        mail.header_counts[key] = mail.header_counts.get(key, 0) + 1
        if key not in raw_first:
            raw_first[key] = value
            mail.headers[key] = header_text(value, hints)
    box = parse_mailbox(raw_first.get("from", ""), hints)
    mail.from_address = box.address.strip().lower()
    mail.display_name = box.display_name
    mail.from_defects, mail.from_mailboxes = box.defects, box.mailboxes
    if mail.header_count("from") > 1:
        mail.from_defects.append("several From fields")
    mail.from_problem = address_problem(mail.from_address) if "from" in raw_first else "no From field"
    mail.subject = header_text(raw_first.get("subject", ""), hints, limits.MAX_SUBJECT_CHARS)
    mail.message_id = next(iter(_ids(raw_first.get("message-id", ""))), "")
    mail.in_reply_to = next(iter(_ids(raw_first.get("in-reply-to", ""))), "")
    mail.references = _ids(raw_first.get("references", ""))[-20:]


def _ids(value: str) -> list[str]:
    """Message ids in a field as written (never decoded: an id is not text)."""
    return MESSAGE_ID.findall(charsets.scrub(unfold(value)))


@dataclass(slots=True)
class _Part:
    msg: Message
    maintype: str
    subtype: str
    params: dict[str, str]
    mime_header: str
    disposition: str
    dparams: dict[str, str]
    content_id: str
    depth: int
    parent: _Part | None
    index: int

    @property
    def ctype(self) -> str:
        return f"{self.maintype}/{self.subtype}"

    def ancestors(self) -> list[_Part]:
        out, p = [], self.parent
        while p is not None:
            out.append(p)
            p = p.parent
        return out


# Recovering parts (a boundary that never appears, parts after a closing delimiter) parses text
# again. Each nesting level can hand its whole rest to the next, so without a budget 45 levels of an
# 11.7 MB mail re-parsed ~500 MB (55 s, 200 MB). Real mail re-parses a fraction of its size once.
REPARSE_FACTOR = 2
REPARSE_FLOOR = 1024 * 1024  # small mails are never cut short (re-parsing 1 MB costs ~50 ms)


@dataclass(slots=True)
class _Budget:
    left: int  # bytes the walk may still hand to the parser again

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise GiveUpError(
                f"recovering its MIME parts would parse it more than {REPARSE_FACTOR} times over"
            )


def _walk(msg: Message, mail: ParsedMail, budget: _Budget) -> list[_Part]:
    """Every part in document order, without recursion (nesting, part count and re-parsing bounded)."""
    parts: list[_Part] = []
    stack: list[tuple[Message, int, _Part | None]] = [(msg, 0, None)]
    while stack:
        node, depth, parent = stack.pop()
        if len(parts) >= limits.MAX_MIME_PARTS:
            mail.problems.append(
                f"more than {limits.MAX_MIME_PARTS} MIME parts: the rest are only in the archive"
            )
            break
        part = _describe(node, depth, parent, len(parts))
        parts.append(part)
        if part.maintype != "multipart":
            continue
        children = node.get_payload()
        if not isinstance(children, list):
            children = _recover_parts(node, mail, budget)
            if children is None:
                body = raw_payload(node)
                if _MIME_LINE.search(body):  # parts that cannot be split are never shown as text
                    raise GiveUpError(f"a {part.ctype} whose parts could not be split (boundary not found)")
                if body.strip():  # no MIME inside at all: the body is text
                    part.maintype, part.subtype = "text", "plain"
                continue
        children = [*children, *_epilogue_parts(node, mail, budget)]
        if depth >= MAX_DEPTH:  # no client shows this: the owner gets the original, attached whole
            raise GiveUpError(f"MIME nesting deeper than {MAX_DEPTH} levels")
        stack.extend((c, depth + 1, part) for c in reversed(children) if isinstance(c, Message))
    return parts


_MIME_LINE = re.compile(r"(?im)^content-(?:type|transfer-encoding|disposition)[ \t]*:")
_DELIMITER = re.compile(r"^--([^\s]{1,200})[ \t]*\r?\n(?=[A-Za-z][A-Za-z0-9-]*:)", re.M)


def raw_payload(node: Message) -> str:
    """A leaf's payload as the feed parser stored it. ``get_payload()`` re-decodes text holding
    8-bit bytes under its charset with 'replace', which would corrupt bytes taken back from it."""
    payload = getattr(node, "_payload", "")  # no public accessor returns it unaltered
    return payload if isinstance(payload, str) else ""


def _recover_parts(node: Message, mail: ParsedMail, budget: _Budget) -> list[Message] | None:
    """A multipart whose declared boundary never appears, as mail clients read it: the first
    delimiter-like line followed by a header is taken as the boundary and the body re-split.
    (An 8-bit boundary lands here too: the feed parser compares it in a decoded form that never
    matches the raw lines; the re-split uses an ASCII stand-in.)"""
    body = raw_payload(node)
    found = _DELIMITER.search(body)
    if found is None:
        mail.problems.append("multipart without parts (boundary not found)")
        return None
    boundary = found.group(1)
    mail.problems.append(
        f"declared boundary not found; recovered {charsets.scrub(boundary[:40])!r} from the body"
    )
    parts = _reparse(node.get_content_type(), boundary, body, budget, stand_in=True)
    if not parts:
        return None
    node.set_payload(parts)  # type: ignore[arg-type]  # a list payload is what a multipart holds
    return parts


def _epilogue_parts(node: Message, mail: ParsedMail, budget: _Budget) -> list[Message]:
    """Parts after the closing delimiter (a nested multipart that reused its parent's boundary
    closes the parent early): mail clients still show them, so they are not dropped."""
    epilogue, boundary = node.epilogue, node.get_boundary()
    if not epilogue or not boundary or f"--{boundary}" not in epilogue:
        return []
    parts = _reparse("multipart/mixed", boundary, epilogue, budget, stand_in=not boundary.isascii())
    if not parts:
        return []
    mail.problems.append(f"{len(parts)} part(s) after the closing boundary recovered")
    node.epilogue = ""
    node.set_payload([*node.get_payload(), *parts])
    return parts


def _reparse(ctype: str, boundary: str, body: str, budget: _Budget, stand_in: bool) -> list[Message]:
    """The parts of ``body`` split at ``boundary``: the container's header is built as a Message (a
    boundary holding quotes or 8-bit bytes cannot break it); ``stand_in`` renames the boundary to
    an ASCII token first, for boundaries the feed parser would never match."""
    budget.spend(len(body))
    if stand_in:
        token = (
            "seh-recovered-" + hashlib.sha256(boundary.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        )
        body = re.sub(r"(?m)^--" + re.escape(boundary), lambda m: "--" + token, body)
        boundary = token
    head = Message(policy=email.policy.compat32)
    head["Content-Type"] = ctype if ctype.startswith("multipart/") else "multipart/mixed"
    head.set_param("boundary", boundary)
    parser = BytesFeedParser(policy=email.policy.compat32)
    parser.feed(email.policy.compat32.fold_binary("Content-Type", str(head["Content-Type"])) + b"\n")
    parser.feed(body.encode("ascii", "surrogateescape"))
    sub = parser.close()
    return [p for p in sub.get_payload() if isinstance(p, Message)] if sub.is_multipart() else []


# A part's own header fields are not under limits.screen's per-field caps (it reads only the top
# block), so each value this module interprets is cut first: no real Content-Type, Disposition or
# Content-ID needs more (RFC 2231 splits long file names into sections well within this).
PART_FIELD_CHARS = 8 * 1024


def _describe(node: Message, depth: int, parent: _Part | None, index: int) -> _Part:
    fields: dict[str, str] = {}
    for name, value in node.raw_items():
        fields.setdefault(str(name).lower(), str(value)[:PART_FIELD_CHARS])
    ctype, params = parse_params(fields.get("content-type", ""))
    if "/" not in ctype:
        # A type without a subtype (``BINARY;name="Alices_PDP-10"``, Crispin's classic) is an unrecognised
        # type, which RFC 2049 section 2 says to treat as application/octet-stream: a file, its name kept.
        # Absent or unreadable: RFC 2045's default (message/rfc822 inside a digest).
        # A bare "text" is read as text/plain, as mail clients read it.
        if not ctype and "content-type" in fields:
            params = {}
        ctype = {"": node.get_default_type(), "text": "text/plain"}.get(ctype, "application/octet-stream")
    disposition, dparams = parse_params(fields.get("content-disposition", ""))
    maintype, _, subtype = ctype.partition("/")
    if node.is_multipart() and maintype not in ("multipart", "message"):
        maintype, subtype = "multipart", "mixed"  # the feed parser split it: follow its reading
    cid = clean_header_text(unfold(fields.get("content-id", "")[:1024]), 250).strip("<>")
    return _Part(
        node,
        maintype,
        subtype,
        params,
        clean_header_text(charsets.scrub(unfold(fields.get("content-type", ""))), 998),
        disposition if disposition in ("inline", "attachment") else "",
        dparams,
        charsets.scrub(cid),
        depth,
        parent,
        index,
    )


_TOKEN = r"[\w!#$%&'*+.^`{|}~-]+"
_TYPE = re.compile(rf"\s*({_TOKEN})\s*(?:/\s*({_TOKEN}))?")


def parse_params(value: str) -> tuple[str, dict[str, str]]:
    """``type/subtype; a=b; c="d"`` -> ('type/subtype', {a: b, c: d}) in one pass; RFC 2231
    continuations and charsets (``name*0*=utf-8''…``) joined and decoded. Values keep raw 8-bit."""
    value = unfold(value)
    pieces: list[str] = []
    buf: list[str] = []
    quoted = escaped = False
    for ch in value:
        if escaped:
            buf.append(ch)
            escaped = False
        elif ch == "\\" and quoted:
            buf.append(ch)
            escaped = True
        elif ch == '"':
            quoted = not quoted
            buf.append(ch)
        elif ch == ";" and not quoted:
            pieces.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    pieces.append("".join(buf))
    # type/subtype as tokens: "text/html Content-Transfer-Encoding: 8bit" (a missing line break) is text/html
    first = _TYPE.match(re.sub(r"\([^()]*\)", "", pieces[0]))
    head = (first.group(1) + (f"/{first.group(2)}" if first.group(2) else "")).lower() if first else ""
    plain: dict[str, str] = {}
    sections: dict[str, dict[int, tuple[str, bool]]] = {}
    for piece in pieces[1:]:
        name, eq, val = piece.partition("=")
        name = name.strip().lower()
        if not eq or not name:
            continue
        val = val.strip()
        if len(val) >= 2 and val[0] == '"':
            val = re.sub(r"\\(.)", r"\1", val[1:-1] if val.endswith('"') else val[1:])
        m = re.fullmatch(r"([^*]+)\*(?:(\d{1,3})\*?|)", name) if "*" in name else None
        if m:
            encoded = name.endswith("*")
            sections.setdefault(m.group(1), {})[int(m.group(2) or 0)] = (val, encoded)
        else:
            plain.setdefault(name, val)
    for name, numbered in sections.items():
        plain[name] = _rfc2231(numbered)
    return head, plain


def _rfc2231(sections: dict[int, tuple[str, bool]]) -> str:
    charset = ""
    chunks: list[bytes] = []
    for n in sorted(sections):
        val, encoded = sections[n]
        if encoded and n == min(sections) and val.count("'") >= 2:
            charset, _, val = val.split("'", 2)[0], "", val.split("'", 2)[2]
        chunks.append(
            urllib.parse.unquote_to_bytes(val) if encoded else val.encode("utf-8", "surrogateescape")
        )
    return charsets.decode(b"".join(chunks), charset or "utf-8", partial_utf8=True)


def _is_attachment(p: _Part) -> bool:
    return p.disposition == "attachment"


def _named(p: _Part) -> bool:
    return bool(p.dparams.get("filename") or p.params.get("name"))


def _body(parts: list[_Part], subtype: str, named: bool) -> _Part | None:
    """The part ``EmailMessage.get_body((subtype,))`` would choose, found without recursion:
    the first text/<subtype> in document order that is not an attachment (nor named, unless
    ``named``), entering only the start part of a multipart/related, and nothing inside message/* parts."""
    starts = _related_starts(parts)
    for p in parts:
        if p.maintype != "text" or p.subtype != subtype or _is_attachment(p) or (_named(p) and not named):
            continue
        child, container = p, p.parent
        while container is not None and _enterable(container, child, starts):
            child, container = container, container.parent
        if container is None:
            return p
    return None


def _alternatives(a: _Part, b: _Part) -> bool:
    """Whether two parts are renderings of one content: the nearest multipart/alternative above one
    is above the other (RFC 2046 5.1.4)."""
    above = next((p for p in a.ancestors() if p.subtype == "alternative"), None)
    return above is not None and any(p is above for p in b.ancestors())


def _related_starts(parts: list[_Part]) -> dict[int, _Part]:
    """The start part of each multipart/related (by id of the container), found in one pass over the
    parts with their precomputed Content-IDs: the part its ``start`` parameter names, else its first."""
    starts: dict[int, _Part] = {}
    named: set[int] = set()  # containers whose start part was found by its Content-ID
    wanted = {id(p): p.params.get("start", "").strip("<>") for p in parts if p.ctype == "multipart/related"}
    for p in parts:
        key = id(p.parent)
        if p.parent is None or key not in wanted or key in named:
            continue
        if wanted[key] and p.content_id == wanted[key]:
            starts[key] = p
            named.add(key)
        else:
            starts.setdefault(key, p)
    return starts


def _enterable(container: _Part, child: _Part, starts: dict[int, _Part]) -> bool:
    if container.maintype != "multipart" or _is_attachment(container):
        return False
    if container.subtype != "related":
        return True
    return starts.get(id(container)) is child


def _text(p: _Part, source: _Source) -> str:
    payload = source.decoded(p.msg)
    if payload is None:
        return ""
    return charsets.decode(payload, p.params.get("charset"))


def _attachments(
    parts: list[_Part], chosen: list[_Part], mail: ParsedMail, hints: tuple[str, ...], source: _Source
) -> None:
    # The nearest multipart/alternative around each body part holds other renderings of it.
    alternatives = {
        id(next(a for a in c.ancestors() if a.subtype == "alternative"))
        for c in chosen
        if any(a.subtype == "alternative" for a in c.ancestors())
    }
    chosen_ids = {id(c) for c in chosen if not _named(c)}  # a named body part is attached as well
    crlf = b"\r\n" in source.raw[:4096]
    for p in parts:
        if p.maintype == "multipart" or id(p) in chosen_ids:
            continue
        role = _role(p)
        if role == "" or (role == "text" and any(id(a) in alternatives for a in p.ancestors())):
            continue  # an alternative rendering of the body we show
        data = _part_bytes(p, crlf, mail, source)
        name = _filename(p, hints)
        declared = p.ctype
        if not name:
            name = (
                "forwarded message.eml"
                if declared == "message/rfc822"
                else f"unnamed.{filetypes.default_extension(declared)}"
            )
        shown = display_filename(name)
        ctype = filetypes.content_type(shown, data, declared)
        if (
            role == "text"
            and ctype == filetypes.OCTET
            and declared in ("text/plain", "text/enriched", "text/richtext")
        ):
            ctype = "text/plain"
        mail.attachments.append(
            Attachment(
                shown,
                safe_filename(shown),
                ctype,
                data,
                declared,
                p.mime_header,
                role,
                p.disposition,
                p.content_id,
                p.params.get("charset", ""),
            )
        )


def _role(p: _Part) -> str:
    if p.ctype in filetypes.CRYPTO or (p.parent is not None and p.parent.ctype == "multipart/encrypted"):
        return "crypto"
    if p.maintype == "message" or p.ctype == "text/rfc822-headers":
        return "message"
    if p.maintype == "text" and not _is_attachment(p) and not _named(p):
        return "text" if p.subtype in _READABLE_TEXT else "file"
    return "file"


def _part_bytes(p: _Part, crlf: bool, mail: ParsedMail, source: _Source) -> bytes:
    inner = p.msg.get_payload()
    if p.maintype == "message" and isinstance(inner, list) and inner:
        # The feed parser parsed the embedded message (delivery-status: its header blocks); the
        # compat32 generator writes the fields back as they came, in the original line endings.
        linesep = "\r\n" if crlf else "\n"
        try:
            out = BytesIO()
            for i, block in enumerate(m for m in inner if isinstance(m, Message)):
                if i:
                    out.write(linesep.encode())
                BytesGenerator(
                    out, mangle_from_=False, policy=email.policy.compat32.clone(linesep=linesep)
                ).flatten(block)
            generated = out.getvalue()
            if source.cuts and b"\x00seh-body-" in generated:
                generated = source.restore(generated.decode("ascii", "surrogateescape"))
            # RFC 2046 5.2.1 allows only 7bit/8bit/binary here, but some programs (Python's EmailMessage
            # among them) base64 a forwarded message: the feed parser then read the encoded text as a
            # message, and mail clients decode it, so the message is the decoded bytes.
            cte = str(p.msg.get("content-transfer-encoding", "")).strip().lower()
            if cte == "base64":
                return _b64(generated)
            if cte == "quoted-printable":
                return quopri.decodestring(generated)
            return generated
        except Exception as exc:  # regenerating a pathological embedded message
            mail.problems.append(f"{p.ctype} part could not be regenerated: {type(exc).__name__}")
            return b""
    payload = source.decoded(p.msg)
    if payload is not None:
        return payload
    return raw_payload(p.msg).encode("utf-8", "surrogateescape")


def _filename(p: _Part, hints: tuple[str, ...]) -> str:
    """The part's name as the sender wrote it (decoded; its spacing kept), or ''. Raw UTF-8 with a
    broken sequence keeps its valid characters (common.mail.charsets.broken_utf8)."""
    raw = p.dparams.get("filename") or p.params.get("name") or ""
    return display_filename(decode_words(unfold(raw)[:4000], hints, partial_utf8=True), "") if raw else ""
