"""Quarantine: hold a mail, and list what was held in a daily digest to the owner.

* :func:`hold` keeps the raw mail under ``spam/<day>/<id>.eml`` (S3 metadata ``reason``), writes one
  JSON line to the spam log group and a record in the quarantine table; :func:`quarantined` is the
  same for a live SES receipt, with its log line and the staging object's clean-up.
* :func:`send_digest` runs on a schedule (EventBridge -> inbound-handler, once a day): when
  something was held since the last digest, one mail to the owner lists sender, subject and
  reason with a release address ``release.<id>.<tag>@thread.<domain>`` per mail (HMAC-tagged like
  thread addresses), the oldest ``DIGEST_MAX_ENTRIES`` of them; only those are marked digested, the
  rest lead the next digest. Nothing held: nothing sent. Its idempotency key is derived from the ids
  it lists, so a repeated schedule run sends it once.

Releasing a held mail is common/delivery/release.py.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from common.aws import logs
from common.delivery.compose import build_digest
from common.delivery.results import DigestResult, InboundResult
from common.mail import limits
from common.mail.headers import header_text, parse_mailbox
from common.mail.parse import ParsedMail
from common.runtime import addresses, outcomes
from common.runtime.clock import iso_z
from common.runtime.config import Delivery
from common.runtime.events import SesReceipt
from common.runtime.log import get_logger, scrub
from common.store import quarantine as records
from common.store import rawmail, staging
from common.store.sendqueue import enqueue

log = get_logger("quarantine")


def log_fields(mail: ParsedMail) -> dict[str, Any]:
    """What the logs say about a mail: who, as a pseudonym (common.runtime.log.scrub), and sizes;
    never its subject or text."""
    return {
        "sender": mail.from_address,
        "subject_chars": len(mail.subject),
        "body_chars": len(mail.body_text),
    }


def envelope_fields(receipt: SesReceipt) -> dict[str, Any]:
    """The same for a mail that was not parsed: SES's own reading of From, pseudonymised."""
    return {"sender": envelope_sender(receipt), "envelope_sender": receipt.source}


def envelope_sender(receipt: SesReceipt) -> str:
    return parse_mailbox(receipt.header_from[:2000]).address.lower()


def hold(
    cfg: Delivery,
    receipt: SesReceipt,
    raw: bytes,
    reason: str,
    when: datetime,
    sender: str,
    shown: str,
    subject: str,
) -> str:
    """Quarantine the mail; returns its S3 key. ``sender`` is the From address (the spam log's field),
    ``shown`` the From as the digest shows it (with the display name)."""
    key = rawmail.hold(cfg, when, receipt.message_id, raw, reason)
    logs.put_json_line(
        cfg.spam_log_group,
        f"{when:%Y/%m/%d}",
        # No address, subject or text: who, as the pseudonym the function logs use; the rest is in
        # the quarantine record and the held mail, which `email-handler forget` removes.
        scrub(
            {
                "sesMessageId": receipt.message_id,
                "reason": reason,
                "key": key,
                "sender": sender,
                "envelope_sender": receipt.source,
                "verdicts": receipt.verdicts,
                "timestamp": iso_z(when),
            }
        ),
    )
    public = addresses.of(cfg).written_to(receipt.recipients)
    records.record(
        cfg,
        receipt.message_id,
        key,
        when,
        shown or sender or receipt.source,
        subject,
        reason,
        public.address if public else "",
    )
    return key


def send_digest(cfg: Delivery) -> DigestResult:
    """List the oldest held mails (``DIGEST_MAX_ENTRIES``) and mark only those digested: the rest stay
    pending and lead the next digest, so every held mail gets its release address by mail in turn."""
    held = records.pending(cfg)
    if not held:
        log.info("quarantine digest skipped", extra={"reason": "nothing quarantined since the last digest"})
        return {"status": "nothing-quarantined", "count": 0}
    # Each mailbox gets the mail held for the addresses it is a mailbox of, and only that (an address's
    # forward_to; PRIVATE_EMAIL for the others): one digest per mailbox, as the forwards go.
    by_box: dict[str, list[dict[str, Any]]] = {}
    for item in held:
        for box in cfg.mailboxes(str(item.get("address") or "")):
            by_box.setdefault(box, []).append(item)
    ids: list[str] = []
    marks: list[tuple[list[str], str]] = []
    for box, items in by_box.items():
        shown = [str(item["id"]) for item in items[: limits.DIGEST_MAX_ENTRIES]]
        # one mailbox (the owner's alone): the key of before; several: each mailbox's own
        seed = ",".join(shown) if len(by_box) == 1 else box.lower() + "\n" + ",".join(shown)
        key = "digest:" + hashlib.sha256(seed.encode()).hexdigest()[:32]
        enqueue(cfg.forward_queue, build_digest(cfg, items, key, box), cfg.bucket, cfg.claim_check_bytes)
        marks.append((shown, key))
        ids += [i for i in shown if i not in ids]
        log.info(
            "quarantine digest queued",
            extra={"count": len(items), "listed": len(shown), "idempotency_key": key},
        )
    # Marked once every mailbox's digest is queued: a retry after a failure in between still finds every
    # listed mail pending, and the queued digests' keys send each once.
    for shown, key in marks:
        records.mark_digested(cfg, shown, key)
    return {"status": "digest-sent", "count": len(held), "ids": ids}


def quarantined(
    cfg: Delivery, receipt: SesReceipt, mail: ParsedMail | None, raw: bytes, reason: str, when: datetime
) -> InboundResult:
    """Hold a live receipt's mail, log it and drop its staging object."""
    fields = log_fields(mail) if mail else envelope_fields(receipt)
    if mail is not None:
        shown = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
        sender, subject = mail.from_address, mail.subject
    else:  # not parsed: SES's reading of From and Subject, as text for the owner's digest
        shown = header_text(receipt.header_from[:2000], limit=200)
        sender, subject = envelope_sender(receipt), header_text(receipt.subject[:2000])
    key = hold(cfg, receipt, raw, reason, when, sender, shown, subject)
    log.warning("mail quarantined", extra={**fields, "reason": reason, "key": key})
    public = addresses.of(cfg).written_to(receipt.recipients)
    about = outcomes.Mail(
        receipt.message_id,
        public_address=public.address if public else "",
        sizes={"bytes": len(raw)},
        contact=sender,
        subject=subject,
    )
    outcomes.record(cfg, outcomes.Outcome.QUARANTINED, about, reason)
    staging.done(cfg, receipt)
    return {"status": "quarantined", "reason": reason, "key": key, "messageId": receipt.message_id}
