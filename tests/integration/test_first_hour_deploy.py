"""The first deploy on a new account, finding by finding, on the fresh-account model with IAM
enforced: the plan of a new account is the run's changes and says it stops with exit 3; the deploy creates
PRIVATE_EMAIL's identity and the deployer may create that one only; the feedback topic's policy is put
before the event destination; SES's events reach the topic only as its policy allows. (The Region's check:
tests/integration/test_regions.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from common.aws import client
from deploy.errors import DeployError
from deploy.main import Options, WaitingOnDnsError, deploy, plan_lines
from local import fresh
from ops.main import main as cli
from tests.integration.test_fresh_account import account, run  # noqa: F401  (the fixture)
from tests.support.deploy import ACCOUNT, PREFIX, as_user, deployer_user, images

OWNER = "owner@example.net"


def changes(lines: list[str]) -> list[str]:
    """The change lines of a report, without the verb tense."""
    kinds = ("create ", "update ", "delete ")
    return [
        line.removeprefix("[deploy] ") for line in lines if line.removeprefix("[deploy] ").startswith(kinds)
    ]


def test_a_new_accounts_plan_lists_the_runs_changes_and_says_it_stops_with_exit_3(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    planned: list[str] = []
    plan = deploy(Options(build_dir=tmp_path, dry_run=True), account, report=planned.append, images=images())
    assert any("stops with exit code 3 (waiting on DNS)" in line for line in planned)
    assert client("sesv2").list_email_identities()["EmailIdentities"] == []  # the plan changed nothing
    done: list[str] = []
    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, done)
    assert changes(planned) == changes(done) and changes(done)
    assert [c for c in plan_lines(plan) if c[2] != "unchanged"] == [
        (line.split()[1], line.split()[2], line.split()[0]) for line in changes(done)
    ]
    assert not any("mail-from" in line.lower() for line in changes(done))  # MAIL FROM waits for SES
    assert f"ses-identity       {OWNER}" in "\n".join(changes(done))


def test_the_deploy_creates_private_emails_identity_and_the_deployer_may_create_address_identities_only(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    deployer = deployer_user(account)
    with pytest.raises(WaitingOnDnsError):
        as_user(deployer, lambda: run(account, tmp_path, []))
    identity = client("sesv2").get_email_identity(EmailIdentity=OWNER)
    assert identity["VerifiedForSendingStatus"] is False  # SES mailed the link; it waits for the click

    def create(identity: str) -> None:
        client("sesv2").create_email_identity(EmailIdentity=identity)

    as_user(deployer, lambda: create("friend@mailbox.example"))  # a test contact (ses verify-address)
    with pytest.raises(ClientError, match="AccessDenied"):  # a domain identity: never through SESv2
        as_user(deployer, lambda: create("other.example"))


def test_the_feedback_topic_policy_is_put_before_the_event_destination_and_ses_events_obey_it(
    account: dict[str, str],  # noqa: F811
    moto_server: str,
    tmp_path: Path,
) -> None:
    lines = deployed(account, tmp_path)
    order = [line.split()[1] for line in changes(lines)]
    assert order.index("sns-topic-policy") < order.index("ses-config-set")

    fresh.click(OWNER)

    sent: list[float] = []

    def send() -> None:
        # At the sandbox's one message a second, as a client should: back-to-back sends are throttled.
        if sent:
            time.sleep(max(0.0, sent[-1] + 1.1 - time.monotonic()))
        sent.append(time.monotonic())
        client("sesv2").send_email(
            FromEmailAddress="hello@example.com",
            Destination={"ToAddresses": [OWNER]},
            Content={
                "Raw": {
                    "Data": b"From: hello@example.com\r\nTo: owner@example.net\r\nSubject: s\r\n\r\nb\r\n"
                }
            },
            ConfigurationSetName=PREFIX,
        )

    send()
    [delivered] = fresh.ses_events()
    assert delivered["delivered"] is True and delivered["topic"].endswith(f"{PREFIX}-ses-feedback")
    assert delivered["subscriptions"] == ["lambda"]  # inbound-handler's alias, recorded (no image runs here)
    topic = f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-ses-feedback"
    owner_only = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": "SNS:Publish",
                "Resource": topic,
            }
        ],
    }
    client("sns").set_topic_attributes(
        TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps(owner_only)
    )
    send()
    dropped = fresh.ses_events()[-1]
    assert dropped["delivered"] is False and "policy" in dropped["reason"]


def deployed(account: dict[str, str], tmp_path: Path) -> list[str]:  # noqa: F811
    """The two runs of a first deploy (exit 3, the zone published, the second run); the second's report."""
    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, [])
    fresh.publish((tmp_path / "prd" / "dns.zone").read_text())
    lines: list[str] = []
    run(account, tmp_path, lines)
    return lines


