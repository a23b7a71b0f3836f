"""SQS: the one module that talks to the queues.

Queue URLs are built, not looked up: ``<the SQS endpoint>/<account>/<name>`` is the URL SQS gives
every queue, so the functions need no ``sqs:GetQueueUrl`` (which IAM checks on its own, and whose
denial SQS reports as "queue does not exist").
"""

from __future__ import annotations

from typing import Any

from common.aws import client, learnt
from common.aws.sts import account_id


@learnt
def queue_url(name: str) -> str:

    return f"{str(client('sqs').meta.endpoint_url).rstrip('/')}/{account_id()}/{name}"


def send(queue_name: str, body: str, attributes: dict[str, str] | None = None, delay_s: int = 0) -> str:
    response = client("sqs").send_message(
        QueueUrl=queue_url(queue_name),
        MessageBody=body,
        **({"DelaySeconds": delay_s} if delay_s else {}),
        MessageAttributes={
            k: {"DataType": "String", "StringValue": v} for k, v in (attributes or {}).items()
        },
    )
    return str(response["MessageId"])


def receive(
    queue_name: str, max_messages: int = 10, wait_s: int = 1, visibility_s: int | None = None, api: Any = None
) -> list[dict[str, Any]]:
    """``api``: another SQS client (the local wiring polls a sender's queue with the sender's role, as
    Lambda's event-source mapping does); default: this process's."""
    kwargs: dict[str, Any] = {}
    if visibility_s is not None:
        kwargs["VisibilityTimeout"] = visibility_s
    response = (api or client("sqs")).receive_message(
        QueueUrl=queue_url(queue_name),
        MaxNumberOfMessages=max_messages,
        WaitTimeSeconds=wait_s,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
        **kwargs,
    )
    return list(response.get("Messages", []))


def hide(queue_name: str, receipt_handle: str, seconds: int) -> None:
    """ChangeMessageVisibility: the received message stays invisible for ``seconds`` from now."""
    client("sqs").change_message_visibility(
        QueueUrl=queue_url(queue_name), ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
    )


def show_again(queue_name: str, receipt_handles: list[str]) -> None:
    """Make received messages visible again now (ChangeMessageVisibilityBatch, 0 s), 10 at a time."""
    for start in range(0, len(receipt_handles), 10):
        client("sqs").change_message_visibility_batch(
            QueueUrl=queue_url(queue_name),
            Entries=[
                {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                for i, h in enumerate(receipt_handles[start : start + 10])
            ],
        )


def delete(queue_name: str, receipt_handles: list[str], api: Any = None) -> None:
    for start in range(0, len(receipt_handles), 10):
        chunk = receipt_handles[start : start + 10]
        (api or client("sqs")).delete_message_batch(
            QueueUrl=queue_url(queue_name),
            Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chunk)],
        )


def attributes(queue_name: str) -> dict[str, str]:
    return dict(
        client("sqs").get_queue_attributes(QueueUrl=queue_url(queue_name), AttributeNames=["All"])[
            "Attributes"
        ]
    )
