"""Create or converge every resource the system needs, wherever ``AWS_ENDPOINT_URL`` points.

One module for ``email-handler deploy``, the local modes' provisioning (local/provision.py,
which adds what the local event wiring needs) and the tests. Each resource is compared with what
exists and reported as ``create``, ``update`` or ``unchanged``; with ``apply=False`` nothing is
touched and the same report is the plan (``deploy --dry-run``). Owner-edited state (the spam-rules
file and its SSM parameter) is created once and never overwritten.

S3 notifications go to the attachment queue in every mode (an SQS event source on AWS; the local event
wiring polls it as Lambda's event source mapping would).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from importlib import resources
from typing import Any, NamedTuple

from common.aws import control_client, error_code, or_none, sns
from common.aws.sts import account_id
from common.runtime.config import dlq_name, secret_parameters
from common.store import layout
from deploy import propagation
from deploy.config import Config, env_name
from deploy.errors import DeployError
from deploy.functions import BY_NAME, QUEUE_VISIBILITY_S
from deploy.plan import CREATE, UNCHANGED, UPDATE, Change, Run, canonical  # noqa: F401 (re-exported)

MAIN_RETENTION_S = 24 * 3600  # main queues 1 day
# DLQs keep a message 14 days, SQS's maximum: a forward waiting out a hold on the owner's mailbox
# (common/store/holds.py) can stay there longer than a week before it is redriven.
DLQ_RETENTION_S = 14 * 24 * 3600
# How long a sender queue message can live: main queue + DLQ from its first enqueue, and once more after
# a DLQ redrive, which restarts retention ("redriven messages are treated as new messages", SQS DG).
# Its claim-check payload must live as long (and the send record, IDEMPOTENCY_TTL_SECONDS, test_config).
MESSAGE_LIFETIME_DAYS = 2 * (MAIN_RETENTION_S + DLQ_RETENTION_S) // 86400
LOG_RETENTION_DAYS = 90
FEEDBACK_EVENTS = ("delivery", "bounce", "complaint")


class Index(NamedTuple):
    """A global secondary index: its hash key and the attributes it projects beside the keys."""

    key: str
    include: tuple[str, ...] = ()


# table name field -> (hash key, TTL attribute or "", global secondary indexes by name)
TABLES: dict[str, tuple[str, str, dict[str, Index]]] = {
    "conversations_table": (
        "conversationId",
        "expiresAt",
        {},
    ),  # RETENTION_ARCHIVE_DAYS after the last message
    # aws-lambda-powertools' idempotency layout; a completed send also holds its SES message id and
    # correlation id (common.senders.idempotency): the index is SES feedback's fallback correlation.
    "idempotency_table": ("id", "expiration", {"sesMessageId": Index("sesMessageId", ("correlationId",))}),
    "send_status_table": ("id", "expiresAt", {}),
    "suppression_table": ("email", "expiresAt", {}),  # suppressions from transient bounces expire
    "sender_lists_table": ("entry", "", {}),  # the owner's block/allow lists
    # quarantined mail; the sparse index holds what the next daily digest must list
    "quarantine_table": (
        "id",
        "expiresAt",
        {"pendingDigest": Index("pendingDigest")},
    ),  # with its spam/ object
}


def default_spam_rules() -> str:
    return resources.files("common").joinpath("data/spam-rules.txt").read_text()


def attachment_queue(cfg: Config) -> str:
    """S3 ObjectCreated under attachments/ -> this queue -> attachment-extractor (an SQS event source with
    MaximumConcurrency, deploy.triggers), in every mode; docs/decisions.md says why not S3 -> Lambda."""
    return cfg.name("attachment-events")


# Lambda's guidance for an SQS event source: a visibility timeout of at least six times the function's
# timeout (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
EXTRACT_VISIBILITY_S = 6 * BY_NAME["attachment-extractor"].timeout_s


def sender_queues(cfg: Config) -> tuple[str, ...]:
    return (cfg.ack_queue, cfg.forward_queue, cfg.reply_queue)


def event_queues(cfg: Config) -> tuple[str, ...]:
    """Every queue a function consumes through an SQS event source."""
    return (*sender_queues(cfg), attachment_queue(cfg))


def shared(run: Run, identity: bool = True, account: str = "") -> None:
    """The resources every mode needs, onto ``run``; the deploy converges the SES identity first, itself
    (``identity=False``), and names its ``account`` for the feedback topic's policy, which is put before
    the configuration set's SNS event destination that needs it (SES checks that it may publish to the
    topic when the destination is created: "you must ... allow Amazon SES to publish to the topic", SES
    DG, "Set up an Amazon SNS event destination for event publishing")."""
    cfg = run.cfg
    _bucket(run, cfg)
    for field_name, (key, ttl, indexes) in TABLES.items():
        _table(run, getattr(cfg, field_name), key, ttl, indexes)
    for spec in queues_with_dlq(cfg):
        queue_with_dlq(run, spec.name, spec.visibility_s, cfg.max_receive_count, extra=spec.extra)
    name = attachment_queue(cfg)
    attachments_notification(run, "QueueConfigurations", "QueueArn", queue_arn(cfg, name), name)
    for topic in (cfg.alert_topic, cfg.feedback_topic):
        _topic(run, topic)
    if account:
        feedback_topic_policy(run, account)
    if identity:
        ses_identity(run, cfg.domain_name)
    _configuration_set(run, cfg)
    log_group(run, cfg.spam_log_group)
    _spam_rules(run, cfg)
    _parameter(run, cfg.spam_rules_parameter, layout.SPAM_RULES)
    secrets(run)
    owner_key(run)
    mailbox_keys(run)


# --- existence helpers ---------------------------------------------------------------------------


def _exists(call: Callable[[], Any], *missing_codes: str) -> bool:
    # HEAD requests report a bare "404" as their code.
    return or_none(lambda: call() or True, *missing_codes) is not None


def queue_url(name: str) -> str | None:
    found = or_none(
        lambda: control_client("sqs").get_queue_url(QueueName=name),
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
    )
    return str(found["QueueUrl"]) if found else None


def queue_arn(cfg: Config, name: str) -> str:
    """The ARN a queue has (or will have): read when it exists, derived from the account otherwise."""
    url = queue_url(name)
    if url:
        return str(
            control_client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
        )
    return f"arn:aws:sqs:{cfg.region}:{account_id()}:{name}"


def topic_arn(cfg: Config, name: str) -> str:

    return sns.topic_arn(name, cfg.region)


def bucket_exists(bucket: str) -> bool:
    return _exists(lambda: control_client("s3").head_bucket(Bucket=bucket), "404", "NoSuchBucket", "NotFound")


# --- shared resources ----------------------------------------------------------------------------

PUBLIC_ACCESS_BLOCK = {
    "BlockPublicAcls": True,
    "IgnorePublicAcls": True,
    "BlockPublicPolicy": True,
    "RestrictPublicBuckets": True,
}
# A received mail stays in staging/ until it is handled; a failed one until Lambda's async retries
# (at most 6 h) and the async DLQ (DLQ_RETENTION_S) are over, since `email-handler replay` re-invokes
# it from there and reads it from staging: one day more than that, never longer.
STAGING_DAYS = DLQ_RETENTION_S // 86400 + 1


def lifecycle(cfg: Config) -> list[dict[str, Any]]:
    """The mail bucket's lifecycle rules, one per prefix; a retention of 0 days has no rule (kept for ever).
    Expiration counts from each object's creation ("Days ... after creation", S3 User Guide, Lifecycle
    configuration elements)."""
    days = [
        # Claim-check payloads only matter while their queue message can still be received.
        ("queue-payloads", layout.QUEUE_PAYLOADS, MESSAGE_LIFETIME_DAYS),
        ("staging", layout.STAGING, STAGING_DAYS),
        ("archive", layout.CONVERSATIONS, cfg.retention_archive_days),
        ("sent", layout.SENT, cfg.retention_archive_days),
        ("attachments", layout.ATTACHMENTS, cfg.retention_attachments_days),
        ("withheld", layout.WITHHELD, cfg.retention_attachments_days),
        ("reply-attachments", layout.REPLY_ATTACHMENTS, cfg.retention_attachments_days),
        ("extracted-text", layout.EXTRACTED, cfg.retention_text_days),
        ("quarantine", layout.SPAM, cfg.retention_quarantine_days),
        ("rejected", layout.REJECTED, cfg.retention_rejected_days),
        ("bounces", layout.BOUNCES, cfg.retention_rejected_days),
    ]
    return [
        {"ID": rule, "Filter": {"Prefix": prefix}, "Status": "Enabled", "Expiration": {"Days": n}}
        for rule, prefix, n in days
        if n > 0
    ]


def _bucket(run: Run, cfg: Config) -> None:
    """The private mail bucket; its public-access block and lifecycle are reconciled on every run."""
    s3 = control_client("s3")
    exists = bucket_exists(cfg.bucket)

    def create() -> None:
        kwargs: dict[str, Any] = {}
        if cfg.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": cfg.region}
        s3.create_bucket(Bucket=cfg.bucket, **kwargs)
        settings(["public access block", "lifecycle"])

    def settings(differ: Any) -> None:
        if "public access block" in differ:
            s3.put_public_access_block(Bucket=cfg.bucket, PublicAccessBlockConfiguration=PUBLIC_ACCESS_BLOCK)
        if "lifecycle" in differ:
            s3.put_bucket_lifecycle_configuration(
                Bucket=cfg.bucket, LifecycleConfiguration={"Rules": lifecycle(cfg)}
            )

    differ = []
    if exists:
        block = or_none(
            lambda: s3.get_public_access_block(Bucket=cfg.bucket), "NoSuchPublicAccessBlockConfiguration"
        )
        if (block or {}).get("PublicAccessBlockConfiguration") != PUBLIC_ACCESS_BLOCK:
            differ.append("public access block")
        rules = or_none(
            lambda: s3.get_bucket_lifecycle_configuration(Bucket=cfg.bucket), "NoSuchLifecycleConfiguration"
        )
        have = {
            r.get("ID"): {k: r.get(k) for k in ("ID", "Filter", "Status", "Expiration")}
            for r in (rules or {}).get("Rules", [])
        }
        wanted = lifecycle(cfg)
        if set(have) != {r["ID"] for r in wanted} or any(
            canonical(have.get(r["ID"])) != canonical(r) for r in wanted
        ):
            differ.append("lifecycle")
    run.converge(
        "s3-bucket",
        cfg.bucket,
        True if exists else None,
        differ,
        create=create,
        update=settings,
        create_detail="private, lifecycle per prefix (retention settings)",
    )


def _index(name: str, index: Index) -> dict[str, Any]:
    projection: dict[str, Any] = (
        {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(index.include)}
        if index.include
        else {"ProjectionType": "KEYS_ONLY"}
    )
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": index.key, "KeyType": "HASH"}],
        "Projection": projection,
    }


def _table(run: Run, name: str, key: str, ttl: str, indexes: dict[str, Index]) -> None:
    ddb = control_client("dynamodb")
    described = or_none(lambda: ddb.describe_table(TableName=name), "ResourceNotFoundException")
    existing = described["Table"] if described else None
    have = {i["IndexName"] for i in (existing or {}).get("GlobalSecondaryIndexes", [])}
    missing = [i for i in indexes if i not in have]
    ttl_on = True
    if ttl and existing is not None:
        status = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        ttl_on = (
            status.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and status.get("AttributeName") == ttl
        )

    def create() -> None:
        attributes = sorted({key, *(i.key for i in indexes.values())})
        extra: dict[str, Any] = (
            {"GlobalSecondaryIndexes": [_index(i, k) for i, k in indexes.items()]} if indexes else {}
        )
        ddb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in attributes],
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            **extra,
        )
        ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        if ttl:
            ddb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
            )

    def update(_: Any) -> None:
        for index in missing:  # an older deployment: add what this version queries
            ddb.update_table(
                TableName=name,
                AttributeDefinitions=[{"AttributeName": indexes[index].key, "AttributeType": "S"}],
                GlobalSecondaryIndexUpdates=[{"Create": _index(index, indexes[index])}],
            )
            _index_active(run, ddb, name, index)
        if not ttl_on:
            ddb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
            )

    run.converge(
        "dynamodb-table",
        name,
        existing,
        [f"add index {i}" for i in missing] + ([] if ttl_on else [f"TTL {ttl}"]),
        create=create,
        update=update,
        create_detail=f"key {key}"
        + (f", TTL {ttl}" if ttl else "")
        + "".join(f", index {i}" for i in indexes),
    )


INDEX_POLL_S = 10.0
INDEX_WAIT_S = 3600.0  # the backfill of a large table takes long; ours are small


def _index_active(run: Run, ddb: Any, table: str, index: str) -> None:
    """A new index is queryable only once DynamoDB has backfilled it (IndexStatus ACTIVE; a Query before
    fails with ValidationException), and the functions moved to ``live`` later in this run query it.
    One index is added at a time, and the table is ACTIVE again before its TTL is set."""
    waited = 0.0
    while True:
        described = ddb.describe_table(TableName=table)["Table"]
        status = next(
            (
                i.get("IndexStatus")
                for i in described.get("GlobalSecondaryIndexes", [])
                if i.get("IndexName") == index
            ),
            None,
        )
        if status == "ACTIVE" and described.get("TableStatus") == "ACTIVE":
            return
        if waited >= INDEX_WAIT_S:
            raise DeployError(
                f"the index {index} of {table} is still {status} after {INDEX_WAIT_S / 60:.0f} minutes",
                "deploy again later: the run continues from here",
            )
        if waited % 60 == 0:
            run.say(
                f"waiting for DynamoDB to build the index {index} of {table} "
                f"(status {status}, {waited:.0f} s)"
            )
        run.sleep(INDEX_POLL_S)
        waited += INDEX_POLL_S


def queue(run: Run, name: str, attributes: dict[str, str]) -> None:
    sqs = control_client("sqs")
    url = queue_url(name)
    current = (
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(attributes))["Attributes"] if url else None
    )
    differ = sorted(
        k for k, v in attributes.items() if current is not None and _norm(current.get(k)) != _norm(v)
    )
    run.converge(
        "sqs-queue",
        name,
        current,
        differ,
        create=lambda: _create_queue(run, sqs, name, attributes),
        update=lambda differ: sqs.set_queue_attributes(
            QueueUrl=url, Attributes={k: attributes[k] for k in differ}
        ),
    )


# "When you delete a queue, you must wait at least 60 seconds before creating a queue with the same
# name" (SQS DeleteQueue): a deploy right after `email-handler destroy` waits that out. The JSON
# protocol reports the query-compatible code.
DELETED_RECENTLY = ("AWS.SimpleQueueService.QueueDeletedRecently", "QueueDeletedRecently")
RECREATE_WAIT_S = 70


def _create_queue(run: Run, sqs: Any, name: str, attributes: dict[str, str]) -> Any:
    waited, step = 0.0, 5.0
    while True:
        try:
            return sqs.create_queue(QueueName=name, Attributes=attributes)
        except Exception as exc:
            if error_code(exc) not in DELETED_RECENTLY or waited >= RECREATE_WAIT_S:
                raise
        pause = min(step, RECREATE_WAIT_S - waited)
        run.say(
            f"waiting for SQS: queue {name} was deleted less than 60 s ago and its name is not free yet "
            f"(waited {waited:.0f} s of at most {RECREATE_WAIT_S} s)"
        )
        run.sleep(pause)
        waited, step = waited + pause, min(step * 2, 20.0)


DLQ_ATTRIBUTES = {"MessageRetentionPeriod": str(DLQ_RETENTION_S)}


class QueueSpec(NamedTuple):
    """A queue with its DLQ: its visibility timeout and attributes beside the usual ones."""

    name: str
    visibility_s: int
    extra: dict[str, str]


def queues_with_dlq(cfg: Config) -> list[QueueSpec]:
    """The senders' queues, then the attachment queue, which S3 may send to for the bucket alone
    ("Granting permissions to publish messages to an SQS queue", S3 User Guide,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/grant-destinations-permissions-to-s3.html) and
    which is notified of attachments (deploy.triggers consumes it)."""
    name = attachment_queue(cfg)
    return [QueueSpec(q, QUEUE_VISIBILITY_S, {}) for q in sender_queues(cfg)] + [
        QueueSpec(
            name,
            EXTRACT_VISIBILITY_S,
            {"Policy": allow_sender(name, f"arn:aws:s3:::{cfg.bucket}", "s3.amazonaws.com")},
        )
    ]


def queue_attributes(
    dlq_arn: str,
    visibility_s: int,
    max_receive_count: int,
    retention_s: int = MAIN_RETENTION_S,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """A main queue's attributes: its retention, visibility and redrive to ``dlq_arn``."""
    return {
        "MessageRetentionPeriod": str(retention_s),
        "VisibilityTimeout": str(visibility_s),
        "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}
        ),
        **(extra or {}),
    }


