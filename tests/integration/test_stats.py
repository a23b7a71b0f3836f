"""`email-handler stats`: each outcome of mail that went through the functions under the real RIE and a
real moto server, counted exactly from the stores (ops/stats.py, docs/owner.md "Numbers")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from common.aws import client
from common.mail.outbound import OutboundMessage
from common.store.sendqueue import enqueue
from deploy.resources import attachment_queue
from local import fresh
from local.env import admin_credentials
from local.rie import RieProcess
from ops.main import main as cli
from tests.conftest import REPO
from tests.support.extraction import sample_files
from tests.support.harness import Stack, verify_domain_on_fresh_model
from tests.support.mailgen import mail

OWNER = "owner@example.net"
FAST = {"RETRY_DELAYS_SECONDS": "0", "SANDBOX_WAIT_SECONDS": "1", "ATTEMPT_RESERVE_SECONDS": "1"}
FUNCTIONS = (
    "inbound-handler",
    "reply-handler",
    "forward-sender",
    "ack-sender",
    "reply-sender",
    "attachment-extractor",
)


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {name: rie_module(name, env=FAST) for name in FUNCTIONS}


@pytest.fixture
def sandbox_for_new_contacts(stack: Stack) -> Iterator[None]:
    """From here on the account is in SES's sandbox (local/fresh.py): the domain and the owner verified,
    a contact who is not is held. tests/integration/test_sandbox.py sets it up the same way."""
    fresh.set_fresh(True)
    verify_domain_on_fresh_model()
    client("sesv2").create_email_identity(EmailIdentity=OWNER)
    assert fresh.click(OWNER)
    yield
    fresh.set_fresh(False)


def stats(stack: Stack, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    capsys.readouterr()
    assert cli(["stats", "--endpoint", stack.url, *flags]) == 0
    return capsys.readouterr().out


def contact_writes_in(stack: Stack, fns: dict[str, RieProcess]) -> str:
    """Jane's first mail with a PDF whose text is read and a file named .pdf that is none: forwarded,
    acked, both attachments through the extractor. Returns the thread address the owner answers."""
    files = sample_files()
    attachments = [
        ("My CV.pdf", files["My CV (2026).PDF"], "application/pdf"),
        ("not really.pdf", files["not really.pdf"], "application/pdf"),
    ]
    mid = "0000000000000000000000000000000000000s01"
    result = fns["inbound-handler"].invoke(stack.receipt(mail(attachments=attachments), mid))
    assert result["status"] == "forwarded" and result["ack"], result
    [forward] = stack.peek(stack.cfg.forward_queue)
    for sender, queue in (("forward-sender", stack.cfg.forward_queue), ("ack-sender", stack.cfg.ack_queue)):
        assert [r.failed for r in stack.run_sender(fns[sender], queue)] == [[]]
    stack.run_sender(fns["attachment-extractor"], attachment_queue(stack.cfg))
    return str(forward.reply_to)


def owner_replies(stack: Stack, fns: dict[str, RieProcess], thread: str) -> None:
    raw = mail(sender=f"Owner Name <{OWNER}>", to=thread, subject="Re: Hello", text="Happy to talk.")
    event = stack.receipt(raw, "0000000000000000000000000000000000000s03", to=thread, source=OWNER)
    assert fns["reply-handler"].invoke(event)["status"] == "queued"
    assert fns["inbound-handler"].invoke(event)["status"] == "thread-only"
    assert [r.failed for r in stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)] == [[]]


def test_stats_counts_each_outcome_of_mail_through_the_functions_exactly(
    stack: Stack, fns: dict[str, RieProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    before = json.loads(stats(stack, capsys, "--json"))
    assert set(before["counts"].values()) == {0} and before["quarantined_by_reason"] == {}

    thread = contact_writes_in(stack, fns)
    spam = mail(sender="Deals <deals@spam.example>", subject="Win big")
    quarantined = fns["inbound-handler"].invoke(
        stack.receipt(spam, "0000000000000000000000000000000000000s02", verdicts={"spam": "FAIL"})
    )
    assert quarantined["status"] == "quarantined"
    owner_replies(stack, fns, thread)
    # An ack SES can never take (an address no message can be built for): the ack queue's DLQ at once.
    never = OutboundMessage(
        kind="ack",
        idempotency_key="ack:never",
        correlation_id="ack-never",
        to=["a..b@x.example"],
        subject="Hi",
        text="Hello.",
    )
    enqueue(stack.cfg.ack_queue, never, stack.cfg.bucket, stack.cfg.claim_check_bytes)
    stack.run_sender(fns["ack-sender"], stack.cfg.ack_queue)
    assert len(stack.receive(stack.cfg.ack_queue + "-dlq")) == 1
    sent = [m.destinations for m in stack.sent()]
    assert sorted(sent) == [["jane@corp.example"], ["jane@corp.example"], [OWNER]]  # ack, reply, forward

    report = json.loads(stats(stack, capsys, "--json"))
    assert report["source"] == "stores" and report["deployment"] == stack.cfg.prefix
    assert report["counts"] == {
        "forwarded": 1,
        "quarantined": 1,
        "acked": 1,
        "replied": 1,
        "held": 0,
        "send-failed": 1,
        "text-ready": 1,
        "extraction-error": 1,
    }
    assert report["quarantined_by_reason"] == {quarantined["reason"]: 1}
    table = stats(stack, capsys)
    assert "counted from the stores" in table
    assert [line.split() for line in table.splitlines() if line.strip().startswith("send-failed")] == [
        ["send-failed", "1"]
    ]


def test_stats_counts_a_send_the_sandbox_holds(
    stack: Stack,
    fns: dict[str, RieProcess],
    capsys: pytest.CaptureFixture[str],
    sandbox_for_new_contacts: None,
) -> None:
    held = OutboundMessage(
        kind="reply",
        idempotency_key="reply:held",
        correlation_id="reply-held",
        to=["new@corp.example"],
        subject="Hi",
        text="Hello.",
    )
    enqueue(stack.cfg.reply_queue, held, stack.cfg.bucket, stack.cfg.claim_check_bytes)
    [batch] = stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    assert len(batch.failed) == 1 and stack.sent() == []  # waits in the queue for the sandbox
    counts: dict[str, Any] = json.loads(stats(stack, capsys, "--json"))["counts"]
    assert (counts["held"], counts["replied"], counts["send-failed"]) == (1, 0, 0)


def aws_stats(moto_server: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`email-handler stats` as a user's shell runs it against a deployment (`--env prd`): AWS is the
    session's moto server, the credentials an administrator's."""
    env = {**os.environ, "AWS_ENDPOINT_URL": moto_server, **admin_credentials()}
    return subprocess.run(
        [sys.executable, "-m", "ops.main", "stats", "--env", "prd", "--region", "us-east-1", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_stats_since_sums_the_deployments_metrics_over_the_window(
    stack: Stack, moto_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What CloudWatch makes of the functions' embedded metric format on AWS, put as metric data: only this
    deployment's (dimension Environment), only inside the window, quarantines also by Reason."""
    now = datetime.now(UTC)

    def put(name: str, value: float, minutes_ago: int, env: str = "prd", reason: str = "") -> None:
        dimensions = [{"Name": "Environment", "Value": env}] + (
            [{"Name": "Reason", "Value": reason}] * bool(reason)
        )
        client("cloudwatch").put_metric_data(
            Namespace="service-email-handler",
            MetricData=[
                {
                    "MetricName": name,
                    "Dimensions": dimensions,
                    "Timestamp": now - timedelta(minutes=minutes_ago),
                    "Value": value,
                    "Unit": "Count",
                }
            ],
        )

    put("MailForwarded", 2, 10)
    put("MailForwarded", 1, 5)
    put("MailForwarded", 5, 180)  # before the window
    put("MailForwarded", 7, 5, env="stg")  # another deployment
    put("MailQuarantined", 3, 5)
    put("MailQuarantined", 2, 5, reason="spam verdict FAIL")
    put("MailQuarantined", 1, 5, reason="blocked by the owner (@spam.example)")
    put("SendsFailed", 1, 20)
    put("ExtractionErrors", 1, 30)

    done = aws_stats(moto_server, "--since", "1h", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["source"] == "metrics" and report["deployment"] == "service-email-handler-prd"
    assert report["counts"] == {
        "forwarded": 3,
        "quarantined": 3,
        "acked": 0,
        "replied": 0,
        "held": 0,
        "send-failed": 1,
        "text-ready": 0,
        "extraction-error": 1,
    }
    assert report["quarantined_by_reason"] == {
        "blocked by the owner (@spam.example)": 1,
        "spam verdict FAIL": 2,
    }
    wider = json.loads(
        aws_stats(moto_server, "--since", (now - timedelta(hours=4)).isoformat(), "--json").stdout
    )
    assert wider["counts"]["forwarded"] == 8
    refused = aws_stats(moto_server, "--since", "tomorrow")
    assert refused.returncode == 2 and "give 30m, 24h, 7d or an ISO 8601 date" in refused.stderr
    # The local modes publish no metrics: --since is refused there, never a row of zeros.
    assert cli(["stats", "--since", "1h", "--endpoint", stack.url]) == 2
    assert "the local modes publish none" in capsys.readouterr().err
