"""Whether a first contact gets the automatic acknowledgement (RFC 3834, backscatter), and its greeting.

An ack is mail to an address we did not choose, signed with our domain's DKIM key, so it must go
only where it is wanted and safe:

* RFC 3834 section 2: never answer automatic mail (``Auto-Submitted`` other than ``no``, the
  autoresponders' ``X-Autoreply`` / ``X-Autorespond`` …, ``Precedence: bulk|junk|list|auto_reply``:
  common/mail/autoreply.py; ``List-*`` headers; ``X-Auto-Response-Suppress: All|OOF|AutoReply``),
  reports (``multipart/report``: delivery status and read receipts), or no-reply / role senders
  (``noreply``, ``no-reply``, ``donotreply``, ``do-not-reply`` anywhere in the local part,
  ``mailer-daemon``, ``postmaster``, ``bounce``).
* Only one sender: a From field holding several mailboxes, a group, two angle-addrs or two bare
  addresses, or several From fields make the sender unverifiable (which mailbox did DMARC check?),
  so no ack; the mail itself is still forwarded or quarantined by the policy.
* Backscatter: only a From that SES authenticated, i.e. DMARC PASS, or SPF PASS for an envelope
  domain equal to the From domain (a forged From on a DMARC-less domain passes neither), and no
  verdict FAIL at all. Never to
  an address SES cannot deliver to or to one of our own addresses (no loops).
* Budget: at most ``ACK_LIMIT_PER_DOMAIN_PER_HOUR`` acks per sender domain and
  ``ACK_LIMIT_PER_HOUR`` in all per clock hour (conditional counters in the send-status table with
  a TTL, common/store/ackbudget.py), taken in the same write as the conversation record
  (common/store/intake.py); over budget the ack is skipped with the reason logged, the forward
  still goes.

The greeting reflects at most one word of the sender's display name, letters only, at most 30
characters; anything else (URLs, addresses, digits, punctuation) gives no name at all.

The wording is not here: it is configuration. ``ACK_SUBJECT`` and ``ACK_TEMPLATE`` (``{name}`` becomes
the greeting) set it for a deployment, ``ack_subject`` / ``ack_template`` in ``PUBLIC_ADDRESSES`` per
address; the built-in defaults are ``Config.ack_subject`` and ``Config.ack_template`` in
common/runtime/config.py, and common/delivery/compose.py (``build_ack``) builds the message.
"""

from __future__ import annotations

import re

from common.aws import ses
from common.mail import reports
from common.mail.autoreply import automatic
from common.mail.parse import ParsedMail
from common.runtime.config import Delivery
from common.runtime.events import VERDICTS, SesReceipt
from common.runtime.log import get_logger
from common.store import ackbudget

# RFC 3834 5.2 / common practice: a no-reply marker anywhere in the local part ("gmail-noreply").
_NOREPLY = re.compile(r"no[-_.]?reply|do[-_.]?not[-_.]?reply", re.I)
_ROLE = re.compile(r"^(mailer[-_.]?daemon|postmaster|bounces?)([-+._=].*)?$", re.I)
# What SES can send to: an ASCII dot-atom local part (SES does not support SMTPUTF8) at a domain of
# letter-digit-hyphen labels (IDN domains arrive as punycode or are refused).
_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
GREETING_MAX = 30
# from_defects (common/mail/headers.parse_mailbox) that leave more than one candidate sender
AMBIGUOUS_FROM = (
    "several mailboxes",
    "several From fields",
    "group syntax",
    "several angle addresses",
    "several addresses without angle brackets",
)


def refusal_before_budget(cfg: Delivery, receipt: SesReceipt, mail: ParsedMail) -> str:
    """Why this mail would get no ack even with budget left ('' if only the budget can still refuse:
    common/store/intake.py takes the ack in the write that records a first contact)."""
    return (
        rfc3834(mail)
        or reports.carried_report(mail)
        or unverifiable_sender(mail)
        or unsafe_recipient(cfg, receipt, mail)
        or ackbudget.switched_off(cfg)
    )


