"""The sender queue message (schema 2; 1 is still read): what a queued send carries, shared by
producers and senders.

Producers (common/delivery, common/reply) build an :class:`OutboundMessage`; common/store/sendqueue.py
puts it on a queue (through S3 when it is large) and gives it back to the senders; the senders build
the MIME from it (common/mail/build.py). The JSON is the contract (docs/CONTRACT.md, Data).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from common.errors import EventError

__all__ = ["ALLOWED_HEADERS", "HIDDEN_SCHEMA", "SCHEMA", "Attachment", "OutboundMessage"]

SCHEMA = 2
# Schema 1 had no from_address (one public address): such a message goes out from PUBLIC_EMAIL's
# default, as it was built to. A sender of schema 1 refuses a schema 2 message (SQS keeps it) instead of
# sending it from another address than the one it names.
# A forward that hides its correspondent (PUBLIC_ADDRESSES "hide_correspondent", docs/owner.md) is
# written as schema 3: a sender that predates the setting refuses it (SQS keeps it) instead of sending it
# with the contact's name outside the encryption.
HIDDEN_SCHEMA = 3
READABLE = frozenset({1, SCHEMA, HIDDEN_SCHEMA})
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
    # The public address it goes out from ('' = the default); the sender checks it is one it serves.
    from_address: str = ""
    reply_to: str = ""
    in_reply_to: str = ""
    references: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)
    conversation_id: str = ""
    original_key: str = ""  # S3 key of the archived mail this message carries (forwards), for failure alerts
    # Encrypted with generic outer From and Subject, or not sent at all (common/mail/encrypt.py)
    hide_correspondent: bool = False
    schema: int = SCHEMA

    def to_json(self) -> str:
        # ASCII only: SQS refuses a body with a character outside XML's set (InvalidMessageContents), and
        # a stranger's mail can carry U+FFFE, U+FFFF or C0 controls in its subject, name or body. Escaped,
        # every character travels; the claim-check limit counts the escaped size.
        doc = asdict(self)
        if self.hide_correspondent:
            doc["schema"] = HIDDEN_SCHEMA
        return json.dumps(doc, ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, doc: Any) -> OutboundMessage:
        if not isinstance(doc, dict):
            raise EventError("queue message is not a JSON object")
        if doc.get("schema") not in READABLE:
            raise EventError(f"unsupported queue message schema {doc.get('schema')!r} (expected {SCHEMA})")
        for name in ("kind", "idempotency_key", "correlation_id", "subject", "text"):
            if not isinstance(doc.get(name), str):
                raise EventError(f"queue message field {name!r} missing or not a string")
        if not isinstance(doc.get("from_address", ""), str):
            raise EventError("queue message field 'from_address' is not a string")
        if not isinstance(doc.get("hide_correspondent", False), bool):
            raise EventError("queue message field 'hide_correspondent' is not a boolean")
        if doc.get("schema") == HIDDEN_SCHEMA and doc.get("hide_correspondent") is not True:
            raise EventError("queue message of schema 3 does not say hide_correspondent")
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
        values["schema"] = SCHEMA  # read as today's message (schema 1: from_address '', the default)
        try:
            values["attachments"] = [Attachment(**a) for a in doc.get("attachments") or []]
        except TypeError as exc:
            raise EventError(f"queue message has a malformed attachment: {exc}") from None
        return cls(**values)
