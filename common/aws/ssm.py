"""SSM Parameter Store: configuration that the owner changes without a deploy."""

from __future__ import annotations

from common.aws import client


def get_parameter(name: str, decrypt: bool = False) -> str:
    """The parameter's value; ``decrypt`` for a SecureString (the aws/ssm key needs no kms grant)."""
    return str(client("ssm").get_parameter(Name=name, WithDecryption=decrypt)["Parameter"]["Value"])
