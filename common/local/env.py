"""Local-mode defaults, read from compose/local.env so both local modes share them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from common.runtime.config import DEV_THREAD_SECRET

ENV_FILE = Path(__file__).resolve().parents[2] / "compose" / "local.env"

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


AWS_CLIENT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                        "AWS_DEFAULT_REGION")


def use_endpoint(url: str, env: dict[str, str]) -> None:
    """Point this process's AWS clients at ``url``, with credentials and region from ``env``."""
    from common.aws import reset_clients

    os.environ.update({k: env[k] for k in AWS_CLIENT_VARIABLES if k in env}, AWS_ENDPOINT_URL=url)
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
