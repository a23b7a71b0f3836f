"""Fixtures of the integration suite beyond the shared ones (tests/conftest.py)."""

from __future__ import annotations

import secrets
import urllib.request

import pytest

from local.guard import admin_request


@pytest.fixture
def env(moto_server: str, local_defaults: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A clean emulator and a production configuration (the local defaults, a real secret, env prd)."""
    urllib.request.urlopen(admin_request(moto_server + "/moto-api/reset", method="POST")).read()
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # deploy pins the region for its process
    values = {k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"}
    return {**values, "THREAD_SECRET": secrets.token_hex(32), "MAX_SEND_RATE": "14"}
