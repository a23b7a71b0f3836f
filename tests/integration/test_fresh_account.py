"""A first deploy on a new AWS account, rehearsed on the emulator's fresh-account model
(local/fresh.py), and each rule of that model.

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
from deploy.main import Options, WaitingOnDnsError, deploy
from local import fresh
from local.guard import admin_request
from ops.main import main as cli
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
    # A test may have deployed to another Region: the next file on this worker must not inherit its
    # clients (the environment itself is restored by monkeypatch).
    reset_clients()


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
    assert code == 1 and not report["ready"]  # the sandbox: forwards wait for PRIVATE_EMAIL's link
    assert any(r.startswith("owner's address: owner@example.net Pending") for r in report["reasons"])
    assert cli(["model", "verify-address", "owner@example.net", "--endpoint", moto_server]) == 0
    assert cli(["model", "grant-production", "--endpoint", moto_server]) == 0
    code, report = status(capsys)
    assert (code, report["ready"], report["reasons"]) == (0, True, [])
    assert report["send_rate"] == "1"
    assert report["sandbox"] is False and report["send_quota"]["Max24HourSend"] == 50000.0
    sent = report["send_quota"]["SentLast24Hours"]
    assert report["daily_quota_used_percent"] == round(100 * sent / 50000, 1)
    [sending] = [c for c in report["checks"] if c["check"] == "sending"]
    assert (
        f"{sent:g} of 50000 in 24 h ({report['daily_quota_used_percent']:g}% of the day's quota used)"
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
    assert fresh.click("owner@example.net")  # its owner clicks SES's link
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
    assert fresh.click("owner@example.net")
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


def test_reservations_must_leave_the_documented_100_unreserved_on_a_ten_concurrency_account(
    account: dict[str, str], tmp_path: Path
) -> None:
    fresh.set_fresh(False)  # deploy on a kind account, then model the new one's Lambda quota
    deploy(Options(build_dir=tmp_path), account, report=lambda line: None, images=images())
    fresh.set_fresh(True)
    with pytest.raises(ClientError, match="below its minimum value of \\[100\\]"):
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


# The senders of a first-hour test: the sandbox's rate, and held mail visible again within a second.
SENDERS_ENV = {"MAX_SEND_RATE": "1", "SANDBOX_WAIT_SECONDS": "1", "RETRY_DELAYS_SECONDS": "0,1.1,2.2"}


def new_account(local_defaults: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """From here on the account is a new one (the local stack is provisioned already), and this process's
    environment the production configuration a user's shell exports."""
    import secrets

    fresh.set_fresh(True)
    env = {k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"}
    env |= {"THREAD_SECRET": secrets.token_hex(32), "MAX_SEND_RATE": "14", "AWS_REGION": "us-east-1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    reset_clients()
    return env


@pytest.mark.timeout(600)
def test_the_first_hour_on_a_new_account(
    stack: Any,
    moto_server: str,
    local_defaults: dict[str, str],
    rie_function: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The first hour, step by step as docs/deploy.md tells it, on one new account with IAM enforced.
    The deployment (``prd``) is read by ``status`` as a user reads it; the mail flows through the
    functions under the RIE, each with its production role, on the local stack that shares the
    account's SES state (moto cannot run the deployed image functions). Nothing reaches a DLQ at any
    step."""
    import time

    from common.runtime.config import dlq_name
    from tests.support.mailgen import mail

    env = new_account(local_defaults, monkeypatch)
    cfg, owner, contact = stack.cfg, "owner@example.net", "jane@corp.example"

    def no_dlq(report: dict[str, Any] | None = None) -> None:
        local = [stack.depth(dlq_name(q)) for q in (cfg.ack_queue, cfg.forward_queue, cfg.reply_queue)]
        assert local == [0, 0, 0] and not any((report or {}).get("dlq_depths", {}).values())

    try:
        # 1. the first deploy exits 3 and writes the zone
        with pytest.raises(WaitingOnDnsError):
            run(env, tmp_path, [])
        zone = tmp_path / "prd" / "dns.zone"
        assert zone.exists()
        # 2. `dns publish`, then the second deploy
        assert cli(["dns", "publish", str(zone), "--endpoint", moto_server]) == 0
        run(env, tmp_path, [])
        # 3. status is not ready and names PRIVATE_EMAIL's verification
        code, report = status(capsys)
        assert code == 1 and not report["ready"]
        assert any(r.startswith(f"owner's address: {owner} Pending") for r in report["reasons"])
        no_dlq(report)
        # 4. the address is confirmed: forwarding works, replies only to verified addresses
        assert cli(["model", "verify-address", owner, "--endpoint", moto_server]) == 0
        code, report = status(capsys)
        flows = {f["flow"]: f for f in report["flows"]}
        assert flows["forwarding to the owner"]["ok"] and not flows["acks and replies to anyone"]["ok"]
        assert "only to verified addresses" in flows["acks and replies to anyone"]["next"]
        no_dlq(report)
        # 5. a contact's mail reaches the owner; its ack is held for the sandbox and recorded
        inbound = rie_function("inbound-handler")
        result = inbound.invoke(
            stack.receipt(mail(subject="Role"), "0000000000000000000000000000000000000f01")
        )
        assert result["status"] == "forwarded" and result["ack"] is False
        forward_sender = rie_function("forward-sender", env=SENDERS_ENV)
        stack.run_sender(forward_sender, cfg.forward_queue)
        [forward] = stack.sent()
        assert forward.destinations == [owner]
        assert "No automatic acknowledgement was sent: SES is in the sandbox" in forward.raw.decode()
        record = stack.conversation("jane-at-corp.example") or {}
        assert record["ackStatus"].startswith(f"not sent: SES is in the sandbox and {contact}")
        assert stack.depth(cfg.ack_queue) == 0
        no_dlq()
        # 6. the owner's reply to that contact is kept, with a notice to the owner
        thread = str(forward.message["Reply-To"])
        reply = mail(sender="Owner Name <owner@example.net>", to=thread, subject="Re: Role", text="Tuesday?")
        replied = rie_function("reply-handler").invoke(
            stack.receipt(reply, "0000000000000000000000000000000000000f02", to=thread, source=owner)
        )
        assert replied["status"] == "queued"
        reply_sender = rie_function("reply-sender", env=SENDERS_ENV)
        stack.run_sender(reply_sender, cfg.reply_queue)
        # The notice goes to the owner through forward-sender, the sender that holds the owner's key.
        stack.run_sender(forward_sender, cfg.forward_queue)
        notice = stack.sent()[-1]
        assert len(stack.sent()) == 2 and notice.destinations == [owner]
        assert notice.message["Subject"] == "Not sent yet: Re: Role"
        no_dlq()
        # 7. production access is granted; the held reply goes out exactly once
        assert cli(["model", "grant-production", "--endpoint", moto_server]) == 0
        time.sleep(1.2)  # SANDBOX_WAIT_SECONDS: the held reply is visible again
        stack.run_sender(reply_sender, cfg.reply_queue)
        time.sleep(1.2)
        assert stack.run_sender(reply_sender, cfg.reply_queue) == []
        to_contact = [m for m in stack.sent() if m.destinations == [contact]]
        assert len(to_contact) == 1 and "Tuesday?" in to_contact[0].raw.decode()
        no_dlq()
        # 8. status says ready
        code, report = status(capsys)
        assert (code, report["ready"], report["reasons"]) == (0, True, [])
        no_dlq(report)
        assert cli(["model", "confirm-subscriptions", "--endpoint", moto_server]) == 0
        assert all(f["ok"] for f in status(capsys)[1]["flows"])  # and the alerts reach the owner
    finally:
        fresh.set_fresh(False)


def test_an_address_identity_waits_for_its_link_and_only_an_existing_one_can_be_clicked(
    account: dict[str, str], moto_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sesv2, ses = client("sesv2"), client("ses")
    sesv2.create_email_identity(EmailIdentity="owner@example.net")

    def state() -> tuple[str, bool]:
        attrs = ses.get_identity_verification_attributes(Identities=["owner@example.net"])
        status = attrs["VerificationAttributes"]["owner@example.net"]["VerificationStatus"]
        return status, sesv2.get_email_identity(EmailIdentity="owner@example.net")["VerifiedForSendingStatus"]

    assert state() == ("Pending", False)  # moto's kind account verified it at once
    assert cli(["model", "verify-address", "nobody@example.net", "--endpoint", moto_server]) == 2
    assert "SES sent no link" in capsys.readouterr().err
    assert cli(["model", "verify-address", "owner@example.net", "--endpoint", moto_server]) == 0
    assert state() == ("Success", True)
    sesv2.delete_email_identity(EmailIdentity="owner@example.net")
    sesv2.create_email_identity(EmailIdentity="owner@example.net")
    assert state() == ("Pending", False)  # created again: a new link, a new click


@pytest.mark.timeout(600)
def test_the_owners_reply_self_test_in_the_sandbox(
    stack: Any,
    moto_server: str,
    local_defaults: dict[str, str],
    rie_function: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/deploy.md, "Test a reply", on a new account in the SES sandbox with IAM enforced: the owner's
    answer to mail from PRIVATE_EMAIL is refused as a loop with a notice that says what to do instead;
    `ses verify-address` makes a second mailbox of the owner's a test contact (pending until its link is
    clicked); it writes, the owner replies, and the reply reaches it exactly once, without production
    access. `status` says at each step where the test contact stands."""
    import time

    from tests.support.mailgen import mail

    env = new_account(local_defaults, monkeypatch)
    cfg, owner, second = stack.cfg, "owner@example.net", "me@second-mailbox.example"
    try:
        with pytest.raises(WaitingOnDnsError):
            run(env, tmp_path, [])
        assert cli(["dns", "publish", str(tmp_path / "prd" / "dns.zone"), "--endpoint", moto_server]) == 0
        run(env, tmp_path, [])
        assert cli(["model", "verify-address", owner, "--endpoint", moto_server]) == 0
        [contacts] = [c for c in status(capsys)[1]["checks"] if c["check"] == "test contacts"]
        assert contacts["value"] == "none" and "email-handler ses verify-address" in contacts["detail"]
        inbound, forwarder = rie_function("inbound-handler"), rie_function("forward-sender", env=SENDERS_ENV)
        replier, reply_sender = rie_function("reply-handler"), rie_function("reply-sender", env=SENDERS_ENV)

        def write(sender: str, subject: str, mid: str, ack: bool) -> str:
            """A mail to the public address, forwarded to the owner; the forward's thread address."""
            result = inbound.invoke(stack.receipt(mail(sender=sender, subject=subject), mid, source=sender))
            assert (result["status"], result["ack"]) == ("forwarded", ack), result
            stack.run_sender(forwarder, cfg.forward_queue)
            forward = stack.sent()[-1]
            assert forward.destinations == [owner] and subject in str(forward.message["Subject"])
            return str(forward.message["Reply-To"])

        def answer(thread: str, text: str, mid: str) -> dict[str, Any]:
            raw = mail(sender=f"Owner Name <{owner}>", to=thread, subject="Re: test", text=text)
            return dict(replier.invoke(stack.receipt(raw, mid, to=thread, source=owner)))

        # the first test anyone tries: from PRIVATE_EMAIL itself. The answer is not sent (a loop), and the
        # owner's notice says what to do instead.
        thread = write(
            f"Owner Name <{owner}>", "From myself", "0000000000000000000000000000000000000e01", False
        )
        shown = " ".join(
            str(p.get_content())
            for p in stack.sent()[-1].message.walk()
            if p.get_content_type() == "text/plain"
        )
        assert "This came from your own mailbox: a reply to it is not sent" in " ".join(shown.split())
        refused = answer(thread, "Does this reach me?", "0000000000000000000000000000000000000e02")
        assert refused["status"] == "rejected" and "ses verify-address" in refused["reason"]
        stack.run_sender(forwarder, cfg.forward_queue)
        notice = stack.sent()[-1]
        assert notice.destinations == [owner]
        assert "a second mailbox of yours" in notice.raw.decode() and "email-handler ses verify-address" in (
            notice.raw.decode()
        )

        # the self-test: a second mailbox, verified
        assert cli(["ses", "verify-address", second]) == 0
        assert "mailed verification link" in capsys.readouterr().out
        [contacts] = [c for c in status(capsys)[1]["checks"] if c["check"] == "test contacts"]
        assert contacts["value"] == f"{second} Pending" and not contacts["ok"]
        assert cli(["model", "verify-address", second, "--endpoint", moto_server]) == 0  # its link clicked
        code, report = status(capsys)
        assert code == 1 and report["test_contacts"] == {second: "Success"}  # the sandbox: not ready
        thread = write(f"Me <{second}>", "Reply test", "0000000000000000000000000000000000000e03", True)
        queued = answer(thread, "It works.", "0000000000000000000000000000000000000e04")
        assert queued["status"] == "queued", queued
        stack.run_sender(reply_sender, cfg.reply_queue)
        time.sleep(1.2)  # SANDBOX_WAIT_SECONDS: nothing held comes back either
        assert stack.run_sender(reply_sender, cfg.reply_queue) == []
        replies = [m for m in stack.sent() if m.destinations == [second] and "It works." in m.raw.decode()]
        assert len(replies) == 1 and replies[0].message["From"].addresses[0].addr_spec == cfg.public_email
        assert not [m for m in stack.sent() if str(m.message["Subject"]).startswith("Not sent yet")]
        assert client("sesv2").get_account()["ProductionAccessEnabled"] is False  # all in the sandbox
    finally:
        fresh.set_fresh(False)
