"""Quarantined mail (table ``quarantine``): one record per mail held under ``spam/``.

The raw mail stays in S3 (``layout.quarantined``); the record is what the owner's tools read: the
daily digest (records still carrying ``pendingDigest``, a sparse index partitioned by the day the mail
was held, so a digest reads only the days it offers), the release addresses
and ``email-handler quarantine``. Item: ``id`` (16 base32 characters of SHA-256 of the SES message
id: short enough for ``release.<id>.<tag>@thread.<domain>`` to stay within SMTP's 64-character
local part), ``sesMessageId``, ``key``, ``receivedAt``, ``sender``, ``subject``, ``reason``,
``status`` (``held`` | ``released``), ``pendingDigest`` until a digest listed it, ``digestedAt``,
``releasedAt``, ``releasedBy``.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from common.aws import dynamodb
from common.mail.limits import DIGEST_WINDOW_DAYS
from common.runtime.clock import iso_z
from common.runtime.config import Delivery
from common.store import layout

PENDING_INDEX = "pendingDigest"
PENDING = "1"  # the partition of records written before it was the day they were held
HELD, RELEASED = "held", "released"
SUBJECT_CHARS = 300


def quarantine_id(ses_message_id: str) -> str:
    digest = hashlib.sha256(ses_message_id.encode()).digest()
    return base64.b32encode(digest).decode("ascii").lower()[:16]


def record(
    cfg: Delivery,
    ses_message_id: str,
    key: str,
    when: datetime,
    sender: str,
    subject: str,
    reason: str,
    address: str = "",
) -> str:
    """Write (or, on a retried delivery, rewrite) the record of a quarantined mail; returns its id."""
    qid = quarantine_id(ses_message_id)
    item: dict[str, Any] = {
        "id": qid,
        "sesMessageId": ses_message_id,
        "key": key,
        "receivedAt": iso_z(when),
        "sender": sender,
        "subject": subject[:SUBJECT_CHARS],
        "reason": reason,
        "status": HELD,
        PENDING_INDEX: layout.day(when),
    }
    if address:  # the public address it was written to (several addresses: the lists and digest show it)
        item["address"] = address
    if (
        cfg.retention_quarantine_days > 0
    ):  # DynamoDB TTL: the record goes when S3's lifecycle removes the mail
        item["expiresAt"] = int(when.timestamp()) + cfg.retention_quarantine_days * 86400
    dynamodb.put(
        cfg.quarantine_table,
        item,
        condition="attribute_not_exists(id) OR #s = :held",
        names={"#s": "status"},
        values={":held": HELD},
    )
    return qid


def get(cfg: Delivery, qid: str) -> dict[str, Any] | None:
    return dynamodb.get(cfg.quarantine_table, {"id": qid.strip().lower()})


def pending(cfg: Delivery, now: datetime | None = None) -> list[dict[str, Any]]:
    """Held mail of the last ``DIGEST_WINDOW_DAYS`` days that no digest has listed yet, oldest first
    (and records written before the index was partitioned by day, under ``PENDING``)."""
    now = now or datetime.now(UTC)
    days = [layout.day(now - timedelta(days=n)) for n in range(DIGEST_WINDOW_DAYS)] + [PENDING]
    ids = [
        str(i["id"])
        for day in days
        for i in dynamodb.query_all(cfg.quarantine_table, PENDING_INDEX, PENDING_INDEX, day)
    ]
    items = [
        i
        for start in range(0, len(ids), 100)
        for i in dynamodb.batch_get(cfg.quarantine_table, [{"id": q} for q in ids[start : start + 100]])
    ]
    return sorted((i for i in items if i.get("status") == HELD), key=lambda i: str(i.get("receivedAt", "")))


def mark_digested(cfg: Delivery, ids: list[str], digest_key: str) -> None:
    """Mark the records a digest listed (at most ``DIGEST_MAX_ENTRIES``: one UpdateItem each, in turn)."""
    now = iso_z()
    for qid in ids:
        dynamodb.update(
            cfg.quarantine_table,
            {"id": qid},
            "SET digestedAt = :t, digestKey = :k REMOVE #p",
            {":t": now, ":k": digest_key},
            names={"#p": PENDING_INDEX},
            condition="attribute_exists(id)",
        )


def mark_released(cfg: Delivery, qid: str, by: str) -> bool:
    """Held -> released; False when it was released already (a repeated release changes nothing)."""
    done = dynamodb.update(
        cfg.quarantine_table,
        {"id": qid},
        "SET #s = :r, releasedAt = :t, releasedBy = :b REMOVE #p",
        {":r": RELEASED, ":t": iso_z(), ":b": by, ":held": HELD},
        names={"#s": "status", "#p": PENDING_INDEX},
        condition="#s = :held",
    )
    return done is not None


def everything(cfg: Delivery) -> list[dict[str, Any]]:
    """Every record, newest first (operator tools)."""
    return sorted(
        dynamodb.scan(cfg.quarantine_table), key=lambda i: str(i.get("receivedAt", "")), reverse=True
    )
