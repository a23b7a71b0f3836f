"""inbound-handler's SES receipt: a mail to the public address.

parse -> spam policy -> conversation record -> archive -> attachments -> ack (first contact) ->
forward -> delete staging; the steps from the conversation record on are common/delivery/deliver.py.
Every step is safe to repeat: a failure re-raises so SES or Lambda retries, and the senders'
idempotency keys come from the SES message id, so a retry never sends a second ack or forward.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from common.aws import s3
from common.delivery.deliver import deliver
from common.delivery.quarantine import envelope_fields, log_fields, quarantined
from common.delivery.results import InboundResult
from common.inbound import policy
from common.mail import limits
from common.mail.parse import parse
from common.runtime import events
from common.runtime.clock import parse_iso
from common.runtime.config import Config
from common.runtime.log import bind, get_logger
from common.store import layout, senderlists, staging

log = get_logger("inbound-handler")


def handle(cfg: Config, event: Any) -> InboundResult:
    """An SES receipt event (any other shape is refused by SesReceipt.from_event with the reason)."""
    return receive_mail(cfg, events.SesReceipt.from_event(event))


def received_at(receipt: events.SesReceipt) -> datetime:
    """When SES received the mail (stable across retries); now if SES did not say."""
    return parse_iso(receipt.timestamp) or datetime.now(UTC)


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
