"""A provisioned local stack on the session's moto server: reset, provision, inspect.

Tests go through the same paths a user does: mail is staged in S3 and delivered to the handler as
an SES receipt event; queue messages are received from SQS and handed to a sender as the SQS event
an event-source mapping would build; sent mail is read back from moto's SES backend.
"""

from __future__ import annotations

import email
import email.policy
import json
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from email.message import EmailMessage
from typing import Any

from common.aws import client, forget_learnt, sqs
from common.inbound import policy
from common.mail.outbound import OutboundMessage
from common.store.sendqueue import load
from deploy import config
from deploy.config import Config
from deploy.functions import FUNCTIONS, SENDERS
from local import events as localevents
from local import motoadapter, provision
from local.env import function_credentials
from local.guard import admin_request

ACCOUNT = "123456789012"


@dataclass
class SentMail:
    source: str
    destinations: list[str]
    raw: bytes

    @property
    def message(self) -> EmailMessage:
        msg = email.message_from_bytes(self.raw, policy=email.policy.default)
        assert isinstance(msg, EmailMessage)
        return msg


class Stack:
    def __init__(self, moto_url: str, env: dict[str, str]) -> None:
        self.url, self.env = moto_url, env
        self.cfg: Config = config.load(env)

    def reset(self) -> Stack:
        urllib.request.urlopen(admin_request(self.url + "/moto-api/reset", method="POST")).read()
        forget_learnt()  # the reset emptied the emulator: no cached queue URL is valid now
        policy.RULES.clear()
        provision.provision(self.cfg)
        for f in FUNCTIONS:  # the functions' role sessions again (their keys do not change)
            function_credentials(self.cfg, f.name, ensure_role=False)
        return self

    # --- inbound side -------------------------------------------------------------------------
    def stage(self, raw: bytes, message_id: str) -> None:
        client("s3").put_object(Bucket=self.cfg.bucket, Key=f"staging/{message_id}", Body=raw)

    def receipt(self, raw: bytes, message_id: str, to: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """Stage ``raw`` like SES's S3 action and return the Lambda action's event."""
        self.stage(raw, message_id)
        return localevents.receipt_event(raw, message_id, [to or self.cfg.public_email], **kwargs)

    # --- queues -------------------------------------------------------------------------------
    def queue_arn(self, queue: str) -> str:
        return f"arn:aws:sqs:{self.cfg.region}:{ACCOUNT}:{queue}"

    def receive(self, queue: str, visibility_s: int = 0, max_messages: int = 10) -> list[dict[str, Any]]:
        """Receive up to 10 messages; visibility 0 leaves them in the queue for the next look."""
        return sqs.receive(queue, max_messages=max_messages, wait_s=0, visibility_s=visibility_s)

    def peek(self, queue: str) -> list[OutboundMessage]:
        seen: dict[str, OutboundMessage] = {}
        for _ in range(3):  # moto returns a subset per call; three looks find everything in small tests
            for m in self.receive(queue):
                seen[m["MessageId"]] = load(m["Body"], self.cfg.bucket)
        return list(seen.values())

    def sqs_event(self, queue: str, visibility_s: int = 30) -> dict[str, Any]:
        return localevents.sqs_event(
            self.receive(queue, visibility_s=visibility_s), self.queue_arn(queue), self.cfg.region
        )

    def run_sender(self, fn: Any, queue: str, visibility_s: int = 30, max_batches: int = 50) -> list[Any]:
        """Act as the event-source mapping until the queue has nothing visible; returns each batch's
        result."""
        from local.wiring import poll_queue_once

        results = []
        for _ in range(max_batches):
            result = poll_queue_once(
                queue, self.queue_arn(queue), fn.invoke, visibility_s=visibility_s, region=self.cfg.region
            )
            if not result.received:
                break
            results.append(result)
        return results

    def depth(self, queue: str) -> int:
        attrs = sqs.attributes(queue)
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    # --- state --------------------------------------------------------------------------------
    def s3_keys(self, prefix: str = "") -> list[str]:
        out = client("s3").list_objects_v2(Bucket=self.cfg.bucket, Prefix=prefix)
        return sorted(o["Key"] for o in out.get("Contents", []))

    def s3_body(self, key: str) -> bytes:
        return bytes(client("s3").get_object(Bucket=self.cfg.bucket, Key=key)["Body"].read())

    def conversation(self, cid: str) -> dict[str, Any] | None:
        from common.aws import dynamodb

        return dynamodb.get(self.cfg.conversations_table, {"conversationId": cid})

    def spam_log(self) -> list[dict[str, Any]]:
        logs = client("logs")
        streams = logs.describe_log_streams(logGroupName=self.cfg.spam_log_group).get("logStreams", [])
        lines = []
        for s in streams:
            for e in logs.get_log_events(
                logGroupName=self.cfg.spam_log_group, logStreamName=s["logStreamName"]
            )["events"]:
                lines.append(json.loads(e["message"]))
        return lines

    def sent(self) -> list[SentMail]:
        get_backend = motoadapter.moto_backends().get_backend

        backend = get_backend("ses")[ACCOUNT][self.cfg.region]
        return [
            SentMail(
                m.source,
                list(dict.fromkeys(m.destinations)),
                m.raw_data.encode() if isinstance(m.raw_data, str) else m.raw_data,
            )
            for m in backend.sent_messages
        ]

    def send_records(self) -> list[dict[str, Any]]:
        """Every idempotency record of the senders: powertools' status, the send's result (``data``,
        parsed) and the send record its completion carries (``correlationId``, ``sesMessageId``)."""
        from common.aws import dynamodb

        items = client("dynamodb").scan(TableName=self.cfg.idempotency_table, ConsistentRead=True)["Items"]
        records = [dynamodb.from_item(i) or {} for i in items]
        return [{**r, "data": json.loads(r["data"])} if "data" in r else r for r in records]

    def for_queue(self, queue_field: str) -> Config:
        """The configuration make_handler gives the sender that consumes ``queue_field``."""
        sender = next(f.name for f in SENDERS if f.queue_field == queue_field)
        return replace(self.cfg, send_queue=getattr(self.cfg, queue_field), function=sender)

    def watch_alerts(self, name: str = "test-alert-inbox") -> Callable[[], list[dict[str, Any]]]:
        """Subscribe a queue to the alert topic (what the owner would receive); the returned function
        drains it and returns the alerts that arrived since the last call, as JSON objects."""
        sqs_client = client("sqs")
        url = sqs_client.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        client("sns").subscribe(
            TopicArn=f"arn:aws:sns:{self.cfg.region}:{ACCOUNT}:{self.cfg.alert_topic}",
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true"},
        )

        def drain() -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = []
            while batch := sqs_client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
                "Messages", []
            ):
                got += [json.loads(m["Body"]) for m in batch]
                sqs_client.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
                    ],
                )
            return got

        return drain


def verify_domain_on_fresh_model(domain: str = "example.com") -> str:
    """On the fresh-account model (local/fresh.py, already switched on): create ``domain``'s SES
    identity, publish its verification TXT record as `email-handler dns publish` would, and let SES's
    next poll see it. Returns the status that poll reports."""
    from local import fresh

    ses = client("ses")
    ses.verify_domain_identity(Domain=domain)
    attributes = ses.get_identity_verification_attributes(Identities=[domain])["VerificationAttributes"]
    fresh.publish(f'_amazonses.{domain}. 1800 IN TXT "{attributes[domain]["VerificationToken"]}"\n')
    polled = ses.get_identity_verification_attributes(Identities=[domain])["VerificationAttributes"]
    return str(polled[domain]["VerificationStatus"])
