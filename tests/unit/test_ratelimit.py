"""The GCRA spacing: never more than the configured rate in any one-second window."""

from __future__ import annotations

from typing import Any

import pytest

from common.senders.ratelimit import RateLimiter
from common.store import ratewindow


@pytest.mark.parametrize("rate", [1, 3, 7, 9, 14, 0.5])
def test_slot_spacing_never_lets_rate_plus_one_into_a_second(rate: float) -> None:
    limiter = RateLimiter("unused", rate)
    slots = [n * limiter.interval_us / 1e6 for n in range(int(rate * 3) + 2)]  # back-to-back slots
    busiest = max(sum(1 for t in slots if start <= t < start + 1.0) for start in slots)
    assert busiest <= max(1, int(rate))


class FakeTable:
    """The rate item's conditional writes, as DynamoDB applies them (one at a time)."""

    def __init__(self) -> None:
        self.item: dict = {}
        self.writes = 0

    def update(
        self,
        table: str,
        key: dict[str, Any],
        expression: str,
        values: dict[str, Any],
        condition: str | None = None,
        raise_on_condition: bool = False,
        **kw: Any,
    ) -> dict[str, Any]:
        from common.aws.dynamodb import ConditionFailedError

        self.writes += 1
        tat = self.item.get("tat")
        holds = {
            "attribute_not_exists(tat) OR tat <= :now": tat is None or tat <= values.get(":now", 0),
            "tat >= :now": tat is not None and tat >= values.get(":now", 0),
            "tat = :end": tat == values.get(":end"),
        }[condition]
        if not holds:
            raise ConditionFailedError(dict(self.item))
        if "ADD tat :len" in expression:
            self.item["tat"] = tat + values[":len"]
        else:
            self.item["tat"] = values[":new"] if ":new" in values else values[":back"]
        return dict(self.item)


def simulate(
    monkeypatch: pytest.MonkeyPatch, rate: float, cycles: list[float], batches: int, batch_size: int = 10
) -> tuple[list[float], int]:
    """Instances with their own per-send time (``cycles``) drain batches against one rate item on a
    virtual clock; returns every planned send start and the number of writes to the rate item."""
    from common.senders import ratelimit

    table = FakeTable()
    monkeypatch.setattr(ratewindow.dynamodb, "update", table.update)
    clock = {"now": 1000.0}
    limiters = [RateLimiter("t", rate, clock=lambda: clock["now"]) for _ in cycles]
    # each instance: (time it is ready, instance, pacer, sends left in its batch, batches left)
    state: list[list[Any]] = [
        [1000.0 + i * 0.001, i, ratelimit.BatchPacer(limiters[i]), batch_size, batches]
        for i in range(len(cycles))
    ]
    starts: list[float] = []
    while any(s[4] for s in state):
        s = min((s for s in state if s[4]), key=lambda s: s[0])
        clock["now"] = s[0]
        _, start = s[2].next_start(s[3])
        starts.append(start)
        clock["now"] = max(clock["now"], start)
        s[2].started(clock["now"])
        s[0] = clock["now"] + cycles[s[1]]
        s[3] -= 1
        if not s[3]:
            clock["now"] = s[0]
            s[2].finish()
            s[2], s[3], s[4] = ratelimit.BatchPacer(limiters[s[1]]), batch_size, s[4] - 1
    return sorted(starts), table.writes


@pytest.mark.parametrize(
    "rate,cycles",
    [
        (14, [0.03, 0.05]),  # instances faster than the rate
        (14, [0.09, 0.12]),  # slower than the rate, taking turns
        (14, [0.03, 0.2, 0.09, 0.5]),  # mixed, four instances
        (100_000, [0.03, 0.04]),  # a rate no instance comes near
        (1, [0.05]),
        (3, [0.4, 0.5, 0.2]),
    ],
)
def test_sends_of_all_instances_start_at_least_one_interval_apart(
    monkeypatch: pytest.MonkeyPatch, rate: int, cycles: list[float]
) -> None:
    starts, _ = simulate(monkeypatch, rate, cycles, batches=4)
    assert len(starts) == 40 * len(cycles)
    interval = RateLimiter("t", rate).interval_us / 1e6
    assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= interval - 1e-6
    busiest = max(sum(1 for t in starts if s <= t < s + 1.0) for s in starts)
    assert busiest <= max(1, int(rate))


@pytest.mark.parametrize("cycles", [[0.03], [0.03, 0.05]])
def test_instances_that_keep_pace_claim_one_window_per_batch(
    monkeypatch: pytest.MonkeyPatch, cycles: list[float]
) -> None:
    starts, writes = simulate(monkeypatch, 14, cycles, batches=5)
    # One per batch, and per instance one for its very first send (it has not measured itself yet)
    # and one guess about TAT that was wrong.
    assert writes <= 5 * len(cycles) + 2 * len(cycles)
    assert (len(starts) - 1) / (starts[-1] - starts[0]) > 13  # at the rate: nothing held back


@pytest.mark.parametrize("cycles", [[0.12], [0.09, 0.12]])
def test_instances_slower_than_the_rate_claim_one_send_at_a_time_without_lost_races(
    monkeypatch: pytest.MonkeyPatch, cycles: list[float]
) -> None:
    starts, writes = simulate(monkeypatch, 14, cycles, batches=4)
    # a write per send (their first batch assumed they kept pace), hardly a retried conditional write
    assert writes <= len(starts) + 4 * len(cycles)
    if len(cycles) > 1:  # and the rate is used, not held by one of them
        assert (len(starts) - 1) / (starts[-1] - starts[0]) > 12


def test_unused_time_is_given_back_only_if_nobody_claimed_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from common.senders import ratelimit

    table = FakeTable()
    monkeypatch.setattr(ratewindow.dynamodb, "update", table.update)
    now = {"t": 1000.0}
    a, b = (RateLimiter("t", 10, clock=lambda: now["t"]) for _ in range(2))
    a.note_cycle(0.02)  # an instance that keeps pace
    pacer = ratelimit.BatchPacer(a)
    first, _ = pacer.next_start(10)  # a window for ten sends; only one is made (nine were duplicates)
    assert pacer.finish() and table.item["tat"] == int(first * 1e6) + a.interval_us
    pacer = ratelimit.BatchPacer(a)
    pacer.next_start(10)
    b.reserve(1)  # another instance claims after the window: nothing can be given back
    assert not pacer.finish()