def queue_with_dlq(
    run: Run,
    queue_name: str,
    visibility_s: int,
    max_receive_count: int,
    retention_s: int = MAIN_RETENTION_S,
    extra: dict[str, str] | None = None,
) -> None:
    dlq = dlq_name(queue_name)
    queue(run, dlq, DLQ_ATTRIBUTES)
    queue(
        run,
        queue_name,
        queue_attributes(queue_arn(run.cfg, dlq), visibility_s, max_receive_count, retention_s, extra),
    )


def _norm(value: str | None) -> Any:
    try:
        parsed = json.loads(value) if value else value
    except json.JSONDecodeError:
        return value
    if isinstance(parsed, dict):  # SQS answers maxReceiveCount as a number or a string
        return {k: str(v) for k, v in parsed.items()}
    return str(parsed) if isinstance(parsed, int | float) else parsed


def _topic(run: Run, name: str) -> None:
    sns = control_client("sns")
    existing = {
        t["TopicArn"].rsplit(":", 1)[1]
        for page in sns.get_paginator("list_topics").paginate()
        for t in page["Topics"]
    }
    run.converge(
        "sns-topic", name, name if name in existing else None, create=lambda: sns.create_topic(Name=name)
    )


def ses_identity(run: Run, domain: str) -> None:
    """The sending and receiving domain, with Easy DKIM (SES signs every message it sends)."""
    ses = control_client("ses")
    exists = domain in ses.list_identities(IdentityType="Domain").get("Identities", [])
    dkim = (
        ses.get_identity_dkim_attributes(Identities=[domain]).get("DkimAttributes", {}).get(domain, {})
        if exists
        else {}
    )

    def create() -> None:
        try:
            ses.verify_domain_identity(Domain=domain)
        except Exception as exc:
            if error_code(exc) != "InvalidParameterValue":
                raise
            # SES refuses a domain it cannot verify for this account (VerifyDomainIdentity,
            # InvalidParameterValue)
            raise DeployError(
                f"SES cannot verify {domain} for this account: {exc}",
                "set DOMAIN_NAME to a domain you control and whose DNS you can change",
            ) from None
        ses.verify_domain_dkim(Domain=domain)

    run.converge(
        "ses-identity",
        domain,
        domain if exists else None,
        [] if dkim.get("DkimTokens") else ["enable DKIM"],
        create=create,
        update=lambda _: ses.verify_domain_dkim(Domain=domain),
        create_detail="with DKIM; publish the DNS records the deploy prints",
    )


