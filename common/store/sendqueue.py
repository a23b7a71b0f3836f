"""The sender queue message (schema 1) and its claim check, shared by producers and senders.

Producers (inbound-handler, reply-handler) call :func:`enqueue`; senders call :func:`load`. A
message whose JSON exceeds ``claim_check_bytes`` (200 KB) is written to S3 under
``queue-payloads/`` and the queue carries a pointer with the idempotency key, so a duplicate can be
recognised before the payload is fetched.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from common.runtime.errors import EventError
from common.store import layout

SCHEMA = 1
# The only extra headers a queue message may ask for; everything else is built by the sender.
ALLOWED_HEADERS = frozenset({"Auto-Submitted", "X-Auto-Response-Suppress", "Precedence"})


@dataclass(slots=True)
class Attachment:
    key: str  # S3 key in the mail bucket
    filename: str
    content_type: str = "application/octet-stream"
    inline: bool = False  # Content-Disposition: inline (shown in the body, not as a download)
    content_id: str = (
        ""  # without <>; an inline part the HTML body names as cid: goes beside it (multipart/related)
    )


@dataclass(slots=True)
class OutboundMessage:
    kind: str  # ack | forward | reply (for logs and the send record; senders never branch on it)
    idempotency_key: str  # derived from the SES message id that caused it, never from SQS
    correlation_id: str
    to: list[str]
    subject: str
    text: str
    html: str = ""
    from_name: str = ""  # display name on the public address
    reply_to: str = ""
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)
    conversation_id: str = ""
    original_key: str = ""  # S3 key of the archived mail this message carries (forwards), for failure alerts
    schema: int = SCHEMA

    def to_json(self) -> str:
        # ASCII only: SQS refuses a body with a character outside XML's set (InvalidMessageContents), and
        # a stranger's mail can carry U+FFFE, U+FFFF or C0 controls in its subject, name or body. Escaped,
        # every character travels; the claim-check limit counts the escaped size.
        return json.dumps(asdict(self), ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, doc: Any) -> OutboundMessage:
        if not isinstance(doc, dict):
            raise EventError("queue message is not a JSON object")
        if doc.get("schema") != SCHEMA:
            raise EventError(f"unsupported queue message schema {doc.get('schema')!r} (expected {SCHEMA})")
        for name in ("kind", "idempotency_key", "correlation_id", "subject", "text"):
            if not isinstance(doc.get(name), str):
                raise EventError(f"queue message field {name!r} missing or not a string")
        if not doc["idempotency_key"]:
            raise EventError("queue message has an empty idempotency_key")
        to = doc.get("to")
        if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
            raise EventError("queue message field 'to' must be a non-empty list of addresses")
        unknown = set(doc.get("headers") or {}) - ALLOWED_HEADERS
        if unknown:
            raise EventError(f"queue message asks for headers that are not allowed: {sorted(unknown)}")
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in doc.items() if k in known}
        try:
            values["attachments"] = [Attachment(**a) for a in doc.get("attachments") or []]
        except TypeError as exc:
            raise EventError(f"queue message has a malformed attachment: {exc}") from None
        return cls(**values)


def payload_key(idempotency_key: str) -> str:
    return layout.queue_payload(hashlib.sha256(idempotency_key.encode()).hexdigest())


def enqueue(queue: str, message: OutboundMessage, bucket: str, limit: int) -> str:
    """Send to SQS, through S3 when the JSON is over ``limit`` bytes. Returns the SQS message id."""
    from common.aws import s3, sqs

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
    from common.aws import s3

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
