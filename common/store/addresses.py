"""Addresses the owner adds and disables without a redeploy (`email-handler address`): those a
catch-all (``*@DOMAIN`` in PUBLIC_EMAIL) covers, such as one handed to a single shop.

They live in the ``sender-lists`` table beside the block and allow entries, keyed by the address
(``entry``) with ``list = "address"``: no block or allow entry can have such a key (an entry that
covers one of our own addresses is refused, common/store/senderlists.py), the block/allow lookups
and checks ignore any other ``list``, and inbound-handler reads them with the BatchGetItem it already
has on that table. Only a mail the catch-all covers is looked up (one read); a listed address needs
none. ``state``: ``active`` or ``disabled`` (mail to it is quarantined with that reason, never bounced:
a bounce would tell the sender the address is watched); ``note``: the owner's words, shown as its label.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from common.aws import dynamodb
from common.errors import EmailHandlerError
from common.runtime import addresses
from common.runtime.addresses import PublicAddress
from common.runtime.clock import iso_z
from common.runtime.config import Delivery

KIND = "address"  # the ``list`` value that marks an address item in the sender-lists table
ACTIVE, DISABLED = "active", "disabled"


class UnmanagedAddressError(EmailHandlerError, ValueError):
    """An address `email-handler address` may not manage: outside the catch-all, or listed in
    PUBLIC_EMAIL (the deploy owns those)."""


def _covered(cfg: Delivery, address: str) -> str:
    """``address`` normalised, when `email-handler address` may manage it; UnmanagedAddressError otherwise."""
    table = addresses.of(cfg)
    found = table.resolve(address)
    if found is None:
        raise UnmanagedAddressError(
            f"{address} is not covered by a catch-all: list *@{cfg.domain_name} in PUBLIC_EMAIL and deploy"
            if table.catch_all is None
            else f"{address} is not an address at {cfg.domain_name} this system can write from"
        )
    if not found.catch_all:
        raise UnmanagedAddressError(
            f"{found.address} is listed in PUBLIC_EMAIL: remove it there and deploy to stop it receiving"
        )
    return found.address


def get(cfg: Delivery, address: str) -> dict[str, Any] | None:
    items = dynamodb.batch_get(cfg.sender_lists_table, [{"entry": address.lower()}])
    return next((i for i in items if i.get("list") == KIND), None)


def base(address: str) -> str:
    """``address`` without its ``+tag`` (RFC 5233 sub-addressing): ``shop+x@d`` -> ``shop@d``."""
    local, at, domain = address.strip().lower().rpartition("@")
    return f"{local.partition('+')[0]}@{domain}" if at and "+" in local else address.strip().lower()


def applied(cfg: Delivery, public: PublicAddress) -> tuple[PublicAddress, str]:
    """A catch-all address as the owner registered it: its note as the label, and why its mail is
    quarantined ('' unless it is disabled). A disabled address covers its sub-addresses: mail to
    ``shop+x@`` is held when ``shop@`` is disabled (one BatchGetItem reads both)."""
    exact, parent = public.address.lower(), base(public.address)
    keys = [{"entry": e} for e in dict.fromkeys([exact, parent])]
    found = {
        str(i["entry"]): i for i in dynamodb.batch_get(cfg.sender_lists_table, keys) if i.get("list") == KIND
    }
    item = found.get(exact) or found.get(parent)
    if item is None:
        return public, ""
    labelled = replace(public, label=str(item.get("note") or public.address))
    off = next((e for e in dict.fromkeys([parent, exact]) if found.get(e, {}).get("state") == DISABLED), "")
    if off:
        return labelled, f"address disabled ({off})"
    return labelled, ""


def add(cfg: Delivery, address: str, note: str = "", source: str = "cli") -> dict[str, Any]:
    """Register (or enable again) ``address``; the item written."""
    item = {
        "entry": _covered(cfg, address),
        "list": KIND,
        "state": ACTIVE,
        "note": note.strip()[:200],
        "source": source,
        "createdAt": iso_z(),
    }
    dynamodb.put(cfg.sender_lists_table, item)
    return item


def disable(cfg: Delivery, address: str, source: str = "cli") -> dict[str, Any]:
    """Disable ``address`` (registered or not: an address never added can be disabled too)."""
    entry = _covered(cfg, address)
    old = get(cfg, entry) or {}
    item = {
        "createdAt": iso_z(),
        "note": "",
        **old,
        "entry": entry,
        "list": KIND,
        "state": DISABLED,
        "disabledAt": iso_z(),
        "source": source,
    }
    dynamodb.put(cfg.sender_lists_table, item)
    return item


def listing(cfg: Delivery) -> list[dict[str, Any]]:
    """Every address with its kind (listed, catch-all, added), state, label and counts: conversations
    whose contact wrote to it, mails held in quarantine."""
    table = addresses.of(cfg)
    conversations = Counter(
        str(i.get("publicAddress") or cfg.public_email).lower()
        for i in dynamodb.scan(cfg.conversations_table)
    )
    held = Counter(str(i["address"]).lower() for i in dynamodb.scan(cfg.quarantine_table) if i.get("address"))
    rows: list[dict[str, Any]] = [
        {"address": a.address, "kind": "listed", "state": ACTIVE, "label": a.label, "note": ""}
        for a in table.listed
    ]
    added = sorted(
        (i for i in dynamodb.scan(cfg.sender_lists_table) if i.get("list") == KIND),
        key=lambda i: str(i["entry"]),
    )
    rows += [
        {
            "address": str(i["entry"]),
            "kind": "added",
            "state": str(i.get("state", ACTIVE)),
            "label": str(i.get("note") or i["entry"]),
            "note": str(i.get("note", "")),
            "createdAt": str(i.get("createdAt", "")),
        }
        for i in added
    ]
    shown = {r["address"] for r in rows}
    if table.catch_all is not None:
        rows.append(
            {
                "address": table.catch_all.address,
                "kind": "catch-all",
                "state": ACTIVE,
                "label": table.catch_all.label,
                "note": "",
            }
        )
    # addresses a conversation or held mail names that are no longer listed, added or covered
    for gone in sorted((set(conversations) | set(held)) - shown):
        if table.resolve(gone) is None:
            rows.append({"address": gone, "kind": "removed", "state": "not served", "label": "", "note": ""})
    for row in rows:
        row["conversations"] = conversations.get(row["address"], 0)
        row["quarantined"] = held.get(row["address"], 0)
    if table.catch_all is not None:  # the catch-all's own row counts every covered address not shown above
        row = rows[len(table.listed) + len(added)]
        others = [a for a in set(conversations) | set(held) if a not in shown and table.resolve(a)]
        row["conversations"] = sum(conversations[a] for a in others)
        row["quarantined"] = sum(held[a] for a in others)
    return rows