def owner_identity(run: Run) -> None:
    """PRIVATE_EMAIL as an SES address identity, so SES mails its owner the verification link: in the
    sandbox SES sends only to verified addresses ("If your account is still in the Amazon SES sandbox, you
    also need to verify any email addresses which you plan on sending email to", SES DG, "Verified
    identities", https://docs.aws.amazon.com/ses/latest/dg/verify-addresses-and-domains.html), and until the
    link is clicked the forwards wait (common/senders/handler.py). Created once: SES mails a new link only
    for a new identity."""
    cfg = run.cfg
    address = cfg.private_email
    ses = control_client("ses")
    listed = ses.list_identities(IdentityType="EmailAddress").get("Identities", [])
    exists = address.lower() in {a.lower() for a in listed}
    run.converge(
        "ses-identity",
        address,
        address if exists else None,
        create=lambda: control_client("sesv2").create_email_identity(EmailIdentity=address),
        create_detail="SES mails a verification link to it: click it within 24 hours",
    )


def feedback_topic_policy_document(cfg: Config, account: str) -> dict[str, Any]:
    """The feedback topic's policy: the account manages it, SES publishes for the configuration set."""
    arn = topic_arn(cfg, cfg.feedback_topic)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountOwnerManages",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
                "Action": [
                    "SNS:GetTopicAttributes",
                    "SNS:SetTopicAttributes",
                    "SNS:Subscribe",
                    "SNS:ListSubscriptionsByTopic",
                    "SNS:Publish",
                    "SNS:DeleteTopic",
                ],
                "Resource": arn,
            },
            {
                "Sid": "SesPublishesFeedback",
                "Effect": "Allow",
                "Principal": {"Service": "ses.amazonaws.com"},
                "Action": "SNS:Publish",
                "Resource": arn,
                "Condition": {
                    "StringEquals": {"AWS:SourceAccount": account},
                    "StringLike": {
                        "AWS:SourceArn": f"arn:aws:ses:{cfg.region}:{account}:configuration-set/"
                        f"{cfg.ses_configuration_set}"
                    },
                },
            },
        ],
    }


