"""Create or converge every resource the system needs, wherever ``AWS_ENDPOINT_URL`` points.

One module for both local modes (``email-handler dev`` and the compose init service), the tests and
``email-handler deploy``. Each resource is compared with what exists and reported as ``create``,
``update`` or ``unchanged``; with ``apply=False`` nothing is touched and the same report is the plan
(``deploy --dry-run``). Owner-edited state (the spam-rules file and its SSM parameter) is created
once and never overwritten.

``local=True`` adds what AWS does for us and the local event wiring needs instead
(common.local.wiring): a queue for S3 notifications, a queue subscribed to the SES feedback topic,
and a queue that stands in for Lambda's asynchronous invocations (SES receipt actions).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, NamedTuple

from common.aws import client, or_none
from common.aws.sts import account_id
from common.runtime.config import Config
from common.runtime.functions import QUEUE_VISIBILITY_S, dlq_name
from common.store import layout

MAIN_RETENTION_S = 24 * 3600  # seed values: main queues 1 day, DLQs 7 days
DLQ_RETENTION_S = 7 * 24 * 3600
LOG_RETENTION_DAYS = 90
FEEDBACK_EVENTS = ("delivery", "bounce", "complaint")
# Lambda retries an asynchronous invocation twice: three receives, then the local DLQ.
ASYNC_ATTEMPTS = 3
ASYNC_RETRY_S = 10

class Index(NamedTuple):
    """A global secondary index: its hash key and the attributes it projects beside the keys."""

    key: str
    include: tuple[str, ...] = ()


# table name field -> (hash key, TTL attribute or "", global secondary indexes by name)
TABLES: dict[str, tuple[str, str, dict[str, Index]]] = {
    "conversations_table": ("conversationId", "", {}),
    # aws-lambda-powertools' idempotency layout; a completed send also holds its SES message id and
    # correlation id (common.senders.idempotency): the index is SES feedback's fallback correlation.
    "idempotency_table": ("id", "expiration", {"sesMessageId": Index("sesMessageId", ("correlationId",))}),
    "send_status_table": ("id", "expiresAt", {}),
    "suppression_table": ("email", "expiresAt", {}),  # suppressions from transient bounces expire
    "sender_lists_table": ("entry", "", {}),  # the owner's block/allow lists
    # quarantined mail; the sparse index holds what the next daily digest must list
    "quarantine_table": ("id", "", {"pendingDigest": Index("pendingDigest")}),
}

CREATE, UPDATE, UNCHANGED = "create", "update", "unchanged"


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    name: str
    action: str  # create | update | unchanged
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.action:<9} {self.kind:<16} {self.name}{'  (' + self.detail + ')' if self.detail else ''}"


def default_spam_rules() -> str:
    return resources.files("common").joinpath("data/spam-rules.txt").read_text()


def local_queue(cfg: Config, purpose: str) -> str:
    """Queues of the local event wiring: ``s3-events``, ``ses-feedback``, ``invocations``."""
    return cfg.name(f"wiring-{purpose}")


def sender_queues(cfg: Config) -> tuple[str, ...]:
    return (cfg.ack_queue, cfg.forward_queue, cfg.reply_queue)


class Run:
    """Collects the changes of one provisioning run and applies them unless it is a dry run."""

    def __init__(self, cfg: Config, apply: bool, report: Callable[[Change], None] | None) -> None:
        self.cfg, self.apply, self.report = cfg, apply, report
        self.changes: list[Change] = []

    def note(self, kind: str, name: str, action: str, detail: str = "") -> str:
        change = Change(kind, name, action, detail)
        self.changes.append(change)
        if self.report:
            self.report(change)
        return action


def provision(cfg: Config, report: Callable[[Change], None] | None = None, *, apply: bool = True,
              local: bool = False) -> list[Change]:
    """The local modes' provisioning: the shared resources and the six function roles (the
    production policies from deploy.iam, so enforced IAM locally checks what AWS will check)."""
    from deploy import iam

    run = Run(cfg, apply, report)
    shared(run, local=local)
    iam.local_roles(run)
    return run.changes


def shared(run: Run, local: bool = False) -> None:
    """The resources every mode needs (and with ``local``, the local wiring's), onto ``run``."""
    cfg = run.cfg
    _bucket(run, cfg)
    for field_name, (key, ttl, indexes) in TABLES.items():
        _table(run, getattr(cfg, field_name), key, ttl, indexes)
    for queue in sender_queues(cfg):
        _queue_with_dlq(run, queue, QUEUE_VISIBILITY_S, cfg.max_receive_count)
    for topic in (cfg.alert_topic, cfg.feedback_topic):
        _topic(run, topic)
    _ses_identity(run, cfg.domain_name)
    _configuration_set(run, cfg)
    log_group(run, cfg.spam_log_group)
    _spam_rules(run, cfg)
    _parameter(run, cfg.spam_rules_parameter, layout.SPAM_RULES)
    if local:
        _local_wiring(run, cfg)


# --- existence helpers ---------------------------------------------------------------------------

def _exists(call: Callable[[], Any], *missing_codes: str) -> bool:
    # HEAD requests report a bare "404" as their code.
    return or_none(lambda: call() or True, *missing_codes) is not None


def queue_url(name: str) -> str | None:
    found = or_none(lambda: client("sqs").get_queue_url(QueueName=name), "AWS.SimpleQueueService.NonExistentQueue",
                    "QueueDoesNotExist")
    return str(found["QueueUrl"]) if found else None


def queue_arn(cfg: Config, name: str) -> str:
    """The ARN a queue has (or will have): read when it exists, derived from the account otherwise."""
    url = queue_url(name)
    if url:
        return str(client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
    return f"arn:aws:sqs:{cfg.region}:{account_id()}:{name}"


def topic_arn(cfg: Config, name: str) -> str:
    from common.aws import sns

    return sns.topic_arn(name, cfg.region)


def bucket_exists(bucket: str) -> bool:
    return _exists(lambda: client("s3").head_bucket(Bucket=bucket), "404", "NoSuchBucket", "NotFound")


# --- shared resources ----------------------------------------------------------------------------

def _bucket(run: Run, cfg: Config) -> None:
    s3 = client("s3")
    if bucket_exists(cfg.bucket):
        run.note("s3-bucket", cfg.bucket, UNCHANGED)
        return
    run.note("s3-bucket", cfg.bucket, CREATE, f"private, lifecycle for {layout.STAGING} and {layout.QUEUE_PAYLOADS}")
    if not run.apply:
        return
    kwargs: dict[str, Any] = {}
    if cfg.region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": cfg.region}
    s3.create_bucket(Bucket=cfg.bucket, **kwargs)
    s3.put_public_access_block(Bucket=cfg.bucket, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    s3.put_bucket_lifecycle_configuration(Bucket=cfg.bucket, LifecycleConfiguration={"Rules": [
        # Claim-check payloads only matter while their queue message can still be received.
        {"ID": "queue-payloads", "Filter": {"Prefix": layout.QUEUE_PAYLOADS}, "Status": "Enabled", "Expiration": {"Days": 14}},
        {"ID": "staging", "Filter": {"Prefix": layout.STAGING}, "Status": "Enabled", "Expiration": {"Days": 30}},
    ]})


def _index(name: str, index: Index) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.include)} \
        if index.include else {"ProjectionType": "KEYS_ONLY"}
    return {"IndexName": name, "KeySchema": [{"AttributeName": index.key, "KeyType": "HASH"}], "Projection": projection}


def _table(run: Run, name: str, key: str, ttl: str, indexes: dict[str, Index]) -> None:
    ddb = client("dynamodb")
    described = or_none(lambda: ddb.describe_table(TableName=name), "ResourceNotFoundException")
    existing = described["Table"] if described else None
    if existing is None:
        run.note("dynamodb-table", name, CREATE, f"key {key}" + (f", TTL {ttl}" if ttl else "")
                 + "".join(f", index {i}" for i in indexes))
        if not run.apply:
            return
        attributes = sorted({key, *(i.key for i in indexes.values())})
        extra: dict[str, Any] = {"GlobalSecondaryIndexes": [_index(i, k) for i, k in indexes.items()]} if indexes else {}
        ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in attributes],
                         KeySchema=[{"AttributeName": key, "KeyType": "HASH"}], **extra)
        ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        if ttl:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl})
        return
    have = {i["IndexName"] for i in existing.get("GlobalSecondaryIndexes", [])}
    missing = [i for i in indexes if i not in have]
    ttl_on = True
    if ttl:
        status = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        ttl_on = status.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and status.get("AttributeName") == ttl
    if not missing and ttl_on:
        run.note("dynamodb-table", name, UNCHANGED)
        return
    run.note("dynamodb-table", name, UPDATE, ", ".join([f"add index {i}" for i in missing] + ([] if ttl_on else [f"TTL {ttl}"])))
    if not run.apply:
        return
    for index in missing:  # an older deployment: add what this version queries
        ddb.update_table(TableName=name, AttributeDefinitions=[{"AttributeName": indexes[index].key, "AttributeType": "S"}],
                         GlobalSecondaryIndexUpdates=[{"Create": _index(index, indexes[index])}])
    if not ttl_on:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl})


