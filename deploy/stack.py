"""Everything around the images on AWS: roles, functions, triggers, SES receiving, alarms.

Every step compares what exists with what the tables in code say and records ``create``,
``update`` or ``unchanged`` on the provisioning Run; with ``run.apply`` False nothing is changed
and the same records are the plan. The order is the dependency order: roles before functions,
functions (and their ``live`` alias) before the permissions, triggers and receipt rules that
point at them, and alarms last.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from typing import Any

from common.aws import client, error_code, or_none
from common.runtime.config import Config, env_name
from common.runtime.functions import FUNCTIONS, SENDERS, Function
from common.store import layout
from deploy import iam
from deploy.images import Published
from deploy.resources import (
    CREATE,
    UNCHANGED,
    UPDATE,
    Run,
    attachments_notification,
    bucket_exists,
    dlq_name,
    log_group,
    queue_arn,
    sender_queues,
    subscription,
    topic_arn,
)

ALIAS = "live"
FUNCTION_LOG_RETENTION_DAYS = 30
BATCH_SIZE = 10
MAIL_FROM_LABEL = "bounce"  # MAIL FROM domain bounce.<DOMAIN_NAME> (FR-1)
# Variables Lambda sets itself or that make no sense in a function's environment.
_NOT_PASSED = {"region", "send_queue", "alert_topic_arn"}


def function_name(cfg: Config, function: str) -> str:
    return cfg.name(function)


def alias_arn(cfg: Config, account: str, function: str) -> str:
    return f"arn:aws:lambda:{cfg.region}:{account}:function:{function_name(cfg, function)}:{ALIAS}"


def environment(cfg: Config, spec: Function, source: dict[str, str]) -> dict[str, str]:
    """The function's variables: the configuration the deploy was given, minus what it must not see."""
    env = {"PROJECT_NAME": cfg.project, "ENVIRONMENT": cfg.env, "DOMAIN_NAME": cfg.domain_name,
           "PUBLIC_EMAIL": cfg.public_email, "PRIVATE_EMAIL": cfg.private_email,
           "ALERT_TOPIC_ARN": topic_arn(cfg, cfg.alert_topic),
           "LOG_LEVEL": source.get("LOG_LEVEL", "INFO")}
    for f in fields(Config):
        name = env_name(f.name)
        if not f.name.startswith("_") and f.name not in _NOT_PASSED and name in source and name not in env:
            env[name] = source[name]
    if "thread_secret" in spec.requires:  # only the two handlers hold the HMAC secret
        env["THREAD_SECRET"] = cfg.thread_secret
    else:
        env.pop("THREAD_SECRET", None)
    return dict(sorted(env.items()))


# --- IAM -----------------------------------------------------------------------------------------

def role(run: Run, account: str, function: str) -> str:
    return iam.converge_role(run, account, function)


_canonical = iam.canonical


# --- functions -----------------------------------------------------------------------------------

def function_log_group(run: Run, function: str) -> None:
    log_group(run, f"/aws/lambda/{function_name(run.cfg, function)}", FUNCTION_LOG_RETENTION_DAYS)