def feedback_topic_policy(run: Run, account: str) -> None:
    """SES may publish this deployment's feedback events to the feedback topic, for its configuration set
    only: "you must ... allow Amazon SES to publish to the topic" with AWS:SourceAccount and AWS:SourceArn
    conditions (SES DG, "Set up an Amazon SNS event destination for event publishing",
    https://docs.aws.amazon.com/ses/latest/dg/event-publishing-add-event-destination-sns.html). Without it
    no bounce or complaint reaches inbound-handler. The account's own principals keep the default access."""
    cfg, sns = run.cfg, control_client("sns")
    arn = topic_arn(cfg, cfg.feedback_topic)
    wanted = feedback_topic_policy_document(cfg, account)
    found = or_none(lambda: sns.get_topic_attributes(TopicArn=arn), "NotFound", "NotFoundException")
    current = (
        json.loads(found["Attributes"]["Policy"]) if found and found["Attributes"].get("Policy") else None
    )
    is_ours = current is not None and any(
        s.get("Sid") == "SesPublishesFeedback" for s in current.get("Statement", [])
    )

    def put(*_: Any) -> None:
        sns.set_topic_attributes(TopicArn=arn, AttributeName="Policy", AttributeValue=json.dumps(wanted))

    run.converge(
        "sns-topic-policy",
        cfg.feedback_topic,
        current if is_ours else None,
        [] if canonical(current) == canonical(wanted) else ["policy"],
        create=put,
        update=put,
        create_detail="SES may publish feedback of configuration set " + cfg.ses_configuration_set,
    )


