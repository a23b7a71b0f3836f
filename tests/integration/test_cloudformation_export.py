"""`email-handler deploy --export cloudformation DIR`: the template makes what the deploy makes.

The deploy runs on the emulator; the template exported for the same configuration is resolved with
its parameters (tests/support/cfn.py) and compared with what the deploy really made, read back from
the emulator: the same names for every kind of resource the deploy reports, the same IAM policies
statement by statement, the same functions and environment, and the same wiring (event sources,
permissions, subscriptions, the bucket's notification, the receipt rules in order with their
actions, the schedule, alarms). What a template cannot make is named here and in the README."""

from __future__ import annotations

import json
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

from common.aws import client, or_none
from deploy.cloudformation import export, image_parameter
from deploy.functions import FUNCTIONS
from deploy.iam import POLICY_NAME
from deploy.plan import canonical
from tests.support.cfn import Resolver
from tests.support.deploy import ACCOUNT, BUCKET, PREFIX, images, run
from tests.support.ownerkeys import pgp_owner, smime_owner

REGION = "us-east-1"
# The deploy's change kinds -> the template's resource type whose name (Resolver.name) is the change's.
SAME_NAME = {
    "sqs-queue": "AWS::SQS::Queue",
    "dynamodb-table": "AWS::DynamoDB::Table",
    "s3-bucket": "AWS::S3::Bucket",
    "sns-topic": "AWS::SNS::Topic",
    "iam-role": "AWS::IAM::Role",
    "lambda-function": "AWS::Lambda::Function",
    "events-rule": "AWS::Events::Rule",
    "ses-receipt-rule": "AWS::SES::ReceiptRule",
    "ses-rule-set": "AWS::SES::ReceiptRuleSet",
    "ses-config-set": "AWS::SES::ConfigurationSet",
}
# Compared by what they grant and connect (test_the_wiring_is_the_deploys), not by the deploy's label.
BY_WIRING = {"lambda-permission", "sns-subscription"}


def _not_in_a_template(changes: list[Any]) -> set[tuple[str, str]]:
    """What CloudFormation cannot make, each a step of the README: the secret's SecureString, the spam
    rules file (an S3 object) and activating the rule set."""
    return {
        ("ssm-parameter", "/service-email-handler/prd/thread-secret"),
        ("s3-object", "config/spam-rules.txt"),
        ("ses-active-rule-set", PREFIX),
    } & {(c.kind, c.name) for c in changes}


def exported(env: dict[str, str], tmp_path: Path) -> Resolver:
    export(tmp_path, "prd", REGION, env, report=lambda line: None)
    template = json.loads((tmp_path / "template.json").read_text())
    parameters = {image_parameter(f): p.image_uri for f, p in images().items()}
    return Resolver(template, parameters, ACCOUNT, REGION)


def _alias(arn: str) -> str:
    """``arn:...:function:NAME:live`` -> ``NAME:live``."""
    return arn.split(":function:", 1)[1]


def template_names(t: Resolver) -> dict[str, set[str]]:  # noqa: C901, PLR0912 (one line per kind)
    out: dict[str, set[str]] = defaultdict(set)
    for logical, resource in t.template["Resources"].items():
        kind = resource["Type"]
        for change_kind, cfn_kind in SAME_NAME.items():
            if kind == cfn_kind:
                out[change_kind].add(t.name(logical))
    for props in t.resources("AWS::Lambda::Alias").values():
        out["lambda-alias"].add(f"{props['FunctionName']}:{props['Name']}")
    for props in t.resources("AWS::Lambda::EventInvokeConfig").values():
        out["lambda-on-failure"].add(f"{props['FunctionName']}:{props['Qualifier']}")
    for props in t.resources("AWS::Lambda::EventSourceMapping").values():
        out["event-source"].add(
            f"{props['EventSourceArn'].rsplit(':', 1)[1]} -> {_alias(props['FunctionName'])}"
        )
    for props in t.resources("AWS::Logs::LogGroup").values():
        out["log-group"].add(props["LogGroupName"])
    for props in t.resources("AWS::CloudWatch::Alarm").values():
        out["cloudwatch-alarm"].add(props["AlarmName"])
    for props in t.resources("AWS::CloudWatch::Dashboard").values():
        out["cloudwatch-dashboard"].add(props["DashboardName"])
    for props in t.resources("AWS::SSM::Parameter").values():
        out["ssm-parameter"].add(props["Name"])
    for props in t.resources("AWS::SES::EmailIdentity").values():
        out["ses-identity"].add(props["EmailIdentity"])
        if "MailFromAttributes" in props:
            out["ses-mail-from"].add(props["MailFromAttributes"]["MailFromDomain"])
    for props in t.resources("AWS::SES::ConfigurationSet").values():
        if "SuppressionOptions" in props:
            out["ses-suppression"].add(props["Name"])
    for props in t.resources("AWS::SNS::TopicPolicy").values():
        out["sns-topic-policy"].update(arn.rsplit(":", 1)[1] for arn in props["Topics"])
    for props in t.resources("AWS::S3::BucketPolicy").values():
        out["s3-bucket-policy"].add(props["Bucket"])
    for props in t.resources("AWS::S3::Bucket").values():
        for notification in props["NotificationConfiguration"]["QueueConfigurations"]:
            prefix = notification["Filter"]["S3Key"]["Rules"][0]["Value"]
            out["s3-notification"].add(f"{props['BucketName']}/{prefix}")
    for props in t.resources("AWS::Events::Rule").values():
        out["events-target"].update(
            f"{props['Name']} -> {_alias(target['Arn'])}" for target in props["Targets"]
        )
    return out


