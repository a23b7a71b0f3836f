"""The deploy names the account (ACCOUNT_ID) in every function's environment: a cold start builds its queue
URLs and topic ARNs from it instead of asking STS, one client and one call fewer on the path of the first
mail. Without it (the host tools, an older deploy) STS is asked once, as before."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest

from common.aws import forget_learnt, sts
from common.inbound.handler import handle
from common.runtime.handler import make_handler
from tests.support.awscalls import CallCounter
from tests.support.harness import Stack
from tests.support.mailgen import mail

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

CONTEXT = SimpleNamespace(aws_request_id="req-account", get_remaining_time_in_millis=lambda: 60_000)


@pytest.fixture
def configured(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    for name, value in stack.env.items():
        monkeypatch.setenv(name, value)
    sts.use_account("")
    forget_learnt()  # a cold start: nothing learnt yet
    yield stack
    sts.use_account("")
    forget_learnt()


def first_mail(stack: Stack, message_id: str) -> dict[str, int]:
    handler = make_handler("inbound-handler", handle)  # what images/inbound-handler/app.py does
    event = stack.receipt(mail(sender=f"Jane <jane-{message_id}@corp.example>"), message_id)
    with CallCounter() as calls, calls.track():
        handler(event, cast("LambdaContext", CONTEXT))
    return dict(calls.calls)


def test_a_deployed_function_builds_its_queue_urls_from_the_configured_account(
    configured: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = sts.account_id()  # the emulator's, asked here by the test, outside the counted calls
    forget_learnt()
    monkeypatch.setenv("ACCOUNT_ID", account)
    calls = first_mail(configured, "m-account")
    assert "STS.GetCallerIdentity" not in calls, calls
    assert calls.get("SQS.SendMessage", 0) >= 1, calls  # the ack (and the forward) went out
    assert [m.kind for m in configured.peek(configured.cfg.ack_queue)] == ["ack"]


def test_without_it_sts_is_asked_once(configured: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCOUNT_ID", raising=False)
    assert first_mail(configured, "m-sts").get("STS.GetCallerIdentity") == 1


def test_a_malformed_account_stops_the_cold_start(configured: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    from common.errors import ConfigError

    monkeypatch.setenv("ACCOUNT_ID", "12345")
    with pytest.raises(ConfigError, match="ACCOUNT_ID='12345' is not an AWS account id"):
        make_handler("inbound-handler", handle)


def test_a_changed_account_forgets_the_queue_urls_built_with_the_old_one(configured: Stack) -> None:
    from common.aws import sqs

    sts.use_account("111122223333")
    assert "/111122223333/" in sqs.queue_url(configured.cfg.ack_queue)
    sts.use_account("444455556666")
    assert "/444455556666/" in sqs.queue_url(configured.cfg.ack_queue)
