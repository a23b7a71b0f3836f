"""deploy/saved.py: what the saved deployment keeps and how a command reads it (exported wins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy import config, saved
from deploy.errors import DeployError

GIVEN = {
    "DOMAIN_NAME": "example.org",
    "PUBLIC_EMAIL": "hello@example.org,*@example.org",
    "PRIVATE_EMAIL": "me@mailbox.example",
    "ACK_SUBJECT": "Thanks",
    "THREAD_SECRET": "s" * 64,
    "AWS_REGION": "eu-west-1",
    "AWS_SECRET_ACCESS_KEY": "never-a-setting",
    "HOME": "/home/me",
}


def saved_file(folder: Path) -> dict[str, object]:
    cfg = config.load({**GIVEN, "ENVIRONMENT": "prd"})
    return dict(json.loads(saved.save(cfg, GIVEN, folder).read_text()))


def test_the_file_keeps_the_settings_and_never_the_secret_or_the_shell(saved_deployments: Path) -> None:
    data = saved_file(saved_deployments)
    assert data["settings"] == {
        "ACK_SUBJECT": "Thanks",
        "DOMAIN_NAME": "example.org",
        "PRIVATE_EMAIL": "me@mailbox.example",
        "PUBLIC_EMAIL": "hello@example.org,*@example.org",
    }
    assert (data["env"], data["region"]) == ("prd", "eu-west-1")
    assert "s" * 64 not in (saved_deployments / "prd.json").read_text()


def test_exported_variables_win_and_the_saved_ones_fill_the_rest(saved_deployments: Path) -> None:
    saved_file(saved_deployments)
    assert saved.merged("prd", {})["DOMAIN_NAME"] == "example.org"
    assert saved.merged("prd", {})["AWS_REGION"] == "eu-west-1"
    shell = saved.merged("prd", {"PRIVATE_EMAIL": "other@mailbox.example", "AWS_DEFAULT_REGION": "us-east-1"})
    assert shell["PRIVATE_EMAIL"] == "other@mailbox.example" and shell["ACK_SUBJECT"] == "Thanks"
    assert "AWS_REGION" not in shell  # the shell's Region wins, whichever variable names it
    assert "AWS_REGION" not in saved.merged("prd", {}, cli_region="us-west-2")  # so does --region
    assert saved.merged("stg", {"X": "1"}) == {"X": "1"}  # another env has its own file (none here)


def test_a_damaged_file_is_an_error_with_what_to_do(saved_deployments: Path) -> None:
    (saved_deployments / "prd.json").write_text("{not json")
    with pytest.raises(DeployError, match="cannot be read") as err:
        saved.merged("prd", {})
    assert "delete" in err.value.fix


def test_a_secret_in_a_hand_edited_file_is_not_read(saved_deployments: Path) -> None:
    (saved_deployments / "prd.json").write_text(json.dumps({"settings": {"THREAD_SECRET": "x" * 40}}))
    assert "THREAD_SECRET" not in saved.merged("prd", {})
