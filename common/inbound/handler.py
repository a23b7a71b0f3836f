"""inbound-handler logic: mail to the public address (SES receipt), and SES feedback (SNS).

For a receipt: parse -> spam policy -> conversation record -> archive -> attachments -> ack (first
contact) -> forward -> delete staging. Every step is safe to repeat: a failure re-raises so SES or
Lambda retries, and the senders' idempotency keys come from the SES message id, so a retry never
sends a second ack or forward.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from common.aws import dynamodb, logs, s3
from common.inbound import policy
from common.inbound.messages import build_ack, build_forward
from common.mail.parse import ParsedMail, extension, parse
from common.mail.threads import conversation_id, thread_address
from common.runtime import events
from common.runtime.config import Config
from common.runtime.log import bind, get_logger
from common.store import layout
from common.store.sendqueue import Attachment, enqueue

log = get_logger("inbound-handler")
BODY_RECORD_CHARS = 1000
PREVIEW_CHARS = 500


def handle(event: Any, context: Any, cfg: Config) -> dict[str, Any]:
    if events.kind(event) == "sns":
        from common.inbound import feedback

        return feedback.handle(events.sns_messages(event), cfg)
    return process(events.SesReceipt.from_event(event), cfg)


def received_at(receipt: events.SesReceipt) -> datetime:
    """When SES received the mail (stable across retries); now if SES did not say."""
    try:
        return datetime.fromisoformat(receipt.timestamp.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return datetime.now(UTC)


def iso_z(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_fields(mail: ParsedMail) -> dict[str, Any]:
    return {"sender": mail.from_address, "subject": mail.subject, "body_preview": mail.body_text[:PREVIEW_CHARS]}


def process(receipt: events.SesReceipt, cfg: Config) -> dict[str, Any]:
    mid = receipt.message_id
    bind(ses_message_id=mid)
    staging = layout.staging(mid)
    obj = s3.get(cfg.bucket, staging)
    if obj is None:
        # Staging is deleted last, so a missing object means this delivery was already handled.
        log.warning("mail not processed", extra={"reason": "staging object missing (already processed)", "key": staging})
        return {"status": "already-processed", "messageId": mid}
    raw: bytes = obj["Body"].read()
    mail = parse(raw)
    when = received_at(receipt)
    decision = policy.assess(receipt, mail, cfg, policy.RULES.get(cfg))
    fields = log_fields(mail)
    if mail.problems:
        log.warning("mail has malformed parts", extra={"problems": mail.problems[:10]})

    if decision.action == policy.DROP:
        log.warning("mail dropped", extra={**fields, "reason": decision.reason, "verdicts": receipt.verdicts})
        s3.delete(cfg.bucket, staging)
        return {"status": "dropped", "reason": decision.reason, "messageId": mid}
    if decision.action == policy.DSN:
        key = layout.bounce(when, mid)
        s3.put(cfg.bucket, key, raw, "message/rfc822")
        log.info("delivery status notification archived", extra={**fields, "reason": decision.reason, "key": key})
        s3.delete(cfg.bucket, staging)
        return {"status": "dsn", "reason": decision.reason, "key": key, "messageId": mid}
    if decision.action == policy.QUARANTINE:
        key = quarantine(cfg, receipt, mail, raw, decision.reason, when)
        log.warning("mail quarantined", extra={**fields, "reason": decision.reason, "key": key})
        s3.delete(cfg.bucket, staging)
        return {"status": "quarantined", "reason": decision.reason, "key": key, "messageId": mid}

    cid = conversation_id(mail.from_address, mail.display_name, cfg.opaque_relay_domains)
    bind(conversation_id=cid)
    first_contact = record_conversation(cfg, cid, mid, mail, when)
    archive_key = layout.archive(cid, mid)
    s3.put(cfg.bucket, archive_key, raw, "message/rfc822")
    stored, sizes, skipped = store_attachments(cfg, cid, mid, mail)

    ack_reason = ack_blocked(receipt, mail) if first_contact else "not first contact"
    if not ack_reason:
        enqueue(cfg.ack_queue, build_ack(cfg, mid, cid, mail), cfg.bucket, cfg.claim_check_bytes)
    forward = build_forward(cfg, mid, cid, mail, stored, sizes, skipped, decision.warnings, archive_key,
                            thread_address(cid, cfg.thread_secret, cfg.thread_domain))
    enqueue(cfg.forward_queue, forward, cfg.bucket, cfg.claim_check_bytes)
    s3.delete(cfg.bucket, staging)
    log.info("mail forwarded", extra={**fields, "conversation_id": cid, "first_contact": first_contact,
                                      "ack": not ack_reason, "ack_skipped_reason": ack_reason or None,
                                      "attachments": len(stored), "skipped_attachments": skipped,
                                      "warnings": list(decision.warnings)})
    return {"status": "forwarded", "messageId": mid, "conversationId": cid, "firstContact": first_contact,
            "ack": not ack_reason, "attachments": [a.key for a in stored], "skipped": skipped}


def quarantine(cfg: Config, receipt: events.SesReceipt, mail: ParsedMail, raw: bytes, reason: str,
               when: datetime) -> str:
    key = layout.quarantined(when, receipt.message_id)
    s3.put(cfg.bucket, key, raw, "message/rfc822",
           metadata={"reason": reason.encode("ascii", "backslashreplace").decode()[:1024]})
    logs.put_json_line(cfg.spam_log_group, f"{when:%Y/%m/%d}", {
        "sesMessageId": receipt.message_id, "reason": reason, "key": key, "sender": mail.from_address,
        "envelopeSender": receipt.source, "subject": mail.subject, "verdicts": receipt.verdicts,
        "timestamp": iso_z(when),
    })
    return key


def record_conversation(cfg: Config, cid: str, mid: str, mail: ParsedMail, when: datetime) -> bool:
    """Upsert the conversation; True on first contact (also when a first delivery is retried)."""
    values: dict[str, Any] = {
        ":e": mail.from_address, ":d": mail.from_address.rpartition("@")[2], ":s": mail.subject,
        ":b": mail.body_text.strip()[:BODY_RECORD_CHARS], ":t": iso_z(when), ":m": mid,
        ":h": mail.message_id or f"<{mid}@email.amazonses.com>",
    }
    expression = ("SET senderEmail = :e, emailDomain = :d, subject = :s, lastMessageBody = :b, #ts = :t, "
                  "lastSesMessageId = :m, lastMessageId = :h, "
                  "firstContactDate = if_not_exists(firstContactDate, :t), firstMessageId = if_not_exists(firstMessageId, :m)")
    if mail.display_name:
        expression += ", displayName = :n"
        values[":n"] = mail.display_name
    new = dynamodb.update(cfg.conversations_table, {"conversationId": cid}, expression, values,
                          names={"#ts": "timestamp"}, return_values="ALL_NEW")
    return new is not None and new.get("firstMessageId") == mid


def store_attachments(cfg: Config, cid: str, mid: str,
                      mail: ParsedMail) -> tuple[list[Attachment], dict[str, int], list[str]]:
    """Store the allowed types; returns them, their sizes by key, and 'name (why)' for the rest."""
    allowed = {t.lower().lstrip(".") for t in cfg.attachment_types}
    stored: list[Attachment] = []
    sizes: dict[str, int] = {}
    skipped: list[str] = []
    used: set[str] = set()
    for att in mail.attachments:
        if extension(att.safe_name) not in allowed:
            skipped.append(f"{att.safe_name} (type not allowed)")
            continue
        name = att.safe_name
        stem, dot, ext = name.rpartition(".")
        n = 2
        while name.lower() in used:  # two parts with the same name must not overwrite each other
            name, n = f"{stem}-{n}{dot}{ext}", n + 1
        used.add(name.lower())
        key = layout.attachment(cid, mid, name)
        s3.put(cfg.bucket, key, att.data, att.content_type)
        stored.append(Attachment(key, name, att.content_type))
        sizes[key] = len(att.data)
    return stored, sizes, skipped


def ack_blocked(receipt: events.SesReceipt, mail: ParsedMail) -> str:
    """Why RFC 3834 forbids an automatic reply to this mail ('' when an ack is fine)."""
    auto = mail.headers.get("auto-submitted", "").split(";")[0].strip().lower()
    if auto and auto != "no":
        return f"Auto-Submitted: {auto}"
    precedence = mail.headers.get("precedence", "").strip().lower()
    if precedence in ("bulk", "junk", "list"):
        return f"Precedence: {precedence}"
    if mail.has_list_headers():
        return "mailing list headers"
    if mail.is_noreply:
        return "no-reply sender"
    failed = [v for v in ("spam", "virus", "spf", "dkim", "dmarc") if receipt.verdicts.get(v) == "FAIL"]
    if failed:
        return f"failed verdicts: {', '.join(failed)}"
    return ""
