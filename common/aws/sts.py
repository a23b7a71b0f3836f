"""STS: who the current credentials belong to."""

from __future__ import annotations

from common.aws import client, learnt


@learnt
def account_id() -> str:
    """The account of the current credentials (cached: it cannot change within a process)."""
    return str(client("sts").get_caller_identity()["Account"])
