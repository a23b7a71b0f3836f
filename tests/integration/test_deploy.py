"""`email-handler deploy` against a real moto server (ECR, Lambda with PackageType=Image, IAM, SQS,
SNS, SES, S3, DynamoDB, CloudWatch): what a first deploy creates, that a second changes nothing,
that a new image updates only its function, that the dry run is the same plan, and the errors.

The image push itself runs against a local registry in tests/docker/test_deploy_push.py; here the
published images are given (the seam `deploy(images=...)`), so these tests need no Docker.
"""

from __future__ import annotations

import json
import secrets
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from common.aws import client, reset_clients
from common.local.rie import RieProcess
from common.runtime.functions import BY_NAME, FUNCTIONS, SENDERS
from deploy.errors import DeployError
from deploy.images import Published
from deploy.main import Options, WaitingOnDns, deploy, plan_lines
from tests.support.harness import Stack
from tests.support.sesproxy import SesProxy

ACCOUNT = "123456789012"
PREFIX = "service-email-handler-prd"
BUCKET = f"{PREFIX}-{ACCOUNT}-us-east-1-mail"  # bucket names are global: account and region in the default


def images(digest: str = "a", only: str = "") -> dict[str, Published]:
    """Published images as the push would report them; ``only`` gives one function another digest."""
    return {
        f.name: Published(
            f.name,
            f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{PREFIX}-{f.name}",
            f"c-{(digest if not only or f.name == only else 'a') * 12}",
            "sha256:" + (digest if not only or f.name == only else "a") * 64,
            "x86_64",
        )
        for f in FUNCTIONS
    }


