"""The sender queue and its claim check: common/mail/outbound.py's message on SQS, shared by producers
and senders.

Producers (inbound-handler, reply-handler) call :func:`enqueue`; senders call :func:`load`, and
:func:`attachment` for each stored part a message attaches (common/store/attachments.py wrote it). A
message whose JSON exceeds ``claim_check_bytes`` (200 KB) is written to S3 under
``queue-payloads/`` and the queue carries a pointer with the idempotency key, so a duplicate can be
recognised before the payload is fetched.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from common.aws import s3, sqs
from common.errors import EventError
from common.mail.outbound import SCHEMA, OutboundMessage
from common.store import layout


def payload_key(idempotency_key: str) -> str:
    return layout.queue_payload(hashlib.sha256(idempotency_key.encode()).hexdigest())


def enqueue(queue: str, message: OutboundMessage, bucket: str, limit: int) -> str:
    """Send to SQS, through S3 when the JSON is over ``limit`` bytes. Returns the SQS message id."""
    body = message.to_json()
    if len(body.encode()) > limit:
        key = payload_key(message.idempotency_key)
        s3.put(bucket, key, body.encode(), "application/json")
        body = json.dumps(
            {
                "schema": SCHEMA,
                "idempotency_key": message.idempotency_key,
                "claim_check": {"bucket": bucket, "key": key},
            }
        )
    return sqs.send(queue, body, {"correlation_id": message.correlation_id, "kind": message.kind})


def parse(body: str) -> Any:
    """A queue body's JSON, unchecked (:func:`load` checks it)."""
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise EventError(f"queue message is not JSON: {exc.msg}") from None


def load(body: str | dict[str, Any], bucket: str) -> OutboundMessage:
    """A queue body (or its :func:`parse`d JSON) as a message, following a claim check (only into our
    own bucket and prefix)."""
    doc = parse(body) if isinstance(body, str) else body
    pointer = doc.get("claim_check") if isinstance(doc, dict) else None
    if pointer is not None:
        if (
            not isinstance(pointer, dict)
            or pointer.get("bucket") != bucket
            or not str(pointer.get("key", "")).startswith(layout.QUEUE_PAYLOADS)
        ):
            raise EventError("claim check points outside the mail bucket's queue-payloads/ prefix")
        obj = s3.get(bucket, pointer["key"])
        if obj is None:
            raise EventError(f"claim check payload {pointer['key']} is missing")
        doc = json.loads(obj["Body"].read())
    return OutboundMessage.from_dict(doc)


def attachment(bucket: str, key: str) -> bytes | None:
    """A stored part's bytes, as a message's ``Attachment`` names it, or None if it is not in the bucket."""
    obj = s3.get(bucket, key)
    return None if obj is None else bytes(obj["Body"].read())
