"""One SES send rate shared by every sender instance (GCRA over a DynamoDB item).

The item ``rate#ses`` holds the theoretical arrival time (TAT) of the next free slot. A sender
claims a slot with a conditional write: ``start = max(now, TAT)``, ``TAT := start + 1/rate`` only
if nobody moved TAT meanwhile; then it waits until ``start``. Slot starts are therefore spaced at
least ``1/rate`` apart across all instances, with no burst after an idle period (a per-second
counter would allow 2x the rate across a window boundary). A lost race costs one more write: the
failed conditional write returns the current TAT (ReturnValuesOnConditionCheckFailure), so no read.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from common.aws import dynamodb

KEY = {"id": "rate#ses"}
PACING = 0.97
_US = 1_000_000


class RateLimiter:
    def __init__(self, table: str, rate: float, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        # Paced at PACING of the rate and rounded up: r slots then span 1.03 s, and the ~30 ms of slack
        # absorbs scheduling jitter between a slot and its SES call (measured: at exactly 1/r, calls
        # put r + 1 into some one-second window; rounded down, even the slots did: 9 x 111111 us < 1 s).
        self.table, self.interval_us = table, math.ceil(_US / (rate * PACING))
        self.clock, self.sleep = clock, sleep
        self._seen: int | None = None  # last TAT this instance saw: usually right, saves a read

    def reserve(self) -> float:
        """Claim the next slot; returns its start time (epoch seconds). Does not wait."""
        while True:
            now = int(self.clock() * _US)
            old = self._seen
            start = max(now, old or 0)
            new = start + self.interval_us
            values = {":new": new, ":ttl": now // _US + 86400}
            if old is not None:
                values[":old"] = old
            try:
                dynamodb.update(self.table, KEY, "SET tat = :new, expiresAt = :ttl", values,
                                condition="attribute_not_exists(tat)" if old is None else "tat = :old",
                                raise_on_condition=True)
            except dynamodb.ConditionFailed as lost:
                # Another instance moved TAT; the failed write returned it, so retry without a read.
                self._seen = int(lost.item["tat"]) if lost.item and "tat" in lost.item else None
                continue
            self._seen = new
            return start / _US

    def wait_until(self, start: float) -> None:
        delay = start - self.clock()
        if delay > 0:
            self.sleep(delay)
