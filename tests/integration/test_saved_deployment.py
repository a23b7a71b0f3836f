"""The saved deployment (deploy/saved.py): after the first deploy a new shell, with nothing exported but
its credentials, runs `email-handler status` and reads the right deployment; a later deploy reads the
same settings; exported variables win; the secret is never written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deploy import saved
from deploy.main import Options, deploy
from local.env import admin_credentials
from ops.main import main as cli
from tests.conftest import REPO
from tests.support.deploy import PREFIX, changed, images

# `email-handler` itself, with the saved settings in this test's folder instead of the project's
# .email-handler/ (the autouse fixture of tests/conftest.py cannot reach another process).
RUNNER = (
    "import pathlib, sys; import deploy.saved as s; s.DIR = pathlib.Path(sys.argv[1]); "
    "from ops.main import main; sys.exit(main(sys.argv[2:]))"
)


def new_shell(moto_server: str, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A new shell: credentials and the emulator's endpoint only, no DOMAIN_NAME, no AWS_REGION, no
    profile (HOME points nowhere, so no ~/.aws/config gives a Region either)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(folder / "home"),
        "AWS_ENDPOINT_URL": moto_server,
        **admin_credentials(),
    }
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(folder), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_new_shell_runs_status_with_nothing_exported_after_the_first_deploy(
    env: dict[str, str],
    moto_server: str,
    tmp_path: Path,
    saved_deployments: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = new_shell(moto_server, saved_deployments, "status", "--env", "prd", "--json")
    assert before.returncode == 2 and "no AWS region" in before.stderr  # nothing saved yet: it says so

    lines: list[str] = []
    deploy(Options(build_dir=tmp_path), env, report=lines.append, images=images())
    file = saved_deployments / "prd.json"
    assert f"[deploy] settings saved in {file} (a new shell needs nothing exported)" in lines
    text = file.read_text()
    assert env["THREAD_SECRET"] not in text and "THREAD_SECRET" not in json.loads(text)["settings"]
    settings = json.loads(text)["settings"]
    assert settings["DOMAIN_NAME"] == "example.com" and settings["PRIVATE_EMAIL"] == env["PRIVATE_EMAIL"]
    assert settings["PUBLIC_EMAIL"] == env["PUBLIC_EMAIL"] and settings["MAX_SEND_RATE"] == "14"

    done = new_shell(moto_server, saved_deployments, "status", "--env", "prd", "--json")
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)
    assert (report["deployment"], report["region"], report["domain"]) == (PREFIX, "us-east-1", "example.com")
    assert report["owner_address"]["address"] == env["PRIVATE_EMAIL"]
    assert all(report["versions"].values())  # it found the deployed functions
    # the same answer as the shell that has everything exported
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = cli(["status", "--env", "prd", "--json"])
    exported = json.loads(capsys.readouterr().out)
    assert (code, exported["ready"], exported["reasons"]) == (
        done.returncode,
        report["ready"],
        report["reasons"],
    )

    # a later deploy from a shell without the settings finds the same stack: nothing to change
    later = deploy(Options(build_dir=tmp_path), {}, report=lambda line: None, images=images())
    assert changed(later) == []


def test_exported_variables_win_over_the_saved_ones(
    env: dict[str, str], moto_server: str, tmp_path: Path, saved_deployments: Path
) -> None:
    deploy(Options(build_dir=tmp_path), env, report=lambda line: None, images=images())
    done = new_shell(moto_server, saved_deployments, "status", "--env", "prd", "--json")
    assert json.loads(done.stdout)["owner_address"]["address"] == env["PRIVATE_EMAIL"]
    merged = saved.merged("prd", {"PRIVATE_EMAIL": "second@mailbox.example", "AWS_REGION": "eu-west-1"})
    assert merged["PRIVATE_EMAIL"] == "second@mailbox.example" and merged["AWS_REGION"] == "eu-west-1"
    assert merged["DOMAIN_NAME"] == "example.com"  # what the shell does not say comes from the file
    assert saved.merged("prd", {}, cli_region="eu-west-1").get("AWS_REGION") is None  # --region wins
