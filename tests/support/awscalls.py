"""Count AWS API calls at the boto3 client: every request botocore makes goes through
``BaseClient._make_api_call``, whatever client or module made it.

The benchmark counts calls per inbound mail and per send with it, and the sender tests use it to
hold the per-send figure. Only calls made inside :meth:`CallCounter.track` count, in that thread
and in every thread started from it with a copy of its context (``asyncio.to_thread`` does, and
tests.support.sendload's workers do), so the harness's own calls (staging mail, feeding queues,
checking that a queue is empty) never do.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

IDLE_POLL = "SQS.ReceiveMessage (empty)"
_TRACKING: contextvars.ContextVar[CallCounter | None] = contextvars.ContextVar(
    "aws_call_counter", default=None
)


class CallCounter:
    """``with CallCounter() as calls, calls.track():`` counts ``Service.Operation`` per call.

    An SQS ReceiveMessage that returned nothing is counted apart (:data:`IDLE_POLL`): an idle
    event-source mapping polls whether or not mail comes, so it is no cost of a send.
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> CallCounter:
        from botocore.client import BaseClient

        real = BaseClient._make_api_call

        def counted(client: Any, operation: str, params: dict[str, Any]) -> Any:
            response: Any = None
            try:
                response = real(client, operation, params)
                return response
            finally:  # a call that failed (a lost conditional write, a throttle) is a call too
                counter = _TRACKING.get()
                if counter is not None:
                    name = f"{client.meta.service_model.service_id}.{operation}"
                    if (
                        operation == "ReceiveMessage"
                        and response is not None
                        and not response.get("Messages")
                    ):
                        name = IDLE_POLL
                    with counter._lock:
                        counter.calls[name] += 1

        BaseClient._make_api_call = counted

        def undo() -> None:
            BaseClient._make_api_call = real

        self._undo = undo
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    @contextlib.contextmanager
    def track(self) -> Iterator[CallCounter]:
        """Count the calls made in this context (and in threads given a copy of it)."""
        token = _TRACKING.set(self)
        try:
            yield self
        finally:
            _TRACKING.reset(token)

    def total(self) -> int:
        """Every counted call except idle polls."""
        return sum(n for name, n in self.calls.items() if name != IDLE_POLL)

    def per(self, units: int) -> dict[str, float]:
        """Calls per unit (mail, send) by operation, idle polls apart, largest first."""
        return {name: round(n / units, 3) for name, n in self.calls.most_common()}
