"""Lambda concurrency on the emulator (local/concurrency.py): GetAccountSettings and the
reservation minimum on a real moto server, and the local wiring's throttling: a throttled SQS batch
returns to its queue and counts a receive (so the redrive policy applies), a throttled asynchronous
invocation is retried later without using up its attempts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from common.aws import client, sqs
from common.runtime.config import dlq_name
from deploy.functions import FUNCTIONS
from local import fresh, provision
from local.concurrency import THROTTLE_KEY, AccountConcurrency
from local.wiring import Endpoint, Wiring, invocation_route
from tests.support.harness import Stack
from tests.support.scenario import wait_for

TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
)


@pytest.fixture
def fresh_account() -> Iterator[None]:
    fresh.set_fresh(True)
    yield
    fresh.set_fresh(False)


def _function(stack: Stack, name: str) -> str:
    role = client("iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=TRUST)["Role"]["Arn"]
    client("lambda").create_function(
        FunctionName=name,
        Role=role,
        PackageType="Image",
        Code={"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:latest"},
    )
    return name


def test_get_account_settings_answer_with_the_default_quota_and_what_reservations_leave(
    stack: Stack,
) -> None:
    lam = client("lambda")
    limit = lam.get_account_settings()["AccountLimit"]
    assert (limit["ConcurrentExecutions"], limit["UnreservedConcurrentExecutions"]) == (1000, 1000)
    name = _function(stack, "reserving")
    lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=900)  # leaves 100
    assert lam.get_account_settings()["AccountLimit"]["UnreservedConcurrentExecutions"] == 100
    with pytest.raises(ClientError, match=r"below its minimum value of \[100\]"):
        lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=901)
    lam.delete_function_concurrency(FunctionName=name)


def test_a_fresh_account_has_10_and_can_reserve_nothing(stack: Stack, fresh_account: None) -> None:
    lam = client("lambda")
    limit = lam.get_account_settings()["AccountLimit"]
    assert (limit["ConcurrentExecutions"], limit["UnreservedConcurrentExecutions"]) == (10, 10)
    assert AccountConcurrency.of_account().limit == 10  # what the wiring throttles at
    name = _function(stack, "reserving-fresh")
    with pytest.raises(ClientError, match=r"below its minimum value of \[100\]"):
        lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=1)


class Held:
    """Every one of the account's concurrent executions taken by something else until released."""

    def __init__(self, account: AccountConcurrency) -> None:
        self.entered, self.release = threading.Barrier(account.limit + 1), threading.Event()
        self.threads = [threading.Thread(target=self._hold, args=(account,)) for _ in range(account.limit)]
        for t in self.threads:
            t.start()
        self.entered.wait()

    def _hold(self, account: AccountConcurrency) -> None:
        with account.slot("another-function"):
            self.entered.wait()
            self.release.wait()

    def free(self) -> None:
        self.release.set()
        for t in self.threads:
            t.join()


def _wiring(stack: Stack, invoked: list[Any], account: AccountConcurrency, lines: list[str]) -> Wiring:
    def record(url: str, event: Any, timeout: float) -> dict[str, Any]:
        invoked.append(event)
        return {"status": "ok"}

    endpoints = {f.name: Endpoint(f.name, "-", invoke=record) for f in FUNCTIONS}
    return Wiring(stack.cfg, endpoints, visibility_s=1, report=lines.append, account=account)


def test_a_throttled_sqs_batch_returns_to_its_queue_and_its_receives_reach_the_dlq(stack: Stack) -> None:
    cfg = stack.cfg
    provision.provision(cfg, wiring=True)
    account = AccountConcurrency(1)
    invoked: list[Any] = []
    lines: list[str] = []
    held = Held(account)
    wiring = _wiring(stack, invoked, account, lines)
    wiring.sources = [s for s in wiring.sources if s.queue == cfg.ack_queue]
    sqs.send(cfg.ack_queue, "{}")
    wiring.start()
    try:
        # Throttled at every receive: each one counts, and at maxReceiveCount the redrive moves it.
        wait_for("the dead-letter queue", lambda: stack.depth(dlq_name(cfg.ack_queue)) == 1, timeout=60)
    finally:
        wiring.stop()
        held.free()
    assert invoked == [] and account.throttles["ack-sender"] >= cfg.max_receive_count
    assert any("throttled: back to the queue" in line for line in lines)
    assert stack.depth(cfg.ack_queue) == 0


def test_a_throttled_async_invocation_is_retried_later_without_using_its_attempts(stack: Stack) -> None:
    cfg = stack.cfg
    provision.provision(cfg, wiring=True)
    queue = provision.wiring_queue(cfg, "invocations")
    account = AccountConcurrency(1)
    invoked: list[Any] = []
    lines: list[str] = []
    held = Held(account)

    def invocations_wiring() -> Wiring:
        wiring = _wiring(stack, invoked, account, lines)
        wiring.sources = [s for s in wiring.sources if s.route is invocation_route]
        return wiring.start()

    event = {"Records": [{"eventSource": "aws:ses", "marker": "throttled-once"}]}
    sqs.send(queue, json.dumps({"function": "inbound-handler", "event": event}))
    throttling = invocations_wiring()
    try:
        wait_for("two throttles", lambda: account.throttles["inbound-handler"] >= 2)
    finally:
        throttling.stop()
    try:
        # Back in the queue as a new message (no receive of the original used), with its throttle count.
        # Read with the wiring stopped: a poller running beside this read would take the message at
        # each of its reappearances, throttle it again and double its delay past the wait (seen under load).
        waiting = wait_for("the retried message", lambda: stack.receive(queue, visibility_s=0))
        assert waiting[0]["Attributes"]["ApproximateReceiveCount"] == "1"
        assert json.loads(waiting[0]["Body"])[THROTTLE_KEY]["count"] >= 1
        held.free()
        retrying = invocations_wiring()
        try:
            wait_for("the invocation", lambda: invoked)
            wait_for("the queue to empty", lambda: stack.depth(queue) == 0)
        finally:
            retrying.stop()
    finally:
        held.free()
    assert invoked == [event]  # once, as it was sent
    assert stack.depth(dlq_name(queue)) == 0
    assert any("throttled, retried in 1 s" in line for line in lines)
