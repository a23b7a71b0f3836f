"""Header values from strangers, decoded in linear time: encoded words, the From mailbox, addresses.

The stdlib's header registry (policy.default) is not used on received headers: its parser is
quadratic in memory on encoded words (100 KB of them took a 256 MB function past its limit) and
slow on comments (a 48 KB From ran 60 s), and for a From like ``a@x.example <b@y.example>`` it
returns ``a@x.example``. Everything here is one pass over the value with bounded state.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from common.mail import charsets
from common.mail.sanitize import clean_header_text

MAX_ENCODED_WORDS = 256  # per header value; limits.screen refuses more before anything is parsed
MAX_COMMENT_DEPTH = 10
MAX_MAILBOXES = 100  # per address field read; a From names one, a real To or Cc rarely more than this

_FOLD = re.compile(r"\r?\n(?=[ \t])|\r?\n")
# RFC 2047 encoded word. The text has no "?" (Q encodes it, B cannot contain it), so each match
# scans forward once: no backtracking over long values.
ENCODED_WORD = re.compile(r"=\?([^?\s]{1,64})\?([bBqQ])\?([^?]*)\?=")
_Q_ESCAPE = re.compile(rb"=([0-9A-Fa-f]{2})")


def unfold(value: str) -> str:
    return _FOLD.sub("", value)


def _word_bytes(encoding: str, text: str) -> bytes:
    if encoding in "qQ":
        # Raw 8-bit bytes inside a Q word (seen from Outlook) come back from surrogateescape as they were.
        data = text.replace("_", " ").encode("utf-8", "surrogateescape")
        return _Q_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), data)
    b64 = re.sub(r"[^A-Za-z0-9+/]", "", text)
    b64 = b64[: len(b64) - (len(b64) % 4 == 1)]  # a dangling sixth bit group carries no byte
    try:
        return base64.b64decode(b64 + "=" * (-len(b64) % 4))
    except (binascii.Error, ValueError):
        return b""


def decode_words(
    value: str, hints: tuple[str, ...] = (), max_words: int = MAX_ENCODED_WORDS, partial_utf8: bool = False
) -> str:
    """Decode RFC 2047 encoded words (at most ``max_words``; the rest stay as they are), and raw
    8-bit bytes between them (UTF-8, else the hints, else cp1252). ``partial_utf8`` (file names):
    UTF-8 with a few broken sequences keeps its valid characters (common.mail.charsets.broken_utf8).

    Whitespace between adjacent encoded words is dropped (RFC 2047 6.2), and adjacent words in one
    charset are decoded together, because mailers split multi-byte characters across words.
    """
    repair = charsets.repairer(value, hints, partial_utf8)
    out: list[str] = []
    pending: list[bytes] = []
    pending_charset = ""
    pos = 0

    def flush() -> None:
        if pending:
            out.append(charsets.decode(b"".join(pending), pending_charset, hints, partial_utf8))
            pending.clear()

    for words, m in enumerate(ENCODED_WORD.finditer(value)):
        if words >= max_words:
            break
        gap = value[pos : m.start()]
        adjacent = words > 0 and not gap.strip(" \t")  # only whitespace since the previous word
        charset = m.group(1).partition("*")[0]  # RFC 2231 language suffix
        if not (adjacent and charset.lower() == pending_charset.lower()):
            flush()
        if not adjacent:
            out.append(repair(gap))
        pending_charset = charset
        pending.append(_word_bytes(m.group(2), m.group(3)))
        pos = m.end()
    flush()
    out.append(repair(value[pos:]))
    return charsets.scrub("".join(out))


def header_text(raw: str, hints: tuple[str, ...] = (), limit: int = 998) -> str:
    """A received header value as one clean line: 8-bit bytes repaired, encoded words decoded."""
    return clean_header_text(decode_words(unfold(raw), hints), limit)


@dataclass(slots=True)
class Mailbox:
    address: str = ""  # addr-spec as written (not lower-cased, not validated)
    display_name: str = ""  # decoded
    defects: list[str] = field(default_factory=list)
    mailboxes: int = 0  # how many mailboxes the field names


_SPECIALS = set('()<>,;:"')


def _tokens(value: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Split an address field into (kind, text) tokens: word, quoted, comment, angle, ",", ";", ":".

    One pass; comments nest up to MAX_COMMENT_DEPTH (deeper ones are a defect and their text is
    skipped), quoted strings honour backslash escapes.
    """
    tokens: list[tuple[str, str]] = []
    defects: list[str] = []
    i, n = 0, len(value)
    while i < n:
        c = value[i]
        if c in " \t\r\n":
            i += 1
        elif c == "(":
            text, i = _comment(value, i, defects)
            tokens.append(("comment", text))
        elif c == '"':
            text, i = _quoted(value, i, defects)
            tokens.append(("quoted", text))
        elif c == "<":
            j = value.find(">", i + 1)
            if j < 0:
                defects.append("unterminated angle address")
                j = n
            tokens.append(("angle", value[i + 1 : j]))
            i = j + 1
        elif c in ",;:":
            tokens.append((c, c))
            i += 1
        else:
            j = i
            while j < n and value[j] not in _SPECIALS and value[j] not in " \t\r\n":
                j += 1
            if j == i:  # a stray ">" or ")"
                defects.append(f"stray {c!r}")
                j = i + 1
            else:
                tokens.append(("word", value[i:j]))
            i = j
    return tokens, defects


