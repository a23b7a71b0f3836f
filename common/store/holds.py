"""Holding mail to the owner's mailbox while it bounces (docs/security.md: the owner's mail is never lost).

A permanent bounce of a protected address (the owner's mailbox) does not suppress it: it sets a
hold on its suppression-table item. While the hold is set, a sender fails mail to that address on
purpose (:data:`HELD`), so the message stays in its queue and, after its last receive, in the DLQ
for ``email-handler dlq redrive``: nothing is dropped. One message per ``OWNER_HOLD_PROBE_SECONDS``
is let through as a probe; its delivery (SES Delivery event) releases the hold, as does
``email-handler suppression remove`` (which deletes the item). The hold lives on the item the
senders read anyway, so checking it costs no extra request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, TypeGuard

from common.aws import dynamodb
from common.runtime.clock import iso_z
from common.runtime.config import Delivery, Sending

HELD = "RecipientHeld"  # the error code of a send failed on purpose because its recipient is held


def is_held(item: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    return bool(item and item.get("held"))


@dataclass(frozen=True, slots=True)
class Hold:
    """One hold as :func:`hold` left it."""

    new: bool  # it was not held before this call
    since: str  # heldSince: names this hold (its notices' idempotency keys come from it)
    told: bool  # the address's other mailboxes were told of this hold (:func:`mark_told`)


def hold(cfg: Delivery, address: str, reason: str) -> Hold:
    """Hold mail to ``address`` (the next probe waits a full interval); the hold as it now is."""
    now = iso_z()
    old = (
        dynamodb.update(
            cfg.suppression_table,
            {"email": address.lower()},
            "SET held = :t, heldReason = :r, heldSince = if_not_exists(heldSince, :u), "
            "probeAfter = :p, updatedAt = :u",
            {":t": True, ":r": reason, ":u": now, ":p": int(time.time()) + cfg.owner_hold_probe_s},
            return_values="ALL_OLD",
        )
        or {}
    )
    was = bool(old.get("held"))
    return Hold(
        not was,
        str(old.get("heldSince") or now) if was else now,
        was and old.get("othersTold") == old.get("heldSince"),
    )


def mark_told(cfg: Delivery, address: str, since: str) -> bool:
    """Record that the other mailboxes were told of the hold that began at ``since``; False when that
    hold is gone (released meanwhile) or already marked."""
    return (
        dynamodb.update(
            cfg.suppression_table,
            {"email": address.lower()},
            "SET othersTold = :s",
            {":s": since, ":t": True},
            condition="held = :t AND heldSince = :s "
            "AND (attribute_not_exists(othersTold) OR othersTold <> :s)",
        )
        is not None
    )


def release(cfg: Delivery, address: str) -> bool:
    """Lift the hold; True if there was one (so the caller tells the owner once)."""
    return (
        dynamodb.update(
            cfg.suppression_table,
            {"email": address.lower()},
            "REMOVE held, heldReason, heldSince, probeAfter, othersTold SET updatedAt = :u",
            {":u": iso_z(), ":t": True},
            condition="held = :t",
        )
        is not None
    )


def claim_probe(cfg: Sending, address: str) -> bool:
    """True for the one send per probe interval that may test the held mailbox."""
    now = int(time.time())
    return (
        dynamodb.update(
            cfg.suppression_table,
            {"email": address.lower()},
            "SET probeAfter = :next",
            {":next": now + cfg.owner_hold_probe_s, ":now": now, ":t": True},
            condition="held = :t AND (attribute_not_exists(probeAfter) OR probeAfter <= :now)",
        )
        is not None
    )