def sandbox_refusal(address: str) -> str:
    """Why SES's sandbox would refuse an ack to ``address`` ('' when it would not, or when SES cannot say:
    then the ack is queued, and its sender holds it if SES refuses it). Asked only for an ack that passed
    every other check, after the budget was taken (a unit of one hour's budget is all a refusal costs)."""

    try:
        refused = ses.sandbox_refused([address])
    except Exception as exc:
        get_logger("inbound-handler").warning(
            "sandbox not checked", extra={"error": f"{type(exc).__name__}: {exc}"}
        )
        return ""
    if not refused:
        return ""
    return (
        f"SES is in the sandbox and {address} is not a verified address "
        "(acks go out once AWS grants production access)"
    )


def unverifiable_sender(mail: ParsedMail) -> str:
    """Several mailboxes or From fields, a group, two angle-addrs or two bare addresses in From:
    SES's DMARC verdict may be about another mailbox than the one an ack would go to. (A name that
    merely looks like an address, ``a@x.example <b@y.example>``, is not ambiguous: the angle-addr is
    the mailbox.)"""
    found = [d for d in mail.from_defects if d.startswith(AMBIGUOUS_FROM)]
    if found or mail.from_mailboxes > 1:
        return f"unverifiable sender (From: {'; '.join(found) or 'several mailboxes'})"
    return ""


def rfc3834(mail: ParsedMail) -> str:
    if why := automatic(mail):
        return why
    if mail.has_list_headers():
        return "mailing list headers"
    ctype = mail.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype.startswith("message/"):
        return f"report or notification ({ctype})"
    # Microsoft's request not to be auto-answered (Exchange puts it on its own out-of-office replies)
    suppress = {v.strip().lower() for v in mail.headers.get("x-auto-response-suppress", "").split(",")}
    if suppress & {"all", "autoreply", "oof"}:
        return f"X-Auto-Response-Suppress: {mail.headers['x-auto-response-suppress'].strip()[:40]}"
    local = mail.from_address.rpartition("@")[0]
    if _NOREPLY.search(local) or _ROLE.match(local):
        return "no-reply sender"
    return ""


def address_problem(address: str) -> str:
    """Why SES could not (or must not be asked to) deliver an ack to ``address``."""
    local, at, domain = address.rpartition("@")
    if not at or not _LOCAL.fullmatch(local) or len(local) > 64 or len(address) > 254:
        return "sender address unusable for a reply"
    labels = domain.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return "sender domain unusable for a reply"
    return ""


def authenticated(receipt: SesReceipt, address: str) -> bool:
    """Whether SES's verdicts tie the mail to the domain of its From ``address``: DMARC PASS, or SPF
    PASS for an envelope sender at that same domain, and never a DMARC FAIL (the From's domain says
    the mail is not its own). (A DKIM PASS alone may be any domain's signature.)"""
    v = receipt.verdicts
    domain = address.lower().rpartition("@")[2]
    envelope_domain = receipt.source.strip().strip("<>").rpartition("@")[2].lower()
    if v.get("dmarc") == "FAIL":
        return False
    return v.get("dmarc") == "PASS" or (v.get("spf") == "PASS" and bool(domain) and envelope_domain == domain)


def unsafe_recipient(cfg: Delivery, receipt: SesReceipt, mail: ParsedMail) -> str:
    address = mail.from_address.lower()
    problem = address_problem(address) or ("sender address unusable for a reply" if mail.from_problem else "")
    if problem:
        return problem
    domain = address.rpartition("@")[2]
    if cfg.is_own(address):
        return "sender is one of our own addresses"
    v = receipt.verdicts
    failed = [name for name in VERDICTS if v.get(name) == "FAIL"]
    if failed:  # even with DMARC PASS: a warning banner on the forward is enough, an ack is not needed
        return f"failed verdicts: {', '.join(failed)}"
    envelope_domain = receipt.source.strip().strip("<>").rpartition("@")[2].lower()
    if authenticated(receipt, address):
        return ""
    return (
        f"sender not authenticated (DMARC {v.get('dmarc')}, SPF {v.get('spf')}"
        f"{'' if envelope_domain == domain else ' for another domain'})"
    )


def greeting_name(display_name: str) -> str:
    """The first word of the display name if it is letters only and short, else ''."""
    words = display_name.replace('"', " ").replace(",", " ").split()
    first = words[0] if words else ""
    return first if first.isalpha() and len(first) <= GREETING_MAX else ""
