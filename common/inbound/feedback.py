"""SES feedback (Delivery / Bounce / Complaint over SNS): send status and the suppression list.

Correlation by the ``X-Correlation-ID`` header SES echoes in ``mail.headers`` (fallback: the SES
message id recorded at send time). Duplicate SNS deliveries are ignored by SNS message id.

Contacts: permanent bounces and complaints suppress at once; transient bounces count and, at
``TRANSIENT_BOUNCE_LIMIT`` in a row, suppress for ``TRANSIENT_SUPPRESSION_SECONDS``; a delivery
resets the count.

The owner's mailboxes and the public address are never suppressed (docs/security.md):
* a complaint about a forward (the owner pressed "spam") blocks the contact for the public address
  the forward was for and tells the owner once, by mail, how to undo it (common/inbound/spamblock.py:
  the forward is found from SES's message id and the forward-sender's record, never from the
  complaint's text); when it cannot be found that way, the contact's conversation is marked as a spam
  candidate and the owner alerted, as for a complaint about any other message;
* a permanent bounce, or the transient-bounce limit, holds mail to that mailbox
  (common/store/holds.py: forwards wait in the queue and its DLQ) and alerts the owner; when the
  mailbox is one of several of an address, the others are told once per hold, by mail
  (common/inbound/heldmailbox.py); a delivery releases the hold and says so; a bounce about one
  message's content or size only alerts;
* every alert about an undelivered forward names where the original is archived in S3.
Alerts go to the alert topic (SNS, which should reach the owner by a second channel: the mailbox
they are about may be the broken one), at most one per mailbox and kind per hour.
"""

from __future__ import annotations

from email.utils import parseaddr
from typing import Any, Literal, TypedDict

from common.inbound import heldmailbox, spamblock
from common.mail.threads import verify_thread_address
from common.runtime import events
from common.runtime.config import InboundHandlerConfig
from common.runtime.log import get_logger
from common.store import alerts, conversations, holds, layout, sendstatus

log = get_logger("feedback")
TYPES = ("Delivery", "Bounce", "Complaint")
EXPECTED_OTHER_TYPES = ("Send",)  # nothing to do, nothing wrong: logged at INFO
SES_VALIDATION = "Successfully validated SNS topic for Amazon SES event publishing"


class FeedbackResult(TypedDict):
    status: Literal["feedback"]
    results: list[dict[str, Any]]


def handle(cfg: InboundHandlerConfig, event: Any) -> FeedbackResult:
    """An SNS event: one or more SES notifications."""
    return apply_notifications(cfg, events.sns_messages(event))


def apply_notifications(cfg: InboundHandlerConfig, messages: list[dict[str, Any]]) -> FeedbackResult:
    outcomes = [apply_one(cfg, m) for m in messages]
    return {"status": "feedback", "results": outcomes}


def _header(message: dict[str, Any], name: str) -> str:
    for header in (message.get("mail") or {}).get("headers") or []:
        if str(header.get("name", "")).lower() == name:
            return str(header.get("value", ""))
    return ""


def correlation_id(cfg: InboundHandlerConfig, message: dict[str, Any]) -> str:
    return _header(message, "x-correlation-id") or sendstatus.correlation_for(
        cfg, str((message.get("mail") or {}).get("messageId", ""))
    )


def origin(cfg: InboundHandlerConfig, corr: str, message: dict[str, Any]) -> dict[str, str]:
    """Which conversation a sent message belonged to and where its original is archived.

    A forward's correlation id is ``forward-<inbound SES id>`` and its Reply-To is the conversation's
    HMAC-tagged thread address, so both come from what SES echoes, with no lookup."""
    kind, _, mid = corr.partition("-")
    mid = mid.partition("~")[0]  # one forward of several mailboxes' (common/delivery/deliver.py)
    cid = (
        verify_thread_address(
            parseaddr(_header(message, "reply-to"))[1], cfg.thread_secret, cfg.thread_domain
        )
        or ""
    )
    found = {"kind": kind, "conversationId": cid}
    if kind == "forward" and mid:
        found["original"] = (
            f"s3://{cfg.bucket}/{layout.archive(cid, mid)}"
            if cid
            else f"s3://{cfg.bucket}/{layout.CONVERSATIONS}*/{mid}.eml (SES id {mid})"
        )
    return found


