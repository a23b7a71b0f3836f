"""What was sent, what SES said about it, who not to mail.

* A send's outcome is its completed idempotency record (common.senders.idempotency): written by the
  same request that completes the key, with the SES message id and the correlation id beside
  powertools' fields, so the record SES feedback correlates with costs a send no request of its own.
* The send-status table keeps what happens after or instead of a send, per correlation id (SES
  feedback, failed attempts and their last error, ``finalFailure`` when that failure put the message in
  its DLQ), the shared rate-limit item and duplicate SNS ids.
* The suppression table: addresses never to mail again (bounces, complaints).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from common.aws import dynamodb
from common.runtime.clock import iso_z
from common.runtime.config import Delivery, Sending

RECORD_TTL_S = 90 * 24 * 3600


def now_iso() -> str:
    return iso_z(millis=True)


def _ttl() -> int:
    return int(time.time()) + RECORD_TTL_S


def record_attempts(
    cfg: Sending, correlation_id: str, attempts: int, status: str, **fields: Any
) -> dict[str, Any]:
    """Add ``attempts`` to the correlation id's status record and set its status (failed, or what SES
    reported); returns the record after the update."""
    values: dict[str, Any] = {":n": attempts, ":s": status, ":u": now_iso(), ":x": _ttl()}
    sets = ["#st = :s", "updatedAt = :u", "expiresAt = :x"]
    for i, (name, value) in enumerate(fields.items()):
        if value is not None:
            sets.append(f"{name} = :f{i}")
            values[f":f{i}"] = value
    return (
        dynamodb.update(
            cfg.send_status_table,
            {"id": f"corr#{correlation_id}"},
            f"SET {', '.join(sets)} ADD attempts :n",
            values,
            names={"#st": "status"},
            return_values="ALL_NEW",
        )
        or {}
    )


def first_hold(cfg: Sending, correlation_id: str) -> bool:
    """True the first time the send of ``correlation_id`` is held by SES's sandbox (its owner notice is
    then due): one conditional write on the send's status record."""
    return (
        dynamodb.update(
            cfg.send_status_table,
            {"id": f"corr#{correlation_id}"},
            "SET sandboxHeldSince = :u",
            {":u": now_iso()},
            condition="attribute_not_exists(sandboxHeldSince)",
        )
        is not None
    )


SES_ID_INDEX = (
    "sesMessageId"  # GSI of the idempotency table: SES MessageId -> the completed send (correlationId)
)


def correlation_for(cfg: Delivery, ses_message_id: str) -> str:
    """The correlation id of the send SES gave ``ses_message_id`` ('' if unknown, or if the send's
    record expired: ``IDEMPOTENCY_TTL_SECONDS`` after the send)."""
    if not ses_message_id:
        return ""
    items = dynamodb.query_index(cfg.idempotency_table, SES_ID_INDEX, "sesMessageId", ses_message_id)
    return str(items[0].get("correlationId", "")) if items else ""


MAX_SES_ID_CHARS = 200  # SES's ids are about 60 characters; a longer one was no send of ours


def sent_record(cfg: Delivery, ses_message_id: str) -> dict[str, Any] | None:
    """The completed send SES gave ``ses_message_id``, as the sender recorded it (``correlationId``,
    ``conversationId``, ``fromAddress``, ``data``: the send's result), or None (unknown, or expired
    ``IDEMPOTENCY_TTL_SECONDS`` after the send). The index projects only the correlation id, so the
    item is read by the key the index gives: two requests, only for a complaint from the owner."""
    if not ses_message_id or len(ses_message_id) > MAX_SES_ID_CHARS:
        return None
    items = dynamodb.query_index(cfg.idempotency_table, SES_ID_INDEX, "sesMessageId", ses_message_id)
    if not items or not items[0].get("id"):
        return None
    item = dynamodb.get(cfg.idempotency_table, {"id": items[0]["id"]})
    # the index is eventually consistent: the item read must still be that send
    return item if item is not None and item.get("sesMessageId") == ses_message_id else None


def claim_complaint(cfg: Delivery, ses_message_id: str) -> bool:
    """True the first time the owner's complaint about the send ``ses_message_id`` is acted on: SES
    can report one complaint in several notifications (each its own SNS id)."""
    return _claim(cfg, f"complaint#{ses_message_id}")


def release_complaint(cfg: Delivery, ses_message_id: str) -> None:
    dynamodb.delete(cfg.send_status_table, {"id": f"complaint#{ses_message_id}"})


def _claim(cfg: Delivery, key: str) -> bool:
    """True when this call wrote the item ``key`` (expiring with the send records), False if it was there."""
    return dynamodb.put(
        cfg.send_status_table, {"id": key, "expiresAt": _ttl()}, condition="attribute_not_exists(id)"
    )


