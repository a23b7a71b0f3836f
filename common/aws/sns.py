"""SNS: owner alerts."""

from __future__ import annotations

import functools
import json
from typing import Any

from common.aws import client


@functools.cache
def _account() -> str:
    return str(client("sts").get_caller_identity()["Account"])


def topic_arn(name: str, region: str, arn: str = "") -> str:
    return arn or f"arn:aws:sns:{region}:{_account()}:{name}"


def publish(arn: str, subject: str, message: dict[str, Any]) -> str:
    response = client("sns").publish(TopicArn=arn, Subject=subject[:100], Message=json.dumps(message, indent=2))
    return str(response["MessageId"])
