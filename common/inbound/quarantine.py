"""Quarantine: hold a mail, list what was held in a daily digest to the owner, release on request.

* :func:`hold` keeps the raw mail under ``spam/<day>/<id>.eml`` (S3 metadata ``reason``), writes one
  JSON line to the spam log group and a record in the quarantine table.
* :func:`send_digest` runs on a schedule (EventBridge -> inbound-handler, once a day): when
  something was held since the last digest, one mail to the owner lists sender, subject and
  reason with a release address ``release.<id>.<tag>@thread.<domain>`` per mail (HMAC-tagged like
  thread addresses), the oldest ``DIGEST_MAX_ENTRIES`` of them; only those are marked digested, the
  rest lead the next digest. Nothing held: nothing sent. Its idempotency key is derived from the ids
  it lists, so a repeated schedule run sends it once.
* :func:`release` forwards a held mail as any other (never acked: the contact wrote a day ago and
  the owner answers in person), or, when it was held unparsed because it is over a parsing cap,
  forwards it unparsed with the original attached whole as an opaque file; marks it released, and is
  safe to repeat (the forward's idempotency key is the original SES message id's). Called by reply-handler when the owner mails
  a release address, and by ``email-handler quarantine release`` through inbound-handler.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Literal, NotRequired, TypedDict

from common.aws import logs, s3
from common.inbound.messages import build_digest, build_unparsed_forward, fits_attached
from common.mail import limits
from common.mail.parse import parse
from common.runtime.clock import iso_z, parse_iso
from common.runtime.config import Config
from common.runtime.events import SesReceipt
from common.runtime.log import bind, get_logger
from common.store import layout
from common.store import quarantine as records
from common.store.sendqueue import Attachment, enqueue

log = get_logger("quarantine")


class ReleaseResult(TypedDict):
    status: Literal["released", "already-released", "unknown", "undeliverable"]
    id: str
    reason: NotRequired[str]
    conversationId: NotRequired[str]
    messageId: NotRequired[str]


class DigestResult(TypedDict):
    status: Literal["digest-sent", "nothing-quarantined"]
    count: int
    ids: NotRequired[list[str]]


def hold(
    cfg: Config,
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
    key = layout.quarantined(when, receipt.message_id)
    s3.put(
        cfg.bucket,
        key,
        raw,
        "message/rfc822",
        metadata={"reason": reason.encode("ascii", "backslashreplace").decode()[:1024]},
    )
    logs.put_json_line(
        cfg.spam_log_group,
        f"{when:%Y/%m/%d}",
        {
            "sesMessageId": receipt.message_id,
            "reason": reason,
            "key": key,
            "sender": sender,
            "envelopeSender": receipt.source,
            "subject": subject,
            "verdicts": receipt.verdicts,
            "timestamp": iso_z(when),
        },
    )
    records.record(cfg, receipt.message_id, key, when, shown or sender or receipt.source, subject, reason)
    return key


def send_digest(cfg: Config) -> DigestResult:
    """List the oldest held mails (``DIGEST_MAX_ENTRIES``) and mark only those digested: the rest stay
    pending and lead the next digest, so every held mail gets its release address by mail in turn."""
    held = records.pending(cfg)
    if not held:
        log.info("quarantine digest skipped", extra={"reason": "nothing quarantined since the last digest"})
        return {"status": "nothing-quarantined", "count": 0}
    ids = [str(item["id"]) for item in held[: limits.DIGEST_MAX_ENTRIES]]
    key = "digest:" + hashlib.sha256(",".join(ids).encode()).hexdigest()[:32]
    enqueue(cfg.forward_queue, build_digest(cfg, held, key), cfg.bucket, cfg.claim_check_bytes)
    records.mark_digested(cfg, ids, key)
    log.info(
        "quarantine digest queued", extra={"count": len(held), "listed": len(ids), "idempotency_key": key}
    )
    return {"status": "digest-sent", "count": len(held), "ids": ids}


def release(cfg: Config, qid: str, by: str) -> ReleaseResult:
    from common.inbound.handler import (
        Undeliverable,
        deliver,
    )  # the one forward path (handler imports this module)

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
    obj = s3.get(cfg.bucket, str(item["key"]))
    if obj is None:
        raise FileNotFoundError(f"quarantined mail s3://{cfg.bucket}/{item['key']} is missing")
    raw = bytes(obj["Body"].read())
    mid = str(item["sesMessageId"])
    when = parse_iso(str(item.get("receivedAt", ""))) or datetime.now(UTC)
    if over := limits.screen(raw):  # held unparsed: still not parsed, forwarded whole
        cid = release_unparsed(cfg, item, raw, mid, over)
    else:
        note = (
            f"Released from quarantine by the owner (it was held because: {item.get('reason', 'unknown')})."
        )
        try:
            result = deliver(cfg, mid, parse(raw), raw, when, (note,), None)
        except Undeliverable as exc:
            log.warning("release failed", extra={"quarantine_id": qid, "reason": str(exc)})
            return {"status": "undeliverable", "id": qid, "reason": str(exc)}
        cid = str(result.get("conversationId", ""))
    records.mark_released(cfg, qid, by)
    log.info(
        "quarantined mail released",
        extra={"quarantine_id": qid, "released_by": by, "conversation_id": cid or None, "parsed": not over},
    )
    return {"status": "released", "id": qid, "messageId": mid, "conversationId": cid}


def release_unparsed(cfg: Config, item: dict[str, object], raw: bytes, mid: str, why: str) -> str:
    """Forward a mail that is over a parsing cap without parsing it: the raw original
    attached as an opaque ``original.eml`` (application/octet-stream, never message/rfc822: its
    structure is what tripped the cap, and neither the owner's client nor SES's attachment checks
    should read it inline), copied inside S3 from the held copy; or named by its S3 key when it would
    not fit SES's size limit. No conversation is recorded (its sender was never read) and no ack goes
    out. Returns the conversation id: always ''."""
    original = None
    if fits_attached(cfg, len(raw)):
        key = layout.released_original(mid)
        s3.copy(cfg.bucket, str(item["key"]), key, "application/octet-stream")
        original = Attachment(key, "original.eml", "application/octet-stream")
    forward = build_unparsed_forward(cfg, mid, item, why, original, len(raw))
    enqueue(cfg.forward_queue, forward, cfg.bucket, cfg.claim_check_bytes)
    log.info(
        "released mail forwarded unparsed",
        extra={"reason": why, "attached": original is not None, "size": len(raw), "key": item.get("key")},
    )
    return ""
