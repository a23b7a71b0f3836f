"""Raw mail as SES's receipt rule stored it (``staging/<sesMessageId>``), until a handler is done.

Staging is deleted last, so a missing object means the delivery was already handled (SES and
Lambda deliver at least once).
"""

from __future__ import annotations

import time

from common.aws import dynamodb, s3
from common.runtime.addresses import receiving_function
from common.runtime.config import Delivery
from common.runtime.events import SesReceipt
from common.store import layout

SHARED_MEMORY_S = 7 * 24 * 3600  # who handled a shared mail: longer than SES's and Lambda's retries


def fetch(cfg: Delivery, mid: str) -> bytes | None:
    obj = s3.get(cfg.bucket, layout.staging(mid))
    return None if obj is None else bytes(obj["Body"].read())


THREAD_RULE, PUBLIC_RULE = "reply-handler", "inbound-handler"


def sharing(cfg: Delivery, receipt: SesReceipt, function: str) -> frozenset[str]:
    """The functions that receive this mail, from SES's receipt recipients -- the envelope's RCPT TO
    addresses the rule matched, which SES writes and the sender cannot (SES DG, "Contents of
    notifications for Amazon SES email receiving": ``receipt.recipients``; ``mail.destination`` is
    read from the To and Cc fields, which the sender writes and a Bcc never reaches).

    The public rule matches the thread domain too (deploy/receiving.py), so inbound-handler is handed
    every mail that reaches either rule, with every recipient: its recipients say whether the thread
    rule ran as well. reply-handler's say only its own; inbound-handler always ran beside it."""
    if function == THREAD_RULE:
        return frozenset({THREAD_RULE, PUBLIC_RULE})
    return frozenset({PUBLIC_RULE} | {f for r in receipt.recipients if (f := receiving_function(cfg, r))})


def done(cfg: Delivery, receipt: SesReceipt, function: str = "") -> None:
    """This handler is done with the mail: delete its staging object, unless another receipt rule's
    handler still needs it. Each rule stores the same object and invokes its own function (no rule stops
    the rule set); when both do, each adds itself to one record and the last of them deletes it, so
    neither finds it gone."""
    mid = receipt.message_id
    mine = function or cfg.function or _guess(cfg, receipt)
    needed = sharing(cfg, receipt, mine)
    if needed != {mine}:
        item = dynamodb.update(
            cfg.send_status_table,
            {"id": f"staging#{mid}"},
            "ADD handledBy :f SET expiresAt = :x",
            {":f": {mine}, ":x": int(time.time()) + SHARED_MEMORY_S},
            return_values="ALL_NEW",
        )
        if not needed <= set((item or {}).get("handledBy") or ()):
            return
    s3.delete(cfg.bucket, layout.staging(mid))


def _guess(cfg: Delivery, receipt: SesReceipt) -> str:
    """Which rule's function this is when the configuration does not say (a direct call in a tool)."""
    functions = {receiving_function(cfg, r) for r in receipt.recipients}
    return THREAD_RULE if functions == {THREAD_RULE} else PUBLIC_RULE