def lambda_function(run: Run, spec: Function, image: Published, role_arn: str, env: dict[str, str]) -> bool:
    """Create or update the function and point ``live`` at a version of it; True if anything changed."""
    api, name = client("lambda"), function_name(run.cfg, spec.name)
    config: dict[str, Any] = {"Role": role_arn, "MemorySize": spec.memory_mb, "Timeout": spec.timeout_s,
                              "Environment": {"Variables": env},
                              "Description": f"{spec.name} ({run.cfg.prefix}, image {image.tag})"}
    current = or_none(lambda: api.get_function(FunctionName=name), "ResourceNotFoundException")
    if current is None:
        run.note("lambda-function", name, CREATE, f"image {image.tag}, {spec.memory_mb} MB, {spec.timeout_s} s")
        if run.apply:
            _retry_role_propagation(lambda: api.create_function(
                FunctionName=name, PackageType="Image", Code={"ImageUri": image.image_uri},
                Architectures=[image.architecture], Publish=False, **config))
            api.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 2, "MaxAttempts": 150})
        _concurrency(run, api, name, spec)
        _publish(run, api, name, changed=True)
        return True
    have = current["Configuration"]
    code_changed = current.get("Code", {}).get("ImageUri") != image.image_uri or not image.digest or \
        have.get("Architectures", ["x86_64"]) != [image.architecture]
    differ = [k for k in ("Role", "MemorySize", "Timeout", "Description") if have.get(k) != config[k]]
    if have.get("Environment", {}).get("Variables", {}) != env:
        differ.append("Environment")
    if code_changed or differ:
        run.note("lambda-function", name, UPDATE, ", ".join((["image " + image.tag] if code_changed else []) + differ))
        if run.apply:
            if code_changed:
                api.update_function_code(FunctionName=name, ImageUri=image.image_uri, Architectures=[image.architecture])
                _wait_updated(api, name)
            if differ:
                _retry_role_propagation(lambda: api.update_function_configuration(FunctionName=name, **config))
                _wait_updated(api, name)
    else:
        run.note("lambda-function", name, UNCHANGED)
    _concurrency(run, api, name, spec)
    _publish(run, api, name, changed=bool(code_changed or differ))
    return bool(code_changed or differ)


def _wait_updated(api: Any, name: str) -> None:
    api.get_waiter("function_updated_v2").wait(FunctionName=name, WaiterConfig={"Delay": 2, "MaxAttempts": 150})


def _retry_role_propagation(call: Any, attempts: int = 12) -> Any:
    """A role created seconds ago may not be assumable by Lambda yet (IAM is eventually consistent)."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            if error_code(exc) != "InvalidParameterValueException" or "assume" not in str(exc).lower() \
                    or attempt == attempts - 1:
                raise
            time.sleep(5)
    return None


def _concurrency(run: Run, api: Any, name: str, spec: Function) -> None:
    current = None
    if run.apply or _function_exists(api, name):
        current = api.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
    if current == spec.reserved_concurrency:
        run.note("lambda-concurrency", name, UNCHANGED, str(spec.reserved_concurrency or "unreserved"))
        return
    run.note("lambda-concurrency", name, CREATE if current is None else UPDATE, str(spec.reserved_concurrency or "unreserved"))
    if run.apply:
        if spec.reserved_concurrency is None:
            api.delete_function_concurrency(FunctionName=name)
        else:
            api.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=spec.reserved_concurrency)


def _function_exists(api: Any, name: str) -> bool:
    return or_none(lambda: api.get_function(FunctionName=name), "ResourceNotFoundException") is not None


def _publish(run: Run, api: Any, name: str, changed: bool) -> None:
    """A new version when the function changed, and ``live`` moved to it."""
    alias = None
    if run.apply or _function_exists(api, name):
        alias = or_none(lambda: api.get_alias(FunctionName=name, Name=ALIAS), "ResourceNotFoundException")
    if alias is not None and not changed:
        run.note("lambda-alias", f"{name}:{ALIAS}", UNCHANGED, f"version {alias['FunctionVersion']}")
        return
    run.note("lambda-alias", f"{name}:{ALIAS}", CREATE if alias is None else UPDATE, "to a new version")
    if not run.apply:
        return
    version = api.publish_version(FunctionName=name)["Version"]
    if alias is None:
        api.create_alias(FunctionName=name, Name=ALIAS, FunctionVersion=version)
    else:
        api.update_alias(FunctionName=name, Name=ALIAS, FunctionVersion=version)


# --- triggers ------------------------------------------------------------------------------------

def permission(run: Run, account: str, function: str, sid: str, principal: str, source_arn: str | None) -> None:
    """Let an AWS service invoke the function's ``live`` alias (and nothing else)."""
    api, name = client("lambda"), function_name(run.cfg, function)
    statements: list[dict[str, Any]] = []
    if run.apply or _function_exists(api, name):
        found = or_none(lambda: api.get_policy(FunctionName=name, Qualifier=ALIAS), "ResourceNotFoundException")
        statements = json.loads(found["Policy"]).get("Statement", []) if found else []
    if any(s.get("Sid") == sid for s in statements):
        run.note("lambda-permission", f"{name}:{ALIAS} {sid}", UNCHANGED)
        return
    run.note("lambda-permission", f"{name}:{ALIAS} {sid}", CREATE, principal)
    if run.apply:
        extra = {"SourceArn": source_arn} if source_arn else {}
        api.add_permission(FunctionName=name, Qualifier=ALIAS, StatementId=sid, Action="lambda:InvokeFunction",
                           Principal=principal, SourceAccount=account, **extra)


