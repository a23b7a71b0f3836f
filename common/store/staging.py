"""Raw mail as SES's receipt rule stored it (``staging/<sesMessageId>``), until a handler is done.

Staging is deleted last, so a missing object means the delivery was already handled (SES and
Lambda deliver at least once).
"""

from __future__ import annotations

import time

from common.aws import dynamodb, s3
from common.runtime import Delivery, SesReceipt, receiving_function
from common.store import layout

SHARED_MEMORY_S = 7 * 24 * 3600  # who handled a shared mail: longer than SES's and Lambda's retries


def fetch(cfg: Delivery, mid: str) -> bytes | None:
    obj = s3.get(cfg.bucket, layout.staging(mid))
    return None if obj is None else bytes(obj["Body"].read())


def done(cfg: Delivery, receipt: SesReceipt) -> None:
    """This handler is done with the mail: delete its staging object, unless another receipt rule's
    handler still needs it. A mail to both the public address and a thread address runs both rules
    (deploy/receiving.py: no rule stops the rule set), each storing the same object and invoking its
    own function; the last of them to finish deletes it, so neither finds it gone."""
    mid = receipt.message_id
    functions = {f for r in receipt.destination if (f := receiving_function(cfg, r))}
    mine = {f for r in receipt.recipients if (f := receiving_function(cfg, r))}
    if len(functions) > 1 and mine:
        item = dynamodb.update(
            cfg.send_status_table,
            {"id": f"staging#{mid}"},
            "ADD handledBy :f SET expiresAt = :x",
            {":f": mine, ":x": int(time.time()) + SHARED_MEMORY_S},
            return_values="ALL_NEW",
        )
        if not functions <= set((item or {}).get("handledBy") or ()):
            return
    s3.delete(cfg.bucket, layout.staging(mid))