@pytest.fixture
def env(moto_server: str, local_defaults: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A clean emulator and a production configuration (the local defaults, a real secret, env prd)."""
    urllib.request.urlopen(urllib.request.Request(moto_server + "/moto-api/reset", method="POST")).read()
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # deploy pins the region for its process
    values = {k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"}
    return {**values, "THREAD_SECRET": secrets.token_hex(32), "MAX_SEND_RATE": "14"}


def run(
    env: dict[str, str],
    published: dict[str, Published] | None = None,
    lines: list[str] | None = None,
    **options: Any,
) -> tuple[list[Any], list[str]]:
    lines = [] if lines is None else lines
    changes = deploy(Options(**options), env, report=lines.append, images=published or images())
    return changes, lines


def test_first_deploy_plan_equals_run_and_creates_everything_with_the_right_settings(
    env: dict[str, str],
) -> None:
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
    fed = [(f, f"{PREFIX}-{f.name.removesuffix('-sender')}") for f in SENDERS] + [
        (BY_NAME["attachment-extractor"], f"{PREFIX}-attachment-events")
    ]
    for (
        f,
        queue_name,
    ) in fed:  # the sender queues and the attachment queue feed the live alias with partial batch responses
        queue = client("sqs").get_queue_url(QueueName=queue_name)["QueueUrl"]
        attrs = client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
        assert (
            int(attrs["VisibilityTimeout"]) >= 6 * f.timeout_s and attrs["MessageRetentionPeriod"] == "86400"
        )
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
    doc = client("iam").get_role_policy(RoleName=f"{PREFIX}-forward-sender", PolicyName="least-privilege")[
        "PolicyDocument"
    ]
    doc = json.loads(urllib.parse.unquote(doc)) if isinstance(doc, str) else doc
    reads = [s for s in doc["Statement"] if "s3:GetObject" in s["Action"]]
    assert [r["Resource"] for r in reads] == [
        [f"arn:aws:s3:::{BUCKET}/attachments/*", f"arn:aws:s3:::{BUCKET}/queue-payloads/*"]
    ]
    sends = [s for s in doc["Statement"] if "ses:SendRawEmail" in s["Action"]]
    assert {r for s in sends for r in s["Resource"]} == {
        f"arn:aws:ses:us-east-1:{ACCOUNT}:identity/*",
        f"arn:aws:ses:us-east-1:{ACCOUNT}:configuration-set/{PREFIX}",
    }
    assert all(s["Condition"] == {"StringEquals": {"ses:FromAddress": "hello@example.com"}} for s in sends)
    assert not any(r == "*" for s in doc["Statement"] for r in s["Resource"])
    secret = client("ssm").get_parameter(
        Name="/service-email-handler/prd/thread-secret", WithDecryption=True
    )["Parameter"]
    assert secret["Type"] == "SecureString" and secret["Value"] == env["THREAD_SECRET"]

    # S3 -> the attachment queue (-> extractor, above), SES feedback -> inbound-handler, alerts -> the owner.
    notification = client("s3").get_bucket_notification_configuration(Bucket=BUCKET)
    assert "LambdaFunctionConfigurations" not in notification  # S3 never invokes the extractor itself
    [to_extractor] = notification["QueueConfigurations"]
    assert to_extractor["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-attachment-events"
    subs = client("sns").list_subscriptions()["Subscriptions"]
    assert {
        (
            s["TopicArn"].rsplit(":", 1)[1],
            s["Protocol"],
            s["Endpoint"].rsplit(":", 2)[-2:][0] if s["Protocol"] == "lambda" else s["Endpoint"],
        )
        for s in subs
    } >= {
        (f"{PREFIX}-ses-feedback", "lambda", f"{PREFIX}-inbound-handler"),
        (f"{PREFIX}-alerts", "email", "owner@example.net"),
    }

    # SES: thread replies first, then the public address, no rule stopping the set (a mail to both
    # reaches both handlers); S3 staging/ then the handler.
    ses = client("ses")
    assert ses.describe_active_receipt_rule_set()["Metadata"]["Name"] == PREFIX
    thread, public = ses.describe_receipt_rule_set(RuleSetName=PREFIX)["Rules"]
    assert thread["Recipients"] == ["thread.example.com"] and public["Recipients"] == ["hello@example.com"]
    assert thread["Actions"][0]["S3Action"] == {"BucketName": BUCKET, "ObjectKeyPrefix": "staging/"}
    assert thread["Actions"][1]["LambdaAction"]["FunctionArn"].endswith(f"{PREFIX}-reply-handler:live")
    assert len(thread["Actions"]) == 2 and not [
        a for r in (thread, public) for a in r["Actions"] if "StopAction" in a
    ]
    assert public["Actions"][1]["LambdaAction"]["InvocationType"] == "Event"
    mail_from = ses.get_identity_mail_from_domain_attributes(Identities=["example.com"])[
        "MailFromDomainAttributes"
    ]
    # never refuses a send while MAIL FROM is pending (test_fresh_account.py: RejectMessage would)
    assert mail_from["example.com"]["BehaviorOnMXFailure"] == "UseDefaultValue"
    policy = json.loads(client("s3").get_bucket_policy(Bucket=BUCKET)["Policy"])
    assert policy["Statement"][0]["Principal"] == {"Service": "ses.amazonaws.com"}

    # Alarms: any DLQ message within a minute, any function error within five, to the alert topic.
    alarms = {a["AlarmName"]: a for a in client("cloudwatch").describe_alarms()["MetricAlarms"]}
    dlq = alarms[f"{PREFIX}-ack-dlq-not-empty"]
    assert (dlq["MetricName"], dlq["Period"], dlq["Threshold"], dlq["ComparisonOperator"]) == (
        "ApproximateNumberOfMessagesVisible",
        60,
        1.0,
        "GreaterThanOrEqualToThreshold",
    )
    errors = alarms[f"{PREFIX}-reply-sender-errors"]
    assert (errors["MetricName"], errors["Period"], errors["Threshold"]) == ("Errors", 300, 0.0)
    assert errors["AlarmActions"] == [f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-alerts"]
    assert len(alarms) == len(FUNCTIONS) + len(SENDERS) + 2  # + the attachment queue's DLQ and the async DLQ
    assert f"{PREFIX}-attachment-events-dlq-not-empty" in alarms
    assert f"{PREFIX}-async-dlq-not-empty" in alarms
    # inbound-handler, reply-handler, attachment-extractor: a failed asynchronous event goes to the async DLQ.
    for name in ("inbound-handler", "reply-handler", "attachment-extractor"):
        config = lam.get_function_event_invoke_config(FunctionName=f"{PREFIX}-{name}", Qualifier="live")
        assert (
            config["DestinationConfig"]["OnFailure"]["Destination"]
            == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq"
            and config["MaximumRetryAttempts"] == 2
        )
    # SNS's permission names the topic only; S3's and SES's also the account.
    statements = json.loads(
        lam.get_policy(FunctionName=f"{PREFIX}-inbound-handler", Qualifier="live")["Policy"]
    )["Statement"]
    by_sid = {s["Sid"]: s.get("Condition", {}) for s in statements}
    assert "StringEquals" not in by_sid["sns-ses-feedback"] and by_sid["ses-receipt-public"]["StringEquals"]

    # The owner's daily quarantine digest: 07:00 UTC, EventBridge -> inbound-handler:live, only from that rule.
    rule = client("events").describe_rule(Name=f"{PREFIX}-quarantine-digest")
    assert (rule["ScheduleExpression"], rule["State"]) == ("cron(0 7 * * ? *)", "ENABLED")
    [target] = client("events").list_targets_by_rule(Rule=f"{PREFIX}-quarantine-digest")["Targets"]
    assert target["Arn"] == f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-inbound-handler:live"
    assert json.loads(digest_input(target, "2026-01-01T07:00:00Z", rule["Arn"]))["detail"] == {
        "task": "quarantine-digest"
    }
    digest = next(s for s in statements if s["Sid"] == "events-quarantine-digest")
    assert (
        digest["Principal"] == {"Service": "events.amazonaws.com"}
        and "StringEquals" not in digest["Condition"]
    )
    assert (
        digest["Condition"]["ArnLike"]["AWS:SourceArn"]
        == rule["Arn"]
        == f"arn:aws:events:us-east-1:{ACCOUNT}:rule/{PREFIX}-quarantine-digest"
    )

    # SES's account-level suppression list never applies to our sends (our own list protects the owner) ...
    options = client("sesv2").get_configuration_set(ConfigurationSetName=PREFIX)["SuppressionOptions"]
    assert options == {"SuppressedReasons": []}
    # ... and a dead letter (a forward held for the owner's mailbox) is kept 14 days, SQS's maximum.
    for dlq in (f"{PREFIX}-forward-dlq", f"{PREFIX}-async-dlq"):
        url = client("sqs").get_queue_url(QueueName=dlq)["QueueUrl"]
        assert client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])[
            "Attributes"
        ]["MessageRetentionPeriod"] == str(14 * 24 * 3600)


def digest_input(target: dict[str, Any], time: str, rule_arn: str) -> str:
    """What EventBridge hands inbound-handler: the target's input template filled in for one run."""
    transformer = target["InputTransformer"]
    assert transformer["InputPathsMap"] == {"time": "$.time"}
    return (
        str(transformer["InputTemplate"]).replace("<time>", time).replace("<aws.events.rule-arn>", rule_arn)
    )


def test_the_scheduled_digest_event_is_what_inbound_handler_runs_the_digest_on(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    from deploy.triggers import DIGEST_INPUT

    event = json.loads(
        digest_input(
            {"InputTransformer": DIGEST_INPUT},
            "2026-01-01T07:00:00Z",
            f"arn:aws:events:us-east-1:{ACCOUNT}:rule/{PREFIX}-quarantine-digest",
        )
    )
    assert event["source"] == "aws.events" and event["detail-type"] == "Scheduled Event"
    result = rie_function("inbound-handler").invoke(event)
    assert result["status"] == "nothing-quarantined", result  # the digest ran (nothing was held)


def test_second_deploy_changes_nothing_and_says_so(env: dict[str, str]) -> None:
    run(env)
    versions = {
        f.name: client("lambda").get_alias(FunctionName=f"{PREFIX}-{f.name}", Name="live")["FunctionVersion"]
        for f in FUNCTIONS
    }
    plan, _ = run(env, dry_run=True)
    changes, output = run(env)
    assert all(c.action == "unchanged" for c in changes) and plan_lines(plan) == plan_lines(changes)
    assert output[-1].startswith("[deploy] nothing to change")
    assert versions == {
        f.name: client("lambda").get_alias(FunctionName=f"{PREFIX}-{f.name}", Name="live")["FunctionVersion"]
        for f in FUNCTIONS
    }


def test_a_new_image_updates_only_its_function(env: dict[str, str]) -> None:
    run(env)
    before = client("lambda").get_alias(FunctionName=f"{PREFIX}-ack-sender", Name="live")["FunctionVersion"]
    new = images("b", only="ack-sender")
    plan, _ = run(env, new, dry_run=True)
    changes, _ = run(env, new)
    assert plan_lines(plan) == plan_lines(changes)
    changed = [(c.kind, c.name) for c in changes if c.action != "unchanged"]
    assert changed == [
        ("lambda-function", f"{PREFIX}-ack-sender"),
        ("lambda-alias", f"{PREFIX}-ack-sender:live"),
    ]
    after = client("lambda").get_alias(FunctionName=f"{PREFIX}-ack-sender", Name="live")["FunctionVersion"]
    assert int(after) == int(before) + 1
    code = client("lambda").get_function(FunctionName=f"{PREFIX}-ack-sender")["Code"]["ImageUri"]
    assert code.endswith("@sha256:" + "b" * 64)


def test_a_changed_setting_is_converged(env: dict[str, str]) -> None:
    run(env)
    client("sqs").set_queue_attributes(
        QueueUrl=client("sqs").get_queue_url(QueueName=f"{PREFIX}-reply")["QueueUrl"],
        Attributes={"VisibilityTimeout": "30"},
    )  # drifted by hand
    changes, _ = run(env)
    assert [(c.kind, c.name, c.action, c.detail) for c in changes if c.action != "unchanged"] == [
        ("sqs-queue", f"{PREFIX}-reply", "update", "VisibilityTimeout")
    ]


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
        with pytest.raises(WaitingOnDns, match="status Pending") as err:
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


def test_iam_policies_name_only_their_own_resources(env: dict[str, str]) -> None:
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
    queues = [
        s["Resource"]
        for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"]
        if "sqs:SendMessage" in s["Action"]
    ]
    assert queues == [
        [f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq"]
    ]  # Lambda's on-failure destination
    polled = [
        s["Resource"]
        for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"]
        if "sqs:ReceiveMessage" in s["Action"]
    ]
    assert polled == [
        [f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-attachment-events"]
    ]  # its event source, nothing else


def test_the_deploy_says_whether_ses_is_in_the_sandbox(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from common.local.iam import SES_SANDBOX

    monkeypatch.setitem(SES_SANDBOX, "on", True)  # sesv2 GetAccount: ProductionAccessEnabled false
    _, lines = run(env)
    [note] = [line for line in lines if "SES" in line and "sandbox" in line]
    assert (
        "SES is in the sandbox in us-east-1" in note and "owner@example.net" in note
    )  # verify the owner's mailbox
    monkeypatch.setitem(SES_SANDBOX, "on", False)
    assert "[deploy] SES production access: yes" in run(env)[1]


def test_drifted_suppression_options_and_schedule_are_converged(env: dict[str, str]) -> None:
    run(env)
    client("sesv2").put_configuration_set_suppression_options(
        ConfigurationSetName=PREFIX, SuppressedReasons=["BOUNCE"]
    )
    client("events").put_rule(
        Name=f"{PREFIX}-quarantine-digest", ScheduleExpression="rate(1 hour)", State="DISABLED"
    )
    assert changed(run(env)[0]) == [
        ("ses-suppression", PREFIX, "update"),
        ("events-rule", f"{PREFIX}-quarantine-digest", "update"),
    ]
    assert client("sesv2").get_configuration_set(ConfigurationSetName=PREFIX)["SuppressionOptions"] == {
        "SuppressedReasons": []
    }
    rule = client("events").describe_rule(Name=f"{PREFIX}-quarantine-digest")
    assert (rule["ScheduleExpression"], rule["State"]) == ("cron(0 7 * * ? *)", "ENABLED")
    assert changed(run(env)[0]) == []


def changed(changes: list[Any]) -> list[tuple[str, str, str]]:
    return [(c.kind, c.name, c.action) for c in changes if c.action != "unchanged"]


def test_live_is_compared_not_latest_so_a_half_finished_deploy_is_completed(env: dict[str, str]) -> None:
    run(env)
    name = f"{PREFIX}-ack-sender"
    new = images("b", only="ack-sender")
    # A run that updated the function and died before moving the alias: $LATEST is new, live is old.
    lam = client("lambda")
    lam.update_function_code(FunctionName=name, ImageUri=new["ack-sender"].image_uri)
    lam.update_function_configuration(
        FunctionName=name, Description=f"ack-sender ({PREFIX}, image {new['ack-sender'].tag})"
    )
    changes, _ = run(env, new)
    assert changed(changes) == [("lambda-alias", f"{name}:live", "update")]
    live = client("lambda").get_function(FunctionName=name, Qualifier="live")["Code"]["ImageUri"]
    assert live == new["ack-sender"].image_uri
    assert changed(run(env, new)[0]) == []


def test_a_function_in_state_failed_is_recreated(env: dict[str, str]) -> None:
    from moto.backends import get_backend

    run(env)
    name = f"{PREFIX}-reply-handler"
    get_backend("lambda")[ACCOUNT]["us-east-1"].get_function(
        name
    ).state = "Failed"  # as Lambda leaves a failed creation
    changes, _ = run(env)
    [change] = [c for c in changes if c.kind == "lambda-function" and c.action != "unchanged"]
    assert (change.name, change.action) == (name, "create") and "Failed" in change.detail
    assert client("lambda").get_function(FunctionName=name)["Configuration"]["State"] == "Active"


def test_no_reserved_concurrency_and_an_old_reservation_is_removed(env: dict[str, str]) -> None:
    run(env)
    name = f"{PREFIX}-forward-sender"
    client("lambda").put_function_concurrency(
        FunctionName=name, ReservedConcurrentExecutions=2
    )  # an older deploy's
    assert changed(run(env)[0]) == [("lambda-concurrency", name, "update")]
    assert (
        client("lambda").get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
        is None
    )
    assert changed(run(env)[0]) == []


def test_another_applications_active_rule_set_stays_active_unless_replacing_is_asked(
    env: dict[str, str],
) -> None:
    ses = client("ses")
    ses.create_receipt_rule_set(RuleSetName="other-app")
    ses.create_receipt_rule(
        RuleSetName="other-app",
        Rule={
            "Name": "other",
            "Enabled": True,
            "Recipients": ["other.example"],
            "Actions": [{"StopAction": {"Scope": "RuleSet"}}],
        },
    )
    ses.set_active_receipt_rule_set(RuleSetName="other-app")
    changes, _ = run(env)
    assert ses.describe_active_receipt_rule_set()["Metadata"]["Name"] == "other-app"
    rules = [r["Name"] for r in ses.describe_receipt_rule_set(RuleSetName="other-app")["Rules"]]
    assert rules[:2] == [f"{PREFIX}-thread", f"{PREFIX}-public"] and "other" in rules
    assert not [c for c in changes if c.kind in ("ses-rule-set", "ses-active-rule-set")]
    policy = json.loads(
        client("lambda").get_policy(FunctionName=f"{PREFIX}-inbound-handler", Qualifier="live")["Policy"]
    )
    public = next(s for s in policy["Statement"] if s["Sid"] == "ses-receipt-public")
    assert public["Condition"]["ArnLike"]["AWS:SourceArn"].endswith(
        f"receipt-rule-set/other-app:receipt-rule/{PREFIX}-public"
    )
    assert changed(run(env)[0]) == []

    changes, _ = run(env, replace_active_rule_set=True)
    assert ses.describe_active_receipt_rule_set()["Metadata"]["Name"] == PREFIX
    assert ("ses-active-rule-set", PREFIX, "update") in changed(changes)


def test_the_bucket_reconciles_settings_made_only_at_creation(env: dict[str, str]) -> None:
    run(env)
    client("s3").delete_public_access_block(Bucket=BUCKET)
    client("s3").delete_bucket_lifecycle(Bucket=BUCKET)
    changes, _ = run(env)
    [bucket] = [c for c in changes if c.kind == "s3-bucket"]
    assert bucket.action == "update" and bucket.detail == "public access block, lifecycle"
    block = client("s3").get_public_access_block(Bucket=BUCKET)["PublicAccessBlockConfiguration"]
    assert all(block.values())
    assert changed(run(env)[0]) == []


def test_a_bucket_name_taken_by_another_account_is_a_clear_error_before_anything_changes(
    env: dict[str, str], moto_server: str
) -> None:
    # Another account's bucket: to this deployer HeadBucket answers 403, as AWS does for a name owned elsewhere.
    client("s3").create_bucket(Bucket="taken-by-someone-else")
    deployer = deployer_user(env)
    with pytest.raises(DeployError, match="belongs to another AWS account") as err:
        as_user(deployer, lambda: run({**env, "EMAIL_BUCKET": "taken-by-someone-else"}))
    assert "EMAIL_BUCKET" in str(err.value)
    assert client("lambda").list_functions()["Functions"] == []


def deployer_user(env: dict[str, str]) -> dict[str, str]:
    """An IAM user holding exactly `email-handler deploy --print-deployer-policy`'s policies, created and
    attached as it says (managed policies: an inline user policy is capped at 2,048 characters)."""
    from deploy.iam import deployer_policies, deployer_policy_names
    from deploy.preflight import load_config

    iam_api = client("iam")
    iam_api.create_user(UserName="deployer")
    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    documents = deployer_policies(cfg, ACCOUNT)
    for name, document in zip(deployer_policy_names(cfg, len(documents)), documents, strict=True):
        arn = iam_api.create_policy(PolicyName=name, PolicyDocument=json.dumps(document))["Policy"]["Arn"]
        iam_api.attach_user_policy(UserName="deployer", PolicyArn=arn)
    key = iam_api.create_access_key(UserName="deployer")["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


def as_user(credentials: dict[str, str], call: Any) -> Any:
    import os

    saved = {k: os.environ.get(k) for k in credentials}
    os.environ.update(credentials)
    reset_clients()
    try:
        return call()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
        reset_clients()


def test_the_deployer_policy_is_enough_for_deploy_and_destroy(env: dict[str, str]) -> None:
    """Under enforced IAM, a user with only the printed deployer policy deploys, redeploys and destroys.

    The emulator evaluates an action with no resource type against "*" as AWS does
    (common.local.iam.NO_RESOURCE_ACTIONS), so the SES identity and receipt-rule calls prove the
    policy's Resource elements too, not only its action list."""
    from deploy.destroy import destroy

    ses = client("ses")
    assert ses.list_identities()["Identities"] == []  # a fresh account: the deploy verifies the domain
    deployer = deployer_user(env)
    changes, _ = as_user(deployer, lambda: run(env))
    assert {
        ("ses-identity", "create"),
        ("ses-rule-set", "create"),
        ("ses-receipt-rule", "create"),
        ("ses-active-rule-set", "create"),
        ("ses-mail-from", "create"),
    } <= {(c.kind, c.action) for c in changes}
    assert changed(as_user(deployer, lambda: run(env))[0]) == []
    # drift the deployer has to converge: a receipt rule, the MAIL FROM domain, the feedback destination
    thread = next(
        r
        for r in ses.describe_receipt_rule_set(RuleSetName=PREFIX)["Rules"]
        if r["Name"] == f"{PREFIX}-thread"
    )
    ses.update_receipt_rule(RuleSetName=PREFIX, Rule={**thread, "Enabled": False})
    ses.set_identity_mail_from_domain(Identity="example.com", MailFromDomain="elsewhere.example.com")
    fixed = changed(as_user(deployer, lambda: run(env))[0])
    assert ("ses-receipt-rule", f"{PREFIX}-thread", "update") in fixed and (
        "ses-mail-from",
        "bounce.example.com",
        "update",
    ) in fixed
    # moto has no SetReceiptRulePosition or DeleteReceiptRule; its IAM check runs before it looks the action up
    for call in (
        lambda: client("ses").set_receipt_rule_position(RuleSetName=PREFIX, RuleName=f"{PREFIX}-public"),
        lambda: client("ses").delete_receipt_rule(RuleSetName=PREFIX, RuleName="not-there"),
    ):
        try:
            as_user(deployer, call)
        except Exception as exc:
            assert "AccessDenied" not in str(exc), exc
    # replay's dry run lists the async DLQ (hiding, then showing again what it listed)
    from deploy.replay import replay

    url = client("sqs").get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    client("sqs").send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            {
                "requestContext": {
                    "requestId": "r-1",
                    "functionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-inbound-handler",
                },
                "requestPayload": {},
            }
        ),
    )
    assert (
        len(as_user(deployer, lambda: replay(Options(dry_run=True), environ=env, report=lambda line: None)))
        == 1
    )
    as_user(deployer, lambda: destroy(Options(), delete_data=True, environ=env, report=lambda line: None))
    assert client("lambda").list_functions()["Functions"] == []
    assert ses.list_receipt_rule_sets()["RuleSets"] == []


def test_destroy_removes_what_the_deploy_made_and_keeps_the_data_unless_asked(env: dict[str, str]) -> None:
    from deploy.destroy import destroy

    run(env)
    lines: list[str] = []
    plan = destroy(Options(dry_run=True), environ=env, report=lines.append)
    assert {c.action for c in plan} == {"delete"} and len(
        client("lambda").list_functions()["Functions"]
    ) == len(FUNCTIONS)
    done = destroy(Options(), environ=env, report=lines.append)
    assert plan_lines(plan) == plan_lines(done)
    assert client("lambda").list_functions()["Functions"] == []
    assert not [r for r in client("iam").list_roles()["Roles"] if r["RoleName"].startswith(PREFIX)]
    assert client("ses").describe_active_receipt_rule_set().get("Metadata") is None
    assert client("events").list_rules(NamePrefix=PREFIX)["Rules"] == []
    client("s3").head_bucket(Bucket=BUCKET)  # the mail is kept
    assert any("kept" in line and BUCKET in line for line in lines)
    destroy(Options(), delete_data=True, environ=env, report=lines.append)
    assert BUCKET not in [b["Name"] for b in client("s3").list_buckets()["Buckets"]]
    assert changed(destroy(Options(), delete_data=True, environ=env, report=lines.append)) == []


def test_replay_reinvokes_the_events_lambda_gave_up_on(env: dict[str, str]) -> None:
    from deploy.replay import replay

    run(env)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    event = {
        "Records": [
            {
                "eventSource": "aws:s3",
                "s3": {"bucket": {"name": BUCKET}, "object": {"key": "attachments/a/b/c.pdf"}},
            }
        ]
    }
    record = {
        "version": "1.0",
        "requestContext": {
            "requestId": "r-1",
            "condition": "RetriesExhausted",
            "functionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-attachment-extractor:live",
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
    }
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
    listed = replay(Options(dry_run=True), environ=env, report=lambda line: None)
    assert [(e["function"], e["requestId"], e["outcome"]) for e in listed] == [
        (f"{PREFIX}-attachment-extractor:live", "r-1", "would replay")
    ]
    # moto cannot invoke an image function (HTTP 500): the replay says so and keeps the event for the next one.
    [entry] = replay(Options(), environ=env, report=lambda line: None)  # the dry run left the message visible
    assert entry["requestId"] == "r-1" and entry["outcome"].startswith(("replayed", "failed"))
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    left = int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])
    assert left == (0 if entry["outcome"] == "replayed" else 1)


class Throttled:
    """A raw body for botocore's AWSResponse."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


def test_the_deploy_rides_out_ses_throttling(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """SES's management actions allow one request per second and a deploy makes about 15 in a row:
    a run of Throttling answers must be retried (more attempts, adaptive mode), not end the deploy.
    The functions' data-plane clients keep their own retry settings."""
    import boto3
    from botocore.awsrequest import AWSResponse

    from common.aws import CONTROL_PLANE_ATTEMPTS

    error = (
        b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>"
        b"</Error><RequestId>t-1</RequestId></ErrorResponse>"
    )
    seen: list[str] = []

    def throttle(request: Any, **_: Any) -> Any:
        seen.append("VerifyDomainIdentity")
        if len(seen) <= 4:  # more than the 3 attempts of a default client
            return AWSResponse(request.url, 400, {}, Throttled(error))
        return None

    original = boto3.session.Session.client

    def throttled_client(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        made = original(self, service, *args, **kwargs)
        if service == "ses":
            made.meta.events.register("before-send.ses.VerifyDomainIdentity", throttle)
        return made

    monkeypatch.setattr(boto3.session.Session, "client", throttled_client)
    # no real waiting: the backoff is what is under test, not its duration
    monkeypatch.setattr("botocore.retries.standard.ExponentialBackoff.delay_amount", lambda self, context: 0)
    reset_clients()
    changes, _ = run(env)
    assert ("ses-identity", "example.com", "create") in changed(changes) and len(seen) == 5
    assert client("ses").list_identities()["Identities"] == ["example.com"]
    assert CONTROL_PLANE_ATTEMPTS >= 10
    # the senders' SES client keeps owning its retries (one attempt), the other data-plane clients three
    assert client("sesv2", max_attempts=1).meta.config.retries == {
        "mode": "standard",
        "total_max_attempts": 1,
    }
    assert client("sqs").meta.config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_a_mail_with_many_attachments_cannot_take_the_concurrency_a_new_account_keeps_for_the_senders(
    env: dict[str, str],
) -> None:
    """A new account runs 10 functions at once and keeps all 10 unreserved (common/local/fresh.py). With
    the deployed event sources and reservations, one mail -- however many attachments it stores -- uses
    at most: 3 senders x 2, the extractor 2, and one invocation each of the two receiving handlers."""
    from common.local.fresh import ACCOUNT_CONCURRENCY
    from deploy.preflight import load_config
    from deploy.triggers import worst_case_concurrency

    run(env)
    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    worst = worst_case_concurrency(cfg, ACCOUNT)
    assert worst == {
        "inbound-handler": 1,
        "reply-handler": 1,
        "attachment-extractor": 2,
        "ack-sender": 2,
        "forward-sender": 2,
        "reply-sender": 2,
    }
    assert sum(worst.values()) <= ACCOUNT_CONCURRENCY
    # The senders keep their 6 whatever the extractor does: it can never go past its 2.
    assert ACCOUNT_CONCURRENCY - worst["attachment-extractor"] - 2 >= sum(worst[f.name] for f in SENDERS)
    # What S3 used to do (invoke the function per object) is unbounded: the measure says so.
    lam = client("lambda")
    [mapping] = lam.list_event_source_mappings(
        FunctionName=f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-attachment-extractor:live"
    )["EventSourceMappings"]
    lam.delete_event_source_mapping(UUID=mapping["UUID"])
    assert worst_case_concurrency(cfg, ACCOUNT)["attachment-extractor"] == -1


def test_destroy_removes_the_event_source_mappings_made_on_the_alias_before_the_queues(
    env: dict[str, str],
) -> None:
    """The senders' mappings are made on the ``live`` alias. ListEventSourceMappings filters by the exact
    function (qualifier included): asked with the plain function name it does not list them (moto:
    none; AWS documents the alias filter), so destroy lists them by queue ARN and by alias ARN."""
    from deploy.destroy import destroy

    run(env)
    lam = client("lambda")
    mappings = lam.list_event_source_mappings()["EventSourceMappings"]
    assert len(mappings) == len(SENDERS) + 1  # + the extractor's attachment queue
    sender = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-{SENDERS[0].name}"
    # what the plain name (or unqualified ARN) lists for a mapping made on the alias: nothing
    assert lam.list_event_source_mappings(FunctionName=sender.rsplit(":", 1)[-1])["EventSourceMappings"] == []
    assert lam.list_event_source_mappings(FunctionName=sender)["EventSourceMappings"] == []
    assert len(lam.list_event_source_mappings(FunctionName=f"{sender}:live")["EventSourceMappings"]) == 1
    # a mapping of another application on one of our queues stays
    lam.create_function(
        FunctionName="other-app",
        Role=f"arn:aws:iam::{ACCOUNT}:role/{PREFIX}-ack-sender",
        PackageType="Image",
        Code={"ImageUri": images()[SENDERS[0].name].image_uri},
    )
    queue = mappings[0]["EventSourceArn"]
    lam.create_event_source_mapping(EventSourceArn=queue, FunctionName="other-app")
    changes = destroy(Options(), environ=env, report=lambda line: None)
    kinds = [c.kind for c in changes]
    assert kinds.count("event-source") == len(SENDERS) + 1
    assert max(i for i, k in enumerate(kinds) if k == "event-source") < min(
        i for i, k in enumerate(kinds) if k == "sqs-queue"
    )
    assert [
        m["FunctionArn"].rsplit(":", 1)[-1] for m in lam.list_event_source_mappings()["EventSourceMappings"]
    ] == ["other-app"]


class RecentlyDeleted:
    """The SQS client as AWS answers within 60 s of DeleteQueue: ``refusals`` CreateQueue calls fail."""

    def __init__(self, real: Any, refusals: int) -> None:
        self.real, self.refusals, self.calls = real, refusals, 0

    def create_queue(self, **kwargs: Any) -> Any:
        from botocore.exceptions import ClientError

        self.calls += 1
        if self.calls <= self.refusals:
            raise ClientError(
                {
                    "Error": {
                        "Code": "AWS.SimpleQueueService.QueueDeletedRecently",
                        "Message": "You must wait 60 seconds after deleting a queue before you can "
                        "create another queue with the same name.",
                    }
                },
                "CreateQueue",
            )
        return self.real.create_queue(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_queue_deleted_moments_ago_is_created_once_sqs_frees_its_name(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy right after `destroy`: SQS refuses a deleted queue's name for 60 s (QueueDeletedRecently).
    The deploy waits with backoff for up to about 70 s, saying so, then creates it."""
    from deploy import resources
    from deploy.plan import Run
    from deploy.preflight import load_config

    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    stub = RecentlyDeleted(client("sqs"), refusals=4)
    monkeypatch.setattr(
        resources,
        "control_client",
        lambda service, region=None: stub if service == "sqs" else client(service),
    )
    said: list[str] = []
    waits: list[float] = []
    run_ = Run(cfg, True, None, say=said.append, sleep=waits.append)
    resources.queue(run_, f"{PREFIX}-ack-dlq", {"MessageRetentionPeriod": "1209600"})
    assert stub.calls == 5 and client("sqs").get_queue_url(QueueName=f"{PREFIX}-ack-dlq")
    assert waits == [5, 10, 20, 20] and len(said) == 4
    assert all("deleted less than 60 s ago" in line and f"{PREFIX}-ack-dlq" in line for line in said)
    # SQS still refusing after about 70 s: the error, not an endless wait
    stub = RecentlyDeleted(client("sqs"), refusals=100)
    waits.clear()
    with pytest.raises(Exception, match="QueueDeletedRecently"):
        resources.queue(Run(cfg, True, None, sleep=waits.append), f"{PREFIX}-other", {})
    assert sum(waits) == resources.RECREATE_WAIT_S


def test_a_dry_run_replay_lists_every_failed_event_and_leaves_them_all_visible(env: dict[str, str]) -> None:
    """More failed events than one receive returns: the dry run lists each once (it hides what it has
    listed, then shows it again), and the replay after it still finds every one."""
    from deploy.replay import replay

    run(env)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    arn = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-attachment-extractor:live"
    for n in range(23):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(
                {"requestContext": {"requestId": f"r-{n}", "functionArn": arn}, "requestPayload": {"n": n}}
            ),
        )
    listed = replay(Options(dry_run=True), environ=env, report=lambda line: None)
    assert sorted(e["requestId"] for e in listed) == sorted(f"r-{n}" for n in range(23))
    assert {e["outcome"] for e in listed} == {"would replay"}
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == (
        "23",
        "0",
    )
    assert len(replay(Options(), environ=env, report=lambda line: None)) == 23


def refuse(
    monkeypatch: Any, answers: dict[tuple[str, str], tuple[int, dict[str, str], bytes]], times: int
) -> list[str]:
    """Every new client answers ``(service, operation)`` with ``(status, headers, body)`` for its first
    ``times`` calls, as AWS does until a grant made seconds before has propagated; returns the calls seen."""
    import boto3
    from botocore.awsrequest import AWSResponse

    seen: list[str] = []
    original = boto3.session.Session.client

    def made(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        new = original(self, service, *args, **kwargs)
        for (svc, operation), (status, headers, body) in answers.items():
            if svc != service:
                continue

            def answer(
                request: Any,
                operation: str = operation,
                status: int = status,
                headers: dict[str, str] = headers,
                body: bytes = body,
                **_: Any,
            ) -> Any:
                seen.append(operation)
                if seen.count(operation) <= times:
                    return AWSResponse(request.url, status, headers, Throttled(body))
                return None

            new.meta.events.register(f"before-send.{service}.{operation}", answer)
        return new

    monkeypatch.setattr(boto3.session.Session, "client", made)
    reset_clients()
    return seen


def test_calls_refused_until_a_fresh_grant_propagates_are_retried(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a role, a policy or a permission is made, Lambda, S3 and SES refuse the calls that check it
    (the error texts AWS users report). The deploy retries those errors, saying why, instead of stopping."""
    from deploy import propagation

    lambda_error = {"x-amzn-ErrorType": "InvalidParameterValueException"}
    answers = {
        ("lambda", "CreateEventSourceMapping"): (
            400,
            lambda_error,
            json.dumps(
                {
                    "Type": "User",
                    "message": "The provided execution role does not have permissions to call ReceiveMessage on SQS",
                }
            ).encode(),
        ),
        ("lambda", "PutFunctionEventInvokeConfig"): (
            400,
            lambda_error,
            json.dumps(
                {
                    "Type": "User",
                    "message": "The function execution role does not have permissions to call SendMessage on "
                    f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq",
                }
            ).encode(),
        ),
        ("s3", "PutBucketNotificationConfiguration"): (
            400,
            {},
            (
                b"<Error><Code>InvalidArgument</Code><Message>Unable to validate the following destination configurations"
                b"</Message><RequestId>r</RequestId></Error>"
            ),
        ),
        ("ses", "CreateReceiptRule"): (
            400,
            {},
            (
                b"<ErrorResponse><Error><Type>Sender</Type><Code>InvalidS3Configuration</Code><Message>Could not write to "
                b"bucket: " + BUCKET.encode() + b"</Message></Error><RequestId>r</RequestId></ErrorResponse>"
            ),
        ),
    }
    monkeypatch.setattr(propagation, "STEP_S", 0.0)
    seen = refuse(monkeypatch, answers, times=2)
    changes, lines = run(env)
    assert {op for _, op in answers} <= set(seen)
    for kind in ("event-source", "lambda-on-failure", "s3-notification", "ses-receipt-rule"):
        assert (kind, "create") in {(c.kind, c.action) for c in changes}, kind
    assert sum("waiting for IAM to propagate" in line for line in lines) >= 2 * len(answers)
    assert (
        len(client("lambda").list_event_source_mappings()["EventSourceMappings"]) == len(SENDERS) + 1
    )  # + the extractor's
    # what is not a propagation delay is not retried
    assert not propagation.ROLE_LACKS_PERMISSION.matches(Exception("ResourceConflictException"))


def test_replay_invokes_the_live_alias_whatever_the_record_names(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record naming a version (or the unqualified function) is replayed on ``live``: an old version runs
    old code and has no on-failure destination. A record of another function is skipped."""
    from deploy.replay import replay

    run(env)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    base = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:"
    for n, arn in enumerate(
        [f"{base}{PREFIX}-inbound-handler:3", f"{base}{PREFIX}-reply-handler", f"{base}other-app:live"]
    ):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(
                {"requestContext": {"requestId": f"r-{n}", "functionArn": arn}, "requestPayload": {"n": n}}
            ),
        )
    invoked: list[str] = []

    def accept(request: Any, **_: Any) -> Any:
        from urllib.parse import unquote

        from botocore.awsrequest import AWSResponse

        invoked.append(unquote(request.url.split("/functions/")[1].split("/invocations")[0]))
        return AWSResponse(request.url, 202, {}, Throttled(b""))

    import boto3

    original = boto3.session.Session.client

    def made(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        new = original(self, service, *args, **kwargs)
        new.meta.events.register("before-send.lambda.Invoke", accept)
        return new

    monkeypatch.setattr(boto3.session.Session, "client", made)  # replay makes its clients anew
    done = {e["requestId"]: e for e in replay(Options(), environ=env, report=lambda line: None)}
    assert sorted(invoked) == [f"{base}{PREFIX}-inbound-handler:live", f"{base}{PREFIX}-reply-handler:live"]
    assert (done["r-0"]["function"], done["r-0"]["outcome"]) == (f"{PREFIX}-inbound-handler:live", "replayed")
    assert done["r-2"]["outcome"] == "skipped: not a function of this deployment"


def test_environment_variables_over_lambdas_4kb_are_refused_before_anything_changes(
    env: dict[str, str],
) -> None:
    """Lambda allows 4 KB of environment variables per function (as JSON); every configuration variable
    given is passed on, so a long ACK_TEMPLATE would make CreateFunction fail after the shared resources."""
    template = "Thank you for writing. " * 180  # about 4.1 KB
    with pytest.raises(DeployError) as err:
        run({**env, "ACK_TEMPLATE": template})
    assert "4096 (4 KB)" in str(err.value) and f"ACK_TEMPLATE ({len(template)} characters)" in str(err.value)
    assert client("sqs").list_queues().get("QueueUrls", []) == []  # nothing was made
    changes, _ = run({**env, "ACK_TEMPLATE": template[:1500]})  # one that fits is deployed
    assert ("lambda-function", f"{PREFIX}-ack-sender", "create") in changed(changes)


class Backfilling:
    """The DynamoDB client while an index added by UpdateTable is being built: ``polls`` DescribeTable
    answers show it CREATING (moto builds it at once). Records the calls in order."""

    def __init__(self, real: Any, polls: int) -> None:
        self.real, self.polls = real, polls
        self.calls: list[str] = []

    def update_table(self, **kwargs: Any) -> Any:
        self.calls.append("UpdateTable")
        return self.real.update_table(**kwargs)

    def describe_table(self, **kwargs: Any) -> Any:
        described = self.real.describe_table(**kwargs)
        if "UpdateTable" in self.calls and self.polls > 0:
            self.polls -= 1
            self.calls.append("DescribeTable: CREATING")
            for index in described["Table"].get("GlobalSecondaryIndexes", []):
                index["IndexStatus"] = "CREATING"
        return described

    def update_time_to_live(self, **kwargs: Any) -> Any:
        self.calls.append("UpdateTimeToLive")
        return self.real.update_time_to_live(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_an_index_added_to_an_older_table_is_active_before_the_run_goes_on(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older deployment's idempotency table lacks the sesMessageId index: the deploy adds it and waits
    until DynamoDB has built it (the functions moved to live later in the run query it), then sets TTL."""
    from deploy import resources
    from deploy.plan import Run
    from deploy.preflight import load_config

    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    key, ttl, indexes = resources.TABLES["idempotency_table"]
    client("dynamodb").create_table(
        TableName=cfg.idempotency_table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
    )
    stub = Backfilling(client("dynamodb"), polls=3)
    monkeypatch.setattr(
        resources,
        "control_client",
        lambda service, region=None: stub if service == "dynamodb" else client(service),
    )
    said: list[str] = []
    waits: list[float] = []
    resources._table(
        Run(cfg, True, None, say=said.append, sleep=waits.append), cfg.idempotency_table, key, ttl, indexes
    )
    assert stub.calls == ["UpdateTable"] + ["DescribeTable: CREATING"] * 3 + ["UpdateTimeToLive"]
    assert waits == [resources.INDEX_POLL_S] * 3 and "sesMessageId" in said[0]
