"""reply-handler logic: the owner's reply to a thread address goes to the conversation's contact.

Order matters: authorise first (owner envelope + From, SPF or DKIM PASS, DMARC not FAIL, no
failed spam/virus verdict, a thread address whose HMAC tag verifies); anything else is archived
under ``rejected/`` with the reason, never answered (no backscatter to a forged sender), and the
owner is alerted at most once per hour per reason. The recipient comes only from the conversation
record; To/Cc of the reply are never used.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from common.aws import dynamodb, s3, sns
from common.mail.parse import ParsedMail, parse
from common.mail.threads import verify_thread_address
from common.reply.text import clean_reply, reply_subject
from common.runtime import events
from common.runtime.config import Config
from common.runtime.log import bind, get_logger
from common.store import attachments, conversations, layout, staging
from common.store.sendqueue import OutboundMessage, enqueue

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

log = get_logger("reply-handler")


class ReplyResult(TypedDict):
    status: Literal["queued", "rejected", "already-processed"]
    messageId: NotRequired[str]
    reason: NotRequired[str]
    key: NotRequired[str]
    alerted: NotRequired[bool]
    conversationId: NotRequired[str]
    metadata: NotRequired[dict[str, str]]
    attachments: NotRequired[list[str]]
ALERT_INTERVAL_S = 3600


class NotAuthorised(Exception):
    """The mail is not an owner reply this handler may act on; the message says why."""


def handle(cfg: Config, event: Any, context: LambdaContext | None = None) -> ReplyResult:
    receipt = events.SesReceipt.from_event(event)
    mid = receipt.message_id
    bind(ses_message_id=mid)
    raw = staging.fetch(cfg, mid)
    if raw is None:
        log.warning("reply not processed", extra={"reason": "staging object missing (already processed)"})
        return {"status": "already-processed", "messageId": mid}
    mail = parse(raw)
    try:
        cid = authorise(cfg, receipt, mail)
        bind(conversation_id=cid)
        record = conversations.get(cfg, cid)
        if not record or not record.get("senderEmail"):
            raise NotAuthorised("unknown conversation")
    except NotAuthorised as exc:
        return reject(cfg, receipt, mail, raw, str(exc))
    result = send_reply(cfg, mid, cid, record, mail)
    staging.done(cfg, mid)
    return result


def authorise(cfg: Config, receipt: events.SesReceipt, mail: ParsedMail) -> str:
    owners = {a.lower() for a in cfg.owner_emails}
    v = receipt.verdicts
    if receipt.source.strip().lower() not in owners:
        raise NotAuthorised("envelope sender is not the owner")
    if mail.from_address not in owners:
        raise NotAuthorised("From is not the owner")
    if v.get("spf") != "PASS" and v.get("dkim") != "PASS":
        raise NotAuthorised("neither SPF nor DKIM passed")
    if v.get("dmarc") == "FAIL":
        raise NotAuthorised("DMARC failed")
    if v.get("spam") == "FAIL" or v.get("virus") == "FAIL":
        raise NotAuthorised("spam or virus verdict FAIL")
    for recipient in receipt.recipients:
        cid = verify_thread_address(recipient, cfg.thread_secret, cfg.thread_domain)
        if cid:
            return cid
    raise NotAuthorised("no thread address with a valid tag")


def reject(cfg: Config, receipt: events.SesReceipt, mail: ParsedMail, raw: bytes, reason: str) -> ReplyResult:
    key = layout.rejected(datetime.now(UTC), receipt.message_id)
    s3.put(cfg.bucket, key, raw, "message/rfc822", metadata={"reason": reason})
    log.warning("reply rejected", extra={"reason": reason, "sender": mail.from_address, "envelope_sender": receipt.source,
                                         "recipients": list(receipt.recipients), "key": key, "verdicts": receipt.verdicts})
    alerted = alert_once_per_hour(cfg, reason, {"alert": "reply-rejected", "reason": reason, "key": key,
                                                "envelopeSender": receipt.source, "from": mail.from_address})
    staging.done(cfg, receipt.message_id)
    return {"status": "rejected", "reason": reason, "key": key, "alerted": alerted}


def alert_once_per_hour(cfg: Config, reason: str, message: dict[str, Any]) -> bool:
    now = int(time.time())
    claimed = dynamodb.put(cfg.send_status_table, {"id": f"alert#{reason}", "sentAt": now, "expiresAt": now + 86400},
                           condition="attribute_not_exists(id) OR sentAt < :cutoff",
                           values={":cutoff": now - ALERT_INTERVAL_S})
    if claimed:
        sns.publish(sns.topic_arn(cfg.alert_topic, cfg.region, cfg.alert_topic_arn), "Reply rejected", message)
    return claimed


def send_reply(cfg: Config, mid: str, cid: str, record: dict[str, Any], mail: ParsedMail) -> ReplyResult:
    owners = tuple(cfg.owner_emails)
    body, metadata = clean_reply(mail.body_text, owners, cfg.public_email)
    kept = attachments.store(cfg, mail.attachments, lambda name: layout.reply_attachment(cid, mid, name))
    for skipped in kept.skipped:
        log.warning("reply attachment skipped", extra={"attachment": skipped})
    conversations.set_attributes(cfg, cid, metadata)
    last = str(record.get("lastMessageId") or "")
    ses_form = f"<{record.get('lastSesMessageId')}@email.amazonses.com>" if record.get("lastSesMessageId") else ""
    message = OutboundMessage(
        kind="reply", idempotency_key=f"reply:{mid}", correlation_id=f"reply-{mid}", to=[str(record["senderEmail"])],
        subject=reply_subject(mail.subject), text=body, from_name=mail.display_name,
        in_reply_to=last or ses_form, references=[r for r in dict.fromkeys((last, ses_form)) if r],
        attachments=kept.attachments, conversation_id=cid,
    )
    enqueue(cfg.reply_queue, message, cfg.bucket, cfg.claim_check_bytes)
    log.info("reply queued", extra={"conversation_id": cid, "metadata": sorted(metadata), "attachments": len(kept.attachments),
                                    "recipient": message.to[0], "subject": message.subject})
    return {"status": "queued", "conversationId": cid, "metadata": metadata, "attachments": [a.key for a in kept.attachments]}
