"""Count AWS API calls at the boto3 client: every request botocore makes goes through
``BaseClient._make_api_call``, whatever client or module made it.

The benchmark counts calls per inbound mail and per send with it, and the sender tests use it to
hold the per-send figure: only calls made on the threads the caller selects are counted, so the
harness's own calls (staging mail, feeding queues, checking that a queue is empty) never are.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any

IDLE_POLL = "SQS.ReceiveMessage (empty)"


class CallCounter:
    """``with CallCounter() as calls:`` counts ``Service.Operation`` per call on the selected threads.

    An SQS ReceiveMessage that returned nothing is counted apart (:data:`IDLE_POLL`): an idle
    event-source mapping polls whether or not mail comes, so it is no cost of a send.
    """

    def __init__(self, select: Callable[[threading.Thread], bool] | None = None) -> None:
        self.select = select or (lambda thread: True)
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._undo: Callable[[], None] | None = None

    def __enter__(self) -> CallCounter:
        from botocore.client import BaseClient

        real = BaseClient._make_api_call
        counter = self

        def counted(client: Any, operation: str, params: dict[str, Any]) -> Any:
            response: Any = None
            try:
                response = real(client, operation, params)
                return response
            finally:  # a call that failed (a lost conditional write, a throttle) is a call too
                if counter.select(threading.current_thread()):
                    name = f"{client.meta.service_model.service_id}.{operation}"
                    if operation == "ReceiveMessage" and response is not None and not response.get("Messages"):
                        name = IDLE_POLL
                    with counter._lock:
                        counter.calls[name] += 1

        BaseClient._make_api_call = counted

        def undo() -> None:
            BaseClient._make_api_call = real

        self._undo = undo
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    def total(self) -> int:
        """Every counted call except idle polls."""
        return sum(n for name, n in self.calls.items() if name != IDLE_POLL)

    def per(self, units: int) -> dict[str, float]:
        """Calls per unit (mail, send) by operation, idle polls apart, largest first."""
        return {name: round(n / units, 3) for name, n in self.calls.most_common()}