def _queue(run: Run, name: str, attributes: dict[str, str]) -> None:
    sqs = client("sqs")
    url = queue_url(name)
    if url is None:
        run.note("sqs-queue", name, CREATE)
        if run.apply:
            sqs.create_queue(QueueName=name, Attributes=attributes)
        return
    current = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(attributes))["Attributes"]
    differ = sorted(k for k, v in attributes.items() if _norm(current.get(k)) != _norm(v))
    if not differ:
        run.note("sqs-queue", name, UNCHANGED)
        return
    run.note("sqs-queue", name, UPDATE, ", ".join(differ))
    if run.apply:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={k: attributes[k] for k in differ})


def _queue_with_dlq(run: Run, queue: str, visibility_s: int, max_receive_count: int,
                    retention_s: int = MAIN_RETENTION_S, extra: dict[str, str] | None = None) -> None:
    dlq = dlq_name(queue)
    _queue(run, dlq, {"MessageRetentionPeriod": str(DLQ_RETENTION_S)})
    dlq_arn = queue_arn(run.cfg, dlq)
    _queue(run, queue, {
        "MessageRetentionPeriod": str(retention_s),
        "VisibilityTimeout": str(visibility_s),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}),
        **(extra or {}),
    })


def _norm(value: str | None) -> Any:
    try:
        parsed = json.loads(value) if value else value
    except json.JSONDecodeError:
        return value
    if isinstance(parsed, dict):  # SQS answers maxReceiveCount as a number or a string
        return {k: str(v) for k, v in parsed.items()}
    return str(parsed) if isinstance(parsed, int | float) else parsed


