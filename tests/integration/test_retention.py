"""Retention as provisioning applies it on the emulator (the same code the deploy runs): the mail
bucket's lifecycle per prefix, the tables' TTLs, the expiry written on records, and a changed setting
reconciled on the next run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from common.aws import client, dynamodb
from deploy import resources
from local import provision
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail


def rules(bucket: str) -> dict[str, tuple[str, int]]:
    got = client("s3").get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    return {r["ID"]: (r["Filter"]["Prefix"], r["Expiration"]["Days"]) for r in got}


def test_provisioning_applies_retention_and_reconciles_a_change(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    cfg = stack.cfg
    assert rules(cfg.bucket) == {
        "queue-payloads": ("queue-payloads/", resources.MESSAGE_LIFETIME_DAYS),
        "staging": ("staging/", 15),
        "archive": ("conversations/", 730),
        "sent": ("sent/", 730),
        "attachments": ("attachments/", 730),
        "withheld": ("withheld/", 730),
        "reply-attachments": ("reply-attachments/", 730),
        "extracted-text": ("extracted-text/", 730),
        "quarantine": ("spam/", 30),
        "rejected": ("rejected/", 90),
        "bounces": ("bounces/", 90),
    }
    ddb = client("dynamodb")
    for table in (cfg.conversations_table, cfg.quarantine_table):
        ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expiresAt"), table

    inbound = rie_function("inbound-handler")
    first = inbound.invoke(stack.receipt(mail(), "0000000000000000000000000000000000000t01"))
    held = inbound.invoke(
        stack.receipt(
            mail(sender="Spam <s@spam.example>"),
            "0000000000000000000000000000000000000t02",
            verdicts={"spam": "FAIL"},
        )
    )
    record = stack.conversation(first["conversationId"])
    assert record["expiresAt"] == epoch(record["timestamp"]) + 730 * 86400
    [item] = dynamodb.scan(cfg.quarantine_table)
    assert held["status"] == "quarantined" and item["expiresAt"] == epoch(item["receivedAt"]) + 30 * 86400

    changes = provision.provision(
        replace(cfg, retention_archive_days=0, retention_quarantine_days=7), wiring=True
    )
    assert [c.action for c in changes if c.kind == "s3-bucket"] == ["update"]
    now = rules(cfg.bucket)
    assert "archive" not in now and "sent" not in now and now["quarantine"] == ("spam/", 7)


def epoch(iso: object) -> int:
    """A record's ISO 8601 time (the mail's arrival, which its expiry counts from) in epoch seconds."""
    from datetime import datetime

    return int(datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp())