def apply_one(cfg: InboundHandlerConfig, message: dict[str, Any]) -> dict[str, Any]:
    kind = str(message.get("notificationType") or message.get("eventType") or "")
    sns_id = str(message.get("_snsMessageId") or "")
    if "_text" in message:  # not JSON: SES's validation message when an event destination is created
        validation = str(message["_text"]).startswith(SES_VALIDATION)
        (log.info if validation else log.warning)(
            "feedback ignored",
            extra={
                "reason": "SES's topic validation message"
                if validation
                else "SNS message is not a JSON object",
                "sns_message_id": sns_id,
                "length": len(str(message["_text"])),
            },
        )
        return {"type": "", "status": "ignored"}
    if kind not in TYPES:
        # SES publishes every event type the configuration set asks for; LocalStack publishes "Send"
        # whatever it asks.
        (log.info if kind in EXPECTED_OTHER_TYPES else log.warning)(
            "feedback ignored",
            extra={"reason": f"unsupported notification type {kind!r}", "sns_message_id": sns_id},
        )
        return {"type": kind, "status": "ignored"}
    if sns_id and not sendstatus.claim_notification(cfg, sns_id):
        log.info("feedback ignored", extra={"reason": "duplicate SNS message", "sns_message_id": sns_id})
        return {"type": kind, "status": "duplicate"}
    try:
        return _apply(cfg, kind, message)
    except Exception:
        if sns_id:  # let the SNS/Lambda retry process it instead of treating it as a duplicate
            sendstatus.release_notification(cfg, sns_id)
        raise


def _apply(cfg: InboundHandlerConfig, kind: str, message: dict[str, Any]) -> dict[str, Any]:
    corr = correlation_id(cfg, message)
    suppressed: list[str] = []
    owner: list[str] = []  # protected recipients: alerted, never suppressed
    blocked: list[str] = []  # sender-list entries an owner's complaint made
    if kind == "Delivery":
        recipients = [str(r) for r in (message.get("delivery") or {}).get("recipients") or []]
        for r in recipients:
            sendstatus.reset_transient_bounces(cfg, r)
            if sendstatus.protected(cfg, r) and holds.release(cfg, r):
                owner.append(r)
                _owner_alert(
                    cfg,
                    r,
                    "released",
                    "Forwards resumed",
                    {
                        "alert": "owner-mailbox-delivered",
                        "recipient": r,
                        "action": "Mail to this mailbox is delivered again and the hold is lifted. "
                        "Forwards that failed while it was held are in the DLQ: "
                        f"email-handler dlq redrive {cfg.forward_queue}",
                    },
                )
        status, detail = "delivered", ""
    elif kind == "Bounce":
        bounce = message.get("bounce") or {}
        bounced = {
            str(r.get("emailAddress", "")): str(r.get("status") or "")
            for r in bounce.get("bouncedRecipients") or []
        }
        recipients = list(bounced)
        btype, subtype = str(bounce.get("bounceType", "")), str(bounce.get("bounceSubType", ""))
        detail = f"{btype}/{subtype}"
        for r in recipients:
            if sendstatus.protected(cfg, r):
                owner.append(r)
                _owner_bounced(cfg, r, btype, subtype, bounced[r], origin(cfg, corr, message))
            elif btype == "Permanent":
                sendstatus.suppress(cfg, r, f"permanent bounce ({subtype})")
                suppressed.append(r)
            elif sendstatus.count_transient_bounces(cfg, r) >= cfg.transient_bounce_limit:
                sendstatus.suppress(
                    cfg, r, f"{cfg.transient_bounce_limit} transient bounces", cfg.transient_suppression_s
                )
                suppressed.append(r)
        status = "bounced" if btype == "Permanent" else "bounced-transient"
    else:
        complaint = message.get("complaint") or {}
        recipients = [str(r.get("emailAddress", "")) for r in complaint.get("complainedRecipients") or []]
        detail = str(complaint.get("complaintFeedbackType", ""))
        for r in recipients:
            if sendstatus.protected(cfg, r):
                owner.append(r)
                blocked += _owner_complained(cfg, r, detail, origin(cfg, corr, message), message)
            else:
                sendstatus.suppress(cfg, r, "complaint")
                suppressed.append(r)
        status = "complained"
    if corr:
        sendstatus.record_attempts(
            cfg, corr, 0, status, feedbackDetail=detail or None, **{f"{kind.lower()}At": sendstatus.now_iso()}
        )
    log.info(
        "feedback applied",
        extra={
            "type": kind,
            "detail": detail,
            "correlation_id": corr or None,
            "recipients": recipients,
            "suppressed": suppressed,
            "owner_mailboxes": owner,
            "blocked": blocked,
        },
    )
    done = {"suppressed": suppressed, "owner": owner, "blocked": blocked}
    return {"type": kind, "status": status, "correlationId": corr, **done}


def _owner_alert(
    cfg: InboundHandlerConfig, address: str, what: str, subject: str, body: dict[str, Any]
) -> bool:
    return alerts.publish_throttled(cfg, f"owner-{what}#{address.lower()}", subject, body)


