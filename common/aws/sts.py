"""STS: who the current credentials belong to."""

from __future__ import annotations

from common.aws import client, forget_learnt, learnt

_configured: list[str] = []  # the account the configuration names (ACCOUNT_ID), if any


def use_account(account: str) -> None:
    """Take the account from the configuration (the deploy sets ACCOUNT_ID for every function), so
    that building a queue URL or a topic ARN asks STS nothing: one client and one call less at cold
    start. Empty: ask STS, as the host tools do."""
    wanted = [account] if account else []
    if wanted != _configured:
        _configured[:] = wanted
        forget_learnt()  # queue URLs built with another account are wrong now


@learnt
def account_id() -> str:
    """The account of the current credentials (cached: it cannot change within a process)."""
    if _configured:
        return _configured[0]
    return str(client("sts").get_caller_identity()["Account"])
