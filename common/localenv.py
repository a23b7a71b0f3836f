"""Local-mode defaults, read from compose/local.env so both local modes share them."""

from __future__ import annotations

from pathlib import Path

from common.config import DEV_THREAD_SECRET

ENV_FILE = Path(__file__).resolve().parent.parent / "compose" / "local.env"

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
