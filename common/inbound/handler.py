"""inbound-handler logic: mail to the public address (SES receipt), and SES feedback (SNS).

For a receipt: parse -> spam policy -> conversation record -> archive -> attachments -> ack (first
contact) -> forward -> delete staging. Every step is safe to repeat: a failure re-raises so SES or
Lambda retries, and the senders' idempotency keys come from the SES message id, so a retry never
sends a second ack or forward.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from common.aws import s3
from common.inbound import ack, policy, quarantine
from common.inbound.messages import build_ack, build_forward, unconverted_html
from common.mail import limits
from common.mail.build import unbuildable
from common.mail.headers import header_text, parse_mailbox
from common.mail.parse import ParsedMail, parse
from common.mail.threads import conversation_id, thread_address
from common.runtime import events
from common.runtime.clock import parse_iso
from common.runtime.config import Config
from common.runtime.log import bind, get_logger
from common.store import attachments, conversations, layout, senderlists, staging
from common.store.sendqueue import enqueue

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from common.inbound.feedback import FeedbackResult

log = get_logger("inbound-handler")


class InboundResult(TypedDict):
    """What inbound-handler returns for an SES receipt (the RIE shows it; tests assert on it)."""

    status: Literal["forwarded", "quarantined", "dropped", "dsn", "already-processed"]
    messageId: str
    reason: NotRequired[str]
    key: NotRequired[str]
    conversationId: NotRequired[str]
    firstContact: NotRequired[bool]
    ack: NotRequired[bool]
    attachments: NotRequired[list[str]]
    skipped: NotRequired[list[str]]


PREVIEW_CHARS = 500


def handle(
    cfg: Config, event: Any, context: LambdaContext | None = None
) -> InboundResult | FeedbackResult | quarantine.DigestResult | quarantine.ReleaseResult:
    source = events.kind(event)
    if source == "sns":
        from common.inbound import feedback

        return feedback.apply_notifications(cfg, events.sns_messages(event))
    if source == "eventbridge":
        task = events.OwnerTask.from_event(event)
        if task.task == "quarantine-digest":
            return quarantine.send_digest(cfg)
        return quarantine.release(cfg, task.quarantine_id, f"cli:{task.by}")
    return receive_mail(cfg, events.SesReceipt.from_event(event))


def received_at(receipt: events.SesReceipt) -> datetime:
    """When SES received the mail (stable across retries); now if SES did not say."""
    return parse_iso(receipt.timestamp) or datetime.now(UTC)


def log_fields(mail: ParsedMail) -> dict[str, Any]:
    return {
        "sender": mail.from_address,
        "subject": mail.subject,
        "body_preview": mail.body_text[:PREVIEW_CHARS],
    }


def envelope_fields(receipt: events.SesReceipt) -> dict[str, Any]:
    """What the logs say about a mail that was not parsed: SES's own reading of From and Subject."""
    return {
        "sender": parse_mailbox(receipt.header_from[:2000]).address.lower(),
        "subject": header_text(receipt.subject[:2000]),
        "envelope_sender": receipt.source,
    }


def receive_mail(cfg: Config, receipt: events.SesReceipt) -> InboundResult:
    mid = receipt.message_id
    bind(ses_message_id=mid)
    raw = staging.fetch(cfg, mid)
    if raw is None:
        log.warning(
            "mail not processed",
            extra={"reason": "staging object missing (already processed)", "key": layout.staging(mid)},
        )
        return {"status": "already-processed", "messageId": mid}
    when = received_at(receipt)
    # Nothing a stranger wrote is parsed before the envelope rules and the caps (docs/security.md).
    decision = policy.assess_envelope(receipt, cfg)
    if decision is None and (over := limits.screen(raw)):
        decision = policy.Decision(policy.QUARANTINE, f"not parsed: {over}")
    mail = None
    if decision is None:
        mail = parse(raw)
        if mail.problems:
            log.warning("mail has malformed parts", extra={"problems": mail.problems[:10]})
        # Only a usable address is looked up (an unusable one is quarantined by assess_mail below): a
        # 3,000-character local part is a key DynamoDB refuses even on reads.
        listing = (
            senderlists.lookup(cfg, mail.from_address)
            if mail.from_address and not mail.from_problem
            else None
        )
        decision = policy.assess_mail(receipt, mail, policy.RULES.get(cfg), listing, cfg.is_own)
    fields = log_fields(mail) if mail else envelope_fields(receipt)

    if decision.action == policy.DROP:
        log.warning("mail dropped", extra={**fields, "reason": decision.reason, "verdicts": receipt.verdicts})
        staging.done(cfg, receipt)
        return {"status": "dropped", "reason": decision.reason, "messageId": mid}
    if decision.action == policy.DSN:
        key = layout.bounce(when, mid)
        s3.put(cfg.bucket, key, raw, "message/rfc822")
        log.info(
            "archived without forward or ack (bounce, report or automatic reply)",
            extra={**fields, "reason": decision.reason, "key": key},
        )
        staging.done(cfg, receipt)
        return {"status": "dsn", "reason": decision.reason, "key": key, "messageId": mid}
    if decision.action == policy.QUARANTINE or mail is None:
        return quarantined(cfg, receipt, mail, raw, decision.reason, when)

    result = deliver(cfg, mid, mail, raw, when, decision.warnings, receipt)
    staging.done(cfg, receipt)
    return result


