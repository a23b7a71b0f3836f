"""`email-handler deploy` against a real moto server (ECR, Lambda with PackageType=Image, IAM, SQS,
SNS, SES, S3, DynamoDB, CloudWatch): what a first deploy creates, that a second changes nothing,
that a new image updates only its function, that the dry run is the same plan, and the errors.

The image push itself runs against a local registry in tests/docker/test_deploy_push.py; here the
published images are given (the seam `deploy(images=...)`), so these tests need no Docker.
"""

from __future__ import annotations

import json
import secrets
import urllib.request
from typing import Any

import pytest

from common.aws import client, reset_clients
from common.runtime.functions import FUNCTIONS, SENDERS
from deploy.errors import DeployError
from deploy.images import Published
from deploy.main import Options, deploy, plan_lines
from tests.support.sesproxy import SesProxy

ACCOUNT = "123456789012"
PREFIX = "service-email-handler-prd"
BUCKET = f"{PREFIX}-{ACCOUNT}-us-east-1-mail"  # bucket names are global: account and region in the default


def images(digest: str = "a", only: str = "") -> dict[str, Published]:
    """Published images as the push would report them; ``only`` gives one function another digest."""
    return {f.name: Published(f.name, f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{PREFIX}-{f.name}",
                              f"c-{(digest if not only or f.name == only else 'a') * 12}",
                              "sha256:" + (digest if not only or f.name == only else "a") * 64, "x86_64")
            for f in FUNCTIONS}


