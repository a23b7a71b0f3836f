"""CloudWatch Logs: the spam log group (one JSON line per quarantined or dropped mail)."""

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
