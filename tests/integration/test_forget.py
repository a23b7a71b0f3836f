"""`email-handler forget ADDR` after a real conversation (inbound-handler, the owner's reply with an
attachment, the senders, a quarantined mail): nothing of that contact is left, and another contact's
data is untouched."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from common.aws import client, dynamodb
from tests.conftest import REPO
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
JANE, BOB = "jane@corp.example", "bob@other.example"


@pytest.fixture(scope="module")
def fns(rie_module):
    env = {"RETRY_DELAYS_SECONDS": "0"}
    return {
        name: rie_module(name, env=env)
        for name in ("inbound-handler", "reply-handler", "forward-sender", "ack-sender", "reply-sender")
    }


def everything(stack) -> list[str]:
    """Every S3 key and table item of the stack, as text."""
    out = list(stack.s3_keys(""))
    for table in (
        "conversations_table",
        "quarantine_table",
        "send_status_table",
        "idempotency_table",
        "suppression_table",
    ):
        out += [f"{table}: {json.dumps(i, default=str)}" for i in dynamodb.scan(getattr(stack.cfg, table))]
    return out


def test_forget_leaves_no_object_or_item_of_the_contact(stack, fns) -> None:
    pdf = ("cv.pdf", b"%PDF-1.4 jane's cv", "application/pdf")
    first = fns["inbound-handler"].invoke(
        stack.receipt(
            mail(sender=f"Jane Smith <{JANE}>", attachments=[pdf]), "0000000000000000000000000000000000000f01"
        )
    )
    assert first["status"] == "forwarded", first
    cid = first["conversationId"]
    client("s3").put_object(
        Bucket=stack.cfg.bucket, Key=f"extracted-text/{cid}/x/cv.pdf.txt", Body=b"jane's cv"
    )
    [fwd] = stack.peek(stack.cfg.forward_queue)
    reply = mail(
        sender=OWNER,
        to=fwd.reply_to,
        subject="Re: Hello",
        text="Thanks Jane",
        attachments=[("offer.pdf", b"%PDF-1.4 offer", "application/pdf")],
    )
    assert (
        fns["reply-handler"].invoke(
            stack.receipt(
                reply, "0000000000000000000000000000000000000f02", to=fwd.reply_to, source="owner@example.net"
            )
        )["status"]
        == "queued"
    )
    held = fns["inbound-handler"].invoke(
        stack.receipt(
            mail(sender=f"Jane Smith <{JANE}>", subject="again"),
            "0000000000000000000000000000000000000f03",
            verdicts={"spam": "FAIL"},
        )
    )
    assert held["status"] == "quarantined", held
    bob = fns["inbound-handler"].invoke(
        stack.receipt(mail(sender=f"Bob <{BOB}>"), "0000000000000000000000000000000000000f04")
    )
    for name, queue in (
        ("forward-sender", "forward_queue"),
        ("ack-sender", "ack_queue"),
        ("reply-sender", "reply_queue"),
    ):
        stack.run_sender(fns[name], getattr(stack.cfg, queue))
    assert any(JANE in line or cid in line for line in everything(stack))
    bob_before = [line for line in everything(stack) if BOB in line or bob["conversationId"] in line]

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "common.ops.cli",
            "forget",
            "Jane@Corp.example",
            "--json",
            "--endpoint",
            stack.url,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    removed = json.loads(done.stdout)
    assert removed["conversations"] == [cid] and len(removed["quarantined"]) == 1
    assert f"conversations/{cid}/0000000000000000000000000000000000000f01.eml" in removed["objects"]
    assert f"extracted-text/{cid}/x/cv.pdf.txt" in removed["objects"]
    assert any(k.startswith(f"reply-attachments/{cid}/") for k in removed["objects"])
    left = [line for line in everything(stack) if JANE in line.lower() or cid in line]
    assert left == [], left
    assert [line for line in everything(stack) if BOB in line or bob["conversationId"] in line] == bob_before
    again = subprocess.run(
        [sys.executable, "-m", "common.ops.cli", "forget", JANE, "--endpoint", stack.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and "nothing stored for" in again.stdout, again.stdout + again.stderr
