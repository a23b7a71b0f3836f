"""Which owner messages a conversation has already sent on (replay protection, docs/reply.md).

A DKIM-signed owner reply stays valid when someone delivers it again, and every delivery gets a
new SES message id, so the id cannot tell a replay from a first delivery. The owner message's own
identity (its Message-ID, else its content) can: one item per conversation and identity in the
send-status table, written with a condition. The SES delivery that wrote it may write it again
(Lambda retries the same event); any other delivery is refused.
"""

from __future__ import annotations

import time

from common.aws import dynamodb
from common.runtime.config import Delivery

# Outlives REPLY_MAX_AGE_SECONDS by far: an older signed Date is refused before this is consulted.
MEMORY_TTL_S = 400 * 24 * 3600


def claim(cfg: Delivery, cid: str, identity: str, ses_message_id: str) -> bool:
    """True if ``ses_message_id`` is the (first) delivery of this owner message in conversation
    ``cid`` (common.reply.auth.ANY_CONVERSATION: in any conversation)."""
    return dynamodb.put(
        cfg.send_status_table,
        {
            "id": f"owner-message#{cid}#{identity}",
            "claimedBy": ses_message_id,
            "expiresAt": int(time.time()) + MEMORY_TTL_S,
        },
        condition="attribute_not_exists(id) OR claimedBy = :m",
        values={":m": ses_message_id},
    )
