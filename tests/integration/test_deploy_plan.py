"""`email-handler deploy`, planning and converging: the dry run is the plan of the run, a first deploy
creates everything with its settings, a second changes nothing, and whatever drifted, failed or was
left half-finished is brought back to the plan.

The published images are given (the seam `deploy(images=...)`, tests/support/deploy.py); the push
runs against a local registry in tests/docker/test_deploy_push.py.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from common.aws import client
from deploy.errors import DeployError
from deploy.functions import BY_NAME, FUNCTIONS, SENDERS
from deploy.main import plan_lines
from local.iam import takes_no_resource
from local.rie import RieProcess
from tests.support.deploy import (
    ACCOUNT,
    BUCKET,
    PREFIX,
    changed,
    images,
    run,
)
from tests.support.harness import Stack


def test_first_deploy_plan_equals_run_and_creates_everything_with_the_right_settings(
    env: dict[str, str],
) -> None:
    plan, plan_output = run(env, dry_run=True)
    assert "dry run" in plan_output[0]
    assert client("lambda").list_functions()["Functions"] == []  # the dry run touched nothing
    changes, _ = run(env)
    assert plan_lines(plan) == plan_lines(changes)
    assert [c for c in changes if c.action != "create"] == []  # everything is new
    assert ("cloudwatch-dashboard", PREFIX, "create") in plan_lines(plan)  # the dry run shows it

    lam = client("lambda")
    for f in FUNCTIONS:
        name = f"{PREFIX}-{f.name}"
        got = lam.get_function(FunctionName=name)
        config = got["Configuration"]
        assert config["PackageType"] == "Image" and got["Code"]["ImageUri"] == images()[f.name].image_uri
        assert "@sha256:" in got["Code"]["ImageUri"]  # pinned by digest, never a tag
        assert (config["MemorySize"], config["Timeout"]) == (f.memory_mb, f.timeout_s)
        variables = config["Environment"]["Variables"]
        assert variables["ENVIRONMENT"] == "prd"
        # each function's variables are its class's (common/runtime/config.py): the senders' rate is theirs
        assert variables.get("MAX_SEND_RATE") == ("14" if f in SENDERS else None)
        queue = f"{PREFIX}-{f.name.removesuffix('-sender')}"
        assert variables.get("SEND_QUEUE_NAME") == (queue if f.queue_field else None)
        assert "THREAD_SECRET" not in variables  # the secret is in SSM (a SecureString), read at cold start
        assert ("THREAD_SECRET_PARAMETER" in variables) == f.reads_thread_secret
        if f.name == "attachment-extractor":  # the bucket comes with each event; it alerts no one
            assert "EMAIL_BUCKET" not in variables and "ALERT_TOPIC_ARN" not in variables
        else:
            assert variables["EMAIL_BUCKET"] == BUCKET
            assert variables["ALERT_TOPIC_ARN"] == f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-alerts"
        assert variables["ACCOUNT_ID"] == ACCOUNT  # queue URLs without STS at cold start
        assert config["Role"] == f"arn:aws:iam::{ACCOUNT}:role/{name}"
        alias = lam.get_alias(FunctionName=name, Name="live")
        assert alias["FunctionVersion"] != "$LATEST"
        # No reservation anywhere: a new account (limit 10) could not grant one; MaximumConcurrency caps the
        # senders.
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

    # Least privilege: forward-sender reads attachments/ and claim checks only, sends only as the public
    # address.
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
    # the local defaults have a catch-all: any address at the domain, never the thread domain's
    assert all(s["Condition"] == {"StringLike": {"ses:FromAddress": "*@example.com"}} for s in sends)
    # "*" only for actions that take no resource (sesv2 GetAccount: is SES's sandbox refusing a recipient?)
    assert not any(
        r == "*" and not all(takes_no_resource(a) for a in s["Action"])
        for s in doc["Statement"]
        for r in s["Resource"]
    )
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
    assert thread["Recipients"] == ["thread.example.com"]
    assert public["Recipients"] == ["example.com", "thread.example.com"]  # every recipient: staging.py
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

    # The owner's daily quarantine digest: 07:00 UTC, EventBridge -> inbound-handler:live, only from that
    # rule.
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


def test_a_dashboard_edited_by_hand_is_put_back(env: dict[str, str]) -> None:
    run(env)
    cw = client("cloudwatch")
    wanted = json.loads(cw.get_dashboard(DashboardName=PREFIX)["DashboardBody"])
    assert wanted["widgets"] and {w["properties"]["region"] for w in wanted["widgets"]} == {"us-east-1"}
    cw.put_dashboard(DashboardName=PREFIX, DashboardBody=json.dumps({"widgets": []}))
    changes, _ = run(env)
    assert [(c.kind, c.action, c.detail) for c in changes if c.action != "unchanged"] == [
        ("cloudwatch-dashboard", "update", "DashboardBody")
    ]
    assert json.loads(cw.get_dashboard(DashboardName=PREFIX)["DashboardBody"]) == wanted


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