def feedback_destination(cfg: Config) -> dict[str, Any]:
    """The configuration set's event destination (SES v1 field names)."""
    return {
        "Name": "feedback",
        "Enabled": True,
        "MatchingEventTypes": list(FEEDBACK_EVENTS),
        "SNSDestination": {"TopicARN": topic_arn(cfg, cfg.feedback_topic)},
    }


def _configuration_set(run: Run, cfg: Config) -> None:
    """SES publishes Delivery/Bounce/Complaint of every send made with this set to the feedback topic."""
    ses = control_client("ses")
    name = cfg.ses_configuration_set
    destination = feedback_destination(cfg)
    described = or_none(
        lambda: ses.describe_configuration_set(
            ConfigurationSetName=name, ConfigurationSetAttributeNames=["eventDestinations"]
        ),
        "ConfigurationSetDoesNotExist",
    )
    current = next(
        (d for d in (described or {}).get("EventDestinations", []) if d.get("Name") == "feedback"), None
    )
    # An emulator that does not report event destinations leaves nothing to compare with.
    reported = described is not None and "EventDestinations" in described
    same = (
        current is not None
        and sorted(current.get("MatchingEventTypes", [])) == sorted(FEEDBACK_EVENTS)
        and current.get("SNSDestination", {}).get("TopicARN") == destination["SNSDestination"]["TopicARN"]
    )

    def create() -> None:
        ses.create_configuration_set(ConfigurationSet={"Name": name})
        ses.create_configuration_set_event_destination(
            ConfigurationSetName=name, EventDestination=destination
        )

    def update(_: Any) -> None:
        if current is None:
            ses.create_configuration_set_event_destination(
                ConfigurationSetName=name, EventDestination=destination
            )
        else:
            ses.update_configuration_set_event_destination(
                ConfigurationSetName=name, EventDestination=destination
            )

    run.converge(
        "ses-config-set",
        name,
        described,
        [] if same or not reported else ["feedback event destination"],
        create=create,
        update=update,
        create_detail="events delivery, bounce, complaint -> " + cfg.feedback_topic,
    )


