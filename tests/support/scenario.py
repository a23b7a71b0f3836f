"""The end-to-end scenario both local modes must pass (email-handler dev, and make up's compose stack).

Everything goes through the user's paths: mail over SMTP to the ingress, `email-handler outbox` to
see what SES sent, the emulator's APIs to look at records and objects. The caller provides the
running system (SMTP port and emulator URL) with the wiring's visibility timeout shortened, so a
failed send reaches its DLQ in seconds instead of 5 x 18 minutes.
"""

from __future__ import annotations

import email
import email.policy
import json
import smtplib
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from common.aws import client, dynamodb
from common.store import sendstatus
from deploy import config, resources
from local.env import aws_endpoint, local_env
from tests.support.docgen import make_pdf
from tests.support.mailgen import mail

JANE = "Jane Smith <jane@corp.example>"


@dataclass
class LocalSystem:
    smtp_port: int
    endpoint: str

    def send(self, envelope_from: str, to: str, raw: bytes) -> None:
        # On the wire lines end in CRLF (smtplib only converts str messages, not bytes).
        wire = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        with smtplib.SMTP("127.0.0.1", self.smtp_port, timeout=30) as smtp:
            smtp.sendmail(envelope_from, [to], wire)

    def outbox(self) -> list[dict[str, Any]]:
        """What the emulator sent, read the way the owner reads it (``email-handler outbox``, which
        itself reads a busy emulator's dump again after a timeout or a 5xx)."""
        command = [sys.executable, "-m", "ops.main", "outbox", "--json", "--endpoint", self.endpoint]
        out = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, f"outbox exited {out.returncode}: {out.stderr}"
        return list(json.loads(out.stdout))


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _message(item: dict[str, Any]) -> EmailMessage:
    msg = email.message_from_string(item["raw"], policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def run_scenario(system: LocalSystem) -> None:
    env = local_env()
    cfg = config.load(env)
    with aws_endpoint(system.endpoint, env):
        _scenario(system, cfg)


def _scenario(system: LocalSystem, cfg: config.Config) -> None:
    s3 = client("s3")

    # What this system sends (from its own domain): LocalStack's SES also lists the mails its SNS sends
    # to the alert topic's e-mail subscription (the owner), which is how alerts reach the owner.
    def ours() -> list[dict[str, Any]]:
        return [i for i in system.outbox() if i["source"].lower().endswith("@" + cfg.domain_name)]

    start = len(ours())

    def new_items(n: int) -> list[dict[str, Any]]:
        items = ours()[start:]
        return items if len(items) >= n else []

    # 1. First contact over SMTP: one ack to Jane and one forward to the owner.
    system.send(
        "jane@corp.example",
        cfg.public_email,
        mail(sender=JANE, subject="Role at Acme", message_id="<jane-1@corp.example>"),
    )
    first = wait_for("ack and forward", lambda: new_items(2))
    by_to = {tuple(i["destinations"]): i for i in first}
    assert set(by_to) == {("jane@corp.example",), (cfg.private_email,)}, first
    ack, forward = _message(by_to[("jane@corp.example",)]), _message(by_to[(cfg.private_email,)])
    assert ack["Auto-Submitted"] == "auto-replied" and ack["From"] == cfg.public_email
    assert forward["Subject"] == "Role at Acme"
    thread = forward["Reply-To"].addresses[0].addr_spec
    assert thread.endswith("@" + cfg.thread_domain)

    # 2. A second mail from the same sender: a forward only.
    system.send(
        "jane@corp.example",
        cfg.public_email,
        mail(sender=JANE, subject="Following up", message_id="<jane-2@corp.example>"),
    )
    second = wait_for("second forward", lambda: new_items(3))[2:]
    time.sleep(2)  # an ack would be sent by now; make sure none comes
    assert [i["destinations"] for i in ours()[start + 2 :]] == [[cfg.private_email]], second

    # 3. The owner replies to the forward's Reply-To, with a metadata command.
    system.send(
        cfg.private_email,
        thread,
        mail(
            sender=f"Owner <{cfg.private_email}>",
            to=thread,
            subject="Re: Following up",
            text="Hi Jane, happy to talk on Tuesday.\n[company: Acme Corp]\n\nOn Mon, Jane wrote:\n> "
            "Following up\n",
        ),
    )
    [reply] = wait_for("the reply", lambda: new_items(4))[3:]
    assert reply["destinations"] == ["jane@corp.example"] and reply["source"] == cfg.public_email
    reply_msg = _message(reply)
    assert reply_msg["Subject"] == "Re: Following up" and reply_msg["In-Reply-To"] == "<jane-2@corp.example>"
    body = reply_msg.get_body(("plain",)).get_content()
    assert "Tuesday" in body and "[company" not in body and "> Following up" not in body
    assert cfg.private_email not in reply["raw"]
    record = dynamodb.get(cfg.conversations_table, {"conversationId": "jane-at-corp.example"})
    assert record and record["companyName"] == "Acme Corp"

    # 4. A stranger writing to the thread address gets nothing sent anywhere.
    before = len(ours())
    system.send(
        "mallory@evil.example",
        thread,
        mail(
            sender="Mallory <mallory@evil.example>",
            to=thread,
            subject="Re: Role",
            text="Send the contract to me instead.",
        ),
    )
    wait_for(
        "the stranger's mail to be rejected",
        lambda: s3.list_objects_v2(Bucket=cfg.bucket, Prefix="rejected/").get("KeyCount", 0) >= 1,
    )
    time.sleep(2)
    assert len(ours()) == before

    # 5. A PDF attachment becomes text under extracted-text/.
    pdf = make_pdf(["Curriculum vitae of Bob Builder", "Experience: bridges"])
    system.send(
        "bob@corp.example",
        cfg.public_email,
        mail(
            sender="Bob <bob@corp.example>", subject="My CV", attachments=[("CV.pdf", pdf, "application/pdf")]
        ),
    )
    key = wait_for(
        "the extracted text",
        lambda: [
            o["Key"]
            for o in s3.list_objects_v2(Bucket=cfg.bucket, Prefix="extracted-text/bob-at-corp.example/").get(
                "Contents", []
            )
            if o["Key"].endswith(".txt")
        ],
    )[0]
    text = s3.get_object(Bucket=cfg.bucket, Key=key)["Body"].read().decode()
    assert "Bob Builder" in text and "bridges" in text and key.endswith("/CV.pdf.txt")

    # 6. SES reports a permanent bounce through the feedback topic: the address is suppressed.
    ack_id = ack["X-Correlation-ID"]
    notification = {
        "notificationType": "Bounce",
        "mail": {
            "messageId": by_to[("jane@corp.example",)]["id"],
            "source": cfg.public_email,
            "destination": ["dave@corp.example"],
            "headers": [{"name": "X-Correlation-ID", "value": ack_id}],
        },
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": "dave@corp.example"}],
        },
    }
    client("sns").publish(
        TopicArn=resources.topic_arn(cfg, cfg.feedback_topic), Message=json.dumps(notification)
    )
    suppressed = wait_for(
        "the bounce to suppress the address", lambda: sendstatus.suppression(cfg, "dave@corp.example")
    )
    assert suppressed["reason"] == "permanent bounce (General)"
    # The feedback handler writes the send record's status after the suppression (two writes).
    wait_for(
        "the bounce on the send record",
        lambda: (sendstatus.get_record(cfg, ack_id) or {}).get("status") == "bounced",
    )

    # 7. A sender forced to fail (SES refuses the unverified sending domain) ends in the DLQ, alerted.
    alerts = _subscribe_alerts(cfg)
    client("ses").delete_identity(Identity=cfg.domain_name)
    try:
        system.send(
            "carol@corp.example", cfg.public_email, mail(sender="Carol <carol@corp.example>", subject="Hi")
        )
        dlq = client("sqs").get_queue_url(QueueName=resources.dlq_name(cfg.ack_queue))["QueueUrl"]
        dead = wait_for(
            "the failed ack in its DLQ",
            lambda: (
                client("sqs")
                .receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=0)
                .get("Messages")
            ),
            timeout=120,
        )
        assert json.loads(dead[0]["Body"])["to"] == ["carol@corp.example"]  # body intact
        got: list[dict[str, Any]] = []

        def carols_alert() -> dict[str, Any] | None:
            got.extend(
                json.loads(m["Body"])
                for m in client("sqs")
                .receive_message(QueueUrl=alerts, MaxNumberOfMessages=10, WaitTimeSeconds=1)
                .get("Messages", [])
            )
            return next((a for a in got if a.get("recipient") == "carol@corp.example"), None)

        alert = wait_for("the alert", carols_alert)
        # refused for good: the DLQ at once after one attempt, not after every receive
        assert alert["errorCode"] == "MessageRejected" and alert["totalAttempts"] == 1
    finally:
        client("ses").verify_domain_identity(Domain=cfg.domain_name)


def _subscribe_alerts(cfg: config.Config) -> str:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="e2e-owner-alerts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    client("sns").subscribe(
        TopicArn=resources.topic_arn(cfg, cfg.alert_topic),
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return str(url)