def _comment(value: str, i: int, defects: list[str]) -> tuple[str, int]:
    """The comment opening at ``value[i]`` (nested ones inside it, escapes honoured): its text and the
    index after its closing parenthesis."""
    n = len(value)
    depth, j, buf = 0, i, []
    while j < n:
        ch = value[j]
        if ch == "\\":
            buf.append(value[j + 1 : j + 2])
            j += 2
            continue
        if ch == "(":
            depth += 1
            if depth > MAX_COMMENT_DEPTH and "comment nesting too deep" not in defects:
                defects.append("comment nesting too deep")
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        if depth <= MAX_COMMENT_DEPTH and not (ch == "(" and depth == 1):
            buf.append(ch)
        j += 1
    else:
        defects.append("unterminated comment")
    return "".join(buf), j + 1


def _quoted(value: str, i: int, defects: list[str]) -> tuple[str, int]:
    """The quoted string opening at ``value[i]``: its text unescaped and the index after its closing
    quote."""
    n = len(value)
    j, buf = i + 1, []
    while j < n and value[j] != '"':
        if value[j] == "\\" and j + 1 < n:
            j += 1
        buf.append(value[j])
        j += 1
    if j >= n:
        defects.append("unterminated quoted string")
    return "".join(buf), j + 1


def _phrase(tokens: list[tuple[str, str]], hints: tuple[str, ...]) -> str:
    # Decoded as one value: the 8-bit codec is chosen from the whole name, not word by word.
    return clean_header_text(
        decode_words(" ".join(t for k, t in tokens if k in ("word", "quoted") and t), hints), 200
    )


def parse_mailbox(value: str, hints: tuple[str, ...] = ()) -> Mailbox:
    """The first mailbox of an address field (From), as a mail client reads it.

    The angle-addr is the address when there is one, whatever the display name looks like
    (``a@x.example <b@y.example>`` -> b@y.example). Without one, the last word holding an ``@``
    is the address and the words before it are the name (``Big Bug bb@bug.example`` ->
    bb@bug.example). Encoded words are decoded in the name only: an encoded "address" is never an
    address. Anything unusual is listed in ``defects``.
    """
    value = unfold(value)
    repair = charsets.repairer(value, hints)
    tokens, defects = _tokens(value)
    box = Mailbox(defects=defects)
    mailboxes = _mailboxes(tokens, box.defects)
    box.mailboxes = len(mailboxes)
    if len(mailboxes) > 1:
        box.defects.append("several mailboxes")
    if not mailboxes:
        return box
    first = mailboxes[0]
    angles = [i for i, (k, _) in enumerate(first) if k == "angle"]
    if angles:
        _read_name_addr(box, first, angles, hints, repair)
    else:
        _read_addr_spec(box, first, hints, repair)
    return box


def _mailboxes(tokens: list[tuple[str, str]], defects: list[str]) -> list[list[tuple[str, str]]]:
    """The field's tokens grouped by mailbox (a group's name dropped), at most MAX_MAILBOXES, with
    the commas of an unquoted name put back into it."""
    groups = [[]]  # type: list[list[tuple[str, str]]]
    in_group = False
    for kind, text in tokens:
        if kind == ":" and not in_group and not any(k == "angle" for k, _ in groups[-1]):
            in_group = True
            defects.append("group syntax")
            groups[-1] = []  # the group's name is not a mailbox
        elif kind == ";":
            in_group = False
            groups.append([])
        elif kind == ",":
            groups.append([])
        else:
            groups[-1].append((kind, text))
    mailboxes = [g for g in groups if any(k in ("word", "quoted", "angle") for k, _ in g)]
    if len(mailboxes) > MAX_MAILBOXES:
        defects.append(f"more than {MAX_MAILBOXES} mailboxes")
        mailboxes = mailboxes[:MAX_MAILBOXES]
    # "Smith, Jane <jane@x.example>": a comma in an unquoted name, not two mailboxes. Everything before
    # the first group holding an address is its name, joined once (merging pairwise was quadratic:
    # a 42 KB "From: a,a,a,..." took 51 s).
    addressed = next((i for i, g in enumerate(mailboxes) if _has_address(g)), len(mailboxes) - 1)
    if addressed > 0:
        merged: list[tuple[str, str]] = []
        for group in mailboxes[:addressed]:
            kind, text = group[-1]
            merged += [*group[:-1], (kind, text + ",")]
        mailboxes[: addressed + 1] = [[*merged, *mailboxes[addressed]]]
    return mailboxes