# Bounces about this one message, not the mailbox: its content, attachment or size was refused
# (SES's transient subtypes, and enhanced status codes 5.3.4 too big, 5.6.x media, 5.7.x policy).
# They never hold the owner's mailbox: otherwise anyone could stop every forward by sending mail
# the owner's provider rejects.
MESSAGE_SUBTYPES = ("ContentRejected", "AttachmentRejected", "MessageTooLarge")


def mailbox_level(subtype: str, status: str) -> bool:
    """Whether a bounce says the mailbox cannot take mail (rather than this one message)."""
    code = status.strip().split(".")
    message_level = len(code) == 3 and (code[1] in ("6", "7") or code[1:] == ["3", "4"])
    return subtype not in MESSAGE_SUBTYPES and not message_level


def _owner_bounced(
    cfg: InboundHandlerConfig, address: str, btype: str, subtype: str, status: str, found: dict[str, str]
) -> None:
    """The owner's mailbox bounced one of our messages: hold further mail to it if the mailbox is the
    problem, and always say where the original is."""
    permanent = btype == "Permanent"
    if not mailbox_level(subtype, status):
        held, what = False, "message"
        action = (
            f"Your provider refused this one message ({subtype or status}); later forwards are not affected. "
            "The original is archived (see 'original')."
        )
    elif not permanent and sendstatus.count_transient_bounces(cfg, address) < cfg.transient_bounce_limit:
        held, what = False, "transient"
        action = "This message was not delivered after SES's retries; the mailbox is not held yet."
    else:
        held, what = True, "held"
        reason = (
            f"permanent bounce ({subtype})"
            if permanent
            else f"{cfg.transient_bounce_limit} transient bounces"
        )
        told = heldmailbox.tell_others(cfg, address, holds.hold(cfg, address, reason), reason)
        action = (
            "Mail to this mailbox is held: forwards stay in the forward queue and then its DLQ, nothing is "
            f"dropped. A test forward goes out every {cfg.owner_hold_probe_s} s and its delivery lifts "
            "the hold; after fixing the mailbox you can lift it at once with: "
            f"email-handler suppression remove {address}, "
            f"then email-handler dlq redrive {cfg.forward_queue}."
        )
        if told:
            action += f" The address's other mailboxes were told: {', '.join(told)}."
    if subtype in ("OnAccountSuppressionList", "Suppressed"):
        action += (
            " SES itself suppressed this address (its account-level suppression list): remove it there too, "
            f"e.g. aws sesv2 delete-suppressed-destination --email-address {address}."
        )
    log.error(
        "owner mailbox bounced",
        extra={"recipient": address, "bounce": f"{btype}/{subtype}", "status": status, "held": held, **found},
    )
    _owner_alert(
        cfg,
        address,
        f"bounce-{what}",
        "Your mailbox bounced a forward",
        {
            "alert": "owner-mailbox-bounced",
            "recipient": address,
            "bounceType": btype,
            "bounceSubType": subtype,
            "status": status,
            "held": held,
            **found,
            "action": action,
        },
    )


def _owner_complained(
    cfg: InboundHandlerConfig, address: str, detail: str, found: dict[str, str], message: dict[str, Any]
) -> list[str]:
    """The owner marked our mail as spam: never suppress their mailbox. A forward SES's own message id
    (``mail.messageId``) names blocks its contact for its public address, with one notice; otherwise
    the contact is flagged and the owner alerted. Returns the entries blocked."""
    taken = spamblock.act(cfg, address, detail, str((message.get("mail") or {}).get("messageId", "")))
    if taken.block is not None:  # blocked now, or by an earlier notification of the same complaint
        if taken.status == "blocked":
            conversations.mark_spam_candidate(cfg, taken.block.conversation_id, detail)
        return [taken.block.entry]
    cid = found.get("conversationId", "")
    marked = (
        bool(cid) and found.get("kind") == "forward" and conversations.mark_spam_candidate(cfg, cid, detail)
    )
    contact = str((conversations.get(cfg, cid) or {}).get("senderEmail", "")) if marked else ""
    log.warning(
        "owner complaint",
        extra={
            "recipient": address,
            "feedback_type": detail,
            "spam_candidate": marked,
            "contact": contact or None,
            "not_blocked": taken.reason,
            **found,
        },
    )
    _owner_alert(
        cfg,
        address,
        f"complaint#{cid}",
        "You reported a forward as spam",
        {
            "alert": "owner-complaint",
            "recipient": address,
            "feedbackType": detail,
            "contact": contact,
            "spamCandidate": marked,
            **found,
            "action": (
                "Your mailbox is not suppressed; forwards continue. "
                "The contact is marked as a spam candidate: "
                f"reply [block] in its thread or run: email-handler block {contact or '<address>'}. "
                "If SES's account-level suppression list is on, check that your address is not on it."
            ),
        },
    )
    return []
