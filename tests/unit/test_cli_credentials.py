"""Commands that act on a deployment take the local admin's credentials only against an emulator on
this machine, and only when none are configured (ops/main.py emulator_credentials)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from local.env import admin_credentials
from ops import main as cli


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:45111", "http://localhost:4566", "http://[::1]:4566"])
def test_an_emulator_here_without_credentials_gets_the_local_admins(
    clean: pytest.MonkeyPatch, endpoint: str
) -> None:
    clean.setenv("AWS_ENDPOINT_URL", endpoint)
    cli.emulator_credentials()
    assert os.environ["AWS_ACCESS_KEY_ID"] == admin_credentials()["AWS_ACCESS_KEY_ID"]


@pytest.mark.parametrize(
    ("env", "kept"),
    [
        ({}, None),  # AWS itself: the SDK's own chain decides
        ({"AWS_ENDPOINT_URL": "https://s3.eu-west-1.amazonaws.com"}, None),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_ACCESS_KEY_ID": "AKIAMINE"}, "AKIAMINE"),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_PROFILE": "mine"}, None),
    ],
)
def test_configured_credentials_and_aws_endpoints_are_left_alone(
    clean: pytest.MonkeyPatch, env: dict[str, str], kept: str | None
) -> None:
    for name, value in env.items():
        clean.setenv(name, value)
    cli.emulator_credentials()
    assert os.environ.get("AWS_ACCESS_KEY_ID") == kept


def test_a_credentials_file_left_by_an_earlier_secret_is_written_again(tmp_path: Path) -> None:
    """A checkout upgraded from before the per-stack secret keeps the old `local-admin` profile: the
    emulator refuses its keys, so the CLI uses the derived ones and the file is brought up to date."""

    from local.env import ADMIN_PROFILE, write_admin_credentials

    path = Path(tmp_path) / "credentials"
    path.write_text(f"[{ADMIN_PROFILE}]\naws_access_key_id = AKIASTALE\naws_secret_access_key = stale\n")
    keys = admin_credentials(path)
    assert keys["AWS_ACCESS_KEY_ID"] != "AKIASTALE"
    assert f"aws_access_key_id = {keys['AWS_ACCESS_KEY_ID']}" in path.read_text()
    written = path.read_text()
    assert admin_credentials(path) == keys and path.read_text() == written  # current: left alone
    missing = Path(tmp_path) / "none"
    assert admin_credentials(missing) == keys and not missing.exists()  # only an existing file is mended
    write_admin_credentials(missing)
    assert admin_credentials(missing) == keys
