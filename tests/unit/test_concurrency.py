"""Lambda's account concurrency as the local modes model it (local/concurrency.py): the
documented reservation minimum, GetAccountSettings' shape, throttling and the asynchronous retries."""

from __future__ import annotations

import json
import threading

import pytest

from local import concurrency as c


def test_a_reservation_must_leave_the_documented_100_unreserved() -> None:
    # A fresh account (10): every reservation would leave fewer than 100, so every one is refused ...
    assert "minimum value of [100]" in c.check_reservation(c.FRESH_CONCURRENCY, [], 1)
    # ... except none at all (reserving 0 takes nothing from the unreserved pool).
    assert c.check_reservation(c.FRESH_CONCURRENCY, [], 0) == ""
    # The default quota (1,000): up to 900 in all.
    assert c.check_reservation(c.DEFAULT_CONCURRENCY, [], 900) == ""
    assert c.check_reservation(c.DEFAULT_CONCURRENCY, [500], 400) == ""
    assert "[100]" in c.check_reservation(c.DEFAULT_CONCURRENCY, [500], 401)


def test_account_settings_report_the_limit_and_what_reservations_leave() -> None:
    settings = c.account_settings(10, [], [100, 200])
    assert settings["AccountLimit"]["ConcurrentExecutions"] == 10
    assert settings["AccountLimit"]["UnreservedConcurrentExecutions"] == 10
    assert settings["AccountUsage"] == {"TotalCodeSize": 300, "FunctionCount": 2}
    assert c.account_settings(1000, [300], [])["AccountLimit"]["UnreservedConcurrentExecutions"] == 700


def test_one_invocation_past_the_limit_is_throttled_at_once_and_a_finished_one_frees_its_slot() -> None:
    account = c.AccountConcurrency(2)
    entered, release = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with account.slot("inbound-handler"):
            entered.wait()
            release.wait()

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for t in holders:
        t.start()
    entered.wait()
    assert account.running == 2
    with pytest.raises(c.ThrottledError, match="2 of the account's 2"), account.slot("ack-sender"):
        pass  # never reached
    assert account.throttles == {"ack-sender": 1}
    release.set()
    for t in holders:
        t.join()
    with account.slot("ack-sender"):
        assert account.running == 1
    assert account.running == 0 and account.peak == 2


def test_a_throttled_async_invocation_is_retried_from_1_s_doubling_to_5_minutes() -> None:
    assert [c.retry_delay(n) for n in range(1, 12)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


def test_a_throttled_async_invocation_keeps_its_first_throttle_time_and_ends_after_6_hours() -> None:
    body = {"function": "inbound-handler", "event": {"Records": []}}
    first = c.requeue_throttled(body, now=1000.0)
    assert first is not None
    again, delay = first
    assert delay == 1 and json.loads(again)[c.THROTTLE_KEY] == {"count": 1, "since": 1000.0}
    second = c.requeue_throttled(json.loads(again), now=1001.0)
    assert second is not None and second[1] == 2
    assert json.loads(second[0])["event"] == body["event"]  # the invocation itself is untouched
    assert c.requeue_throttled(json.loads(second[0]), now=1000.0 + 6 * 3600 - 1) is not None
    assert c.requeue_throttled(json.loads(second[0]), now=1000.0 + 6 * 3600) is None
