"""Reports a program wrote about a mail (bounces, delivery and feedback reports, complaint
notifications), recognised by their structure whatever the envelope says.

Evidence, strongest first (docs/inbound.md#delivery-reports):

* the report formats: RFC 5965 ARF (``multipart/report; report-type=feedback-report`` or a
  ``message/feedback-report`` part) is an abuse complaint; RFC 3464 DSN (``report-type=delivery-status``
  or a ``message/delivery-status`` part) and a headers-only part (``text/rfc822-headers``, which only
  reports carry) are reports (a read receipt, RFC 8098, is a person's client answering: forwarded,
  never acked);
* SES's own notifications (the SNS JSON of a bounce, complaint or delivery) arriving as mail;
* what only a mail system writes: ``Return-Path: <>`` (RFC 5321 4.5.5), ``X-Failed-Recipients``;
* a returned copy of a mail this system sent (our own From, Reply-To or X-Correlation-ID in a
  returned header block);
* a returned mail (a message/rfc822 part, or a raw header block with transport fields in the text)
  or SMTP reply codes and DSN fields in the text, together with a sender that is a program (a
  mail-system role such as ``MAILER-DAEMON``, ``postmaster``, ``post_master``; an empty From; a
  no-reply address; a list server's admin address; RFC 3834 markers);
* a mail-system role sender with a bounce's subject or first words (the formats older MTAs write).

A person's mail from ``postmaster@`` carries none of this and is forwarded. Every pattern here is
linear-time: fixed alternations and bounded repeats, applied to bounded prefixes of the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from common.mail.autoreply import automatic
from common.mail.parse import Attachment, ParsedMail, parse_params

COMPLAINT: Literal["complaint"] = "complaint"
POSTMASTER = "postmaster sender"
DSN: Literal["dsn"] = "dsn"
SCAN_CHARS = 64 * 1024  # the report's own words and the returned header come first
PART_HEADER_BYTES = 16 * 1024  # the header block of a returned message part


@dataclass(frozen=True, slots=True)
class Report:
    kind: Literal["complaint", "dsn"]
    reason: str


# Subjects and first lines of the common MTAs' bounces (used only with a mail-system sender).
_BOUNCE_SUBJECT = re.compile(
    r"^(undeliver(ed|able)|returned mail|mail delivery (failed|failure)"
    r"|delivery (status notification|failure"
    r"|has failed)|failure notice|mail system error|non[- ]?delivery|message not delivered"
    r"|delivery notification"
    r"|undelivered mail returned to sender|warning: could not send message|rejected:|message delayed)",
    re.I,
)
_BOUNCE_BODY = re.compile(
    "|".join(
        (
            r"this message was created automatically by mail delivery software",  # Exim
            r"this is the qmail-send program at",  # qmail
            r"this is the mail system at host",  # Postfix
            r"delivery to the following recipients? failed",  # Gmail
            r"the following addresses had permanent fatal errors",  # Sendmail
            r"transcript of session follows",  # Sendmail, old postmasters
            r"your message (wasn't|was not|could not be) delivered",  # Gmail, Microsoft 365
            r"delivery has failed to these recipients or groups",  # Exchange
            r"i'm sorry to have to inform you that your message could not",  # Postfix's MAILER-DAEMON
            r"(unable|failed) to deliver (your|the) message",
            r"could not be delivered to (one or more|the following) recipients?",
        )
    ),
    re.I,
)
_ROLE_SENDER = re.compile(
    r"^(mailer[-_.]?daemon|post[-_.]?master|mail[-_.]?delivery[-_.]?(subsystem|system)?)([-+._].*)?$", re.I
)
_MAILER_DAEMON = re.compile(r"mailer[-_.]?daemon", re.I)
_ROLE_NAME = re.compile(r"^(mail delivery (subsystem|system)|mailer[-_ ]?daemon)$", re.I)
_NOREPLY = re.compile(r"no[-_.]?reply|do[-_.]?not[-_.]?reply", re.I)
# A list server's own addresses (Mailman, Majordomo, fml, ezmlm): notices, never a member's post.
_LIST_ADMIN = re.compile(r"^(owner-.{1,64}|.{1,64}-(admin|owner|request|bounces?))$", re.I)
_LIST_SERVER_HEADERS = ("x-mlserver", "x-ml-name", "x-ml-info", "mailing-list", "x-mailing-list", "list-id")
# SMTP replies and RFC 3464 fields in the text: "550 5.1.1", "550-5.7.26", "[#4.1.9]", "(#4.4.1)",
# "550 - Requested action", "Diagnostic-Code: smtp; 550 …", "Status: 5.1.1".
_SMTP = re.compile(
    r"(?<![\w.])[45][0-9]{2}[ \t]?[- ][ \t]?#?[245]\.[0-9]{1,3}\.[0-9]{1,3}(?![\w.])"
    r"|[\[(]#[245]\.[0-9]{1,3}\.[0-9]{1,3}[\])]"
    r"|(?m:^[ \t>]*[45][0-9]{2} - [A-Za-z])"
    r"|(?im:^[ \t>]*(?:diagnostic-code|final-recipient|original-recipient)[ \t]*:[ \t]*\w)"
    r"|(?im:^[ \t>]*status[ \t]*:[ \t]*[245]\.[0-9]{1,3}\.[0-9]{1,3}[ \t]*$)"
)
# One line of a raw header block as a mail system returns it ("Received: from …", indented or ">"-quoted).
_FIELD_LINE = re.compile(r"[ \t>]*([A-Za-z][A-Za-z0-9-]{0,40})[ \t]*:")
_CONTINUATION = re.compile(r"[ \t>]*[ \t]\S")
# Fields a mail client never shows when a person quotes or forwards a mail inline (it shows From, Sent,
# To, Subject): only a returned raw header has them.
_TRANSPORT = frozenset(
    {
        "received",
        "return-path",
        "message-id",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
        "dkim-signature",
        "delivered-to",
        "x-mailer",
        "authentication-results",
        "x-original-to",
        "x-correlation-id",
    }
)
_ADDRESS = re.compile(r"[A-Za-z0-9._%+=-]{1,64}@[A-Za-z0-9.-]{1,253}")
_OWN_FIELDS = ("from", "reply-to", "sender", "return-path")
# The X-Correlation-ID every mail this system sends carries (common/delivery/compose.py, common/reply).
_CORRELATION = re.compile(r"[ \t]*(ack|forward|reply|digest|complaint)-[!-~]{1,200}[ \t]*$", re.I)


def classify(mail: ParsedMail, own: Callable[[str], bool] = lambda address: False) -> Report | None:
    """What kind of report ``mail`` is (None: not one). ``own``: whether an address is this system's."""
    if why := complaint(mail):
        return Report(COMPLAINT, why)
    if why := delivery_report(mail, own):
        return Report(DSN, why)
    return None