def _topic(run: Run, name: str) -> None:
    sns = client("sns")
    existing = {t["TopicArn"].rsplit(":", 1)[1] for page in sns.get_paginator("list_topics").paginate() for t in page["Topics"]}
    if name in existing:
        run.note("sns-topic", name, UNCHANGED)
        return
    run.note("sns-topic", name, CREATE)
    if run.apply:
        sns.create_topic(Name=name)


def _ses_identity(run: Run, domain: str) -> None:
    """The sending and receiving domain, with Easy DKIM (SES signs every message it sends)."""
    ses = client("ses")
    if domain not in ses.list_identities(IdentityType="Domain").get("Identities", []):
        run.note("ses-identity", domain, CREATE, "with DKIM; publish the DNS records the deploy prints")
        if run.apply:
            ses.verify_domain_identity(Domain=domain)
            ses.verify_domain_dkim(Domain=domain)
        return
    dkim = ses.get_identity_dkim_attributes(Identities=[domain]).get("DkimAttributes", {}).get(domain, {})
    if dkim.get("DkimTokens"):
        run.note("ses-identity", domain, UNCHANGED)
        return
    run.note("ses-identity", domain, UPDATE, "enable DKIM")
    if run.apply:
        ses.verify_domain_dkim(Domain=domain)


