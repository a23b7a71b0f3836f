"""The sender core shared by ack-sender, forward-sender and reply-sender."""

from __future__ import annotations

import json
from typing import Any

from common import events
from common.config import Config
from common.log import get_logger

log = get_logger("sender")


def handle(event: Any, context: Any, cfg: Config) -> dict[str, Any]:
    failures = []
    for record in events.sqs_records(event):
        try:
            json.loads(record.body)
        except json.JSONDecodeError:
            log.warning("record is not JSON", extra={"sqs_message_id": record.message_id})
            failures.append({"itemIdentifier": record.message_id})
    return {"batchItemFailures": failures}
