"""Who may send through a thread address: the owner, proven by SES's verdicts and one clean From.

Two steps, cheapest first, so a stranger never gets the message parsed:

1. :func:`check_envelope` (no parsing): the envelope sender is an owner address; spam/virus not FAIL;
   DMARC PASS, or DMARC GRAY with SPF PASS (then :func:`check_from` also requires the From domain to
   equal the envelope domain); a thread address whose HMAC tag verifies.
2. :func:`check_from` (the From field alone, not the header block): exactly one From header with
   exactly one mailbox, no group, no parse defect, an owner address, and no other address anywhere in
   the field (display name or comment), so no parser can read a different domain out of it than we do.

Why DMARC and not "SPF or DKIM": SES's ``dkimVerdict`` PASS means *some* valid signature (any ``d=``),
not one aligned with From, and ``spfVerdict`` is about the envelope domain. Only ``dmarcVerdict``
ties the result to the From domain. GRAY means "failed DMARC and the domain has no DMARC policy *or*
``p=none``" (SES documentation). GRAY is accepted only together with SPF PASS for an envelope sender
that is an owner address whose domain equals the From domain: had that domain a DMARC record, that
SPF result would be aligned and SES would report PASS, so the combination can only mean "no
record", under either reading of GRAY. PROCESSING_FAILED and every other combination are rejected
(fail closed; the owner is alerted and can resend).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.parser import BytesHeaderParser
from email.utils import parsedate_to_datetime

from common.errors import EmailHandlerError
from common.mail.parse import ParsedMail
from common.mail.threads import verify_thread_address
from common.runtime.config import ReplyHandlerConfig
from common.runtime.events import SesReceipt

FROM_MAX_CHARS = 1000  # an owner's From is short; anything longer is not worth parsing
HEADER_BLOCK_MAX = 256 * 1024  # an owner's header block is a few KB; Gmail's, with ARC and DKIM, under 20 KB
# '@' in any spelling a mail client or a browser would turn back into one
_OTHER_AT = re.compile(r"@|%40|&#0*64;?|&#x0*40;?|&commat;|\uff20|\ufe6b", re.I)


UNAUTHENTICATED = (
    "owner not authenticated (needs DMARC PASS, or SPF PASS for the owner's domain without DMARC)"
)


class NotAuthorisedError(EmailHandlerError):
    """The mail is not an authenticated owner message; ``str(exc)`` is the logged reason."""


class NoticedRefusalError(NotAuthorisedError):
    """The owner's authenticated reply, refused: archived and alerted as any refusal, and the owner gets
    a notice (common/reply/notice.py, ``kind`` names it) saying ``how`` to do it instead."""

    kind = "refused"

    def __init__(self, reason: str, how: str) -> None:
        super().__init__(reason)
        self.how = how


class UnreadableReplyError(NoticedRefusalError):
    """The owner's authenticated reply cannot be read (encrypted, an opaque signature that does not
    verify, a structure not understood)."""

    kind = "unreadable"


class OwnMailboxError(NoticedRefusalError):
    """The conversation's contact is one of the owner's own mailboxes: the owner wrote to the public
    address from PRIVATE_EMAIL (the first test anyone tries) and answered the forward. Relaying it would
    mail the owner as a contact, a loop; the notice says how to test a reply instead."""

    kind = "own-mailbox"


# RFC 5322 section 3.6: fields that occur at most once. DKIM signs a field's bottom instance (RFC 6376
# section 5.4.2) while a reader takes the first: a field prepended to a signed reply would redirect it
# (To), make it new (Message-ID, Date, Subject) or answer elsewhere (Reply-To), signature intact.
SINGLE_FIELDS = (
    "from",
    "sender",
    "reply-to",
    "to",
    "cc",
    "message-id",
    "in-reply-to",
    "references",
    "subject",
    "date",
)


@dataclass(frozen=True, slots=True)
class OwnerFrom:
    address: str
    display_name: str


def envelope_sender(receipt: SesReceipt) -> str:
    return receipt.source.strip().strip("<>").strip().lower()


def check_sender(receipt: SesReceipt, cfg: ReplyHandlerConfig) -> None:
    """The owner's envelope sender and SES's verdicts (for any owner-only address). Never reads the
    message."""
    # The owner's mailboxes and every address's own (forward_to): what each may act on is decided once
    # the target is known (check_mailbox).
    if envelope_sender(receipt) not in cfg.senders:
        raise NotAuthorisedError("envelope sender is not the owner")
    v = receipt.verdicts
    if v.get("spam") == "FAIL" or v.get("virus") == "FAIL":
        raise NotAuthorisedError("spam or virus verdict FAIL")
    if not (v.get("dmarc") == "PASS" or (v.get("dmarc") == "GRAY" and v.get("spf") == "PASS")):
        raise NotAuthorisedError(UNAUTHENTICATED)


def check_envelope(receipt: SesReceipt, cfg: ReplyHandlerConfig) -> str:
    """:func:`check_sender`, then a thread address whose tag verifies; returns the conversation id."""
    check_sender(receipt, cfg)
    for recipient in receipt.recipients:
        cid = verify_thread_address(recipient, cfg.thread_secret, cfg.thread_domain)
        if cid:
            return cid
    raise NotAuthorisedError("no thread address with a valid tag")


def header_fields(raw: bytes) -> list[tuple[str, str]]:
    """The raw header fields, from the header block alone (nothing else of the message is parsed)."""
    end = min((i for i in (raw.find(b"\r\n\r\n"), raw.find(b"\n\n")) if i >= 0), default=len(raw))
    if end > HEADER_BLOCK_MAX:
        raise NotAuthorisedError("header block too large")
    head = BytesHeaderParser(policy=policy.default).parsebytes(raw[:end] + b"\r\n\r\n")
    return [(name, str(value)) for name, value in head.raw_items()]


def from_fields(raw: bytes) -> list[str]:
    """The raw From fields."""
    return [value for name, value in header_fields(raw) if name.lower() == "from"]


def check_single_fields(raw: bytes) -> None:
    """Refuse a reply with two instances of a field RFC 5322 allows once (a replay that prepended one)."""
    seen: set[str] = set()
    for name, _ in header_fields(raw):
        low = name.strip().lower()
        if low in SINGLE_FIELDS and low in seen:
            raise NotAuthorisedError(f"more than one {name.strip()} field (a replay with a prepended field?)")
        seen.add(low)


def check_from(raw: bytes, receipt: SesReceipt, cfg: ReplyHandlerConfig) -> OwnerFrom:
    """The one owner mailbox in From, or :class:`NotAuthorisedError` naming what is wrong with the field."""
    values = from_fields(raw)
    if not values:
        raise NotAuthorisedError("From header missing")
    if len(values) > 1:
        raise NotAuthorisedError("more than one From header")
    value = re.sub(r"\r?\n(?=[ \t])", "", values[0]).strip()
    if len(value) > FROM_MAX_CHARS:
        raise NotAuthorisedError("From header too long")
    try:  # raw 8-bit header bytes arrive as surrogates: only valid UTF-8 (RFC 6532) is acceptable
        value = value.encode("ascii", "surrogateescape").decode("utf-8")
    except UnicodeError:
        raise NotAuthorisedError("From header has a parse defect") from None
    try:
        header = policy.default.header_factory("From", value)
    except Exception:  # the registry raises on some malformed fields (e.g. an encoded CR/LF in the name)
        raise NotAuthorisedError("From header has a parse defect") from None
    if header.defects:
        raise NotAuthorisedError("From header has a parse defect")
    if any(group.display_name is not None for group in header.groups):
        raise NotAuthorisedError("From is a group")
    if len(header.addresses) != 1:
        raise NotAuthorisedError("From is not exactly one mailbox")
    mailbox = header.addresses[0]
    address = mailbox.addr_spec.strip().lower()
    owners = cfg.senders
    if address not in owners:
        raise NotAuthorisedError("From is not the owner")
    # Every other spelling of an address (display name, comment, encoded word) must be the owner's too.
    for text in (value, str(header), mailbox.display_name):
        for owner in owners:
            text = re.sub(re.escape(owner), "", text, flags=re.I)
        if _OTHER_AT.search(text):
            raise NotAuthorisedError("From names another address")
    if (
        receipt.verdicts.get("dmarc") != "PASS"
        and address.rpartition("@")[2] != envelope_sender(receipt).rpartition("@")[2]
    ):
        raise NotAuthorisedError("From domain differs from the SPF-authenticated envelope domain")
    return OwnerFrom(address, mailbox.display_name)


class OtherAddressError(NoticedRefusalError):
    """An address's mailbox (``forward_to``) acting on another address's conversation, quarantined mail
    or name: refused, and the mailbox told why (docs/owner.md, "Several mailboxes")."""

    kind = "other-address"
    sender = ""  # the mailbox refused: its notice goes to it


def check_mailbox(cfg: ReplyHandlerConfig, receipt: SesReceipt, sender: str, public: str, what: str) -> None:
    """Both the authenticated From and the envelope sender may act for public address ``public`` (the
    owner for every address, an address's own mailbox for that one only); ``what`` says what was
    attempted, for the refusal."""
    for who in (sender, envelope_sender(receipt)):
        if not cfg.may_act_for(who, public):
            refused = OtherAddressError(
                f"{who} is not a mailbox of {public or 'the default address'}, so it cannot {what}",
                f"Only the mailboxes of {public or 'that address'} (and the owner) can do that. Answer "
                "the conversations forwarded to you, from the mailbox they were forwarded to.",
            )
            refused.sender = sender
            raise refused


def check_age(mail: ParsedMail, received: datetime, max_age_s: int) -> None:
    """A signed Date older than the replay memory can only be a replayed message (DKIM survives replay)."""
    try:
        sent = parsedate_to_datetime(mail.headers.get("date", ""))
    except (TypeError, ValueError, IndexError):
        return  # no usable Date: nothing to compare (a missing or unsigned Date proves nothing either way)
    if sent.tzinfo is None:
        sent = sent.replace(tzinfo=UTC)
    if (received - sent).total_seconds() > max_age_s:
        raise NotAuthorisedError("owner message is too old (replayed?)")


def message_identities(mail: ParsedMail) -> tuple[str, ...]:
    """What makes two deliveries the same owner message: its Message-ID, and its content (Date,
    Subject, text). Never the SES message id, which is new on every delivery (a replay gets a fresh
    one). Both are remembered, so a replay whose Message-ID was changed (legal when the DKIM
    signature does not cover it) is still recognised by its signed content."""
    content = "\n".join(("content", mail.headers.get("date", ""), mail.subject, relaxed_body(mail.body_text)))
    found = [_digest("mid\n" + mail.message_id.strip())] if mail.message_id else []
    return (*found, _digest(content))


ANY_CONVERSATION = "*"


def replay_claims(mail: ParsedMail, cid: str) -> list[tuple[str, str]]:
    """(scope, identity) to claim before relaying: the Message-ID once across all conversations (a
    replay to another conversation's thread address is still a replay), the content per conversation
    (the owner may well send the same short text to two contacts)."""
    identities = message_identities(mail)
    scopes = [ANY_CONVERSATION] * (len(identities) - 1) + [cid]
    return list(zip(scopes, identities, strict=True))


_WSP_RUN = re.compile(r"[ \t]+")


def relaxed_body(text: str) -> str:
    """The body as DKIM's "relaxed" body canonicalization reads it (RFC 6376 section 3.4.4): runs of
    whitespace within a line as one space, none at a line's end, no empty lines at the body's end. A
    replay that only adds such whitespace keeps a valid signature, so it must hash the same."""
    lines = [_WSP_RUN.sub(" ", line).rstrip(" ") for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