def complaint(mail: ParsedMail) -> str:
    """Why ``mail`` is an abuse complaint or unsubscribe request about mail sent from here ('' if not)."""
    ctype, params = parse_params(mail.headers.get("content-type", ""))
    if ctype == "multipart/report" and params.get("report-type", "").strip().lower() == "feedback-report":
        return "abuse complaint (ARF, RFC 5965: multipart/report; report-type=feedback-report)"
    if any(a.declared_type == "message/feedback-report" for a in mail.attachments):
        return "abuse complaint (ARF, RFC 5965: a message/feedback-report part)"
    if _ses_notification(mail) == "Complaint":
        return "abuse complaint (Amazon SES complaint notification)"
    if any(b"\nx-hmxmroriginalrecipient:" in _head(a.data) for a in mail.attachments if a.role == "message"):
        return "abuse complaint (Microsoft JMRP: the reported mail attached)"
    if mail.headers.get("x-apple-unsubscribe", "").strip().lower() == "true" and automatic(mail):
        return "unsubscribe request (sent automatically by Apple Mail)"
    return ""


def delivery_report(mail: ParsedMail, own: Callable[[str], bool] = lambda address: False) -> str:
    """Why ``mail`` is a delivery report or another report a program wrote ('' when nothing says so)."""
    return _declared_report(mail) or _returned_mail(mail, own)