def test_a_receipt_rule_is_created_only_when_ses_may_write_the_bucket_and_invoke_the_function(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    from tests.support.deploy import BUCKET

    deployed(account, tmp_path)  # the bucket policy and the permissions come before the rules
    s3, ses = client("s3"), client("ses")
    assert s3.get_object(Bucket=BUCKET, Key="staging/AMAZON_SES_SETUP_NOTIFICATION")["Body"].read()
    rules = ses.describe_receipt_rule_set(RuleSetName=PREFIX)["Rules"]
    rule = next(r for r in rules if any("S3Action" in a for a in r["Actions"]))
    s3.delete_bucket_policy(Bucket=BUCKET)
    with pytest.raises(ClientError, match="InvalidS3Configuration"):
        ses.update_receipt_rule(RuleSetName=PREFIX, Rule=rule)
    run(account, tmp_path, [])  # the deploy puts the policy back, then the rule passes SES's test write
    lam = client("lambda")
    target = next(a["LambdaAction"]["FunctionArn"] for a in rule["Actions"] if "LambdaAction" in a)
    name, qualifier = target.split(":")[6], target.split(":")[7]
    for statement in json.loads(lam.get_policy(FunctionName=name, Qualifier=qualifier)["Policy"])[
        "Statement"
    ]:
        lam.remove_permission(FunctionName=name, Qualifier=qualifier, StatementId=statement["Sid"])
    with pytest.raises(ClientError, match="InvalidLambdaFunction"):
        ses.update_receipt_rule(RuleSetName=PREFIX, Rule=rule)


def test_suppression_options_refused_in_the_sandbox_are_set_by_the_deploy_after_production_access(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    lines = deployed(account, tmp_path)
    assert any("suppression options in the sandbox" in line for line in lines)
    sesv2 = client("sesv2")
    unset = sesv2.get_configuration_set(ConfigurationSetName=PREFIX).get("SuppressionOptions") or {}
    assert "SuppressedReasons" not in unset
    fresh.grant_production()
    run(account, tmp_path, [])
    options = sesv2.get_configuration_set(ConfigurationSetName=PREFIX)["SuppressionOptions"]
    assert options["SuppressedReasons"] == []  # our own list decides (deploy.resources.SUPPRESSED_REASONS)


def test_lambda_on_the_model_refuses_an_image_index_from_the_local_registry(
    account: dict[str, str],  # noqa: F811
) -> None:
    """What Docker's containerd store can push (an image index) is refused as Lambda refuses it; a
    single-platform manifest is taken. The registry is a stand-in that answers the manifest's media type."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    index, single = "sha256:" + "1" * 64, "sha256:" + "2" * 64

    class Registry(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            kind = "oci.image.index" if self.path.endswith(index) else "oci.image.manifest"
            self.send_response(200)
            self.send_header("Content-Type", f"application/vnd.{kind}.v1+json")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = client("iam").create_role(RoleName="fn", AssumeRolePolicyDocument=json.dumps(trust))["Role"][
            "Arn"
        ]
        repository = f"127.0.0.1:{server.server_address[1]}/fn"

        def create(digest: str) -> None:
            client("lambda").create_function(
                FunctionName=f"fn-{digest[7:9]}",
                PackageType="Image",
                Code={"ImageUri": f"{repository}@{digest}"},
                Role=role,
            )

        with pytest.raises(ClientError, match="media type for the source image .* is not supported"):
            create(index)
        create(single)
    finally:
        server.shutdown()


def test_every_command_the_docs_give_the_deployer_runs_under_exactly_the_printed_policy(
    account: dict[str, str],  # noqa: F811
    moto_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/deploy.md's first hour, each command as the deploying user holding exactly the policies
    `--print-deployer-policy` prints, on the fresh-account model with IAM enforced: deploy (exit 3, then
    the whole stack), status once the alert subscription is confirmed (sns:GetSubscriptionAttributes),
    ses request-production-access, ses verify-address (a new link, then a new link again), replay and
    destroy. The images are given as tests/support/deploy.py gives them (the push: tests/docker)."""
    deployer = deployer_user(account)

    def as_deployer(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = as_user(deployer, lambda: cli(list(argv)))
        out, err = capsys.readouterr()
        assert not any(d in out + err for d in ("AccessDenied", "AuthorizationError", "not authorized")), (
            out + err
        )
        return code, out

    with pytest.raises(WaitingOnDnsError):
        as_user(deployer, lambda: run(account, tmp_path, []))
    fresh.publish((tmp_path / "prd" / "dns.zone").read_text())
    as_user(deployer, lambda: run(account, tmp_path, []))
    assert cli(["model", "verify-address", OWNER, "--endpoint", moto_server]) == 0
    assert cli(["model", "confirm-subscriptions", "--endpoint", moto_server]) == 0

    code, out = as_deployer("status", "--env", "prd", "--json")
    report = json.loads(out)
    assert code == 1 and report["alert_subscription"] == "confirmed"  # read; not ready: the sandbox
    assert [r for r in report["reasons"] if r.startswith("production access")]
    console = "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
    assert report["dashboard"] == {
        "name": PREFIX,
        "url": f"{console}#dashboards/dashboard/{PREFIX}",
        "exists": True,
    }

    code, out = as_deployer("ses", "request-production-access", "--yes")
    assert code == 0 and "review PENDING" in out

    code, out = as_deployer("ses", "verify-address", "friend@mailbox.example")
    assert code == 0 and "mailed verification link to friend@mailbox.example" in out
    code, out = as_deployer("ses", "verify-address", "friend@mailbox.example")  # the link was lost
    assert code == 0 and "mailed a new verification link" in out
    assert not client("sesv2").get_email_identity(EmailIdentity="friend@mailbox.example")[
        "VerifiedForSendingStatus"
    ]
    code, out = as_deployer("ses", "verify-address", OWNER)
    assert code == 0 and "already verified" in out

    dlq = client("sqs").get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    client("sqs").send_message(
        QueueUrl=dlq,
        MessageBody=json.dumps(
            {
                "requestContext": {
                    "requestId": "r-1",
                    "functionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-inbound-handler",
                },
                "requestPayload": {"task": "quarantine-digest"},
            }
        ),
    )
    code, out = as_deployer("replay", "--env", "prd")
    # IAM allowed the Invoke (as_deployer saw no AccessDenied); moto itself cannot run an image function
    # and answers 500, so the event is kept for the next replay (tests/integration/test_deploy_destroy.py).
    assert code == 0 and ("1 replayed" in out or "(500)" in out), out

    code, out = as_deployer("destroy", "--env", "prd", "--delete-data")
    assert code == 0
    assert client("lambda").list_functions()["Functions"] == []


def test_docker_is_checked_before_the_identity_stage_changes_anything(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/deploy.md, Preflight: a deploy that could not push stops before SES's identities are made;
    a dry run does not need Docker to list the first run's changes."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(DeployError, match="the Docker engine is not reachable"):
        deploy(Options(build_dir=tmp_path), account, report=lambda line: None)
    assert client("sesv2").list_email_identities()["EmailIdentities"] == []
    planned: list[str] = []
    deploy(Options(build_dir=tmp_path, dry_run=True), account, report=planned.append)
    assert changes(planned) and any("stops with exit code 3" in line for line in planned)
