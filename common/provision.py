"""Create every resource the system needs, idempotently, wherever ``AWS_ENDPOINT_URL`` points.

Used by both local modes (``email-handler dev`` and the compose init service), by the tests and by
``email-handler deploy``. Each step reports ``created`` or ``unchanged`` so a second run can say
that nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from common.aws import client, error_code
from common.config import Config
from common.functions import QUEUE_VISIBILITY_S

SPAM_RULES_KEY = "config/spam-rules.txt"
MAIN_RETENTION_S = 24 * 3600  # seed values: main queues 1 day, DLQs 7 days
DLQ_RETENTION_S = 7 * 24 * 3600

# table name field -> (hash key, TTL attribute or "")
TABLES = {
    "conversations_table": ("conversationId", ""),
    "idempotency_table": ("id", "expiration"),  # aws-lambda-powertools' idempotency layout
    "send_status_table": ("id", "expiresAt"),
    "suppression_table": ("email", ""),
}


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    name: str
    action: str  # created | unchanged | updated


def default_spam_rules() -> str:
    return resources.files("common").joinpath("data/spam-rules.txt").read_text()


def dlq_name(queue: str) -> str:
    return f"{queue}-dlq"


def provision(cfg: Config, report: Callable[[Change], None] | None = None) -> list[Change]:
    changes: list[Change] = []

    def note(kind: str, name: str, created: bool) -> None:
        change = Change(kind, name, "created" if created else "unchanged")
        changes.append(change)
        if report:
            report(change)

    note("s3-bucket", cfg.bucket, _bucket(cfg))
    for field_name, (key, ttl) in TABLES.items():
        table = getattr(cfg, field_name)
        note("dynamodb-table", table, _table(table, key, ttl))
    for queue in (cfg.ack_queue, cfg.forward_queue, cfg.reply_queue):
        note("sqs-queue", dlq_name(queue), _queue(dlq_name(queue), {"MessageRetentionPeriod": str(DLQ_RETENTION_S)}))
        dlq_arn = client("sqs").get_queue_attributes(
            QueueUrl=client("sqs").get_queue_url(QueueName=dlq_name(queue))["QueueUrl"], AttributeNames=["QueueArn"],
        )["Attributes"]["QueueArn"]
        note("sqs-queue", queue, _queue(queue, {
            "MessageRetentionPeriod": str(MAIN_RETENTION_S),
            "VisibilityTimeout": str(QUEUE_VISIBILITY_S),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(cfg.max_receive_count)}),
        }))
    for topic in (cfg.alert_topic, cfg.feedback_topic):
        note("sns-topic", topic, _topic(topic))
    note("ses-identity", cfg.domain_name, _ses_domain(cfg.domain_name))
    note("log-group", cfg.spam_log_group, _log_group(cfg.spam_log_group))
    note("s3-object", SPAM_RULES_KEY, _spam_rules(cfg))
    note("ssm-parameter", cfg.spam_rules_parameter, _parameter(cfg.spam_rules_parameter, SPAM_RULES_KEY))
    return changes


def _exists(call: Callable[[], Any], *missing_codes: str) -> bool:
    try:
        call()
    except Exception as exc:
        if error_code(exc) in missing_codes:  # HEAD requests report a bare "404"
            return False
        raise
    return True


def _bucket(cfg: Config) -> bool:
    s3 = client("s3")
    if _exists(lambda: s3.head_bucket(Bucket=cfg.bucket), "404", "NoSuchBucket", "NotFound"):
        return False
    kwargs: dict[str, Any] = {}
    if cfg.region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": cfg.region}
    s3.create_bucket(Bucket=cfg.bucket, **kwargs)
    s3.put_public_access_block(Bucket=cfg.bucket, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    s3.put_bucket_lifecycle_configuration(Bucket=cfg.bucket, LifecycleConfiguration={"Rules": [
        # Claim-check payloads only matter while their queue message can still be received.
        {"ID": "queue-payloads", "Filter": {"Prefix": "queue-payloads/"}, "Status": "Enabled", "Expiration": {"Days": 14}},
        {"ID": "staging", "Filter": {"Prefix": "staging/"}, "Status": "Enabled", "Expiration": {"Days": 30}},
    ]})
    return True


def _table(name: str, key: str, ttl: str) -> bool:
    ddb = client("dynamodb")
    if _exists(lambda: ddb.describe_table(TableName=name), "ResourceNotFoundException"):
        return False
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": key, "KeyType": "HASH"}])
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    if ttl:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl})
    return True


def _queue(name: str, attributes: dict[str, str]) -> bool:
    sqs = client("sqs")
    try:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except Exception as exc:
        if error_code(exc) not in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            raise
        sqs.create_queue(QueueName=name, Attributes=attributes)
        return True
    current = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(attributes))["Attributes"]
    if any(_norm(current.get(k)) != _norm(v) for k, v in attributes.items()):
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    return False


def _norm(value: str | None) -> Any:
    try:
        return json.loads(value) if value else value
    except json.JSONDecodeError:
        return value


def _topic(name: str) -> bool:
    sns = client("sns")
    existing = {t["TopicArn"].rsplit(":", 1)[1] for page in sns.get_paginator("list_topics").paginate() for t in page["Topics"]}
    if name in existing:
        return False
    sns.create_topic(Name=name)
    return True


def _ses_domain(domain: str) -> bool:
    ses = client("ses")
    if domain in ses.list_identities(IdentityType="Domain").get("Identities", []):
        return False
    ses.verify_domain_identity(Domain=domain)
    return True


def _log_group(name: str) -> bool:
    logs = client("logs")
    found = logs.describe_log_groups(logGroupNamePrefix=name).get("logGroups", [])
    if any(g["logGroupName"] == name for g in found):
        return False
    logs.create_log_group(logGroupName=name)
    logs.put_retention_policy(logGroupName=name, retentionInDays=90)
    return True


def _spam_rules(cfg: Config) -> bool:
    s3 = client("s3")
    # Never overwrite the owner's edited list.
    if _exists(lambda: s3.head_object(Bucket=cfg.bucket, Key=SPAM_RULES_KEY), "404", "NoSuchKey", "NotFound"):
        return False
    s3.put_object(Bucket=cfg.bucket, Key=SPAM_RULES_KEY, Body=default_spam_rules().encode(), ContentType="text/plain")
    return True


def _parameter(name: str, value: str) -> bool:
    ssm = client("ssm")
    if _exists(lambda: ssm.get_parameter(Name=name), "ParameterNotFound"):
        return False
    ssm.put_parameter(Name=name, Value=value, Type="String")
    return True