def check_names(changes: list[Any], t: Resolver) -> None:
    """Every resource the deploy reported, by kind and name, is in the template, and nothing else is."""
    deployed: dict[str, set[str]] = defaultdict(set)
    left_out = _not_in_a_template(changes)
    for c in changes:
        if c.kind not in BY_WIRING and (c.kind, c.name) not in left_out:
            deployed[c.kind].add(c.name)
    assert dict(template_names(t)) == dict(deployed)


def check_policies(t: Resolver) -> None:
    """Each role: the trust and the one inline policy the deploy put, statement by statement."""
    iam = client("iam")
    roles = t.resources("AWS::IAM::Role")
    assert len(roles) == len(FUNCTIONS)
    for props in roles.values():
        name = props["RoleName"]
        role = iam.get_role(RoleName=name)["Role"]
        assert canonical(role["AssumeRolePolicyDocument"]) == canonical(props["AssumeRolePolicyDocument"])
        assert role["Description"] == props["Description"]
        [inline] = props["Policies"]
        assert iam.list_role_policies(RoleName=name)["PolicyNames"] == [inline["PolicyName"]] == [POLICY_NAME]
        deployed = iam.get_role_policy(RoleName=name, PolicyName=POLICY_NAME)["PolicyDocument"]
        statements = inline["PolicyDocument"]["Statement"]
        assert len(deployed["Statement"]) == len(statements), name
        for have, want in zip(deployed["Statement"], statements, strict=True):
            assert canonical(have) == canonical(want), name


def check_functions(t: Resolver) -> None:
    lam = client("lambda")
    published = {f"{PREFIX}-{f}": p for f, p in images().items()}
    functions = t.resources("AWS::Lambda::Function")
    assert len(functions) == len(FUNCTIONS)
    for props in functions.values():
        name = props["FunctionName"]
        live = lam.get_function(FunctionName=name, Qualifier="live")
        have = live["Configuration"]
        assert props["PackageType"] == have["PackageType"] == "Image"
        assert props["Code"]["ImageUri"] == live["Code"]["ImageUri"] == published[name].image_uri
        assert props["Architectures"] == have["Architectures"]
        assert have["Environment"]["Variables"] == props["Environment"]["Variables"], name
        for key in ("Role", "MemorySize", "Timeout"):
            assert have[key] == props[key], (name, key)
        # The deploy names the image by its tag, the template by the URI it is given.
        assert have["Description"].split(", image ")[0] == props["Description"].split(", image ")[0]
    for props in t.resources("AWS::Lambda::EventInvokeConfig").values():
        have = lam.get_function_event_invoke_config(FunctionName=props["FunctionName"], Qualifier="live")
        for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig"):
            assert have[key] == props[key], (props["FunctionName"], key)