def event_source(run: Run, account: str, spec: Function) -> None:
    """The sender's queue -> its ``live`` alias, partial batch responses, bounded concurrency."""
    api = client("lambda")
    queue = getattr(run.cfg, spec.queue_field)
    source, target = queue_arn(run.cfg, queue), alias_arn(run.cfg, account, spec.name)
    wanted = {"BatchSize": BATCH_SIZE, "MaximumBatchingWindowInSeconds": 0,
              "FunctionResponseTypes": ["ReportBatchItemFailures"],
              "ScalingConfig": {"MaximumConcurrency": spec.batch_concurrency}}
    current: list[dict[str, Any]] = []
    if run.apply or _function_exists(api, function_name(run.cfg, spec.name)):
        current = api.list_event_source_mappings(EventSourceArn=source, FunctionName=target).get("EventSourceMappings", [])
    label = f"{queue} -> {function_name(run.cfg, spec.name)}:{ALIAS}"
    if not current:
        run.note("event-source", label, CREATE, f"batch {BATCH_SIZE}, ReportBatchItemFailures, "
                                                f"max concurrency {spec.batch_concurrency}")
        if run.apply:
            api.create_event_source_mapping(EventSourceArn=source, FunctionName=target, Enabled=True, **wanted)
        return
    mapping = current[0]
    differ = [k for k, v in wanted.items() if mapping.get(k, {} if k == "ScalingConfig" else None) != v]
    if not differ:
        run.note("event-source", label, UNCHANGED)
        return
    run.note("event-source", label, UPDATE, ", ".join(differ))
    if run.apply:
        api.update_event_source_mapping(UUID=mapping["UUID"], **wanted)


# --- SES receiving and sending -------------------------------------------------------------------

def bucket_policy_for_ses(run: Run, account: str) -> None:
    """SES's receipt rules may write raw mail to staging/ of this bucket, for this account only."""
    cfg = run.cfg
    wanted = {"Version": "2012-10-17", "Statement": [{
        "Sid": "SesReceiptRulesStoreMail", "Effect": "Allow", "Principal": {"Service": "ses.amazonaws.com"},
        "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{cfg.bucket}/{layout.STAGING}*",
        "Condition": {"StringEquals": {"aws:SourceAccount": account},
                      "ArnLike": {"aws:SourceArn": f"arn:aws:ses:{cfg.region}:{account}:receipt-rule-set/{rule_set(cfg)}:*"}}}]}
    s3 = client("s3")
    current = None
    if bucket_exists(cfg.bucket):
        found = or_none(lambda: s3.get_bucket_policy(Bucket=cfg.bucket), "NoSuchBucketPolicy")
        current = json.loads(found["Policy"]) if found else None
    if current is not None and _canonical(current) == _canonical(wanted):
        run.note("s3-bucket-policy", cfg.bucket, UNCHANGED)
        return
    run.note("s3-bucket-policy", cfg.bucket, CREATE if current is None else UPDATE, "SES may write staging/")
    if run.apply:
        s3.put_bucket_policy(Bucket=cfg.bucket, Policy=json.dumps(wanted))


def rule_set(cfg: Config) -> str:
    return cfg.prefix