def get_record(cfg: Delivery, correlation_id: str) -> dict[str, Any] | None:
    return dynamodb.get(cfg.send_status_table, {"id": f"corr#{correlation_id}"})


def claim_notification(cfg: Delivery, sns_message_id: str) -> bool:
    """True the first time an SNS message id is seen (SNS delivers at least once)."""
    return _claim(cfg, f"sns#{sns_message_id}")


def release_notification(cfg: Delivery, sns_message_id: str) -> None:
    dynamodb.delete(cfg.send_status_table, {"id": f"sns#{sns_message_id}"})


def protected(cfg: Sending, address: str) -> bool:
    """The owner's own mailboxes and the public address (any case, any ``+tag``) are never suppressed:
    suppressing them would silently drop every forward (docs/security.md)."""
    return cfg.is_own(address)


def is_suppressed(cfg: Sending, item: dict[str, Any] | None) -> bool:
    """Whether a suppression-table item stops sends now (expired entries and protected addresses never do;
    DynamoDB's TTL deletes expired items only eventually, so the expiry is checked here)."""
    if not item or not item.get("suppressed") or protected(cfg, str(item.get("email", ""))):
        return False
    expires = item.get("expiresAt")
    return expires is None or int(expires) > time.time()


def recipient_entry(cfg: Delivery, address: str) -> dict[str, Any] | None:
    """The suppression-table item of ``address`` as stored (suppression, transient count, hold)."""
    return dynamodb.get(cfg.suppression_table, {"email": address.lower()})


def suppression(cfg: Delivery, address: str) -> dict[str, Any] | None:
    item = recipient_entry(cfg, address)
    return item if is_suppressed(cfg, item) else None


def recipient_entries(cfg: Sending, addresses: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The suppression-table items of ``addresses`` that have one, by lowercased address: one
    BatchGetItem per 100 addresses (a sender reads a whole batch's recipients at once)."""
    keys = [{"email": a} for a in sorted({a.lower() for a in addresses})]
    items = dynamodb.batch_get(cfg.suppression_table, keys) if keys else []
    return {str(i["email"]): i for i in items}


def suppress(cfg: Delivery, address: str, reason: str, ttl_s: int = 0) -> bool:
    """Suppress ``address`` (for ``ttl_s`` seconds, or for good with 0); False for a protected address,
    and a temporary suppression never shortens a permanent one."""
    if protected(cfg, address):
        return False
    values: dict[str, Any] = {":t": True, ":r": reason, ":u": now_iso()}
    expression = (
        "SET suppressed = :t, #r = :r, suppressedAt = if_not_exists(suppressedAt, :u), updatedAt = :u"
    )
    condition = None
    if ttl_s:
        expression += ", expiresAt = :x, transientBounces = :z"
        values |= {":x": int(time.time()) + ttl_s, ":z": 0}
        condition = "attribute_not_exists(suppressed) OR suppressed = :f OR attribute_exists(expiresAt)"
        values[":f"] = False
    else:
        expression += " REMOVE expiresAt"
    dynamodb.update(
        cfg.suppression_table,
        {"email": address.lower()},
        expression,
        values,
        names={"#r": "reason"},
        condition=condition,
    )
    return True


def count_transient_bounces(cfg: Delivery, address: str) -> int:
    new = (
        dynamodb.update(
            cfg.suppression_table,
            {"email": address.lower()},
            "SET updatedAt = :u ADD transientBounces :one",
            {":u": now_iso(), ":one": 1},
            return_values="ALL_NEW",
        )
        or {}
    )
    return int(new.get("transientBounces", 0))


def reset_transient_bounces(cfg: Delivery, address: str) -> None:
    """A delivery proves the mailbox works again: transient bounces count consecutively."""
    dynamodb.update(
        cfg.suppression_table,
        {"email": address.lower()},
        "SET transientBounces = :z, updatedAt = :u",
        {":z": 0, ":u": now_iso()},
        condition="attribute_exists(email)",
    )


def stopped_entries(cfg: Delivery) -> list[dict[str, Any]]:
    """Every address sends are skipped (suppressed) or held back (the owner's bouncing mailbox, see
    common/store/holds.py) for now: operator tools, a scan of a small table."""
    return sorted(
        (i for i in dynamodb.scan(cfg.suppression_table) if is_suppressed(cfg, i) or i.get("held")),
        key=lambda i: str(i.get("suppressedAt") or i.get("heldSince") or ""),
    )


def clear(cfg: Delivery, address: str) -> dict[str, Any] | None:
    """Forget ``address``'s suppression, hold and bounce count (the documented explicit clear);
    returns the entry as it was, or None if there was none."""
    return dynamodb.delete(cfg.suppression_table, {"email": address.strip().lower()}, return_old=True)