# No address is suppressed by SES for sends with our configuration set: SES's account-level list
# (on for bounces and complaints in accounts since 2019) would otherwise silently drop every forward
# after one bounce or complaint of the owner's mailbox. Our own list decides (it never suppresses the
# owner: common/store/sendstatus.py) and sees every bounce (SES DG, configuration set-level suppression).
SUPPRESSED_REASONS: list[str] = []


def suppression_options(run: Run) -> None:
    """The configuration set overrides the account-level suppression list with SUPPRESSED_REASONS (SESv2)."""
    sesv2, name = control_client("sesv2"), run.cfg.ses_configuration_set
    found = (
        or_none(
            lambda: sesv2.get_configuration_set(ConfigurationSetName=name),
            "NotFoundException",
            "ConfigurationSetDoesNotExist",
        )
        if run.apply or _config_set_exists(name)
        else None
    )
    # A set without SuppressionOptions follows the account's list: that is "not there yet".
    reasons = ((found or {}).get("SuppressionOptions") or {}).get("SuppressedReasons")
    wanted = ",".join(SUPPRESSED_REASONS) or "none (our own list decides)"

    def put(*_: Any) -> None:
        try:
            sesv2.put_configuration_set_suppression_options(
                ConfigurationSetName=name, SuppressedReasons=SUPPRESSED_REASONS
            )
        except Exception as exc:
            # In the sandbox SES disables suppression-list management ("To bulk add or remove addresses,
            # you must have production access", SES DG, account-level suppression list); whether that
            # covers a configuration set's options is not documented. Refused there, the deploy goes on:
            # the senders' own list still decides, and the next deploy sets the options.
            if error_code(exc) != "BadRequestException" or preflight_production() is not False:
                raise
            run.say(
                f"SES refused {name}'s suppression options in the sandbox ({exc}); deploy again once "
                "production access is granted"
            )

    run.converge(
        "ses-suppression",
        name,
        reasons,
        []
        if reasons is None or sorted(reasons) == sorted(SUPPRESSED_REASONS)
        else [f"SuppressedReasons {wanted}"],
        create=put,
        update=put,
        create_detail=f"SES's account-level list overridden: suppressed reasons {wanted}",
    )


def preflight_production() -> bool | None:
    """SES production access (sesv2 GetAccount), or None when the endpoint cannot say."""
    try:
        return bool(control_client("sesv2").get_account().get("ProductionAccessEnabled"))
    except Exception:
        return None


def _config_set_exists(name: str) -> bool:
    return _exists(
        lambda: control_client("ses").describe_configuration_set(ConfigurationSetName=name),
        "ConfigurationSetDoesNotExist",
    )


