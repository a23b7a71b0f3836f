"""What `email-handler forget` leaves for the senders: sends already queued for a forgotten contact are
dropped, not sent.

A queued message may be out of sight when forget runs (a send SES's sandbox holds, one waiting for the
daily quota, a retry's visibility timeout, a delayed fresh copy), so forget cannot delete it from its
queue. Instead it writes one item per forgotten address and conversation id in the suppression table,
``email = forgotten#<SHA-256 of the value>``, with the time of the forget. A sender reads these items in
the batch read it already makes for suppressions (no request of its own) and drops a message enqueued
(SQS ``SentTimestamp``) before that time when its recipient or its conversation is one of them: a reply
or an ack to the contact, a forward of their mail or the owner's notice about it. A message enqueued
later -- the contact wrote again -- goes out as usual.

The item holds a hash, never the address, and expires (DynamoDB TTL ``expiresAt``) once no message
enqueued before the forget can still be in a queue: SQS keeps a message at most 14 days
(``MessageRetentionPeriod``, SQS API reference, SetQueueAttributes), and a sender's fresh copy on a
last receive is received first (and dropped) before it is made.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import Any

from common.aws import dynamodb
from common.runtime.config import Delivery

PREFIX = "forgotten#"
SQS_MAX_RETENTION_S = 14 * 24 * 3600
KEEP_S = SQS_MAX_RETENTION_S + 24 * 3600  # a day beyond, for a copy made in the last receive's window


def key(value: str) -> str:
    """The suppression-table key of a forgotten address or conversation id (lowercased, trimmed)."""
    return PREFIX + hashlib.sha256(value.strip().lower().encode("utf-8")).hexdigest()


def keys(recipients: Iterable[str], conversation_id: str = "") -> list[str]:
    """The keys a message is checked against: each recipient's and its conversation's."""
    values = [*recipients, *([conversation_id] if conversation_id else [])]
    return [key(v) for v in values if v.strip()]


def mark(cfg: Delivery, values: Iterable[str], now_s: float | None = None) -> int:
    """Cancel what is queued for ``values`` (an address, conversation ids) up to now; returns the
    forget's time in milliseconds, which the senders compare with a message's ``SentTimestamp``."""
    at = time.time() if now_s is None else now_s
    forgotten_ms = int(at * 1000)
    for value in sorted({v.strip().lower() for v in values if v.strip()}):
        dynamodb.put(
            cfg.suppression_table,
            {"email": key(value), "forgottenAt": forgotten_ms, "expiresAt": int(at) + KEEP_S},
        )
    return forgotten_ms


def cancels(entry: dict[str, Any] | None, sent_ms: int) -> bool:
    """Whether a forget item cancels a message enqueued at ``sent_ms`` (0: unknown, so cancelled)."""
    if not entry or not str(entry.get("email", "")).startswith(PREFIX) or "forgottenAt" not in entry:
        return False
    return sent_ms <= int(entry["forgottenAt"])
