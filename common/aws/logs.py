"""CloudWatch Logs: the spam log group (one JSON line per quarantined or dropped mail), and the search
`email-handler forget` makes of the log groups."""

from __future__ import annotations

import json
import time
from typing import Any

from common.aws import client, error_code


def put_json_line(group: str, stream: str, document: dict[str, Any]) -> None:
    logs = client("logs")
    event = {
        "timestamp": int(time.time() * 1000),
        "message": json.dumps(document, sort_keys=True, ensure_ascii=False),
    }
    try:
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[event])
    except Exception as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        try:  # streams are per day, created on first use; the group itself is provisioned
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
        except Exception as again:
            if error_code(again) != "ResourceAlreadyExistsException":
                raise
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[event])


def count_events(group: str, term: str) -> int:
    """How many events of ``group`` hold ``term`` (FilterLogEvents with the term quoted: an exact phrase)."""
    logs = client("logs")
    found, token = 0, None
    while True:
        page = logs.filter_log_events(
            logGroupName=group, filterPattern=json.dumps(term), **({"nextToken": token} if token else {})
        )
        found += len(page.get("events", []))
        token = page.get("nextToken")
        if not token:
            return found
