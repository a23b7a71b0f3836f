"""inbound-handler logic: SES receipts for the public address, and SES feedback over SNS."""

from __future__ import annotations

from typing import Any

from common import events
from common.config import Config
from common.log import get_logger

log = get_logger("inbound-handler")


def handle(event: Any, context: Any, cfg: Config) -> dict[str, Any]:
    if events.kind(event) == "sns":
        messages = events.sns_messages(event)
        log.info("feedback received", extra={"count": len(messages)})
        return {"status": "feedback", "count": len(messages)}
    receipt = events.SesReceipt.from_event(event)
    log.info("mail received", extra={"ses_message_id": receipt.message_id, "verdicts": receipt.verdicts})
    return {"status": "received", "messageId": receipt.message_id, "recipients": list(receipt.recipients)}
