"""SNS: owner alerts."""

from __future__ import annotations

import json
from typing import Any

from common.aws import client
from common.aws.sts import account_id


def topic_arn(name: str, region: str, arn: str = "") -> str:
    return arn or f"arn:aws:sns:{region}:{account_id()}:{name}"


def publish(arn: str, subject: str, message: dict[str, Any]) -> str:
    response = client("sns").publish(
        TopicArn=arn, Subject=subject[:100], Message=json.dumps(message, indent=2)
    )
    return str(response["MessageId"])
