"""STS: who the current credentials belong to."""

from __future__ import annotations

import functools

from common.aws import client


@functools.cache
def account_id() -> str:
    """The account of the current credentials (cached: it cannot change within a process)."""
    return str(client("sts").get_caller_identity()["Account"])
