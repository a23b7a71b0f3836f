"""The ack budget: at most ``ACK_LIMIT_PER_DOMAIN_PER_HOUR`` acks per sender domain and
``ACK_LIMIT_PER_HOUR`` in all per clock hour, as one ``ack-budget#<hour>`` item per hour in the
send-status table (with a TTL). common/delivery/ack.py decides who may get an ack; this spends it.
"""

from __future__ import annotations

import time

from common.aws import dynamodb
from common.runtime.config import Config

HOUR_S = 3600


def spend_budget(cfg: Config, address: str) -> str:
    """Take one ack from the sender domain's and the global budget of this clock hour ('' if there was room).

    One item per hour holds both counts (``total`` and one attribute per domain), so the check and
    the increment are one conditional write; a refused write returns the counts, which name the limit.
    """
    hour = int(time.time()) // HOUR_S
    domain = address.rpartition("@")[2].lower()
    if cfg.ack_limit_per_hour <= 0 or cfg.ack_limit_per_domain_per_hour <= 0:
        return "acks are switched off (ack limit 0)"
    try:
        dynamodb.update(
            cfg.send_status_table,
            {"id": f"ack-budget#{hour}"},
            "SET expiresAt = :x ADD #total :one, #domain :one",
            {
                ":one": 1,
                ":all": cfg.ack_limit_per_hour,
                ":dom": cfg.ack_limit_per_domain_per_hour,
                ":x": (hour + 2) * HOUR_S,
            },
            names={"#total": "total", "#domain": f"domain:{domain}"},
            condition="(attribute_not_exists(#total) OR #total < :all) AND "
            "(attribute_not_exists(#domain) OR #domain < :dom)",
            raise_on_condition=True,
        )
    except dynamodb.ConditionFailedError as refused:
        counts = refused.item or {}
        if int(counts.get(f"domain:{domain}", 0)) >= cfg.ack_limit_per_domain_per_hour:
            return f"ack budget for {domain} used up ({cfg.ack_limit_per_domain_per_hour} per hour)"
        return f"global ack budget used up ({cfg.ack_limit_per_hour} per hour)"
    return ""
