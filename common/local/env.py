"""Local-mode defaults, read from compose/local.env so both local modes share them."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from common.runtime.config import DEV_THREAD_SECRET

ENV_FILE = Path(__file__).resolve().parents[2] / "compose" / "local.env"
# scripts/compose.sh writes one file per running `make up` stack: its endpoint and, when DynamoDB
# is routed to moto beside LocalStack, where DynamoDB answers.
STACKS_DIR = ENV_FILE.parents[1] / ".build" / "local" / "stacks"

# Fallback when the package is installed without the repository (the file is the source of truth).
_BUILTIN = {
    "DOMAIN_NAME": "example.com",
    "PUBLIC_EMAIL": "hello@example.com",
    "PRIVATE_EMAIL": "owner@example.net",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "ENVIRONMENT": "local",
    "THREAD_SECRET": DEV_THREAD_SECRET,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "LOG_LEVEL": "INFO",
}


def local_env() -> dict[str, str]:
    if not ENV_FILE.exists():
        return dict(_BUILTIN)
    out: dict[str, str] = {}
    for line in ENV_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


AWS_CLIENT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                        "AWS_REGION", "AWS_DEFAULT_REGION")


def _same_endpoint(a: str, b: str) -> bool:
    def key(url: str) -> tuple[str, int | None]:
        parts = urlsplit(url.rstrip("/"))
        return ("127.0.0.1" if parts.hostname == "localhost" else parts.hostname or ""), parts.port
    return key(a) == key(b)


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 0.5).close()
    except OSError:
        return False
    return True


def stack_routes(url: str) -> dict[str, str]:
    """boto3's per-service endpoint variables of the running `make up` stack whose emulator answers at
    ``url``: ``AWS_ENDPOINT_URL_DYNAMODB`` when that stack routes DynamoDB to moto, else nothing.
    A file left by a stack that is gone (its DynamoDB port closed) is ignored."""
    for path in sorted(STACKS_DIR.glob("*.json")) if STACKS_DIR.is_dir() else []:
        try:
            stack = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _same_endpoint(str(stack.get("endpoint", "")), url) and stack.get("dynamodb") and _listening(stack["dynamodb"]):
            return {"AWS_ENDPOINT_URL_DYNAMODB": str(stack["dynamodb"])}
    return {}


def use_endpoint(url: str, env: dict[str, str]) -> None:
    """Point this process's AWS clients at ``url``, with credentials and region from ``env``; DynamoDB
    goes where the `make up` stack at ``url`` routes it, unless ``env`` says otherwise."""
    from common.aws import reset_clients

    settings = {k: env[k] for k in AWS_CLIENT_VARIABLES if k in env} | {"AWS_ENDPOINT_URL": url}
    routes = stack_routes(url)
    os.environ.update(routes | settings)
    if "AWS_ENDPOINT_URL_DYNAMODB" not in routes | settings:
        os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)  # a route of the previous endpoint must not follow this one
    reset_clients()


@contextlib.contextmanager
def aws_endpoint(url: str, env: dict[str, str]) -> Iterator[None]:
    """:func:`use_endpoint` for the duration of the block, then the previous environment again."""
    from common.aws import reset_clients

    saved = {k: os.environ.get(k) for k in AWS_CLIENT_VARIABLES}
    use_endpoint(url, env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reset_clients()