def check_wiring(t: Resolver) -> None:
    lam, sns, ses, s3, events = (client(s) for s in ("lambda", "sns", "ses", "s3", "events"))
    keys = (
        "EventSourceArn",
        "BatchSize",
        "MaximumBatchingWindowInSeconds",
        "FunctionResponseTypes",
        "ScalingConfig",
    )
    # The emulator reports the version ``live`` points at where AWS reports the alias: both name the function.
    mappings = {
        (m["EventSourceArn"], m["FunctionArn"].rsplit(":", 1)[0]): {k: m.get(k) for k in keys}
        for m in lam.list_event_source_mappings()["EventSourceMappings"]
    }
    sources = t.resources("AWS::Lambda::EventSourceMapping").values()
    assert {p["FunctionName"].rsplit(":", 1)[1] for p in sources} == {"live"}
    wanted = {
        (p["EventSourceArn"], p["FunctionName"].rsplit(":", 1)[0]): {k: p.get(k) for k in keys}
        for p in sources
    }
    assert mappings == wanted

    granted = set()
    for f in FUNCTIONS:
        found = or_none(
            partial(lam.get_policy, FunctionName=f"{PREFIX}-{f.name}", Qualifier="live"),
            "ResourceNotFoundException",
        )
        for s in json.loads(found["Policy"])["Statement"] if found else []:
            condition = s.get("Condition", {})
            granted.add(
                (
                    s["Resource"],
                    s["Principal"]["Service"],
                    condition.get("ArnLike", {}).get("AWS:SourceArn"),
                    condition.get("StringEquals", {}).get("AWS:SourceAccount"),
                )
            )
    permissions = {
        (p["FunctionName"], p["Principal"], p["SourceArn"], p.get("SourceAccount"))
        for p in t.resources("AWS::Lambda::Permission").values()
    }
    assert permissions == granted

    subscribed = {
        (s["TopicArn"], s["Protocol"], s["Endpoint"]) for s in sns.list_subscriptions()["Subscriptions"]
    }
    assert subscribed == {
        (p["TopicArn"], p["Protocol"], p["Endpoint"]) for p in t.resources("AWS::SNS::Subscription").values()
    }

    [bucket] = t.resources("AWS::S3::Bucket").values()
    have = s3.get_bucket_notification_configuration(Bucket=BUCKET)
    assert [
        (n["QueueArn"], n["Events"], n["Filter"]["Key"]["FilterRules"]) for n in have["QueueConfigurations"]
    ] == [
        (n["Queue"], [n["Event"]], n["Filter"]["S3Key"]["Rules"])
        for n in bucket["NotificationConfiguration"]["QueueConfigurations"]
    ]
    assert set(have) - {"ResponseMetadata"} == {"QueueConfigurations"}

    rules = t.resources("AWS::SES::ReceiptRule")
    ordered: list[dict[str, Any]] = []
    after = None
    while len(ordered) < len(rules):  # the template's order: each rule After the one before
        [(logical, props)] = [(k, p) for k, p in rules.items() if p.get("After") == after]
        ordered.append(props["Rule"])
        after = props["Rule"]["Name"]
    [rule_set] = t.resources("AWS::SES::ReceiptRuleSet").values()
    assert {p["RuleSetName"] for p in rules.values()} == {rule_set["RuleSetName"]}
    have_rules = ses.describe_receipt_rule_set(RuleSetName=rule_set["RuleSetName"])["Rules"]
    assert [canonical(r) for r in have_rules] == [canonical(r) for r in ordered]

    for props in t.resources("AWS::Events::Rule").values():
        rule = events.describe_rule(Name=props["Name"])
        for key in ("ScheduleExpression", "State", "Description"):
            assert rule[key] == props[key]
        targets = events.list_targets_by_rule(Rule=props["Name"])["Targets"]
        assert [canonical(t) for t in targets] == [canonical(t) for t in props["Targets"]]


def check_cloudwatch(t: Resolver) -> None:
    cw = client("cloudwatch")
    alarms = t.resources("AWS::CloudWatch::Alarm")
    found = {
        a["AlarmName"]: a
        for a in cw.describe_alarms(AlarmNames=[p["AlarmName"] for p in alarms.values()])["MetricAlarms"]
    }
    for props in alarms.values():
        have = found[props["AlarmName"]]
        for key, value in props.items():
            assert canonical(have[key]) == canonical(value), (props["AlarmName"], key)
        assert have.get("OKActions", []) == []
    for props in t.resources("AWS::CloudWatch::Dashboard").values():  # region and names filled in
        have = cw.get_dashboard(DashboardName=props["DashboardName"])["DashboardBody"]
        assert json.loads(have) == json.loads(props["DashboardBody"])


