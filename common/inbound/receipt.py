"""inbound-handler's SES receipt: a mail to the public address.

parse -> spam policy -> the screener (an address that has one: common/delivery/screener.py) ->
conversation record -> archive -> attachments -> ack (first contact) ->
forward -> delete staging; the steps from the conversation record on are common/delivery/deliver.py.
Every step is safe to repeat: a failure re-raises so SES or Lambda retries, and the senders'
idempotency keys come from the SES message id, so a retry never sends a second ack or forward.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import datetime
from typing import Any

from common.delivery import ack, deliver, screener
from common.delivery.complaint import build_complaint
from common.delivery.quarantine import envelope_fields, log_fields, quarantined
from common.delivery.results import InboundResult
from common.inbound import policy
from common.mail.build import unbuildable
from common.mail.parse import ParsedMail
from common.runtime import addresses, events
from common.runtime.addresses import receiving_function
from common.runtime.clock import parse_iso_or_now
from common.runtime.config import Delivery, InboundHandlerConfig
from common.runtime.log import bind, get_logger
from common.store import addresses as registry
from common.store import intake, layout, rawmail, senderlists, staging
from common.store.sendqueue import enqueue

log = get_logger("inbound-handler")


def handle(cfg: InboundHandlerConfig, event: Any) -> InboundResult:
    """An SES receipt event (any other shape is refused by SesReceipt.from_event with the reason)."""
    return receive_mail(cfg, events.SesReceipt.from_event(event))


def received_at(receipt: events.SesReceipt) -> datetime:
    """When SES received the mail (stable across retries); now if SES did not say."""
    return parse_iso_or_now(receipt.timestamp)


def receive_mail(cfg: InboundHandlerConfig, receipt: events.SesReceipt) -> InboundResult:
    mid = receipt.message_id
    bind(ses_message_id=mid)
    if {receiving_function(cfg, r) for r in receipt.recipients} == {"reply-handler"}:
        # The public rule matches the thread domain too, so that this function's recipients say which
        # rules a mail reached (common/store/staging.py): a mail to thread addresses alone is
        # reply-handler's, and this only takes its part in the staged mail's clean-up.
        staging.done(cfg, receipt, "inbound-handler")
        log.info("mail left to reply-handler", extra={"reason": "no public address among the recipients"})
        return {"status": "thread-only", "messageId": mid}
    raw = staging.fetch(cfg, mid)
    if raw is None:
        log.warning(
            "mail not processed",
            extra={"reason": "staging object missing (already processed)", "key": layout.staging(mid)},
        )
        return {"status": "already-processed", "messageId": mid}
    when = received_at(receipt)
    # The public address written to: from SES's recipients only (None: the policy drops the mail).
    public = addresses.of(cfg).written_to(receipt.recipients)
    assessed = policy.assess(
        receipt,
        raw,
        cfg,
        lambda: policy.RULES.get(cfg) if public is None or public.keywords else policy.Rules(),
        lambda address: senderlists.lookup(cfg, address, public.address if public else ""),
    )
    decision, mail = assessed.decision, assessed.mail
    fields = log_fields(mail) if mail else envelope_fields(receipt)

    if decision.action == policy.Action.DROP:
        log.warning("mail dropped", extra={**fields, "reason": decision.reason, "verdicts": receipt.verdicts})
        staging.done(cfg, receipt)
        return {"status": "dropped", "reason": decision.reason, "messageId": mid}
    if decision.action == policy.Action.DSN:
        key = rawmail.keep_report(cfg, when, mid, raw)
        log.info(
            "archived without forward or ack (bounce, report or automatic reply)",
            extra={**fields, "reason": decision.reason, "key": key},
        )
        staging.done(cfg, receipt)
        return {"status": "dsn", "reason": decision.reason, "key": key, "messageId": mid}
    if decision.action == policy.Action.COMPLAINT and mail is not None:
        return complained(cfg, receipt, mail, raw, decision.reason, when)
    if public is not None and public.catch_all:  # an address `email-handler address` manages
        public, disabled = registry.applied(cfg, public)
        if disabled:  # quarantined, never bounced: a disabled address must not confirm itself
            return quarantined(cfg, receipt, mail, raw, disabled, when)
    if decision.action == policy.Action.QUARANTINE or mail is None:
        return quarantined(cfg, receipt, mail, raw, decision.reason, when)
    if public is not None and public.screener:  # a first-time sender waits for the owner's approval
        held = screener.screen(cfg, receipt, mail, raw, when, public)
        if held is not None:
            return held

    # The record checks the owner's block list and takes the ack in one write (common/store/intake.py).
    taking = functools.partial(
        intake.record,
        authenticated=ack.authenticated(receipt, mail.from_address),
        ack_refusal=(f"no ack for {public.address}" if public and not public.ack else "")
        or ack.refusal_before_budget(cfg, receipt, mail),
        public=public.address if public else "",
    )

    def record(cfg: Delivery, cid: str, mid: str, mail: ParsedMail, when: datetime) -> intake.Recorded:
        """The record, then SES's sandbox for an ack every other check let through: not attempted."""
        recorded = taking(cfg, cid, mid, mail, when)
        note = (
            ack.sandbox_refusal(mail.from_address)
            if recorded.first_contact and not recorded.ack_refusal
            else ""
        )
        return replace(recorded, ack_refusal=note, ack_note=note) if note else recorded

    result = deliver.deliver(cfg, mid, mail, raw, when, decision.warnings, receipt, record, public)
    staging.done(cfg, receipt)
    return result


def complained(
    cfg: InboundHandlerConfig,
    receipt: events.SesReceipt,
    mail: ParsedMail,
    raw: bytes,
    why: str,
    when: datetime,
) -> InboundResult:
    """An abuse complaint: archived as a report, and the owner told in a labelled notice (never a
    forward, never an ack, no conversation; common/delivery/complaint.py)."""
    mid = receipt.message_id
    key = rawmail.keep_report(cfg, when, mid, raw)
    notice = build_complaint(cfg, mid, mail, raw, why, key)
    if problem := unbuildable(notice, cfg.public_email, cfg.domain_name):
        log.error(
            "abuse complaint notice cannot be built",
            extra={**log_fields(mail), "reason": problem, "key": key},
        )
    else:
        enqueue(cfg.forward_queue, notice, cfg.bucket, cfg.claim_check_bytes)
    log.info(
        "abuse complaint archived; the owner is told",
        extra={**log_fields(mail), "reason": why, "key": key, "notified": not problem},
    )
    staging.done(cfg, receipt)
    return {"status": "complaint", "reason": why, "key": key, "messageId": mid}
