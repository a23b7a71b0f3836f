"""SSM Parameter Store: configuration that the owner changes without a deploy."""

from __future__ import annotations

from common.aws import client


def get_parameter(name: str) -> str:
    return str(client("ssm").get_parameter(Name=name)["Parameter"]["Value"])