class Undeliverable(Exception):
    """A mail released from quarantine that still cannot be delivered (the message says why)."""


def deliver(
    cfg: Config,
    mid: str,
    mail: ParsedMail,
    raw: bytes,
    when: datetime,
    warnings: tuple[str, ...],
    receipt: events.SesReceipt | None,
) -> InboundResult:
    """Record the conversation, archive the raw mail, store its parts, ack a first contact (only for
    a live ``receipt``; a release from quarantine is never acked) and queue the forward."""
    cid = conversation_id(mail.from_address, mail.display_name, cfg.opaque_relay_domains)
    bind(conversation_id=cid)

    def refuse(reason: str) -> InboundResult:
        if receipt is None:
            raise Undeliverable(reason)
        return quarantined(cfg, receipt, mail, raw, reason, when)

    try:
        first_contact = conversations.record_inbound(
            cfg,
            cid,
            mid,
            mail,
            when,
            authenticated=receipt is not None and ack.authenticated(receipt, mail.from_address),
        )
    except conversations.Collision as exc:
        return refuse(f"{exc} (the mail is not merged into it)")
    archive_key = layout.archive(cid, mid)
    s3.put(cfg.bucket, archive_key, raw, "message/rfc822")
    parts = mail.attachments
    if unconverted := unconverted_html(
        cfg, mail, archive_key
    ):  # the text is partial: the owner still gets every word
        part, note = unconverted
        parts = [*parts, part] if part else parts
        warnings = (*warnings, note)
    kept = attachments.store(
        cfg,
        parts,
        lambda name: layout.attachment(cid, mid, name),
        lambda name: layout.withheld(cid, mid, name),
    )
    forward = build_forward(
        cfg,
        mid,
        cid,
        mail,
        kept,
        warnings,
        archive_key,
        thread_address(cid, cfg.thread_secret, cfg.thread_domain),
        lambda key: s3.presign_get(cfg.bucket, key, cfg.forward_link_days * 24 * 3600),
    )
    # A forward that can never be built is quarantined now, before any ack goes out.
    if problem := unbuildable(forward, cfg.public_email, cfg.domain_name):
        return refuse(f"forward cannot be built: {problem}")
    if receipt is None:
        ack_reason = "released from quarantine"
    else:
        ack_reason = ack.refusal(cfg, receipt, mail) if first_contact else "not first contact"
    ack_message = None if ack_reason else build_ack(cfg, mid, cid, mail)
    if ack_message is not None and (problem := unbuildable(ack_message, cfg.public_email, cfg.domain_name)):
        ack_message, ack_reason = None, f"ack cannot be built: {problem}"
    enqueue(cfg.forward_queue, forward, cfg.bucket, cfg.claim_check_bytes)
    if ack_message is not None:
        enqueue(cfg.ack_queue, ack_message, cfg.bucket, cfg.claim_check_bytes)
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


def quarantined(
    cfg: Config, receipt: events.SesReceipt, mail: ParsedMail | None, raw: bytes, reason: str, when: datetime
) -> InboundResult:
    fields = log_fields(mail) if mail else envelope_fields(receipt)
    if mail is not None:
        shown = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
    else:  # not parsed: SES's reading of From, as text for the owner's digest
        shown = header_text(receipt.header_from[:2000], limit=200)
    key = quarantine.hold(cfg, receipt, raw, reason, when, fields["sender"], shown, fields["subject"])
    log.warning("mail quarantined", extra={**fields, "reason": reason, "key": key})
    staging.done(cfg, receipt)
    return {"status": "quarantined", "reason": reason, "key": key, "messageId": receipt.message_id}
