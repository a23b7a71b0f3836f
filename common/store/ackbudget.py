"""The ack budget (send-status table): acks taken per clock hour, in all and per sender domain.

One item per hour, ``id = ack-budget#<hour since the epoch>``, holds both counts (``total`` and one
``domain:<domain>`` attribute per sender domain) and expires (TTL ``expiresAt``) an hour after its
hour ends, so taking an ack is one conditional ADD: the check and the increment cannot be split by a
concurrent mail, and a refused write returns the counts, which name the limit that refused it. The
write goes alone (:func:`spend`) or as one action of the mail's record (common/store/intake.py).
common/delivery/ack.py decides who may get an ack; this module spends it.
"""

from __future__ import annotations

import time
from typing import Any

from common.aws import dynamodb
from common.runtime.config import Delivery

HOUR_S = 3600
PREFIX = "ack-budget#"


def switched_off(cfg: Delivery) -> str:
    """Why no ack can be taken at all ('' if acks are on)."""
    if cfg.ack_limit_per_hour <= 0 or cfg.ack_limit_per_domain_per_hour <= 0:
        return "acks are switched off (ack limit 0)"
    return ""


def domain_of(address: str) -> str:
    return address.rpartition("@")[2].lower()


def domain_field(domain: str) -> str:
    """The attribute of an hour's item that counts ``domain``'s acks."""
    return f"domain:{domain}"


def forget_domain(cfg: Delivery, item_id: str, domain: str) -> None:
    """Drop ``domain``'s count from one hour's item (`email-handler forget`: the count names the
    contact's domain). The hour's total stays: it names no one."""
    dynamodb.update(
        cfg.send_status_table, {"id": item_id}, "REMOVE #domain", {}, names={"#domain": domain_field(domain)}
    )


def _write(cfg: Delivery, address: str) -> dict[str, Any]:
    hour = int(time.time()) // HOUR_S
    return {
        "table": cfg.send_status_table,
        "key": {"id": f"{PREFIX}{hour}"},
        "expression": "SET expiresAt = :x ADD #total :one, #domain :one",
        "values": {
            ":one": 1,
            ":all": cfg.ack_limit_per_hour,
            ":dom": cfg.ack_limit_per_domain_per_hour,
            ":x": (hour + 2) * HOUR_S,
        },
        "names": {"#total": "total", "#domain": domain_field(domain_of(address))},
        "condition": "(attribute_not_exists(#total) OR #total < :all) AND "
        "(attribute_not_exists(#domain) OR #domain < :dom)",
    }


def action(cfg: Delivery, address: str) -> dict[str, Any]:
    """The conditional ADD that takes one ack of this clock hour for ``address``'s domain, as an
    action of a TransactWriteItems."""
    return dynamodb.update_action(**_write(cfg, address))


def refused(cfg: Delivery, address: str, counts: dict[str, Any] | None) -> str:
    """Which limit refused the ack, from the hour's counts as the refused write found them."""
    domain = domain_of(address)
    if int((counts or {}).get(domain_field(domain), 0)) >= cfg.ack_limit_per_domain_per_hour:
        return f"ack budget for {domain} used up ({cfg.ack_limit_per_domain_per_hour} per hour)"
    return f"global ack budget used up ({cfg.ack_limit_per_hour} per hour)"


def spend(cfg: Delivery, address: str) -> str:
    """Take one ack for ``address`` in an UpdateItem of its own ('' if there was room, else why not)."""
    if off := switched_off(cfg):
        return off
    try:
        dynamodb.update(**_write(cfg, address), raise_on_condition=True)
    except dynamodb.ConditionFailedError as exc:
        return refused(cfg, address, exc.item)
    return ""
