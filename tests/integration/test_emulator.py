"""The embedded emulator behaves like AWS where the system depends on it."""

from __future__ import annotations

import threading

from common.aws import client, dynamodb
from tests.support.harness import Stack


def test_concurrent_conditional_writes_have_exactly_one_winner(stack: Stack) -> None:
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
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins == [1] * rounds
    assert client("dynamodb").get_item(TableName=table, Key={"id": {"S": "race#0"}})["Item"]


def test_sqs_refuses_characters_outside_xml_as_aws_does(stack: Stack) -> None:
    """SendMessage: a body with a character outside XML 1.0's set is InvalidMessageContents on AWS."""
    from common.aws import error_code, sqs

    queue = stack.cfg.forward_queue
    for body in ("subject \uffff", "name \ufffe", "control \x01"):
        try:
            sqs.send(queue, body)
        except Exception as exc:
            assert error_code(exc) == "InvalidMessageContents"
        else:
            raise AssertionError(f"{body!r} was accepted")
    sqs.send(queue, "Grüße \U0001f600 \t\r\n")  # the rest of Unicode is fine


def test_dynamodb_refuses_over_long_keys_on_reads_as_aws_does(stack: Stack) -> None:
    """GetItem, BatchGetItem, UpdateItem and DeleteItem refuse a partition key over 2,048 bytes on AWS."""
    from common.aws import error_code

    ddb, table = client("dynamodb"), stack.cfg.sender_lists_table
    key = {"entry": {"S": "a" * 3000 + "@x.example"}}
    calls = {
        "GetItem": lambda: ddb.get_item(TableName=table, Key=key),
        "BatchGetItem": lambda: ddb.batch_get_item(RequestItems={table: {"Keys": [key]}}),
        "UpdateItem": lambda: ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET a = :a",
            ExpressionAttributeValues={":a": {"S": "x"}},
        ),
        "DeleteItem": lambda: ddb.delete_item(TableName=table, Key=key),
    }
    for name, call in calls.items():
        try:
            call()
        except Exception as exc:
            assert error_code(exc) == "ValidationException" and "Size of hashkey" in str(exc), name
        else:
            raise AssertionError(f"{name} accepted a 3 KB key")
    ddb.get_item(TableName=table, Key={"entry": {"S": "a" * 2000}})  # within the limit
