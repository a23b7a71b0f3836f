"""SES feedback (Delivery / Bounce / Complaint over SNS): send status and the suppression list.

Correlation by the ``X-Correlation-ID`` header SES echoes in ``mail.headers`` (fallback: the SES
message id recorded at send time). Duplicate SNS deliveries are ignored by SNS message id.
Permanent bounces and complaints suppress at once; transient bounces count and suppress at
``transient_bounce_limit``; a delivery resets the transient count.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from common.runtime.config import Config
from common.runtime.log import get_logger
from common.store import sendstatus

log = get_logger("feedback")
TYPES = ("Delivery", "Bounce", "Complaint")


class FeedbackResult(TypedDict):
    status: Literal["feedback"]
    results: list[dict[str, Any]]


def apply_notifications(cfg: Config, messages: list[dict[str, Any]]) -> FeedbackResult:
    outcomes = [apply_one(cfg, m) for m in messages]
    return {"status": "feedback", "results": outcomes}


def correlation_id(cfg: Config, message: dict[str, Any]) -> str:
    mail = message.get("mail") or {}
    for header in mail.get("headers") or []:
        if str(header.get("name", "")).lower() == "x-correlation-id":
            return str(header.get("value", ""))
    return sendstatus.correlation_for(cfg, str(mail.get("messageId", "")))


def apply_one(cfg: Config, message: dict[str, Any]) -> dict[str, Any]:
    kind = str(message.get("notificationType") or message.get("eventType") or "")
    sns_id = str(message.get("_snsMessageId") or "")
    if kind not in TYPES:
        log.warning("feedback ignored", extra={"reason": f"unsupported notification type {kind!r}"})
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


def _apply(cfg: Config, kind: str, message: dict[str, Any]) -> dict[str, Any]:
    corr = correlation_id(cfg, message)
    suppressed: list[str] = []
    if kind == "Delivery":
        recipients = [str(r) for r in (message.get("delivery") or {}).get("recipients") or []]
        for r in recipients:
            sendstatus.reset_transient_bounces(cfg, r)
        status, detail = "delivered", ""
    elif kind == "Bounce":
        bounce = message.get("bounce") or {}
        recipients = [str(r.get("emailAddress", "")) for r in bounce.get("bouncedRecipients") or []]
        btype, subtype = str(bounce.get("bounceType", "")), str(bounce.get("bounceSubType", ""))
        detail = f"{btype}/{subtype}"
        for r in recipients:
            if btype == "Permanent":
                sendstatus.suppress(cfg, r, f"permanent bounce ({subtype})")
                suppressed.append(r)
            elif sendstatus.count_transient_bounces(cfg, r) >= cfg.transient_bounce_limit:
                sendstatus.suppress(cfg, r, f"{cfg.transient_bounce_limit} transient bounces")
                suppressed.append(r)
        status = "bounced" if btype == "Permanent" else "bounced-transient"
    else:
        complaint = message.get("complaint") or {}
        recipients = [str(r.get("emailAddress", "")) for r in complaint.get("complainedRecipients") or []]
        detail = str(complaint.get("complaintFeedbackType", ""))
        for r in recipients:
            sendstatus.suppress(cfg, r, "complaint")
            suppressed.append(r)
        status = "complained"
    if corr:
        sendstatus.record_attempts(cfg, corr, 0, status, feedbackDetail=detail or None,
                                    **{f"{kind.lower()}At": sendstatus.now_iso()})
    log.info("feedback applied", extra={"type": kind, "detail": detail, "correlation_id": corr or None,
                                        "recipients": recipients, "suppressed": suppressed})
    return {"type": kind, "status": status, "correlationId": corr, "suppressed": suppressed}