def log_group(run: Run, name: str, retention_days: int = LOG_RETENTION_DAYS) -> None:
    logs = control_client("logs")
    found = logs.describe_log_groups(logGroupNamePrefix=name).get("logGroups", [])
    group = next((g for g in found if g["logGroupName"] == name), None)

    def create() -> None:
        logs.create_log_group(logGroupName=name)
        logs.put_retention_policy(logGroupName=name, retentionInDays=retention_days)

    run.converge(
        "log-group",
        name,
        group,
        []
        if group is None or group.get("retentionInDays") == retention_days
        else [f"retention {retention_days} days"],
        create=create,
        update=lambda _: logs.put_retention_policy(logGroupName=name, retentionInDays=retention_days),
        create_detail=f"retention {retention_days} days",
    )


def _spam_rules(run: Run, cfg: Config) -> None:
    """Created once, never overwritten: the owner edits the list (a bucket created in this dry run has
    no objects)."""
    s3 = control_client("s3")
    exists = (run.apply or bucket_exists(cfg.bucket)) and _exists(
        lambda: s3.head_object(Bucket=cfg.bucket, Key=layout.SPAM_RULES), "404", "NoSuchKey", "NotFound"
    )
    run.converge(
        "s3-object",
        layout.SPAM_RULES,
        True if exists else None,
        create=lambda: s3.put_object(
            Bucket=cfg.bucket,
            Key=layout.SPAM_RULES,
            Body=default_spam_rules().encode(),
            ContentType="text/plain",
        ),
        detail="owner-edited; never overwritten",
        create_detail="default keyword lists",
    )


def secrets(run: Run) -> None:
    """Each secret setting (common.runtime.config.secret_parameters) as an SSM SecureString (AWS-managed
    key), never in a function's configuration: the functions read it at cold start
    (common.runtime.config.with_secrets), locally as on AWS."""
    cfg, ssm = run.cfg, control_client("ssm")
    for secret, parameter in secret_parameters(Config).items():
        name, value = getattr(cfg, parameter), getattr(cfg, secret)
        if not value:  # not given: keep the stored one (the deploy's preflight checked it exists)
            run.converge("ssm-parameter", name, True, detail="SecureString, kept")
            continue
        found = or_none(lambda: ssm.get_parameter(Name=name, WithDecryption=True), "ParameterNotFound")  # noqa: B023
        differ = (
            []
            if found is None
            or (found["Parameter"]["Value"] == value and found["Parameter"]["Type"] == "SecureString")
            else ["new secret"]
        )

        def put(*_: Any, name: str = name, value: str = value) -> None:
            ssm.put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)

        run.converge(
            "ssm-parameter",
            name,
            found,
            differ,
            create=put,
            update=put,
            create_detail=f"SecureString {env_name(secret)}",
        )


def _parameter(run: Run, name: str, value: str) -> None:
    ssm = control_client("ssm")
    exists = _exists(lambda: ssm.get_parameter(Name=name), "ParameterNotFound")
    run.converge(
        "ssm-parameter",
        name,
        True if exists else None,
        create=lambda: ssm.put_parameter(Name=name, Value=value, Type="String"),
        detail="owner-edited; never overwritten",
        create_detail=f"= {value}",
    )


def owner_key(run: Run) -> None:
    """The owner's public key (OWNER_SMIME_CERT or OWNER_PGP_KEY, read and checked by
    deploy.preflight.with_owner_key_file) in SSM, where forward-sender reads it at cold start. Not
    secret, so a String; Intelligent-Tiering takes the advanced tier only for a key over the standard
    tier's 4 KB (an OpenPGP key with several user ids): "Intelligent-Tiering ... evaluates each
    request ... and upgrades to Advanced when needed" (Systems Manager API Reference, PutParameter,
    Tier)."""
    cfg = run.cfg
    if cfg.owner_key:
        ssm = control_client("ssm")
        _public_key(run, ssm, cfg.owner_key_parameter, cfg.owner_key, "the owner's public key")


def mailbox_keys(run: Run) -> None:
    """Each mailbox's own public key (MAILBOX_KEYS, read and checked by
    deploy.preflight.with_mailbox_key_files) in its own SSM parameter, as the owner's: one parameter
    each, since a standard parameter holds 4,096 characters (SSM API Reference, PutParameter, Value) and
    a certificate alone is 1-2 KB. A mailbox no longer keyed keeps its parameter until `destroy`."""
    cfg = run.cfg
    if not cfg.mailbox_key_texts:
        return
    ssm = control_client("ssm")
    for box, text in cfg.mailbox_key_texts:
        _public_key(run, ssm, cfg.mailbox_key_parameter(box), text, "a mailbox's public key")


