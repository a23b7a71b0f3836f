"""The GCRA spacing: never more than the configured rate in any one-second window."""

from __future__ import annotations

import pytest

from common.senders.ratelimit import RateLimiter


@pytest.mark.parametrize("rate", [1, 3, 7, 9, 14, 0.5])
def test_slot_spacing_never_lets_rate_plus_one_into_a_second(rate: float) -> None:
    limiter = RateLimiter("unused", rate)
    slots = [n * limiter.interval_us / 1e6 for n in range(int(rate * 3) + 2)]  # back-to-back slots
    busiest = max(sum(1 for t in slots if start <= t < start + 1.0) for start in slots)
    assert busiest <= max(1, int(rate))