def _read_name_addr(
    box: Mailbox,
    first: list[tuple[str, str]],
    angles: list[int],
    hints: tuple[str, ...],
    repair: Callable[[str], str],
) -> None:
    if len(angles) > 1:
        box.defects.append("several angle addresses")
    spec = first[angles[-1]][1]  # name-addr ends with its angle-addr; anything before is the name
    box.address = repair(re.sub(r"\s+", "", spec.rpartition(":")[2] if spec.startswith("@") else spec))
    name_tokens = first[: angles[-1]]
    box.display_name = _phrase(name_tokens, hints)
    if any(k == "word" and "@" in t for k, t in name_tokens):
        box.defects.append("unquoted display name contains an address")


def _read_addr_spec(
    box: Mailbox, first: list[tuple[str, str]], hints: tuple[str, ...], repair: Callable[[str], str]
) -> None:
    """An addr-spec without angle brackets; a quoted local part is a quoted token followed by "@domain"."""
    joined: list[tuple[str, str]] = []
    for kind, text in first:
        if kind == "word" and text.startswith("@") and joined and joined[-1][0] == "quoted":
            joined[-1] = ("word", f'"{joined[-1][1]}"{text}')
        elif kind != "comment":
            joined.append((kind, text))
    at = [i for i, (k, t) in enumerate(joined) if k == "word" and "@" in t]
    if not at:
        return
    if len(at) > 1:  # "a@x.example b@y.example": no syntax says which one is the mailbox
        box.defects.append("several addresses without angle brackets")
    box.address = repair(joined[at[-1]][1])
    before = joined[: at[-1]]
    if before:
        box.defects.append("bare words before address")
        box.display_name = _phrase(before, hints)
    else:  # the legacy form "addr (Name)"
        box.display_name = clean_header_text(
            decode_words(" ".join(t for k, t in first if k == "comment"), hints), 200
        )
    if len(joined) > at[-1] + 1:
        box.defects.append("words after address")


def _has_address(tokens: list[tuple[str, str]]) -> bool:
    return any(k == "angle" or (k == "word" and "@" in t) for k, t in tokens)


_ATEXT = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def address_problem(address: str) -> str:
    """Why ``address`` cannot be a contact's address ('' when it can): what SES, a thread address or
    a reply could never handle. Non-ASCII (RFC 6532) local parts and IDN domains are allowed."""
    if not address:
        return "no address"
    if "=?" in address:
        return "encoded word in address"
    if address.startswith('"'):
        return "quoted local part"
    local, at, domain = address.rpartition("@")
    if not at:  # "Moderator-Address <moderator>": a bare local name, as RFC 822's local delivery allowed
        return "no domain (no @ in the address)"
    if not local:
        return "no local part"
    if not domain:
        return "no domain"
    if domain.startswith("["):
        return "IP-literal domain"
    if len(local.encode()) > 64:
        return "local part longer than 64 octets"
    if len(address.encode()) > 254:
        return "address longer than 254 octets"
    if local.startswith(".") or local.endswith(".") or ".." in local:
        return "local part is not a dot-atom"
    for atom in local.split("."):
        if not all(_ATEXT.fullmatch(ch) or ord(ch) > 127 for ch in atom) or charsets.scrub(atom) != atom:
            return "local part has characters outside RFC 5322 atext"
        if any(ord(ch) > 127 and not ch.isprintable() for ch in atom):
            return "local part has non-printable characters"
    ascii_domain = idna_domain(domain)
    if not ascii_domain:
        return "invalid domain"
    return ""


def idna_domain(domain: str) -> str:
    """The domain in ASCII (IDNA / punycode) if every label is valid, else ''."""
    domain = domain.rstrip(".").lower()
    if len(domain) > 253 or "." not in domain:
        return ""
    try:
        ascii_domain = domain if domain.isascii() else domain.encode("idna").decode("ascii")
    except (UnicodeError, ValueError):
        return ""
    labels = ascii_domain.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return ""
    return ascii_domain