def receipt_rules(run: Run, account: str) -> None:
    """Thread replies first (and stop), then the public address, both: S3 staging/ + async Lambda."""
    cfg, ses = run.cfg, client("ses")
    name = rule_set(cfg)
    s3_action = {"S3Action": {"BucketName": cfg.bucket, "ObjectKeyPrefix": layout.STAGING}}

    def lambda_action(function: str) -> dict[str, Any]:
        return {"LambdaAction": {"FunctionArn": alias_arn(cfg, account, function), "InvocationType": "Event"}}

    rules: list[dict[str, Any]] = [
        {"Name": f"{name}-thread", "Enabled": True, "TlsPolicy": "Optional", "ScanEnabled": True,
         "Recipients": [cfg.thread_domain],
         "Actions": [s3_action, lambda_action("reply-handler"), {"StopAction": {"Scope": "RuleSet"}}]},
        {"Name": f"{name}-public", "Enabled": True, "TlsPolicy": "Optional", "ScanEnabled": True,
         "Recipients": [cfg.public_email], "Actions": [s3_action, lambda_action("inbound-handler")]},
    ]
    described = or_none(lambda: ses.describe_receipt_rule_set(RuleSetName=name), "RuleSetDoesNotExist")
    existing = {r["Name"]: r for r in (described or {}).get("Rules", [])}
    have_set = described is not None
    if not have_set:
        run.note("ses-rule-set", name, CREATE)
        if run.apply:
            ses.create_receipt_rule_set(RuleSetName=name)
    else:
        run.note("ses-rule-set", name, UNCHANGED)
    after = None
    for rule in rules:
        current = existing.get(rule["Name"])
        if current is None:
            run.note("ses-receipt-rule", rule["Name"], CREATE, ", ".join(rule["Recipients"]))
            if run.apply:
                ses.create_receipt_rule(RuleSetName=name, Rule=rule, **({"After": after} if after else {}))
        elif _canonical(_rule_view(current)) != _canonical(_rule_view(rule)):
            run.note("ses-receipt-rule", rule["Name"], UPDATE)
            if run.apply:
                ses.update_receipt_rule(RuleSetName=name, Rule=rule)
        else:
            run.note("ses-receipt-rule", rule["Name"], UNCHANGED)
        after = rule["Name"]
    active = ses.describe_active_receipt_rule_set().get("Metadata", {}).get("Name")
    if active == name:
        run.note("ses-active-rule-set", name, UNCHANGED)
        return
    run.note("ses-active-rule-set", name, UPDATE if active else CREATE,
             f"replaces the active rule set {active}" if active else "")
    if run.apply:
        ses.set_active_receipt_rule_set(RuleSetName=name)


def _rule_view(rule: dict[str, Any]) -> dict[str, Any]:
    keys = ("Name", "Enabled", "TlsPolicy", "ScanEnabled", "Recipients", "Actions")
    return {k: rule.get(k) for k in keys}


def mail_from(run: Run) -> None:
    """Bounces come back to bounce.<domain>; without its MX record SES rejects the send (FR-1)."""
    cfg, ses = run.cfg, client("ses")
    wanted = f"{MAIL_FROM_LABEL}.{cfg.domain_name}"
    attrs = ses.get_identity_mail_from_domain_attributes(Identities=[cfg.domain_name]).get("MailFromDomainAttributes", {})
    current = attrs.get(cfg.domain_name, {})
    if current.get("MailFromDomain") == wanted and current.get("BehaviorOnMXFailure") == "RejectMessage":
        run.note("ses-mail-from", wanted, UNCHANGED)
        return
    run.note("ses-mail-from", wanted, UPDATE if current.get("MailFromDomain") else CREATE, "BehaviorOnMXFailure=RejectMessage")
    if run.apply:
        ses.set_identity_mail_from_domain(Identity=cfg.domain_name, MailFromDomain=wanted,
                                          BehaviorOnMXFailure="RejectMessage")


# --- alarms --------------------------------------------------------------------------------------

