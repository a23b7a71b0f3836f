"""`email-handler deploy`, the resources around the functions: SES's receipt rule set, the bucket, the
queues, the tables and the concurrency kept for the senders, each as AWS really behaves (throttling,
names freed late, indexes backfilling)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from common.aws import client, reset_clients
from deploy.functions import SENDERS
from tests.support.deploy import (
    ACCOUNT,
    BUCKET,
    PREFIX,
    Throttled,
    changed,
    run,
)


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
    # the domain, and PRIVATE_EMAIL's address (SES mails its owner the verification link)
    assert sorted(client("ses").list_identities()["Identities"]) == ["example.com", "owner@example.net"]
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
    """A new account runs 10 functions at once and keeps all 10 unreserved (local/fresh.py). With
    the deployed event sources and reservations, one mail -- however many attachments it stores -- uses
    at most: 3 senders x 2, the extractor 2, and one invocation each of the two receiving handlers."""
    from deploy.preflight import load_config
    from deploy.triggers import worst_case_concurrency
    from local.fresh import ACCOUNT_CONCURRENCY

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