def _configuration_set(run: Run, cfg: Config) -> None:
    """SES publishes Delivery/Bounce/Complaint of every send made with this set to the feedback topic."""
    ses = client("ses")
    name = cfg.ses_configuration_set
    destination: dict[str, Any] = {"Name": "feedback", "Enabled": True, "MatchingEventTypes": list(FEEDBACK_EVENTS),
                   "SNSDestination": {"TopicARN": topic_arn(cfg, cfg.feedback_topic)}}
    described = or_none(lambda: ses.describe_configuration_set(
        ConfigurationSetName=name, ConfigurationSetAttributeNames=["eventDestinations"]), "ConfigurationSetDoesNotExist")
    if described is None:
        run.note("ses-config-set", name, CREATE, "events delivery, bounce, complaint -> " + cfg.feedback_topic)
        if run.apply:
            ses.create_configuration_set(ConfigurationSet={"Name": name})
            ses.create_configuration_set_event_destination(ConfigurationSetName=name, EventDestination=destination)
        return
    current = next((d for d in described.get("EventDestinations", []) if d.get("Name") == "feedback"), None)
    if current is not None and sorted(current.get("MatchingEventTypes", [])) == sorted(FEEDBACK_EVENTS) and \
            current.get("SNSDestination", {}).get("TopicARN") == destination["SNSDestination"]["TopicARN"]:
        run.note("ses-config-set", name, UNCHANGED)
        return
    if current is None and "EventDestinations" not in described:
        # An emulator that does not report event destinations: nothing to compare with.
        run.note("ses-config-set", name, UNCHANGED, "event destinations not reported by this endpoint")
        return
    run.note("ses-config-set", name, UPDATE, "feedback event destination")
    if run.apply:
        if current is None:
            ses.create_configuration_set_event_destination(ConfigurationSetName=name, EventDestination=destination)
        else:
            ses.update_configuration_set_event_destination(ConfigurationSetName=name, EventDestination=destination)


def log_group(run: Run, name: str, retention_days: int = LOG_RETENTION_DAYS) -> None:
    logs = client("logs")
    found = logs.describe_log_groups(logGroupNamePrefix=name).get("logGroups", [])
    group = next((g for g in found if g["logGroupName"] == name), None)
    if group is not None and group.get("retentionInDays") == retention_days:
        run.note("log-group", name, UNCHANGED)
        return
    run.note("log-group", name, CREATE if group is None else UPDATE, f"retention {retention_days} days")
    if not run.apply:
        return
    if group is None:
        logs.create_log_group(logGroupName=name)
    logs.put_retention_policy(logGroupName=name, retentionInDays=retention_days)


def _spam_rules(run: Run, cfg: Config) -> None:
    s3 = client("s3")
    # Never overwrite the owner's edited list (and a bucket created in this dry run has no objects).
    if (run.apply or bucket_exists(cfg.bucket)) and \
            _exists(lambda: s3.head_object(Bucket=cfg.bucket, Key=layout.SPAM_RULES), "404", "NoSuchKey", "NotFound"):
        run.note("s3-object", layout.SPAM_RULES, UNCHANGED, "owner-edited; never overwritten")
        return
    run.note("s3-object", layout.SPAM_RULES, CREATE, "default keyword lists")
    if run.apply:
        s3.put_object(Bucket=cfg.bucket, Key=layout.SPAM_RULES, Body=default_spam_rules().encode(), ContentType="text/plain")


