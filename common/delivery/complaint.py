"""An abuse complaint about mail sent from here (an ARF report, RFC 5965, or a provider's own layout),
routed to the owner as what it is: a labelled notice, never a forward of a contact's mail.

No conversation is recorded for the reporter and no ack goes out (a feedback loop's address is a
program); the report is archived under ``bounces/`` like every report, and attached whole to the
notice as an opaque ``abuse report.eml`` when it fits SES's size limit (the reported mail inside it may
be anything, so it is never shown inline).
"""

from __future__ import annotations

from common.delivery.compose import fits_attached
from common.mail.limits import MAX_SUBJECT_CHARS
from common.mail.outbound import OutboundMessage
from common.mail.parse import ParsedMail
from common.mail.sanitize import clean_header_text
from common.runtime.config import Delivery
from common.store import attachments as stored

REPORT_NAME = "abuse report.eml"
TEXT_CHARS = 8_000  # the reporter's own words; the whole report is attached or archived
# RFC 5965 3.1 and 3.2: the fields of the machine-readable part the owner can act on.
FEEDBACK_FIELDS = (
    "feedback-type",
    "user-agent",
    "original-mail-from",
    "original-rcpt-to",
    "arrival-date",
    "source-ip",
    "reported-domain",
    "reported-uri",
    "authentication-results",
)
REPORTED_FIELDS = ("from", "to", "subject", "date", "message-id")
REPORTED_TYPES = ("message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers")


def _fields(data: bytes, wanted: tuple[str, ...]) -> list[tuple[str, str]]:
    """The wanted fields of a header block (the first of each), in the order given, cleaned."""
    head = data[:16384].replace(b"\r\n", b"\n").split(b"\n\n", 1)[0].decode("utf-8", "replace")
    found: dict[str, str] = {}
    for line in head.replace("\n ", " ").replace("\n\t", " ").split("\n"):
        name, colon, value = line.partition(":")
        key = name.strip().lower()
        if colon and key in wanted and key not in found:
            found[key] = clean_header_text(value, 300)
    return [(k.title(), found[k]) for k in wanted if found.get(k)]


def build_complaint(
    cfg: Delivery, mid: str, mail: ParsedMail, raw: bytes, why: str, key: str
) -> OutboundMessage:
    """The notice to the owner; ``key`` is where the report is archived. Stores the attached copy."""
    feedback = next((a.data for a in mail.attachments if a.declared_type == "message/feedback-report"), b"")
    reported = next(
        (
            a.data
            for a in mail.attachments
            if a.declared_type
            in ("message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers")
        ),
        b"",
    )
    reporter = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
    lines = [
        f"[!] Abuse complaint about mail sent from {cfg.public_email} ({why}).",
        "[!] This is a report from a mail provider or a recipient's program, not a contact's message: "
        "it was not acknowledged and starts no conversation.",
        "",
        f"Reported by: {clean_header_text(reporter, 300) or '(no sender)'}",
        f"Subject: {mail.subject or '(no subject)'}",
        *(f"{name}: {value}" for name, value in _fields(feedback, FEEDBACK_FIELDS)),
    ]
    if reported:
        lines += ["", "The reported mail:", *(f"  {n}: {v}" for n, v in _fields(reported, REPORTED_FIELDS))]
    text = mail.body_text.strip()
    if text:
        lines += [
            "",
            "The report says:",
            "",
            text[:TEXT_CHARS] + (" [...]" if len(text) > TEXT_CHARS else ""),
        ]
    attachments = []
    if fits_attached(cfg, len(raw)):
        attachments.append(stored.attach_report(cfg, mid, raw, REPORT_NAME))
        lines += [
            "",
            f"The whole report is attached as {REPORT_NAME} and archived at s3://{cfg.bucket}/{key}.",
        ]
    else:
        lines += ["", f"The whole report is archived at s3://{cfg.bucket}/{key} (too large to attach)."]
    subject = clean_header_text(f"Abuse complaint: {mail.subject or 'mail sent from ' + cfg.public_email}")
    return OutboundMessage(
        kind="complaint",
        idempotency_key=f"complaint:{mid}",
        correlation_id=f"complaint-{mid}",
        to=[cfg.private_email],
        subject=subject[:MAX_SUBJECT_CHARS],
        text="\n".join(lines) + "\n",
        from_name=f"Abuse complaint via {cfg.domain_name}",
        headers={"Auto-Submitted": "auto-generated"},
        attachments=attachments,
        original_key=key,
    )
