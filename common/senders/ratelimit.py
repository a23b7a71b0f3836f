"""One SES send rate shared by every sender instance (GCRA over a DynamoDB item).

The item ``rate#ses`` holds the theoretical arrival time (TAT): the end of the last window of time
any instance claimed. An instance claims the next window with one conditional write:
``start = max(now, TAT)``, ``TAT := start + length``. Windows never overlap, and inside its own
window an instance starts its sends at least ``1/rate`` apart, the last one no later than
``1/rate`` before the window ends. So any two sends, whichever instances made them, start at least
``1/rate`` apart, with no burst after an idle period (a per-second counter would allow 2x the rate
across a window boundary). When TAT is ahead of now the claim is an atomic ADD (instances taking
turns never lose a race); otherwise a write conditional on TAT not being ahead. A wrong guess costs
one more write: the failed write returns TAT (ReturnValuesOnConditionCheckFailure), so no read.

An instance that keeps pace with the rate (it is ready for each send before its turn comes) claims
one window for its whole batch: a batch of ten costs one write instead of ten. One that needs longer
per send than ``1/rate`` claims one send's worth at a time: a window it cannot fill would hold the
rate from the others (measured, per sandbox: :meth:`RateLimiter.note_cycle`). What a batch does not
use is given back when nobody has claimed after it (one more write, only then); an instance that
falls behind its window claims another one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from common.store import ratewindow

PACING = 0.97
_US = 1_000_000


@dataclass(slots=True)
class Window:
    """Time claimed by one write: send slots in ``[start_us, end_us - interval_us]``, ``interval_us``
    apart."""

    start_us: int
    end_us: int
    interval_us: int
    next_us: int = -1  # earliest slot of the next send; -1 before the first
    lag_us: int = 0  # how late the first send came after the window's start: every send keeps it

    def take(self, now: float) -> tuple[float, float] | None:
        """The next send's slot and when it may start (epoch seconds), or None when it would not fit
        before the window ends. The first slot is the window's start, and the first send is as late
        as the claim that made the window (a request's time); the others are as late as the first,
        so the window's sends stay one interval apart (on time, a later one would bunch up with it)."""
        if self.next_us < 0:
            slot = self.start_us
            self.lag_us = max(0, int(now * _US) - slot)
        else:
            slot = max(int(now * _US) - self.lag_us, self.next_us)
            if slot > self.end_us - self.interval_us:
                return None
        self.next_us = slot + self.interval_us
        return slot / _US, (slot + self.lag_us) / _US

    def unused_from_us(self) -> int:
        """Where the time this window no longer needs begins."""
        return self.start_us if self.next_us < 0 else self.next_us


class RateLimiter:
    def __init__(
        self,
        table: str,
        rate: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        # Paced at PACING of the rate and rounded up: r sends then span 1.03 s, and the ~30 ms of slack
        # absorbs scheduling jitter between a planned start and the SES call (measured: at exactly 1/r,
        # calls put r + 1 into some one-second window; rounded down, even the starts did:
        # 9 x 111111 us < 1 s).
        self.table, self.interval_us = table, math.ceil(_US / (rate * PACING))
        self.clock, self.sleep = clock, sleep
        self._seen: int | None = None  # last TAT this instance saw: usually right, saves a read
        self._own_end: int | None = None  # end of the last window this instance claimed
        self._others_ahead = False  # whether its last window had to wait for another instance's
        self.cycle_s: float | None = (
            None  # this instance's time from one send's start to being ready for the next
        )

    def note_cycle(self, seconds: float) -> None:
        """Record how long this instance took from a send's start to being ready for the next one."""
        self.cycle_s = seconds if self.cycle_s is None else 0.5 * self.cycle_s + 0.5 * seconds

    def keeps_pace(self) -> bool:
        """Whether this instance is ready for its next send within ``1/rate``; not before it has
        measured itself (a cold sandbox's first send is slow)."""
        return self.cycle_s is not None and self.cycle_s * _US <= self.interval_us

    def reserve(self, sends: int = 1) -> Window:
        """Claim a window for ``sends`` sends (one if this instance does not keep pace) with one
        conditional write. Does not wait."""
        while True:
            now = int(self.clock() * _US)
            # While instances take turns the TAT this one saw is stale: that its last window had to
            # wait for another instance's is the better guess that TAT is ahead.
            ahead = self._others_ahead or (self._seen is not None and self._seen > now)
            length = self.interval_us * (max(1, sends) if self.keeps_pace() else 1)
            try:
                if ahead:
                    # Somebody holds time ahead: append to it. An atomic ADD cannot lose a race, so
                    # instances taking turns cost one write each; it fails only if TAT fell behind now.
                    new = ratewindow.append(self.table, now, length)
                else:
                    new = now + length
                    ratewindow.start(self.table, now, new)
            except ratewindow.TatMovedError as lost:
                # TAT is not where this instance thought; the failed write returned it, so no read.
                self._seen = lost.tat
                self._others_ahead = False
                continue
            self._others_ahead = new - length > now and new - length != self._own_end
            self._seen = self._own_end = new
            return Window(new - length, new, self.interval_us)

    def give_back(self, window: Window) -> bool:
        """Return the part of ``window`` no send needs, if it is still ahead and nobody has claimed
        after it: TAT moves back to where it begins (one conditional write). True if returned."""
        back = window.unused_from_us()
        if back >= window.end_us or back <= self.clock() * _US or self._seen != window.end_us:
            return False
        try:
            ratewindow.give_back(self.table, window.end_us, back)
        except ratewindow.TatMovedError as lost:
            self._seen = lost.tat
            return False
        self._seen = self._own_end = window.end_us = back
        return True

    def wait_until(self, start: float) -> None:
        delay = start - self.clock()
        if delay > 0:
            self.sleep(delay)


class BatchPacer:
    """One batch's sends against the shared rate: one window claimed for the whole batch, another
    only when this instance falls behind it, the unused rest given back at the end."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter
        self.window: Window | None = None
        self._last_start: float | None = None  # when this batch's previous send started

    def next_start(self, sends_left: int, after_pause: bool = False) -> tuple[float, float]:
        """This send's rate slot and when it may start (epoch seconds). ``sends_left`` counts it and
        every record after it that may still send (what a new window is sized for); ``after_pause``
        when a retry delay was slept since the previous send, so that gap is not taken for this
        instance's pace."""
        now = self.limiter.clock()
        if self._last_start is not None and not after_pause:
            self.limiter.note_cycle(now - self._last_start)
        taken = self.window.take(now) if self.window is not None else None
        if taken is None:
            self.window = self.limiter.reserve(max(1, sends_left))
            taken = self.window.take(self.limiter.clock())
        assert taken is not None  # a fresh window always has room for its first send
        return taken

    def started(self, when: float) -> None:
        """The send began at ``when`` (after waiting for its start)."""
        self._last_start = when

    def finish(self) -> bool:
        """Give back what the window no longer needs (True if it was given back)."""
        return self.window is not None and self.limiter.give_back(self.window)
