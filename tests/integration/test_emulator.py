"""The embedded emulator behaves like AWS where the system depends on it."""

from __future__ import annotations

import threading

from common.aws import client, dynamodb


def test_concurrent_conditional_writes_have_exactly_one_winner(stack) -> None:
    """Idempotency records and the rate limiter rely on DynamoDB's atomic conditional writes."""
    table = stack.cfg.send_status_table
    rounds, writers = 40, 8
    wins = [0] * rounds
    lock = threading.Lock()

    def writer() -> None:
        for n in range(rounds):
            barrier.wait()
            if dynamodb.put(table, {"id": f"race#{n}"}, condition="attribute_not_exists(id)"):
                with lock:
                    wins[n] += 1

    barrier = threading.Barrier(writers)
    threads = [threading.Thread(target=writer) for _ in range(writers)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert wins == [1] * rounds
    assert client("dynamodb").get_item(TableName=table, Key={"id": {"S": "race#0"}})["Item"]
