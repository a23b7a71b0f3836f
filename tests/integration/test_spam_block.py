"""The owner presses "spam" on a forward: SES's complaint blocks the contact for that public address
(docs/owner.md, "Spam in your mailbox blocks the sender"), through the path a user's mail takes.

The functions run under the real RIE with their own roles against moto with IAM enforced (the local
defaults serve hello@example.com, jobs@example.com and a catch-all). A contact writes to jobs@, the
forward-sender sends the forward, and SES's Complaint notification for the message id SES gave that
forward arrives over SNS at inbound-handler; what follows is read back from SES, the sender lists and
the handlers' answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from common.store import senderlists
from local.events import sns_event
from local.rie import RieProcess
from tests.conftest import REPO
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

OWNER = "owner@example.net"
JANE = "Jane <jane@corp.example>"
ENTRY = "jane@corp.example to jobs@example.com"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        "inbound-handler": rie_module("inbound-handler"),
        "forward-sender": rie_module("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"}),
    }


_ids = iter(range(1, 10**6))


def write_in(stack: Stack, fns: dict[str, RieProcess], to: str, sender: str = JANE) -> dict[str, Any]:
    """``sender`` writes to ``to`` (SES's receipt recipient); the forward-sender sends what was queued."""
    n = next(_ids)
    raw = mail(sender=sender, to=to, subject=f"Mail {n}", text=f"Hello, mail {n}.")
    result: dict[str, Any] = fns["inbound-handler"].invoke(stack.receipt(raw, f"{n:040d}", to=to))
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    return result


def ses_id_of(stack: Stack, correlation_id: str) -> str:
    """The message id SES returned for the send, as its sender recorded it."""
    [record] = [r for r in stack.send_records() if r.get("correlationId") == correlation_id]
    return str(record["sesMessageId"])


def complain(
    stack: Stack, fns: dict[str, RieProcess], ses_id: str, sns_id: str, headers: list[dict[str, str]]
) -> dict[str, Any]:
    """SES's Complaint notification (the owner's provider's "report spam") over SNS."""
    message = {
        "notificationType": "Complaint",
        "mail": {
            "messageId": ses_id,
            "source": "jobs@example.com",
            "destination": [OWNER],
            "headers": headers,
        },
        "complaint": {
            "complainedRecipients": [{"emailAddress": OWNER}],
            "complaintFeedbackType": "abuse",
            "feedbackId": f"feedback-{sns_id}",
        },
    }
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.feedback_topic}"
    answer = fns["inbound-handler"].invoke(sns_event(json.dumps(message), topic, sns_id))
    result: dict[str, Any] = answer["results"][0]
    return result


def echoed(sent: SentMail) -> list[dict[str, str]]:
    """The forward's headers as SES echoes them in a notification."""
    return [{"name": k, "value": str(v)} for k, v in sent.message.items()]


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops.main", *args, "--endpoint", stack.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_complaint_about_a_forward_blocks_its_sender_for_that_address_once(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    alerts = stack.watch_alerts()
    first = write_in(stack, fns, "jobs@example.com")
    assert first["status"] == "forwarded"
    [forward] = stack.sent()
    ses_id = ses_id_of(stack, f"forward-{first['messageId']}")

    result = complain(stack, fns, ses_id, "sns-c1", echoed(forward))
    assert (result["status"], result["owner"], result["suppressed"]) == ("complained", [OWNER], [])
    assert result["blocked"] == [ENTRY]
    listing = senderlists.lookup(stack.cfg, "jane@corp.example", "jobs@example.com")
    assert listing is not None and (listing.entry, listing.list, listing.source) == (
        ENTRY,
        "block",
        f"complaint:{ses_id}",
    )

    # SNS delivers the notification again, and SES reports the same complaint in a second one
    assert complain(stack, fns, ses_id, "sns-c1", echoed(forward))["status"] == "duplicate"
    assert complain(stack, fns, ses_id, "sns-c2", echoed(forward))["blocked"] == [ENTRY]
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    notices = stack.sent()[1:]
    assert len(notices) == 1  # exactly one notice reached the owner
    [notice] = notices
    assert (notice.destinations, notice.source) == ([OWNER], "jobs@example.com")
    body = notice.message.get_body(("plain",))
    assert body is not None
    text = body.get_content()
    assert "Blocked:      jane@corp.example" in text and "mail to jobs@example.com only" in text
    assert "marked the forward as spam (feedback type: abuse)" in text
    assert "email-handler unblock jane@corp.example --to jobs@example.com" in text
    assert f"conversations/{first['conversationId']}/{first['messageId']}.eml" in text
    assert alerts() == []  # the mail notice is the one message about it
    assert stack.conversation(first["conversationId"])["spamReports"] == 1

    # the contact's next mail to jobs@ is blocked; to hello@ it is forwarded
    held = write_in(stack, fns, "jobs@example.com")
    assert (held["status"], held["reason"]) == ("quarantined", f"blocked by the owner ({ENTRY})")
    assert write_in(stack, fns, "hello@example.com")["status"] == "forwarded"
    assert len(stack.sent()) == 3  # first forward, notice, the forward of the mail to hello@

    # the notice's command undoes it
    undone = cli(stack, "unblock", "jane@corp.example", "--to", "jobs@example.com")
    assert undone.returncode == 0, undone.stderr
    assert f"unblocked {ENTRY}" in undone.stdout
    again = write_in(stack, fns, "jobs@example.com")
    assert again["status"] == "forwarded"
    assert stack.sent()[-1].destinations == [OWNER] and len(stack.sent()) == 4


def test_a_complaint_naming_an_unknown_message_id_blocks_nobody(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """Forged, or about a send whose record expired: the headers still name Jane's real forward (its
    correlation id and its HMAC-tagged Reply-To), but only SES's message id could make a block."""
    alerts = stack.watch_alerts()
    first = write_in(stack, fns, "jobs@example.com")
    [forward] = stack.sent()
    result = complain(stack, fns, "0100018f-forged-0000", "sns-f1", echoed(forward))
    assert (result["status"], result["blocked"], result["owner"]) == ("complained", [], [OWNER])
    assert senderlists.entries(stack.cfg) == []
    # today's handling: the contact flagged, the owner alerted
    assert stack.conversation(first["conversationId"])["spamCandidate"] is True
    assert [a["alert"] for a in alerts()] == ["owner-complaint"]
    lines = [json.loads(x) for x in fns["inbound-handler"].output().splitlines() if x.startswith("{")]
    [logged] = [x for x in lines if x.get("message") == "owner complaint"][-1:]
    assert logged["not_blocked"].startswith("SES message id unknown")
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    assert len(stack.sent()) == 1  # no notice
    assert write_in(stack, fns, "jobs@example.com")["status"] == "forwarded"
