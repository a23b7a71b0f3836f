"""`email-handler replay [--dry-run]`: re-invoke the asynchronous events Lambda gave up on.

inbound-handler, reply-handler and attachment-extractor send an event that still failed after
Lambda's two retries to the async DLQ (an on-failure destination). Each message there is Lambda's
invocation record: the function (``requestContext.functionArn``) and the event (``requestPayload``).
Replay invokes the function's ``live`` alias again with that event (whatever qualifier the record
names), asynchronously as SES, S3 and SNS do, and deletes the message only once Lambda has accepted
the invocation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from common.aws import client
from deploy.lambdas import ALIAS, ASYNC_FUNCTIONS, async_dlq, function_name
from deploy.main import Options, connect
from deploy.resources import queue_url

# Long polling: an empty answer is not one of short polling's "false empty responses" (SQS ReceiveMessage).
POLL_S = 2
LOOK_S = (
    120  # a dry run hides a listed message this long at most (it shows it again when done, or on a crash)
)
MAX_IDLE_POLLS = 3  # empty answers while SQS still counts visible messages (its count lags)


def replay(
    options: Options,
    environ: Mapping[str, str] | None = None,
    report: Callable[[str], None] = print,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Returns one entry per message: function, request id, outcome (replayed | would replay |
    skipped: why)."""
    target = connect(options, dict(os.environ if environ is None else environ), report, need_secret=False)
    name = async_dlq(target.cfg)
    url = queue_url(name)
    if url is None:
        report(f"[replay] {name} does not exist: nothing was deployed here")
        return []
    sqs, lam = client("sqs"), client("lambda")
    ours = {function_name(target.cfg, f) for f in ASYNC_FUNCTIONS}
    done: list[dict[str, Any]] = []
    seen: set[str] = set()
    looked: list[str] = []  # a dry run's receipt handles: shown again when it is done
    idle = 0
    try:
        while len(done) < limit:
            # A dry run hides what it listed until it is done (so the next receive returns others) and then
            # shows it again; a replay hides one it could not invoke for 5 minutes.
            messages = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=POLL_S,
                VisibilityTimeout=LOOK_S if options.dry_run else 300,
            ).get("Messages", [])
            if options.dry_run:
                looked += [m["ReceiptHandle"] for m in messages]
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                # Empty only when SQS also counts nothing visible (what this run hid is not visible).
                count = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
                if (
                    int(count["Attributes"].get("ApproximateNumberOfMessages", 0)) == 0
                    or idle >= MAX_IDLE_POLLS
                ):
                    break
                idle += 1
                continue
            idle = 0
            for m in fresh:
                seen.add(m["MessageId"])
                entry = _replay_one(lam, sqs, url, m, options.dry_run, ours)
                done.append(entry)
                report(f"[replay] {entry['function']} {entry['requestId']}: {entry['outcome']}")
    finally:
        for start in range(0, len(looked), 10):
            sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                    for i, h in enumerate(looked[start : start + 10])
                ],
            )
    report(
        f"[replay] {sum(e['outcome'] == 'replayed' for e in done)} replayed, "
        f"{sum(e['outcome'].startswith('failed') for e in done)} failed (kept), "
        f"{sum(e['outcome'].startswith('skipped') for e in done)} skipped, of {len(done)} in {name}"
    )
    return done


def live(function_arn: str, ours: set[str]) -> str | None:
    """The ``live`` alias of the record's function (whatever qualifier the record names: an old version
    would run old code and has no on-failure destination), or None when it is not one of ``ours``."""
    parts = function_arn.split(":")  # arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]
    if (
        len(parts) < 7
        or parts[:3] != ["arn", "aws", "lambda"]
        or parts[5] != "function"
        or parts[6] not in ours
    ):
        return None
    return ":".join(parts[:7] + [ALIAS])


def _replay_one(
    lam: Any, sqs: Any, url: str, message: dict[str, Any], dry_run: bool, ours: set[str]
) -> dict[str, Any]:
    try:
        record = json.loads(message["Body"])
        context, payload = record["requestContext"], record["requestPayload"]
        recorded = str(context["functionArn"])
    except (ValueError, KeyError, TypeError) as exc:
        return {
            "function": "?",
            "requestId": message["MessageId"],
            "outcome": f"skipped: not an invocation record ({exc})",
        }
    function = live(recorded, ours)
    entry = {
        "function": (function or recorded).split(":function:")[-1],
        "requestId": str(context.get("requestId", "")),
        "condition": context.get("condition", ""),
    }
    if function is None:
        return {**entry, "outcome": "skipped: not a function of this deployment"}
    if dry_run:
        return {**entry, "outcome": "would replay"}
    try:
        lam.invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode())
    except Exception as exc:  # the message stays in the queue for the next replay
        return {**entry, "outcome": f"failed: {type(exc).__name__}: {str(exc)[:200]}"}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return {**entry, "outcome": "replayed"}
