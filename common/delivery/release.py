"""Release a held mail on the owner's request.

:func:`release` forwards a held mail as any other (never acked: the contact wrote a day ago and the
owner answers in person), or, when it was held unparsed because it is over a parsing cap, forwards it
unparsed with the original attached whole as an opaque file; marks it released, and is safe to
repeat (the forward's idempotency key is the original SES message id's). Called by reply-handler
when the owner mails a release address, and by ``email-handler quarantine release`` through
inbound-handler.
"""

from __future__ import annotations

import functools

from common.delivery.compose import build_unparsed_forward, fits_attached
from common.delivery.deliver import UndeliverableError, deliver, per_mailbox
from common.delivery.results import ReleaseResult
from common.errors import EmailHandlerError
from common.mail import limits, parse
from common.runtime import addresses
from common.runtime.clock import parse_iso_or_now
from common.runtime.config import Delivery
from common.runtime.log import bind, get_logger
from common.store import attachments, intake, rawmail
from common.store import quarantine as records
from common.store.sendqueue import enqueue

log = get_logger("quarantine")


class HeldMailMissingError(EmailHandlerError, FileNotFoundError):
    """The quarantine record names a held mail the bucket no longer has."""


def release(cfg: Delivery, qid: str, by: str, note: str = "") -> ReleaseResult:
    """Forward a held mail (parsed, or whole when it is over a parsing cap) and mark it released.
    ``note``: the forward's banner line instead of the quarantine's (the screener's approval)."""
    bind(quarantine_id=qid)
    item = records.get(cfg, qid)
    if item is None:
        log.warning("release refused", extra={"reason": "no such quarantined mail", "quarantine_id": qid})
        return {"status": "unknown", "id": qid}
    if item.get("status") == records.RELEASED:
        log.info(
            "release skipped", extra={"reason": "already released", "released_by": item.get("releasedBy")}
        )
        return {"status": "already-released", "id": qid}
    raw = rawmail.held(cfg, str(item["key"]))
    if raw is None:
        raise HeldMailMissingError(f"quarantined mail s3://{cfg.bucket}/{item['key']} is missing")
    mid = str(item["sesMessageId"])
    when = parse_iso_or_now(str(item.get("receivedAt", "")))
    if over := limits.screen(raw):  # held unparsed: still not parsed, forwarded whole
        cid = release_unparsed(cfg, item, raw, mid, over)
    else:
        note = note or (
            f"Released from quarantine by the owner (it was held because: {item.get('reason', 'unknown')})."
        )
        try:
            public = addresses.served(cfg, str(item.get("address") or "")) or addresses.of(cfg).primary
            record = functools.partial(intake.released, public=public.address)
            result = deliver(cfg, mid, parse.parse(raw), raw, when, (note,), None, record, public)
        except UndeliverableError as exc:
            log.warning("release failed", extra={"quarantine_id": qid, "reason": str(exc)})
            return {"status": "undeliverable", "id": qid, "reason": str(exc)}
        cid = str(result.get("conversationId", ""))
    records.mark_released(cfg, qid, by)
    log.info(
        "quarantined mail released",
        extra={"quarantine_id": qid, "released_by": by, "conversation_id": cid or None, "parsed": not over},
    )
    return {"status": "released", "id": qid, "messageId": mid, "conversationId": cid}


def release_unparsed(cfg: Delivery, item: dict[str, object], raw: bytes, mid: str, why: str) -> str:
    """Forward a mail that is over a parsing cap without parsing it: the raw original
    attached as an opaque ``original.eml`` (application/octet-stream, never message/rfc822: its
    structure is what tripped the cap, and neither the owner's client nor SES's attachment checks
    should read it inline), copied inside S3 from the held copy; or named by its S3 key when it would
    not fit SES's size limit. No conversation is recorded (its sender was never read) and no ack goes
    out. Returns the conversation id: always ''."""
    original = None
    if fits_attached(cfg, len(raw)):
        original = attachments.attach_original(cfg, str(item["key"]), mid)
    forward = build_unparsed_forward(cfg, mid, item, why, original, len(raw))
    public = addresses.served(cfg, str(item.get("address") or ""))
    forward.hide_correspondent = public is not None and public.hide_correspondent  # its subject stays inside
    for each in per_mailbox(forward, cfg.mailboxes(str(item.get("address") or ""))):
        enqueue(cfg.forward_queue, each, cfg.bucket, cfg.claim_check_bytes)
    log.info(
        "released mail forwarded unparsed",
        extra={"reason": why, "attached": original is not None, "size": len(raw), "key": item.get("key")},
    )
    return ""