@pytest.fixture
def env(moto_server, local_defaults, monkeypatch) -> dict[str, str]:
    """A clean emulator and a production configuration (the local defaults, a real secret, env prd)."""
    urllib.request.urlopen(urllib.request.Request(moto_server + "/moto-api/reset", method="POST")).read()
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # deploy pins the region for its process
    values = {k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"}
    return {**values, "THREAD_SECRET": secrets.token_hex(32), "MAX_SEND_RATE": "14"}


def run(env: dict[str, str], published: dict[str, Published] | None = None, **options: Any) -> tuple[list[Any], list[str]]:
    lines: list[str] = []
    changes = deploy(Options(**options), env, report=lines.append, images=published or images())
    return changes, lines


def test_first_deploy_plan_equals_run_and_creates_everything_with_the_right_settings(env) -> None:
    plan, plan_output = run(env, dry_run=True)
    assert "dry run" in plan_output[0]
    assert client("lambda").list_functions()["Functions"] == []  # the dry run touched nothing
    changes, _ = run(env)
    assert plan_lines(plan) == plan_lines(changes)
    assert [c for c in changes if c.action != "create"] == []  # everything is new

    lam = client("lambda")
    for f in FUNCTIONS:
        name = f"{PREFIX}-{f.name}"
        got = lam.get_function(FunctionName=name)
        config = got["Configuration"]
        assert config["PackageType"] == "Image" and got["Code"]["ImageUri"] == images()[f.name].image_uri
        assert "@sha256:" in got["Code"]["ImageUri"]  # pinned by digest, never a tag
        assert (config["MemorySize"], config["Timeout"]) == (f.memory_mb, f.timeout_s)
        variables = config["Environment"]["Variables"]
        assert variables["ENVIRONMENT"] == "prd" and variables["MAX_SEND_RATE"] == "14"
        assert "THREAD_SECRET" not in variables  # the secret is in SSM (a SecureString), read at cold start
        assert ("THREAD_SECRET_PARAMETER" in variables) == ("thread_secret" in f.requires)
        assert variables["EMAIL_BUCKET"] == BUCKET
        assert variables["ALERT_TOPIC_ARN"] == f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-alerts"
        assert config["Role"] == f"arn:aws:iam::{ACCOUNT}:role/{name}"
        alias = lam.get_alias(FunctionName=name, Name="live")
        assert alias["FunctionVersion"] != "$LATEST"
        # No reservation anywhere: a new account (limit 10) could not grant one; MaximumConcurrency caps the senders.
        assert lam.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions") is None
    for f in SENDERS:  # the sender queues feed the live alias with partial batch responses
        queue = client("sqs").get_queue_url(QueueName=f"{PREFIX}-{f.name.removesuffix('-sender')}")["QueueUrl"]
        attrs = client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
        assert int(attrs["VisibilityTimeout"]) >= 6 * f.timeout_s and attrs["MessageRetentionPeriod"] == "86400"
        assert json.loads(attrs["RedrivePolicy"])["maxReceiveCount"] in (5, "5")
        [mapping] = lam.list_event_source_mappings(EventSourceArn=attrs["QueueArn"])["EventSourceMappings"]
        # AWS reports the alias ARN; moto reports the version the alias pointed at.
        live = lam.get_alias(FunctionName=f"{PREFIX}-{f.name}", Name="live")["FunctionVersion"]
        function, qualifier = mapping["FunctionArn"].rsplit(":", 1)
        assert function.endswith(f":function:{PREFIX}-{f.name}") and qualifier in ("live", live)
        assert mapping["BatchSize"] == 10
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": 2}

    # Least privilege: forward-sender reads attachments/ and claim checks only, sends only as the public address.
    doc = client("iam").get_role_policy(RoleName=f"{PREFIX}-forward-sender", PolicyName="least-privilege")["PolicyDocument"]
    doc = json.loads(urllib.request.unquote(doc)) if isinstance(doc, str) else doc
    reads = [s for s in doc["Statement"] if "s3:GetObject" in s["Action"]]
    assert [r["Resource"] for r in reads] == [[f"arn:aws:s3:::{BUCKET}/attachments/*",
                                               f"arn:aws:s3:::{BUCKET}/queue-payloads/*"]]
    sends = [s for s in doc["Statement"] if "ses:SendRawEmail" in s["Action"]]
    assert {r for s in sends for r in s["Resource"]} == {f"arn:aws:ses:us-east-1:{ACCOUNT}:identity/*",
                                                         f"arn:aws:ses:us-east-1:{ACCOUNT}:configuration-set/{PREFIX}"}
    assert all(s["Condition"] == {"StringEquals": {"ses:FromAddress": "hello@example.com"}} for s in sends)
    assert not any(r == "*" for s in doc["Statement"] for r in s["Resource"])
    secret = client("ssm").get_parameter(Name="/service-email-handler/prd/thread-secret", WithDecryption=True)["Parameter"]
    assert secret["Type"] == "SecureString" and secret["Value"] == env["THREAD_SECRET"]

    # S3 -> extractor, SES feedback -> inbound-handler, alerts -> the owner.
    notification = client("s3").get_bucket_notification_configuration(Bucket=BUCKET)
    [to_extractor] = notification["LambdaFunctionConfigurations"]
    assert to_extractor["LambdaFunctionArn"].endswith(f"{PREFIX}-attachment-extractor:live")
    subs = client("sns").list_subscriptions()["Subscriptions"]
    assert {(s["TopicArn"].rsplit(":", 1)[1], s["Protocol"], s["Endpoint"].rsplit(":", 2)[-2:][0] if s["Protocol"] == "lambda"
             else s["Endpoint"]) for s in subs} >= {(f"{PREFIX}-ses-feedback", "lambda", f"{PREFIX}-inbound-handler"),
                                                     (f"{PREFIX}-alerts", "email", "owner@example.net")}

    # SES: thread replies first (and stop), then the public address; S3 staging/ then the handler.
    ses = client("ses")
    assert ses.describe_active_receipt_rule_set()["Metadata"]["Name"] == PREFIX
    thread, public = ses.describe_receipt_rule_set(RuleSetName=PREFIX)["Rules"]
    assert thread["Recipients"] == ["thread.example.com"] and public["Recipients"] == ["hello@example.com"]
    assert thread["Actions"][0]["S3Action"] == {"BucketName": BUCKET, "ObjectKeyPrefix": "staging/"}
    assert thread["Actions"][1]["LambdaAction"]["FunctionArn"].endswith(f"{PREFIX}-reply-handler:live")
    assert thread["Actions"][2] == {"StopAction": {"Scope": "RuleSet"}}
    assert public["Actions"][1]["LambdaAction"]["InvocationType"] == "Event"
    mail_from = ses.get_identity_mail_from_domain_attributes(Identities=["example.com"])["MailFromDomainAttributes"]
    assert mail_from["example.com"]["BehaviorOnMXFailure"] == "RejectMessage"
    policy = json.loads(client("s3").get_bucket_policy(Bucket=BUCKET)["Policy"])
    assert policy["Statement"][0]["Principal"] == {"Service": "ses.amazonaws.com"}

    # Alarms: any DLQ message within a minute, any function error within five, to the alert topic.
    alarms = {a["AlarmName"]: a for a in client("cloudwatch").describe_alarms()["MetricAlarms"]}
    dlq = alarms[f"{PREFIX}-ack-dlq-not-empty"]
    assert (dlq["MetricName"], dlq["Period"], dlq["Threshold"], dlq["ComparisonOperator"]) == \
        ("ApproximateNumberOfMessagesVisible", 60, 1.0, "GreaterThanOrEqualToThreshold")
    errors = alarms[f"{PREFIX}-reply-sender-errors"]
    assert (errors["MetricName"], errors["Period"], errors["Threshold"]) == ("Errors", 300, 0.0)
    assert errors["AlarmActions"] == [f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-alerts"]
    assert len(alarms) == len(FUNCTIONS) + len(SENDERS) + 1  # + the async DLQ
    assert f"{PREFIX}-async-dlq-not-empty" in alarms
    # inbound-handler, reply-handler, attachment-extractor: a failed asynchronous event goes to the async DLQ.
    for name in ("inbound-handler", "reply-handler", "attachment-extractor"):
        config = lam.get_function_event_invoke_config(FunctionName=f"{PREFIX}-{name}", Qualifier="live")
        assert config["DestinationConfig"]["OnFailure"]["Destination"] == \
            f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq" and config["MaximumRetryAttempts"] == 2
    # SNS's permission names the topic only; S3's and SES's also the account.
    statements = json.loads(lam.get_policy(FunctionName=f"{PREFIX}-inbound-handler", Qualifier="live")["Policy"])["Statement"]
    by_sid = {s["Sid"]: s.get("Condition", {}) for s in statements}
    assert "StringEquals" not in by_sid["sns-ses-feedback"] and by_sid["ses-receipt-public"]["StringEquals"]


def test_second_deploy_changes_nothing_and_says_so(env) -> None:
    run(env)
    versions = {f.name: client("lambda").get_alias(FunctionName=f"{PREFIX}-{f.name}", Name="live")["FunctionVersion"]
                for f in FUNCTIONS}
    plan, _ = run(env, dry_run=True)
    changes, output = run(env)
    assert all(c.action == "unchanged" for c in changes) and plan_lines(plan) == plan_lines(changes)
    assert output[-1].startswith("[deploy] nothing to change")
    assert versions == {f.name: client("lambda").get_alias(FunctionName=f"{PREFIX}-{f.name}", Name="live")["FunctionVersion"]
                        for f in FUNCTIONS}


def test_a_new_image_updates_only_its_function(env) -> None:
    run(env)
    before = client("lambda").get_alias(FunctionName=f"{PREFIX}-ack-sender", Name="live")["FunctionVersion"]
    new = images("b", only="ack-sender")
    plan, _ = run(env, new, dry_run=True)
    changes, _ = run(env, new)
    assert plan_lines(plan) == plan_lines(changes)
    changed = [(c.kind, c.name) for c in changes if c.action != "unchanged"]
    assert changed == [("lambda-function", f"{PREFIX}-ack-sender"), ("lambda-alias", f"{PREFIX}-ack-sender:live")]
    after = client("lambda").get_alias(FunctionName=f"{PREFIX}-ack-sender", Name="live")["FunctionVersion"]
    assert int(after) == int(before) + 1
    code = client("lambda").get_function(FunctionName=f"{PREFIX}-ack-sender")["Code"]["ImageUri"]
    assert code.endswith("@sha256:" + "b" * 64)


def test_a_changed_setting_is_converged(env) -> None:
    run(env)
    client("sqs").set_queue_attributes(QueueUrl=client("sqs").get_queue_url(QueueName=f"{PREFIX}-reply")["QueueUrl"],
                                       Attributes={"VisibilityTimeout": "30"})  # drifted by hand
    changes, _ = run(env)
    assert [(c.kind, c.name, c.action, c.detail) for c in changes if c.action != "unchanged"] == \
        [("sqs-queue", f"{PREFIX}-reply", "update", "VisibilityTimeout")]


def test_clear_errors_before_anything_changes(env, monkeypatch, tmp_path) -> None:
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


def test_docker_engine_not_running_is_a_clear_error(env, monkeypatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DeployError, match="Docker engine is not reachable") as err:
        deploy(Options(), env, report=lambda line: None)  # no images given: it must build and push
    assert "systemctl start docker" in str(err.value)


def test_an_unverified_ses_domain_stops_the_deploy_with_the_dns_records(env, moto_server, monkeypatch) -> None:
    client("ses").verify_domain_identity(Domain="example.com")
    client("ses").verify_domain_dkim(Domain="example.com")
    # moto verifies at once; the proxy answers as SES does while the DNS records are missing.
    proxy = SesProxy(moto_server, rewrite=lambda params, body: body.replace(b"Success", b"Pending")
                     if params.get("Action") in ("GetIdentityVerificationAttributes", "GetIdentityDkimAttributes") else body)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SES", proxy.url)
    reset_clients()
    try:
        with pytest.raises(DeployError, match="status Pending") as err:
            run(env)
        assert "_amazonses.example.com" in str(err.value) and "._domainkey.example.com" in str(err.value)
        assert "MX    example.com  10 inbound-smtp.us-east-1.amazonaws.com" in str(err.value)
        assert client("lambda").list_functions()["Functions"] == []
        changes, _ = run(env, allow_unverified=True)  # the owner may go ahead on purpose
        assert any(c.kind == "lambda-function" and c.action == "create" for c in changes)
    finally:
        proxy.close()
        monkeypatch.delenv("AWS_ENDPOINT_URL_SES")
        reset_clients()


def test_iam_policies_name_only_their_own_resources(env) -> None:
    from deploy.iam import policy
    from deploy.preflight import load_config

    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    for f in FUNCTIONS:
        statements = policy(cfg, ACCOUNT, f.name)["Statement"]
        resources = [r for s in statements for r in s["Resource"]]
        assert all(r.startswith("arn:aws:") and not r.endswith(":*:*") for r in resources), f.name
        sends = [s for s in statements if "ses:SendRawEmail" in s["Action"]]
        assert bool(sends) == (f in SENDERS), f.name  # only senders send
        topics = [r for s in statements if "sns:Publish" in s["Action"] for r in s["Resource"]]
        assert topics in ([], [f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-alerts"])
    extractor = {a for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"] for a in s["Action"]}
    assert not any(a.startswith(("dynamodb:", "sns:", "ses:")) for a in extractor)
    queues = [s["Resource"] for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"] if "sqs:SendMessage" in s["Action"]]
    assert queues == [[f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq"]]  # Lambda's on-failure destination
