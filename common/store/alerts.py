"""Owner alerts on the SNS alert topic, at most one per key and interval.

The throttle is one conditional PutItem in the send-status table (``alert#<key>``): the first caller
in an interval wins and publishes, the others only log. A flood of identical failures (rejected
replies, held forwards) therefore costs the owner one message per hour, not one per mail. A publish
that fails gives its claim back, so the retry of the same event (or the next failure) still alerts.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from common.aws import dynamodb, sns
from common.runtime.config import Sending
from common.runtime.log import get_logger

log = get_logger("alerts")

DEFAULT_INTERVAL_S = 3600


def publish(cfg: Sending, subject: str, message: dict[str, Any]) -> str:
    return sns.publish(sns.topic_arn(cfg.alert_topic, cfg.region, cfg.alert_topic_arn), subject, message)


def publish_throttled(
    cfg: Sending, key: str, subject: str, message: dict[str, Any], interval_s: int = DEFAULT_INTERVAL_S
) -> bool:
    """Publish unless an alert with ``key`` went out in the last ``interval_s``; True if published."""
    now = int(time.time())
    item_id = f"alert#{key}"
    if len(item_id.encode()) > 512:  # a key may hold a stranger's text; DynamoDB keys end at 2048 bytes
        item_id = item_id[:200] + "#" + hashlib.sha256(item_id.encode("utf-8", "surrogatepass")).hexdigest()
    claimed = dynamodb.put(
        cfg.send_status_table,
        {"id": item_id, "sentAt": now, "expiresAt": now + max(interval_s, 86400)},
        condition="attribute_not_exists(id) OR sentAt < :cutoff",
        values={":cutoff": now - interval_s},
    )
    if not claimed:
        return False
    try:
        publish(cfg, subject, message)
    except Exception:
        # Give the interval back: a publish that failed must not silence this alert for an hour; the
        # event's retry (or the next failure) claims it again and publishes.
        try:
            dynamodb.put(
                cfg.send_status_table,
                {"id": item_id, "sentAt": 0, "expiresAt": now + 86400},
                condition="sentAt = :mine",
                values={":mine": now},
            )
        except Exception as exc:  # the publish error below is the one that matters
            log.warning("alert throttle not released", extra={"error": f"{type(exc).__name__}: {exc}"})
        raise
    return True