def _public_key(run: Run, ssm: Any, name: str, text: str, detail: str) -> None:
    """A public key in its String parameter, written again only when the text changed."""
    found = or_none(functools.partial(ssm.get_parameter, Name=name), "ParameterNotFound")
    differ = [] if found is None or found["Parameter"]["Value"] == text else ["new key"]
    put = functools.partial(_put_key, ssm, name, text)
    run.converge("ssm-parameter", name, found, differ, create=put, update=put, create_detail=detail)


def _put_key(ssm: Any, name: str, text: str, *_: Any) -> None:
    ssm.put_parameter(Name=name, Value=text, Type="String", Overwrite=True, Tier="Intelligent-Tiering")


# --- queue policies and notifications ----------------------------------------------------------


def allow_sender(queue: str, source_arn: str, service: str) -> str:
    arn = f"arn:aws:sqs:*:*:{queue}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sqs:SendMessage",
                    "Resource": arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": source_arn}},
                }
            ],
        },
        sort_keys=True,
    )


def subscription(run: Run, topic: str, protocol: str, endpoint: str, label: str) -> None:
    sns = control_client("sns")
    subs: list[dict[str, Any]] = []
    if run.apply or _exists(
        lambda: sns.get_topic_attributes(TopicArn=topic), "NotFound", "NotFoundException"
    ):
        subs = sns.list_subscriptions_by_topic(TopicArn=topic).get("Subscriptions", [])
    found = next((s for s in subs if s.get("Endpoint") == endpoint and s.get("Protocol") == protocol), None)
    # An e-mail subscription is listed as PendingConfirmation until its link is clicked, and SNS deletes it
    # unconfirmed after 48 hours ("Amazon SNS now supports automatic deletion of unconfirmed subscriptions",
    # AWS What's New, 2023-05): a lost or expired mail is never sent again unless someone subscribes again.
    # Subscribe on the pending endpoint asks SNS for a new confirmation (what the console's "Request
    # confirmation" does; the API reference does not say so in words, hence "requested" below, not
    # "sent"); once deleted, the subscription is created anew.
    pending = (
        found is not None
        and protocol == "email"
        and not str(found.get("SubscriptionArn", "")).startswith("arn:")
    )
    run.converge(
        "sns-subscription",
        label,
        found,
        [f"still PendingConfirmation: confirmation mail to {endpoint} requested again"] if pending else [],
        create=lambda: sns.subscribe(TopicArn=topic, Protocol=protocol, Endpoint=endpoint),
        update=lambda _: sns.subscribe(TopicArn=topic, Protocol=protocol, Endpoint=endpoint),
        create_detail=protocol + (" (confirm the e-mail AWS sends)" if protocol == "email" else ""),
    )
    if pending and run.apply:
        run.say(
            f"SNS was asked to mail {endpoint} a new confirmation link for the alert topic: click it within "
            "48 hours ('AWS Notification - Subscription Confirmation'), or alarms and alerts reach no one; "
            "if none arrives, `email-handler status` keeps saying so and the next deploy asks again"
        )


def attachments_notification_config(arn_key: str, target: str) -> dict[str, Any]:
    """ObjectCreated under attachments/ -> ``target`` (``arn_key``: QueueArn or LambdaFunctionArn)."""
    return {
        "Id": "attachments-to-extractor",
        arn_key: target,
        "Events": ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": layout.ATTACHMENTS}]}},
    }


def attachments_notification(run: Run, kind: str, arn_key: str, target: str, target_name: str) -> None:
    """S3 ObjectCreated under attachments/ -> ``target`` (the attachment queue in every mode).

    ``kind`` is the notification list (QueueConfigurations, LambdaFunctionConfigurations) and
    ``arn_key`` the target's field in it; this configuration replaces the bucket's others.
    """
    bucket = run.cfg.bucket
    wanted = attachments_notification_config(arn_key, target)
    s3 = control_client("s3")
    current = (
        s3.get_bucket_notification_configuration(Bucket=bucket).get(kind, [])
        if run.apply or bucket_exists(bucket)
        else []
    )
    found = next(
        (
            c
            for c in current
            if c.get(arn_key) == target and layout.ATTACHMENTS in json.dumps(c.get("Filter", {}))
        ),
        None,
    )
    run.converge(
        "s3-notification",
        f"{bucket}/{layout.ATTACHMENTS}",
        found,
        # S3 validates the destination (the function's permission, added just before) when it is put.
        create=lambda: propagation.retry(
            run,
            f"PutBucketNotificationConfiguration {bucket}",
            lambda: s3.put_bucket_notification_configuration(
                Bucket=bucket, NotificationConfiguration={kind: [wanted]}
            ),
            propagation.S3_DESTINATION_UNVALIDATED,
        ),
        create_detail="ObjectCreated -> " + target_name,
    )
