"""Deliver a mail to the owner: the one forward path, for a live SES receipt and for a release.

Record the conversation, archive the raw mail, store its parts, ack a first contact (only for a live
receipt, whose record checks the owner's block list and takes the ack in one write:
common/store/intake.py; a release from quarantine is never acked) and queue the forward. Every step
is safe to repeat: the senders' idempotency keys come from the SES message id, so a retry never sends
a second ack or forward.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from common.delivery.compose import build_ack, build_forward, unconverted_html
from common.delivery.quarantine import log_fields, quarantined
from common.delivery.results import InboundResult
from common.errors import EmailHandlerError
from common.mail import htmldoc, htmlsafe, parse, trackers
from common.mail.build import unbuildable
from common.mail.outbound import OutboundMessage
from common.mail.parse import ParsedMail
from common.mail.threads import conversation_id, opaque_message_id, opaque_thread_address, thread_address
from common.runtime import addresses, events, outcomes
from common.runtime.addresses import PublicAddress
from common.runtime.config import Delivery
from common.runtime.log import bind, get_logger
from common.store import attachments, conversations, intake, layout, rawmail
from common.store.sendqueue import enqueue

log = get_logger("inbound-handler")  # the logger name log queries know, whichever function delivers


class UndeliverableError(EmailHandlerError):
    """A mail released from quarantine that still cannot be delivered (the message says why)."""


# The forward of a mail from the owner's own mailbox says, before the owner answers it, that the answer
# is not sent (common/reply/handler.py, check_contact) and how to test a reply instead.
OWN_MAILBOX = (
    "This came from your own mailbox: a reply to it is not sent (it would mail you back). To test a "
    "reply, write from a second mailbox of yours, verified with `email-handler ses verify-address` "
    "(docs/deploy.md, Test a reply)."
)


def deliver(
    cfg: Delivery,
    mid: str,
    mail: ParsedMail,
    raw: bytes,
    when: datetime,
    warnings: tuple[str, ...],
    receipt: events.SesReceipt | None,
    record: intake.Recorder = intake.released,
    public: PublicAddress | None = None,
) -> InboundResult:
    """Record the conversation, archive the raw mail, store its parts, ack a first contact (only for
    a live ``receipt``, whose ``record`` checks the block list and takes the ack: a release from
    quarantine is never acked) and queue the forward. ``record`` is passed in by the receipt's path
    (common/inbound/receipt.py), so a release (reply-handler's too) never reaches the transaction and
    its role needs no ``dynamodb:ConditionCheckItem`` (tests/unit/test_iam_static.py)."""
    cid = conversation_id(mail.from_address, mail.display_name, cfg.opaque_relay_domains)
    bind(conversation_id=cid)
    # The public address written to (a release: the one its quarantine record names): the ack comes
    # from it, the forward's banner names it (several addresses), the forward is sent from it.
    public = public or addresses.of(cfg).primary
    boxes = cfg.mailboxes(public)
    warnings = _banner(cfg, public, boxes, mail, warnings)

    def refuse(reason: str) -> InboundResult:
        if receipt is None:
            raise UndeliverableError(reason)
        return quarantined(cfg, receipt, mail, raw, reason, when)

    try:
        recorded = record(cfg, cid, mid, mail, when)
    except conversations.CollisionError as exc:
        return refuse(f"{exc} (the mail is not merged into it)")
    if recorded.blocked is not None:
        return refuse(f"blocked by the owner ({recorded.blocked.entry})")
    first_contact = recorded.first_contact
    ack_reason = recorded.ack_refusal
    if recorded.ack_note:  # not attempted: the record says why, and so does the owner's forward, in one line
        conversations.set_attributes(cfg, cid, {"ackStatus": f"not sent: {recorded.ack_note}"})
        warnings = (*warnings, f"No automatic acknowledgement was sent: {recorded.ack_note}.")
    archive_key, kept, warnings = _archive_and_store(cfg, cid, mid, mail, raw, warnings)
    forward = build_forward(
        cfg,
        mid,
        cid,
        mail,
        kept,
        warnings,
        archive_key,
        _thread_address(cfg, cid, public),
        lambda key: attachments.download_link(cfg, key),
    )
    _hide_correspondent(cfg, forward, public)
    # A forward that can never be built is quarantined now, before any ack goes out.
    forward.from_address = public.address
    if problem := unbuildable(forward, public.address, cfg.domain_name):
        return refuse(f"forward cannot be built: {problem}")
    ack_message = None
    if not ack_reason:  # the address's own subject and text
        ack_message = build_ack(cfg, public.ack_subject, public.ack_template, mid, cid, mail)
        ack_message.from_address = public.address
    if ack_message is not None and (problem := unbuildable(ack_message, public.address, cfg.domain_name)):
        ack_message, ack_reason = None, f"ack cannot be built: {problem}"
    for each in per_mailbox(forward, boxes):
        enqueue(cfg.forward_queue, each, cfg.bucket, cfg.claim_check_bytes)
    if ack_message is not None:
        enqueue(cfg.ack_queue, ack_message, cfg.bucket, cfg.claim_check_bytes)
    about = outcomes.Mail(
        mid,
        cid,
        forward.correlation_id,
        public.address,
        {"bytes": len(raw), "attachments": len(kept.attachments)},
        contact=mail.from_address,
        subject=mail.subject,
    )
    outcomes.record(cfg, outcomes.Outcome.FORWARDED, about, "" if receipt else "released from quarantine")
    return _forwarded(mail, mid, cid, first_contact, ack_reason, kept, warnings)


def _thread_address(cfg: Delivery, cid: str, public: PublicAddress) -> str:
    """The forward's Reply-To: the opaque thread address for an address that hides its correspondents
    (it shows nothing of the contact), the readable one otherwise (common/mail/threads.py)."""
    made = opaque_thread_address if public.hide_correspondent else thread_address
    return made(cid, cfg.thread_secret, cfg.thread_domain)


def _hide_correspondent(cfg: Delivery, forward: OutboundMessage, public: PublicAddress) -> None:
    """hide_correspondent (docs/owner.md): nothing of the contact outside the encryption. The forward's
    thread address is already the opaque one; the contact's Message-IDs become keyed digests (the
    owner's client still threads by them), and forward-sender sends it encrypted with generic outer
    fields, or not at all."""
    if not public.hide_correspondent:
        return
    forward.hide_correspondent = True
    forward.references = [
        opaque_message_id(r, cfg.thread_secret, cfg.thread_domain) for r in forward.references
    ]


def _banner(
    cfg: Delivery, public: PublicAddress, boxes: tuple[str, ...], mail: ParsedMail, warnings: tuple[str, ...]
) -> tuple[str, ...]:
    """The forward's banner lines about where it was written and who reads it."""
    if addresses.of(cfg).several:
        warnings = (*warnings, f"Written to {public.described}")
    if cfg.is_owner(mail.from_address):  # the first test anyone tries; its answer would be a loop
        warnings = (*warnings, OWN_MAILBOX)
    if len(boxes) > 1:  # each mailbox reads who else has it, and that an answer is copied to them
        warnings = (
            *warnings,
            f"Sent to every mailbox of {public.address}: {', '.join(boxes)}. A reply from any of them "
            "goes out from the public address, and the others get a copy.",
        )
    return warnings


# Between a forward's correlation id and its mailbox's number (``forward-<SES id>~2``): no SES message id
# holds it, so common/inbound/feedback.py still reads the original's id from a forward's correlation id.
MAILBOX_MARK = "~"


def per_mailbox(forward: OutboundMessage, boxes: tuple[str, ...]) -> list[OutboundMessage]:
    """One forward per mailbox, the same thread address in each (one conversation), each its own
    queued message with its own idempotency key and send record: a mailbox that bounces or waits for
    the sandbox holds up no other, and a retry sends each once. One mailbox keeps the keys of before."""
    if len(boxes) <= 1:
        return [dataclasses.replace(forward, to=list(boxes) or forward.to)]
    return [
        dataclasses.replace(
            forward,
            to=[box],
            idempotency_key=f"{forward.idempotency_key}:to:{box.lower()}",
            correlation_id=f"{forward.correlation_id}{MAILBOX_MARK}{n}",
        )
        for n, box in enumerate(boxes, 1)
    ]


def _forwarded(
    mail: ParsedMail,
    mid: str,
    cid: str,
    first_contact: bool,
    ack_reason: str,
    kept: attachments.Stored,
    warnings: tuple[str, ...],
) -> InboundResult:
    log.info(
        "mail forwarded",
        extra={
            **log_fields(mail),
            "conversation_id": cid,
            "first_contact": first_contact,
            "ack": not ack_reason,
            "ack_skipped_reason": ack_reason or None,
            "attachments": len(kept.attachments),
            "skipped_attachments": kept.skipped,
            "warnings": list(warnings),
        },
    )
    return {
        "status": "forwarded",
        "messageId": mid,
        "conversationId": cid,
        "firstContact": first_contact,
        "ack": not ack_reason,
        "attachments": [a.key for a in kept.attachments],
        "skipped": kept.skipped,
    }


def _archive_and_store(
    cfg: Delivery, cid: str, mid: str, mail: ParsedMail, raw: bytes, warnings: tuple[str, ...]
) -> tuple[str, attachments.Stored, tuple[str, ...]]:
    """Archive the raw mail and store its parts (with the HTML a partial text conversion left out,
    attached HTML and messages made safe); the archive's key, what was stored, and the warnings."""
    archive_key = rawmail.archive(cfg, cid, mid, raw)
    parts = mail.attachments
    if unconverted := unconverted_html(
        cfg, mail, archive_key
    ):  # the text is partial: the owner still gets every word
        part, note = unconverted
        parts = [*parts, part] if part else parts
        warnings = (*warnings, note)
    parts, warnings = _safe_parts(cfg, parts, warnings)
    kept = attachments.store(
        cfg,
        parts,
        lambda name: layout.attachment(cid, mid, name),
        lambda name: layout.withheld(cid, mid, name),
    )
    return archive_key, kept, warnings


def _safe_parts(
    cfg: Delivery, parts: list[parse.Attachment], warnings: tuple[str, ...]
) -> tuple[list[parse.Attachment], tuple[str, ...]]:
    """Attached HTML (a second HTML part, ``message.html``) and attached messages as the forward
    carries them: their HTML sanitised like the body's, trackers removed (common.mail.htmlsafe);
    the banner says how many went and what past the cap was left out of them."""
    out: list[parse.Attachment] = []
    removed = unread = 0
    for part in parts:
        types = {part.content_type, part.declared_type}
        if "text/html" in types:
            data, gone, left = htmlsafe.clean_part(
                part.data, part.charset or "utf-8", remove_trackers=cfg.remove_trackers == "on"
            )
            part = dataclasses.replace(
                part, data=data, charset="utf-8", mime_header="text/html; charset=utf-8"
            )
        elif "message/rfc822" in types:
            data, gone, left = htmlsafe.clean_message(part.data, remove_trackers=cfg.remove_trackers == "on")
            part = dataclasses.replace(part, data=data)
        else:
            gone = left = 0
        removed, unread = removed + gone, unread + left
        out.append(part)
    if removed:
        warnings = (*warnings, trackers.banner(removed) + " from the attached HTML and messages")
    if unread:
        warnings = (
            *warnings,
            f"The attached HTML was read for trackers up to {htmldoc.MAX_HTML_CHARS:,} characters "
            f"({htmldoc.MAX_HTML_TAGS:,} tags) per part; the {unread:,} characters past that were left "
            "out (the archived original has them).",
        )
    return out, warnings