def alarms(run: Run, account: str) -> None:
    cfg = run.cfg
    action = topic_arn(cfg, cfg.alert_topic)
    wanted: list[dict[str, Any]] = [{
        "AlarmName": f"{dlq_name(q)}-not-empty", "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": dlq_name(q)}], "Statistic": "Maximum", "Period": 60,
        "EvaluationPeriods": 1, "Threshold": 1.0, "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "AlarmDescription": f"A send failed for good: its message is in {dlq_name(q)}",
    } for q in sender_queues(cfg)] + [{
        "AlarmName": f"{function_name(cfg, f.name)}-errors", "Namespace": "AWS/Lambda", "MetricName": "Errors",
        "Dimensions": [{"Name": "FunctionName", "Value": function_name(cfg, f.name)}], "Statistic": "Sum", "Period": 300,
        "EvaluationPeriods": 1, "Threshold": 0.0, "ComparisonOperator": "GreaterThanThreshold",
        "AlarmDescription": f"{f.name} raised errors in the last 5 minutes",
    } for f in FUNCTIONS]
    cw = client("cloudwatch")
    names = [w["AlarmName"] for w in wanted]
    current = {a["AlarmName"]: a for start in range(0, len(names), 100)
               for a in cw.describe_alarms(AlarmNames=names[start:start + 100]).get("MetricAlarms", [])}
    for alarm in wanted:
        full = {**alarm, "AlarmActions": [action], "OKActions": [], "TreatMissingData": "notBreaching",
                "ActionsEnabled": True}
        have = current.get(alarm["AlarmName"])
        if have is not None and all(_same(have.get(k), v) for k, v in full.items()):
            run.note("cloudwatch-alarm", alarm["AlarmName"], UNCHANGED)
            continue
        run.note("cloudwatch-alarm", alarm["AlarmName"], CREATE if have is None else UPDATE, "-> " + cfg.alert_topic)
        if run.apply:
            cw.put_metric_alarm(**full)


def _same(have: Any, want: Any) -> bool:
    if isinstance(want, float):
        return have is not None and float(have) == want
    return bool(_canonical(have) == _canonical(want))


def wire(run: Run, account: str, source_env: dict[str, str], images: dict[str, Published]) -> None:
    """Roles, functions and everything that invokes them, in dependency order."""
    cfg = run.cfg
    for spec in FUNCTIONS:
        role_arn = role(run, account, spec.name)
        function_log_group(run, spec.name)
        lambda_function(run, spec, images[spec.name], role_arn, environment(cfg, spec, source_env))
    for spec in SENDERS:
        event_source(run, account, spec)
    bucket_arn = f"arn:aws:s3:::{cfg.bucket}"
    permission(run, account, "attachment-extractor", "s3-attachments", "s3.amazonaws.com", bucket_arn)
    attachments_notification(run, "LambdaFunctionConfigurations", "LambdaFunctionArn",
                             alias_arn(cfg, account, "attachment-extractor"), "attachment-extractor")
    feedback = topic_arn(cfg, cfg.feedback_topic)
    permission(run, account, "inbound-handler", "sns-ses-feedback", "sns.amazonaws.com", feedback)
    subscription(run, feedback, "lambda", alias_arn(cfg, account, "inbound-handler"),
                 f"{cfg.feedback_topic} -> inbound-handler:{ALIAS}")
    subscription(run, topic_arn(cfg, cfg.alert_topic), "email", cfg.private_email, f"{cfg.alert_topic} -> owner e-mail")
    rules = f"arn:aws:ses:{cfg.region}:{account}:receipt-rule-set/{rule_set(cfg)}:receipt-rule/{rule_set(cfg)}"
    permission(run, account, "reply-handler", "ses-receipt-thread", "ses.amazonaws.com", rules + "-thread")
    permission(run, account, "inbound-handler", "ses-receipt-public", "ses.amazonaws.com", rules + "-public")
    bucket_policy_for_ses(run, account)
    receipt_rules(run, account)
    mail_from(run)
    alarms(run, account)

