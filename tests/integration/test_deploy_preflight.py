"""`email-handler deploy`, the checks before anything changes: clear errors for a missing setting, a
stopped Docker engine, an unverified SES domain (with the DNS records to publish), a bucket name
another account holds, and what the deploy says about SES's sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.aws import client, reset_clients
from deploy.errors import DeployError
from deploy.main import Options, WaitingOnDnsError, deploy
from tests.support.deploy import (
    as_user,
    deployer_user,
    run,
)
from tests.support.sesproxy import SesProxy


def test_clear_errors_before_anything_changes(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(DeployError, match="region mismatch") as err:
        run({**env, "AWS_REGION": "eu-west-1"}, region="us-east-1")
    assert "what to do" in str(err.value)
    with pytest.raises(DeployError, match="development secret"):
        run({**env, "THREAD_SECRET": "dev-only-thread-secret-do-not-deploy"})
    with pytest.raises(DeployError, match="THREAD_SECRET has 20 characters"):
        run({**env, "THREAD_SECRET": "x" * 20})
    with pytest.raises(DeployError, match="DOMAIN_NAME"):
        run({k: v for k, v in env.items() if k != "DOMAIN_NAME"})
    assert client("lambda").list_functions()["Functions"] == []

    # No credentials anywhere botocore looks.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    reset_clients()
    try:
        with pytest.raises(DeployError, match="no AWS credentials found"):
            run(env)
    finally:
        monkeypatch.undo()
        reset_clients()


def test_docker_engine_not_running_is_a_clear_error(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DeployError, match="Docker engine is not reachable") as err:
        deploy(Options(), env, report=lambda line: None)  # no images given: it must build and push
    assert "systemctl start docker" in str(err.value)


def test_an_unverified_ses_domain_stops_the_deploy_with_the_dns_records(
    env: dict[str, str], moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client("ses").verify_domain_identity(Domain="example.com")
    client("ses").verify_domain_dkim(Domain="example.com")
    # moto verifies at once; the proxy answers as SES does while the DNS records are missing.
    proxy = SesProxy(
        moto_server,
        rewrite=lambda params, body: (
            body.replace(b"Success", b"Pending")
            if params.get("Action") in ("GetIdentityVerificationAttributes", "GetIdentityDkimAttributes")
            else body
        ),
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_SES", proxy.url)
    reset_clients()
    try:
        lines: list[str] = []
        with pytest.raises(WaitingOnDnsError, match="status Pending") as err:
            run(env, lines=lines, build_dir=tmp_path)
        printed = "\n".join(lines)
        assert "_amazonses.example.com" in printed and "._domainkey.example.com" in printed
        assert "MX    example.com  10 inbound-smtp.us-east-1.amazonaws.com" in printed
        assert str(tmp_path / "prd" / "dns.zone") in str(err.value)
        zone = (tmp_path / "prd" / "dns.zone").read_text()
        assert "example.com.\t1800\tIN\tMX\t10 inbound-smtp.us-east-1.amazonaws.com." in zone
        assert json.loads((tmp_path / "prd" / "dns.json").read_text())["domain"] == "example.com"
        assert client("lambda").list_functions()["Functions"] == []
        changes, _ = run(env, allow_unverified=True, build_dir=tmp_path)  # the owner may go ahead on purpose
        assert any(c.kind == "lambda-function" and c.action == "create" for c in changes)
        assert not any(
            c.kind == "ses-mail-from" for c in changes
        )  # SES sets MAIL FROM on a verified identity only
    finally:
        proxy.close()
        monkeypatch.delenv("AWS_ENDPOINT_URL_SES")
        reset_clients()


def test_the_deploy_says_whether_ses_is_in_the_sandbox(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from local.iam import SES_SANDBOX

    monkeypatch.setitem(SES_SANDBOX, "on", True)  # sesv2 GetAccount: ProductionAccessEnabled false
    _, lines = run(env)
    [note] = [line for line in lines if "SES" in line and "sandbox" in line]
    assert (
        "SES is in the sandbox in us-east-1" in note and "owner@example.net" in note
    )  # verify the owner's mailbox
    monkeypatch.setitem(SES_SANDBOX, "on", False)
    assert "[deploy] SES production access: yes" in run(env)[1]


def test_a_bucket_name_taken_by_another_account_is_a_clear_error_before_anything_changes(
    env: dict[str, str], moto_server: str
) -> None:
    # Another account's bucket: to this deployer HeadBucket answers 403, as AWS does for a name owned
    # elsewhere.
    client("s3").create_bucket(Bucket="taken-by-someone-else")
    deployer = deployer_user(env)
    with pytest.raises(DeployError, match="belongs to another AWS account") as err:
        as_user(deployer, lambda: run({**env, "EMAIL_BUCKET": "taken-by-someone-else"}))
    assert "EMAIL_BUCKET" in str(err.value)
    assert client("lambda").list_functions()["Functions"] == []