def _declared_report(mail: ParsedMail) -> str:
    """Why ``mail`` is a report by its own declaration: its MIME structure or its headers."""
    ctype, params = parse_params(mail.headers.get("content-type", ""))
    if ctype == "message/delivery-status":
        return "delivery status notification (message/delivery-status)"
    kind = params.get("report-type", "").strip().lower()
    if ctype == "multipart/report" and kind in ("delivery-status", "global-delivery-status"):
        return f"delivery status notification (multipart/report; report-type={kind})"
    declared = {a.declared_type for a in mail.attachments}
    for part in ("message/delivery-status", "message/global-delivery-status"):
        if part in declared:  # RFC 3464 2.1, outside a report
            return f"delivery report ({part} part)"
    if declared & {"text/rfc822-headers", "message/global-headers"}:  # RFC 6522: only reports carry it
        return "report (a returned header part)"
    if notification := _ses_notification(mail):
        return f"Amazon SES {notification.lower()} notification"
    # RFC 5321 4.5.5: the null reverse-path is for non-delivery notifications and other automatic
    # mail; the receiving MTA records the envelope sender as the first Return-Path (RFC 5321 4.4).
    if mail.headers.get("return-path", "").replace(" ", "") == "<>":
        return "delivery report (null sender: Return-Path <>)"
    if "x-failed-recipients" in mail.headers:  # Exim writes it on every bounce it sends
        return "delivery report (X-Failed-Recipients)"
    return ""


def _returned_mail(mail: ParsedMail, own: Callable[[str], bool]) -> str:
    """Why ``mail`` is a report by what it carries and who sent it: a returned mail or header, a
    program's sender, SMTP status or bounce text."""
    text = mail.body_text[:SCAN_CHARS]
    block = _returned_block(text)
    if _names_own(block, own):  # a raw header a person's client never quotes
        return "delivery report (the returned header of a mail this system sent)"
    role = _role(mail)
    program = role or _program(mail)
    parts = (a for a in mail.attachments if a.declared_type.startswith("message/"))
    ours = any(_names_own(_fields(a.data), own) for a in parts)
    # A contact may forward our mail back as an attachment: it is returned mail with a sign of a program.
    if ours and (program or _SMTP.search(text) or _BOUNCE_BODY.search(text[:20_000])):
        return "delivery report (a returned copy of a mail this system sent)"
    if not program:
        return ""
    if _SMTP.search(text):
        return f"delivery report ({program}, SMTP status in the text)"
    returned = [a for a in mail.attachments if a.declared_type in ("message/rfc822", "message/global")]
    # postmaster is also a person's mailbox (RFC 5321 4.5.1), and a person may attach a mail: from it,
    # a returned mail counts when the text names one of that mail's recipients, as a bounce does.
    if (block or returned) and (program != POSTMASTER or _names_recipient(text, block, returned)):
        return f"delivery report ({program}, a returned mail)"
    if role and _BOUNCE_SUBJECT.search(mail.subject.strip()):
        return "delivery report (mail system sender, bounce subject)"
    if role and _BOUNCE_BODY.search(text[:20_000]):
        return "delivery report (mail system sender, bounce text)"
    if program == "list server" and (mail.in_reply_to or mail.references):
        return "mailing list server notice about a mail sent to it"
    return ""


def carried_report(mail: ParsedMail) -> str:
    """Why ``mail`` carries a delivery report in its text ('' if it does not): a person forwarding a
    bounce is forwarded, but gets no automatic answer (it may be a bounce in a layout not known here)."""
    text = mail.body_text[:SCAN_CHARS]
    if _SMTP.search(text):
        return "carries a delivery report (SMTP status in the text)"
    if _returned_block(text):
        return "carries a returned mail header"
    return ""


def is_mailer_daemon(local: str) -> bool:
    """A MAILER-DAEMON local part (an envelope sender only mail systems use)."""
    return _MAILER_DAEMON.fullmatch(local) is not None