def _parameter(run: Run, name: str, value: str) -> None:
    ssm = client("ssm")
    if _exists(lambda: ssm.get_parameter(Name=name), "ParameterNotFound"):
        run.note("ssm-parameter", name, UNCHANGED, "owner-edited; never overwritten")
        return
    run.note("ssm-parameter", name, CREATE, f"= {value}")
    if run.apply:
        ssm.put_parameter(Name=name, Value=value, Type="String")


# --- local event wiring --------------------------------------------------------------------------

def _allow_sender(queue: str, source_arn: str, service: str) -> str:
    arn = f"arn:aws:sqs:*:*:{queue}"
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": service}, "Action": "sqs:SendMessage", "Resource": arn,
        "Condition": {"ArnEquals": {"aws:SourceArn": source_arn}}}]}, sort_keys=True)


def _local_wiring(run: Run, cfg: Config) -> None:
    s3_events, feedback, invocations = (local_queue(cfg, p) for p in ("s3-events", "ses-feedback", "invocations"))
    bucket_arn = f"arn:aws:s3:::{cfg.bucket}"
    feedback_arn = topic_arn(cfg, cfg.feedback_topic)
    # S3 and SNS invoke Lambda asynchronously too: the same three attempts, then a DLQ.
    _queue_with_dlq(run, s3_events, ASYNC_RETRY_S, ASYNC_ATTEMPTS,
                    extra={"Policy": _allow_sender(s3_events, bucket_arn, "s3.amazonaws.com")})
    _queue_with_dlq(run, feedback, ASYNC_RETRY_S, ASYNC_ATTEMPTS,
                    extra={"Policy": _allow_sender(feedback, feedback_arn, "sns.amazonaws.com")})
    _queue_with_dlq(run, invocations, ASYNC_RETRY_S, ASYNC_ATTEMPTS)
    feedback_queue, events_queue = queue_arn(cfg, feedback), queue_arn(cfg, s3_events)
    subscription(run, feedback_arn, "sqs", feedback_queue, f"{cfg.feedback_topic} -> {feedback}")
    attachments_notification(run, "QueueConfigurations", "QueueArn", events_queue, s3_events)


def subscription(run: Run, topic: str, protocol: str, endpoint: str, label: str) -> None:
    sns = client("sns")
    subs: list[dict[str, Any]] = []
    if run.apply or _exists(lambda: sns.get_topic_attributes(TopicArn=topic), "NotFound", "NotFoundException"):
        subs = sns.list_subscriptions_by_topic(TopicArn=topic).get("Subscriptions", [])
    if any(s.get("Endpoint") == endpoint and s.get("Protocol") == protocol for s in subs):
        run.note("sns-subscription", label, UNCHANGED)
        return
    run.note("sns-subscription", label, CREATE, protocol + (" (confirm the e-mail AWS sends)" if protocol == "email" else ""))
    if run.apply:
        sns.subscribe(TopicArn=topic, Protocol=protocol, Endpoint=endpoint)


def attachments_notification(run: Run, kind: str, arn_key: str, target: str, target_name: str) -> None:
    """S3 ObjectCreated under attachments/ -> ``target`` (a queue locally, the extractor on AWS).

    ``kind`` is the notification list (QueueConfigurations, LambdaFunctionConfigurations) and
    ``arn_key`` the target's field in it; this configuration replaces the bucket's others.
    """
    bucket = run.cfg.bucket
    wanted = {"Id": "attachments-to-extractor", arn_key: target, "Events": ["s3:ObjectCreated:*"],
              "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": layout.ATTACHMENTS}]}}}
    s3 = client("s3")
    current = s3.get_bucket_notification_configuration(Bucket=bucket).get(kind, []) if run.apply or bucket_exists(bucket) else []
    if any(c.get(arn_key) == target and layout.ATTACHMENTS in json.dumps(c.get("Filter", {})) for c in current):
        run.note("s3-notification", f"{bucket}/{layout.ATTACHMENTS}", UNCHANGED)
        return
    run.note("s3-notification", f"{bucket}/{layout.ATTACHMENTS}", CREATE, "ObjectCreated -> " + target_name)
    if run.apply:
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={kind: [wanted]})