def check_settings(t: Resolver) -> None:
    sqs, ddb, s3, sns, ses, logs = (client(s) for s in ("sqs", "dynamodb", "s3", "sns", "ses", "logs"))
    policies = {p["Queues"][0]: p["PolicyDocument"] for p in t.resources("AWS::SQS::QueuePolicy").values()}
    for logical, props in t.resources("AWS::SQS::Queue").items():
        url = sqs.get_queue_url(QueueName=props["QueueName"])["QueueUrl"]
        have = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        for key in ("MessageRetentionPeriod", "VisibilityTimeout"):
            if key in props:
                assert int(have[key]) == props[key], (props["QueueName"], key)
        if "RedrivePolicy" in props:
            redrive = json.loads(have["RedrivePolicy"])
            assert redrive["deadLetterTargetArn"] == props["RedrivePolicy"]["deadLetterTargetArn"]
            assert int(redrive["maxReceiveCount"]) == props["RedrivePolicy"]["maxReceiveCount"]
        assert canonical(json.loads(have["Policy"]) if "Policy" in have else None) == canonical(
            policies.get(t.ref(logical))
        )
    for props in t.resources("AWS::DynamoDB::Table").values():
        table = ddb.describe_table(TableName=props["TableName"])["Table"]
        assert table["KeySchema"] == props["KeySchema"]
        assert canonical(table["AttributeDefinitions"]) == canonical(props["AttributeDefinitions"])
        assert table["BillingModeSummary"]["BillingMode"] == props["BillingMode"]
        indexes = [
            {k: i[k] for k in ("IndexName", "KeySchema", "Projection")}
            for i in table.get("GlobalSecondaryIndexes", [])
        ]
        assert canonical(indexes) == canonical(props.get("GlobalSecondaryIndexes", []))
        ttl = ddb.describe_time_to_live(TableName=props["TableName"])["TimeToLiveDescription"]
        if "TimeToLiveSpecification" in props:
            assert ttl["TimeToLiveStatus"] == "ENABLED"
            assert ttl["AttributeName"] == props["TimeToLiveSpecification"]["AttributeName"]
        else:
            assert ttl["TimeToLiveStatus"] == "DISABLED"
    [bucket] = t.resources("AWS::S3::Bucket").values()
    block = s3.get_public_access_block(Bucket=BUCKET)["PublicAccessBlockConfiguration"]
    assert block == bucket["PublicAccessBlockConfiguration"]
    rules = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    assert [(r["ID"], r["Filter"]["Prefix"], r["Status"], r["Expiration"]["Days"]) for r in rules] == [
        (r["Id"], r["Prefix"], r["Status"], r["ExpirationInDays"])
        for r in bucket["LifecycleConfiguration"]["Rules"]
    ]
    [bucket_policy] = t.resources("AWS::S3::BucketPolicy").values()
    assert canonical(json.loads(s3.get_bucket_policy(Bucket=BUCKET)["Policy"])) == canonical(
        bucket_policy["PolicyDocument"]
    )
    for props in t.resources("AWS::SNS::TopicPolicy").values():
        [arn] = props["Topics"]
        have = json.loads(sns.get_topic_attributes(TopicArn=arn)["Attributes"]["Policy"])
        assert canonical(have) == canonical(props["PolicyDocument"])
    for props in t.resources("AWS::SES::ConfigurationSetEventDestination").values():
        found = ses.describe_configuration_set(
            ConfigurationSetName=props["ConfigurationSetName"],
            ConfigurationSetAttributeNames=["eventDestinations"],
        )["EventDestinations"]
        want = props["EventDestination"]
        [have] = [d for d in found if d["Name"] == want["Name"]]
        assert have["Enabled"] == want["Enabled"]
        assert sorted(have["MatchingEventTypes"]) == sorted(want["MatchingEventTypes"])
        assert have["SNSDestination"]["TopicARN"] == want["SnsDestination"]["TopicARN"]
    for props in t.resources("AWS::Logs::LogGroup").values():
        [group] = [
            g
            for g in logs.describe_log_groups(logGroupNamePrefix=props["LogGroupName"])["logGroups"]
            if g["logGroupName"] == props["LogGroupName"]
        ]
        assert group["retentionInDays"] == props["RetentionInDays"]
    check_cloudwatch(t)
    for props in t.resources("AWS::SSM::Parameter").values():
        have = client("ssm").get_parameter(Name=props["Name"])["Parameter"]
        assert (have["Type"], have["Value"]) == (props["Type"], props["Value"])
    for props in t.resources("AWS::SES::EmailIdentity").values():
        if "MailFromAttributes" in props:
            domain = props["EmailIdentity"]
            have = ses.get_identity_mail_from_domain_attributes(Identities=[domain])[
                "MailFromDomainAttributes"
            ][domain]
            assert have["MailFromDomain"] == props["MailFromAttributes"]["MailFromDomain"]
            assert have["BehaviorOnMXFailure"] == "UseDefaultValue"
            assert props["MailFromAttributes"]["BehaviorOnMxFailure"] == "USE_DEFAULT_VALUE"


