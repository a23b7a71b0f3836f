"""reply-handler logic: the owner's replies to a thread address."""

from __future__ import annotations

from typing import Any

from common import events
from common.config import Config
from common.log import get_logger

log = get_logger("reply-handler")


def handle(event: Any, context: Any, cfg: Config) -> dict[str, Any]:
    receipt = events.SesReceipt.from_event(event)
    log.info("reply received", extra={"ses_message_id": receipt.message_id, "verdicts": receipt.verdicts})
    return {"status": "received", "messageId": receipt.message_id, "recipients": list(receipt.recipients)}
