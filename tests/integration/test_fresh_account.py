"""A first deploy on a new AWS account, rehearsed on the emulator's fresh-account model
(common/local/fresh.py), and each rule of that model.

The documented procedure (docs/deploy.md, "A first deploy"): ``deploy`` exits 3 and writes the zone;
``dns publish`` of it; ``deploy`` exits 0; ``status --json`` says ready; nothing in any DLQ. The images are
given as tests/support/deploy.py gives them (the push runs in tests/docker).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from common.aws import client, reset_clients
from common.local import fresh
from common.local.guard import admin_request
from common.ops.cli import main as cli
from deploy.main import Options, WaitingOnDnsError, deploy
from tests.support.deploy import ACCOUNT, PREFIX, images

CONFIG_SET = f"arn:aws:ses:us-east-1:{ACCOUNT}:configuration-set/{PREFIX}"


@pytest.fixture
def account(
    moto_server: str, local_defaults: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """A reset emulator modelling a fresh account, and a production configuration in this process's
    environment (as a user's shell has it for the CLI)."""
    import secrets

    urllib.request.urlopen(admin_request(moto_server + "/moto-api/reset", method="POST")).read()
    fresh.set_fresh(True)
    values = {k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"}
    env = {**values, "THREAD_SECRET": secrets.token_hex(32), "MAX_SEND_RATE": "14", "AWS_REGION": "us-east-1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    reset_clients()
    yield env
    fresh.set_fresh(False)


def run(env: dict[str, str], build: Path, lines: list[str]) -> Any:
    return deploy(Options(build_dir=build), env, report=lines.append, images=images())


def status(capsys: Any) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli(["status", "--env", "prd", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_first_deploy_procedure_on_a_fresh_account(
    account: dict[str, str], moto_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[str] = []
    with pytest.raises(WaitingOnDnsError) as waiting:
        run(account, tmp_path, lines)
    assert WaitingOnDnsError.EXIT_CODE == 3
    zone = tmp_path / "prd" / "dns.zone"
    assert str(zone) in str(waiting.value) and zone.exists() and (tmp_path / "prd" / "dns.json").exists()
    assert "_amazonses.example.com.\t1800\tIN\tTXT" in zone.read_text()
    assert (
        client("lambda").list_functions()["Functions"] == []
    )  # stopped before anything that needs verification
    assert (
        client("ses")
        .get_identity_mail_from_domain_attributes(Identities=["example.com"])["MailFromDomainAttributes"][
            "example.com"
        ]
        .get("MailFromDomain")
        is None
    )
    code, report = status(capsys)
    assert code == 1 and report["ready"] is False and any("domain identity" in r for r in report["reasons"])

    assert cli(["dns", "publish", str(zone), "--endpoint", moto_server]) == 0
    run(account, tmp_path, lines)  # verifies on this poll, sets MAIL FROM, deploys everything
    attrs = client("ses").get_identity_mail_from_domain_attributes(Identities=["example.com"])[
        "MailFromDomainAttributes"
    ]["example.com"]
    assert attrs["BehaviorOnMXFailure"] == "UseDefaultValue" and attrs["MailFromDomainStatus"] == "Success"

    assert any("above this account's SES sending rate" in line for line in lines)
    sender = client("lambda").get_function_configuration(FunctionName=f"{PREFIX}-forward-sender")
    assert (
        sender["Environment"]["Variables"]["MAX_SEND_RATE"] == "1"
    )  # the sandbox's rate, not the 14 asked for

    code, report = status(capsys)
    assert (code, report["ready"], report["reasons"]) == (0, True, [])
    assert report["send_rate"] == "1"
    assert report["sandbox"] is True and report["send_quota"]["Max24HourSend"] == 200.0
    sent = report["send_quota"]["SentLast24Hours"]
    assert report["daily_quota_used_percent"] == round(100 * sent / 200, 1)
    [sending] = [c for c in report["checks"] if c["check"] == "sending"]
    assert (
        f"{sent:g} of 200 in 24 h ({report['daily_quota_used_percent']:g}% of the day's quota used)"
        in sending["value"]
    )
    assert set(report["versions"]) == {
        "inbound-handler",
        "reply-handler",
        "attachment-extractor",
        "ack-sender",
        "forward-sender",
        "reply-sender",
    } and all(report["versions"].values())
    assert report["dlq_depths"] and not any(report["dlq_depths"].values())  # nothing in any DLQ
    # On this 10-concurrency account one mail, however many attachments, stays within the limit: the
    # extractor is capped by its queue's event source (deploy.triggers.worst_case_concurrency).
    from deploy.preflight import load_config
    from deploy.triggers import worst_case_concurrency

    worst = worst_case_concurrency(load_config(account, "prd", "us-east-1", ACCOUNT), ACCOUNT)
    assert min(worst.values()) >= 1 and sum(worst.values()) <= fresh.ACCOUNT_CONCURRENCY

    topic = f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-ses-feedback"
    policy = client("sns").get_topic_attributes(TopicArn=topic)["Attributes"]["Policy"]
    assert fresh.ses_may_publish(policy, topic, CONFIG_SET)
    assert not fresh.ses_may_publish(
        policy, topic, CONFIG_SET.replace(ACCOUNT, "210987654321")
    )  # another account's set


def test_wait_polls_with_a_progress_line_until_ses_verifies(
    account: dict[str, str], moto_server: str, tmp_path: Path
) -> None:
    lines: list[str] = []
    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, lines)  # the zone to publish
    zone = (tmp_path / "prd" / "dns.zone").read_text()
    lines.clear()

    def report(line: str) -> None:  # the user publishes the records while the deploy waits
        lines.append(line)
        if line.startswith("[deploy] waiting for SES"):
            fresh.publish(zone)

    deploy(Options(build_dir=tmp_path, wait_s=60, poll_s=0.3), account, report=report, images=images())
    assert any(
        line.startswith("[deploy] waiting for SES to verify example.com: Pending, checking every 0.3 s")
        for line in lines
    )
    assert "[deploy] SES verified example.com" in lines
    assert client("lambda").list_functions()["Functions"]


def test_the_deployer_policies_are_managed_and_within_the_quota(
    account: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from deploy.iam import deployer_policies
    from deploy.preflight import load_config

    cfg = load_config(account, "prd", "us-east-1", ACCOUNT)
    documents = deployer_policies(cfg, ACCOUNT)
    assert all(fresh.policy_size(d) <= fresh.MANAGED_LIMIT for d in documents)
    iam = client("iam")
    iam.create_user(UserName="deployer")
    with pytest.raises(ClientError, match="LimitExceeded"):  # what the old instructions did
        iam.put_user_policy(UserName="deployer", PolicyName="deploy", PolicyDocument=json.dumps(documents[0]))
    for document in documents:  # what --print-deployer-policy says to do
        arn = iam.create_policy(
            PolicyName=f"deploy-{len(document['Statement'])}", PolicyDocument=json.dumps(document)
        )
        iam.attach_user_policy(UserName="deployer", PolicyArn=arn["Policy"]["Arn"])
    capsys.readouterr()
    assert cli(["deploy", "--print-deployer-policy"]) == 0
    out, err = capsys.readouterr()
    assert all(len(line) <= 6144 for line in out.splitlines())  # as printed, not only as IAM counts it
    printed = [json.loads(line) for line in out.splitlines()]
    assert all(fresh.policy_size(d) <= 6144 for d in printed)
    assert "aws iam create-policy" in err and "aws iam attach-user-policy" in err


def statement(n: int) -> dict[str, Any]:
    return {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::bucket-{n:04d}/{'k' * 40}/*",
    }


def test_iam_policy_size_quotas(account: dict[str, str]) -> None:
    iam = client("iam")
    iam.create_user(UserName="u")
    iam.put_user_policy(
        UserName="u",
        PolicyName="a",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [statement(1)]}),
    )
    big = {"Version": "2012-10-17", "Statement": [statement(n) for n in range(25)]}  # ~2,600 characters
    with pytest.raises(ClientError, match="LimitExceeded"):
        iam.put_user_policy(UserName="u", PolicyName="b", PolicyDocument=json.dumps(big))
    with pytest.raises(ClientError, match="LimitExceeded"):
        iam.create_policy(
            PolicyName="huge",
            PolicyDocument=json.dumps({**big, "Statement": [statement(n) for n in range(60)]}),
        )
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    iam.create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps(trust))
    for name in "abc":  # 3 x ~2,600 fit the role's 10,240 ...
        iam.put_role_policy(RoleName="r", PolicyName=name, PolicyDocument=json.dumps(big))
    with pytest.raises(ClientError, match="LimitExceeded"):  # ... a fourth does not
        iam.put_role_policy(RoleName="r", PolicyName="d", PolicyDocument=json.dumps(big))


def verified_domain(moto_server: str, mail_from_behaviour: str | None = None) -> None:
    ses = client("ses")
    ses.verify_domain_identity(Domain="example.com")
    ses.verify_domain_dkim(Domain="example.com")
    token = ses.get_identity_verification_attributes(Identities=["example.com"])["VerificationAttributes"][
        "example.com"
    ]["VerificationToken"]
    fresh.publish(f'_amazonses.example.com. 1800 IN TXT "{token}"\n')
    assert (
        ses.get_identity_verification_attributes(Identities=["example.com"])["VerificationAttributes"][
            "example.com"
        ]["VerificationStatus"]
        == "Success"
    )
    if mail_from_behaviour:
        ses.set_identity_mail_from_domain(
            Identity="example.com",
            MailFromDomain="bounce.example.com",
            BehaviorOnMXFailure=mail_from_behaviour,
        )


def test_identities_start_pending_and_mail_from_needs_a_verified_identity(
    account: dict[str, str], moto_server: str
) -> None:
    ses = client("ses")
    ses.verify_domain_identity(Domain="example.com")
    assert (
        ses.get_identity_verification_attributes(Identities=["example.com"])["VerificationAttributes"][
            "example.com"
        ]["VerificationStatus"]
        == "Pending"
    )
    with pytest.raises(ClientError, match="not verified"):
        ses.set_identity_mail_from_domain(
            Identity="example.com", MailFromDomain="bounce.example.com", BehaviorOnMXFailure="UseDefaultValue"
        )


def send(to: str = "owner@example.net", ses: Any = None) -> Any:
    return (ses or client("ses")).send_raw_email(
        Source="hello@example.com",
        Destinations=[to],
        RawMessage={
            "Data": b"From: hello@example.com\r\nTo: " + to.encode() + b"\r\nSubject: s\r\n\r\nbody\r\n"
        },
    )


def test_reject_message_refuses_sends_while_mail_from_is_pending_and_use_default_value_does_not(
    account: dict[str, str], moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client("ses").verify_email_identity(EmailAddress="owner@example.net")  # the sandbox's verified recipient
    verified_domain(moto_server, "RejectMessage")
    with pytest.raises(ClientError, match="MailFromDomainNotVerified"):
        send()
    client("ses").set_identity_mail_from_domain(
        Identity="example.com", MailFromDomain="bounce.example.com", BehaviorOnMXFailure="UseDefaultValue"
    )
    send()


def test_the_sandbox_sends_to_verified_recipients_one_a_second_and_200_a_day(
    account: dict[str, str], moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from botocore.config import Config

    # one attempt: botocore would retry Throttling, and a retry a second later is allowed again
    once = boto3.client(
        "ses",
        endpoint_url=moto_server,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    client("ses").verify_email_identity(EmailAddress="owner@example.net")
    verified_domain(moto_server)
    with pytest.raises(ClientError, match="not verified"):
        send("stranger@example.org", once)
    send(ses=once)
    with pytest.raises(ClientError, match="Maximum sending rate exceeded"):
        send(ses=once)
    monkeypatch.setattr(fresh, "SANDBOX_DAILY", 1)
    monkeypatch.setattr(fresh, "SANDBOX_RATE", 1e9)
    with pytest.raises(ClientError, match="Daily message quota exceeded"):
        send(ses=once)
    assert client("sesv2").get_account()["SendQuota"]["SentLast24Hours"] == 1.0


def test_dkim_and_mail_from_verify_only_on_a_poll_after_the_records_are_published(
    account: dict[str, str], moto_server: str
) -> None:
    ses = client("ses")
    verified_domain(moto_server, "UseDefaultValue")
    tokens = ses.get_identity_dkim_attributes(Identities=["example.com"])["DkimAttributes"]["example.com"]
    assert tokens["DkimVerificationStatus"] == "Pending"
    fresh.publish(
        "\n".join(
            f"{t}._domainkey.example.com. 1800 IN CNAME {t}.dkim.amazonses.com." for t in tokens["DkimTokens"]
        )
        + "\nbounce.example.com. 1800 IN MX 10 "
        "feedback-smtp.us-east-1.amazonses.com.\n"
    )
    assert (
        ses.get_identity_dkim_attributes(Identities=["example.com"])["DkimAttributes"]["example.com"][
            "DkimVerificationStatus"
        ]
        == "Success"
    )
    assert (
        ses.get_identity_mail_from_domain_attributes(Identities=["example.com"])["MailFromDomainAttributes"][
            "example.com"
        ]["MailFromDomainStatus"]
        == "Success"
    )


def test_reservations_must_leave_ten_unreserved_on_a_ten_concurrency_account(
    account: dict[str, str], tmp_path: Path
) -> None:
    fresh.set_fresh(False)  # deploy on a kind account, then model the new one's Lambda quota
    deploy(Options(build_dir=tmp_path), account, report=lambda line: None, images=images())
    fresh.set_fresh(True)
    with pytest.raises(ClientError, match="below its minimum value of \\[10\\]"):
        client("lambda").put_function_concurrency(
            FunctionName=f"{PREFIX}-attachment-extractor", ReservedConcurrentExecutions=2
        )


def test_dns_publish_is_refused_when_the_emulator_models_no_fresh_account(
    account: dict[str, str], moto_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zone = tmp_path / "x.zone"
    zone.write_text('_amazonses.example.com. 1800 IN TXT "t"\n')
    fresh.set_fresh(False)
    assert cli(["dns", "publish", str(zone), "--endpoint", moto_server]) == 2
    assert "--account fresh" in capsys.readouterr().err


def test_a_domain_ses_could_not_verify_is_a_one_line_error_with_what_to_do(
    account: dict[str, str], moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from deploy.errors import DeployError
    from tests.support.sesproxy import SesProxy

    # after 72 hours without the records SES marks the identity Failed; the proxy answers so
    proxy = SesProxy(
        moto_server,
        rewrite=lambda params, body: (
            body.replace(b"Pending", b"Failed")
            if params.get("Action") == "GetIdentityVerificationAttributes"
            else body
        ),
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_SES", proxy.url)
    reset_clients()
    try:
        with pytest.raises(DeployError, match="could not verify example.com \\(status Failed\\)") as err:
            run(account, tmp_path, [])
        assert (
            not isinstance(err.value, WaitingOnDnsError) and "aws ses verify-domain-identity" in err.value.fix
        )
    finally:
        proxy.close()
        monkeypatch.delenv("AWS_ENDPOINT_URL_SES")
        reset_clients()