def test_the_template_makes_what_the_deploy_makes(env: dict[str, str], tmp_path: Path) -> None:
    changes, _ = run(env)
    t = exported(env, tmp_path)
    check_names(changes, t)
    check_policies(t)
    check_functions(t)
    check_wiring(t)
    check_settings(t)
    readme = (tmp_path / "README.md").read_text()
    for kind, name in _not_in_a_template(changes):  # each is a step the README gives
        assert name.rsplit("/", 1)[-1] in readme, (kind, name)
    assert env["THREAD_SECRET"] not in (tmp_path / "template.json").read_text()


def test_one_address_and_an_owner_key_make_the_same_stack_in_both(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The shape follows the configuration: one public address (no catch-all: the senders' condition
    and the public rule's recipients list it), another environment variable, the owner's key in SSM
    and its grant."""
    key = tmp_path / "owner.asc"
    key.write_text(pgp_owner().armored)
    one = {
        **{k: v for k, v in env.items() if k != "PUBLIC_ADDRESSES"},
        "PUBLIC_EMAIL": "hello@example.com",
        "OWNER_PGP_KEY": str(key),
        "RETENTION_ARCHIVE_DAYS": "365",
    }
    changes, _ = run(one)
    t = exported(one, tmp_path / "export")
    check_names(changes, t)
    check_policies(t)
    check_functions(t)
    check_wiring(t)
    check_settings(t)
    [inbound] = [
        p
        for p in t.resources("AWS::Lambda::Function").values()
        if p["FunctionName"].endswith("-inbound-handler")
    ]
    assert inbound["Environment"]["Variables"]["PUBLIC_EMAIL"] == "hello@example.com"
    assert any(p["Name"].endswith("/owner-key") for p in t.resources("AWS::SSM::Parameter").values())


def test_mailbox_keys_make_the_same_parameters_and_grant_in_both(env: dict[str, str], tmp_path: Path) -> None:
    """MAILBOX_KEYS: each keyed mailbox's key in its own SSM parameter, forward-sender's grant to read
    each, KEYED_MAILBOXES in the functions that know of them; the same in the template as the deploy."""
    p1, p2 = tmp_path / "p1.pem", tmp_path / "p2.asc"
    p1.write_text(smime_owner().pem)
    p2.write_text(pgp_owner().armored)
    boxes = ["p1@partner1.example", "p2@partner2.example"]
    keyed = {
        **env,
        "PUBLIC_ADDRESSES": json.dumps(
            {"hello@example.com": {"forward_to": [*boxes, "p3@partner3.example"]}}
        ),
        "MAILBOX_KEYS": json.dumps({boxes[0]: str(p1), boxes[1]: str(p2)}),
    }
    changes, _ = run(keyed)
    t = exported(keyed, tmp_path / "export")
    check_names(changes, t)
    check_policies(t)
    check_functions(t)
    check_settings(t)
    stored = [p for p in t.resources("AWS::SSM::Parameter").values() if "/mailbox-key/" in p["Name"]]
    assert len(stored) == 2 and {p["Value"] for p in stored} == {p1.read_text(), p2.read_text()}
    [sender] = [
        p
        for p in t.resources("AWS::Lambda::Function").values()
        if p["FunctionName"].endswith("-forward-sender")
    ]
    assert sender["Environment"]["Variables"]["KEYED_MAILBOXES"] == ",".join(boxes)