def _role(mail: ParsedMail) -> str:
    local = mail.from_address.partition("@")[0]
    if _ROLE_NAME.match(mail.display_name.strip()):
        return "mail system sender"
    found = _ROLE_SENDER.match(local)
    if found is None:
        return ""
    return POSTMASTER if found.group(1).lower().startswith("post") else "mail system sender"


def _names_recipient(text: str, block: list[tuple[str, str]], returned: list[Attachment]) -> bool:
    """Whether ``text`` names an address the returned mail was sent to (its To or Cc)."""
    fields = block + [f for a in returned for f in _fields(a.data)]
    wanted = {a.lower() for name, v in fields if name in ("to", "cc") for a in _ADDRESS.findall(v)}
    return any(a.lower() in wanted for a in _ADDRESS.findall(text[:4000]))


def _program(mail: ParsedMail) -> str:
    """Which kind of program sent ``mail`` ('' for what may be a person)."""
    local = mail.from_address.partition("@")[0]
    if _NOREPLY.search(local):
        return "no-reply sender"
    if _LIST_ADMIN.match(local) and any(h in mail.headers for h in _LIST_SERVER_HEADERS):
        return "list server"
    # RFC 3834's marker only: Precedence (bulk, list) is on every list post, which may well carry a mail
    auto = mail.headers.get("auto-submitted", "").split(";")[0].strip().lower()
    if auto and auto != "no":
        return f"automatic mail (Auto-Submitted: {auto[:40]})"
    return ""


def _ses_notification(mail: ParsedMail) -> str:
    """The notificationType (or eventType) of SES's SNS JSON when that is the mail's text ('' if not)."""
    text = mail.text.lstrip()[:SCAN_CHARS]
    if not text.startswith("{") or ('"notificationType"' not in text and '"eventType"' not in text):
        return ""
    try:
        doc, _ = json.JSONDecoder(strict=False).raw_decode(text)  # SNS wraps long lines inside strings
    except ValueError:
        return ""
    if not isinstance(doc, dict) or not isinstance(doc.get("mail"), dict):
        return ""
    kind = doc.get("notificationType") or doc.get("eventType")
    return kind[:40] if isinstance(kind, str) else ""


def _head(data: bytes) -> bytes:
    """The header block of a returned message part, lower-cased, starting with a line break."""
    head = data[:PART_HEADER_BYTES]
    end = head.find(b"\n\n") if b"\r\n\r\n" not in head else head.find(b"\r\n\r\n")
    return b"\n" + (head if end < 0 else head[:end]).replace(b"\r\n", b"\n").lower()


def _fields(data: bytes) -> list[tuple[str, str]]:
    """(name, value) of a returned message part's header lines (unfolded enough for addresses)."""
    out = []
    for line in _head(data).decode("latin-1").split("\n"):
        name, colon, value = line.partition(":")
        if colon and name and not name[0].isspace():
            out.append((name.strip(), value))
    return out


def _returned_block(text: str) -> list[tuple[str, str]]:
    """The first raw header block in ``text`` (3 or more header lines in a row, one of them a
    transport field a person's client never shows), as (name, value); [] when there is none."""
    run: list[tuple[str, str]] = []
    for line in text.splitlines():
        m = _FIELD_LINE.match(line)
        if m:
            run.append((m.group(1).lower(), line[m.end() :]))
            continue
        if run and _CONTINUATION.match(line):
            continue
        if len(run) >= 3 and any(name in _TRANSPORT for name, _ in run):
            return run
        run = []
    return run if len(run) >= 3 and any(name in _TRANSPORT for name, _ in run) else []


def _names_own(fields: list[tuple[str, str]], own: Callable[[str], bool]) -> bool:
    """Whether a returned header block is of a mail this system sent: our X-Correlation-ID, or one of
    our addresses as its From, Reply-To, Sender or Return-Path (together with a transport field)."""
    names = {name for name, _ in fields}
    if any(name == "x-correlation-id" and _CORRELATION.match(value) for name, value in fields):
        return True
    if not names & _TRANSPORT:
        return False
    return any(name in _OWN_FIELDS and any(own(a) for a in _ADDRESS.findall(v)) for name, v in fields)
