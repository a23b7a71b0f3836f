"""Quarantined mail (table ``quarantine``): one record per mail held under ``spam/``.

The raw mail stays in S3 (``layout.quarantined``); the record is what the owner's tools read: the
daily digest (records still carrying ``pendingDigest``, a sparse index partitioned by the day the mail
was held, so a digest reads only the days it offers), the release addresses
and ``email-handler quarantine``. Item: ``id`` (16 base32 characters of SHA-256 of the SES message
id: short enough for ``release.<id>.<tag>@thread.<domain>`` to stay within SMTP's 64-character
local part), ``sesMessageId``, ``key``, ``receivedAt``, ``sender``, ``subject``, ``reason``,
``status`` (``held`` | ``released``), ``pendingDigest`` until a digest listed it, ``digestedAt``,
``releasedAt``, ``releasedBy``.

The screener (common/delivery/screener.py) keeps one more kind of item here, beside the mails it holds:
``id`` ``screener.<sid>`` (a dot, which no quarantine id has), ``kind`` ``screener``, ``sender`` (the
contact's address, so `email-handler forget` finds it), ``publicAddress``, ``heldIds`` (the held mails'
ids in the order they were held; a retried hold may repeat one), ``noticeMid`` (the SES message id of
the mail whose notice went out: one per new sender), ``firstAt``, ``lastAt``, and after the owner
decided ``decision``, ``decidedAt``, ``decidedBy``. It has no ``pendingDigest`` (never in a digest) and
:func:`everything` leaves it out.
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
    """Every record of a held mail, newest first (operator tools); the screener's items are not mails."""
    return sorted(
        (i for i in dynamodb.scan(cfg.quarantine_table) if i.get("kind") != SCREENER),
        key=lambda i: str(i.get("receivedAt", "")),
        reverse=True,
    )


SCREENER = "screener"
SCREENER_MAX_HELD = 500  # held mails an approval releases: bounds the item (DynamoDB's 400 KB)


def screener_key(sid: str) -> dict[str, str]:
    return {"id": f"{SCREENER}.{sid}"}


def screen_hold(
    cfg: Delivery, sid: str, public: str, sender: str, qid: str, mid: str, when: datetime
) -> dict[str, Any]:
    """Add a held mail to its sender's screener item (created by the first); returns the item as it
    is now. ``noticeMid`` is set by the first mail only (if_not_exists): the one whose notice goes out,
    also when its delivery is retried, and never again until the owner decides."""
    values: dict[str, Any] = {
        ":k": SCREENER,
        ":e": sender,
        ":p": public,
        ":q": [qid],
        ":none": [],
        ":m": mid,
        ":t": iso_z(when),
    }
    expression = (
        "SET kind = :k, sender = :e, publicAddress = :p, "
        "heldIds = list_append(if_not_exists(heldIds, :none), :q), "
        "noticeMid = if_not_exists(noticeMid, :m), firstAt = if_not_exists(firstAt, :t), lastAt = :t"
    )
    if cfg.retention_quarantine_days > 0:  # goes with the last mail it holds
        values[":x"] = int(when.timestamp()) + cfg.retention_quarantine_days * 86400
        expression += ", expiresAt = :x"
    key = screener_key(sid)
    values[":cap"] = SCREENER_MAX_HELD
    found = dynamodb.update(
        cfg.quarantine_table,
        key,
        expression,
        values,
        condition="attribute_not_exists(heldIds) OR size(heldIds) < :cap",
        return_values="ALL_NEW",
    )
    # Over the cap (a flood from one stranger): the mail is held all the same, listed in the digest and
    # releasable by its own address; only an approval no longer releases it.
    return found if found is not None else (screened(cfg, sid) or {})


def screened(cfg: Delivery, sid: str) -> dict[str, Any] | None:
    item = dynamodb.get(cfg.quarantine_table, screener_key(sid))
    return item if item is not None and item.get("kind") == SCREENER else None


def screen_decided(cfg: Delivery, sid: str, decision: str, by: str) -> None:
    """The owner approved or declined: remembered, and ``noticeMid`` removed, so should the list entry
    the decision wrote be removed later, the sender's next mail is a new sender's again (one notice)."""
    dynamodb.update(
        cfg.quarantine_table,
        screener_key(sid),
        "SET decision = :d, decidedAt = :t, decidedBy = :b REMOVE noticeMid",
        {":d": decision, ":t": iso_z(), ":b": by},
        condition="attribute_exists(id)",
    )
