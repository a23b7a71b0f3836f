"""What the delivery steps return to inbound-handler and reply-handler (the RIE shows it; tests assert
on it)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class InboundResult(TypedDict):
    """A mail to the public address: delivered, held, set aside or already done."""

    status: Literal[
        "forwarded", "quarantined", "dropped", "dsn", "complaint", "already-processed", "thread-only"
    ]
    messageId: str
    reason: NotRequired[str]
    key: NotRequired[str]
    conversationId: NotRequired[str]
    firstContact: NotRequired[bool]
    ack: NotRequired[bool]
    attachments: NotRequired[list[str]]
    skipped: NotRequired[list[str]]
    notice: NotRequired[bool]  # held by the screener: whether this mail sent the owner the sender's notice


class ReleaseResult(TypedDict):
    status: Literal["released", "already-released", "unknown", "undeliverable"]
    id: str
    reason: NotRequired[str]
    conversationId: NotRequired[str]
    messageId: NotRequired[str]


class DigestResult(TypedDict):
    status: Literal["digest-sent", "nothing-quarantined"]
    count: int
    ids: NotRequired[list[str]]
