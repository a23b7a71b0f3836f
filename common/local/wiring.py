"""Local event wiring: what AWS event-source mappings and notifications do, for RIE endpoints.

``poll_queue_once`` is one turn of an SQS event-source mapping with ``ReportBatchItemFailures``:
receive a batch, invoke the function with the SQS event, delete only the records it did not
report as failed. A failed record stays in the queue until its visibility timeout ends and is
moved to the DLQ by the queue's redrive policy after maxReceiveCount receives, as on AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.aws import sqs
from common.sesevent import sqs_event

Invoke = Callable[[dict[str, Any]], Any]


@dataclass
class BatchResult:
    received: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    error: str = ""


def poll_queue_once(queue: str, queue_arn: str, invoke: Invoke, batch_size: int = 10, wait_s: int = 0,
                    visibility_s: int | None = None, region: str = "us-east-1") -> BatchResult:
    messages = sqs.receive(queue, max_messages=batch_size, wait_s=wait_s, visibility_s=visibility_s)
    result = BatchResult(received=len(messages))
    if not messages:
        return result
    ids = [m["MessageId"] for m in messages]
    try:
        response = invoke(sqs_event(messages, queue_arn, region))
    except Exception as exc:  # a function error fails the whole batch, as on AWS
        result.failed, result.error = ids, f"{type(exc).__name__}: {exc}"
        return result
    reported = response.get("batchItemFailures") if isinstance(response, dict) else None
    failed_ids = {str(f.get("itemIdentifier")) for f in reported or [] if isinstance(f, dict)}
    if reported is None or not failed_ids <= set(ids):
        # Lambda treats a malformed or foreign batchItemFailures as a failure of the whole batch.
        if reported is not None:
            result.failed, result.error = ids, "batchItemFailures names ids outside the batch"
            return result
        failed_ids = set()
    handles = [m["ReceiptHandle"] for m in messages if m["MessageId"] not in failed_ids]
    sqs.delete(queue, handles)
    result.deleted = [i for i in ids if i not in failed_ids]
    result.failed = [i for i in ids if i in failed_ids]
    return result
