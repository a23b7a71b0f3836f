"""`email-handler forget ADDR` after a real conversation (inbound-handler, the owner's reply with an
attachment, the senders, a quarantined mail): nothing of that contact is left, and another contact's
data is untouched."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from common.aws import client, dynamodb
from local.rie import RieProcess
from tests.conftest import REPO
from tests.support.harness import Stack, verify_domain_on_fresh_model
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
JANE, BOB = "jane@corp.example", "bob@other.example"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    env = {"RETRY_DELAYS_SECONDS": "0"}
    return {
        name: rie_module(name, env=env)
        for name in ("inbound-handler", "reply-handler", "forward-sender", "ack-sender", "reply-sender")
    }


def forget_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`email-handler forget ...` as the operator runs it (its own process)."""
    return subprocess.run(
        [sys.executable, "-m", "ops.main", "forget", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def everything(stack: Stack) -> list[str]:
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


def test_forget_leaves_no_object_or_item_of_the_contact(stack: Stack, fns: dict[str, RieProcess]) -> None:
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

    done = forget_cli("Jane@Corp.example", "--json", "--endpoint", stack.url)
    assert done.returncode == 0, done.stdout + done.stderr
    removed = json.loads(done.stdout)
    assert removed["conversations"] == [cid] and len(removed["quarantined"]) == 1
    assert f"conversations/{cid}/0000000000000000000000000000000000000f01.eml" in removed["objects"]
    assert f"extracted-text/{cid}/x/cv.pdf.txt" in removed["objects"]
    assert any(k.startswith(f"reply-attachments/{cid}/") for k in removed["objects"])
    left = [line for line in everything(stack) if JANE in line.lower() or cid in line]
    assert left == [], left
    assert [line for line in everything(stack) if BOB in line or bob["conversationId"] in line] == bob_before
    again = forget_cli(JANE, "--endpoint", stack.url)
    assert again.returncode == 0 and "nothing stored for" in again.stdout, again.stdout + again.stderr


# --- every place, by content -------------------------------------------------------------------------

JO, BANJO = "jo@corp.example", "banjo@corp.example"  # the second holds the first as a substring
NAME, SUBJECT, BODY, FILE = (
    "Jolene Quixote",
    "Zebra orchid 4471",
    "Quartz lantern 7731 says hi",
    "jq-folio.pdf",
)


def exact(address: str) -> re.Pattern[str]:
    """``address`` as a whole token, any case: written here, not taken from the code under test."""
    return re.compile(rf"(?<![\w.+%'-]){re.escape(address)}(?![\w-]|\.\w)", re.IGNORECASE)


def every_store(stack: Stack) -> list[str]:
    """Every S3 object (key and bytes), table item, queue message (DLQs too) and spam log line, as text."""
    from common.aws import sqs

    cfg = stack.cfg
    out = [f"s3 {key}: {stack.s3_body(key).decode('utf-8', 'replace')}" for key in stack.s3_keys("")]
    for table in client("dynamodb").list_tables()["TableNames"]:
        out += [f"{table}: {json.dumps(i, default=str)}" for i in dynamodb.scan(table)]
    for url in client("sqs").list_queues(QueueNamePrefix=cfg.prefix).get("QueueUrls", []):
        name = url.rsplit("/", 1)[1]
        out += [f"sqs {name}: {m['Body']}" for m in sqs.receive(name, 10, 0, 0)]
    out += [f"spam log: {json.dumps(line)}" for line in stack.spam_log()]
    return out


def found(stack: Stack, token: str) -> list[str]:
    """The lines that hold ``token`` whole, as written or URL-decoded (an S3 event's key)."""
    from urllib.parse import unquote_plus

    pattern = exact(token)
    return [
        line[:160]
        for line in every_store(stack)
        if pattern.search(line) or pattern.search(unquote_plus(line))
    ]


def test_forget_finds_the_contact_everywhere_by_content_and_the_logs_never_named_them(
    stack: Stack, fns: dict[str, RieProcess], rie_module: Callable[..., RieProcess]
) -> None:
    from common.aws import sqs
    from common.mail.threads import thread_address
    from local import provision
    from local.provision import wiring_queue
    from tests.support import docgen
    from tests.support.extraction import FUNCTION_ENV

    cfg = stack.cfg
    provision.provision(cfg, wiring=True)  # the local wiring's queues: where a failed async event ends
    extractor = rie_module("attachment-extractor", env=FUNCTION_ENV)
    inbound, replies = fns["inbound-handler"], fns["reply-handler"]
    jo = f"{NAME} <{JO}>"
    pdf = (FILE, docgen.make_pdf([f"{NAME} portfolio"]), "application/pdf")

    def ses_id(n: int) -> str:
        return f"{n:040d}"

    # 1. A first mail, forwarded and acked, its attachment extracted; the same for Banjo.
    first = inbound.invoke(
        stack.receipt(mail(sender=jo, subject=SUBJECT, text=BODY, attachments=[pdf]), ses_id(1))
    )
    assert first["status"] == "forwarded", first
    cid = first["conversationId"]
    [key] = first["attachments"]
    assert (
        extractor.invoke(
            {
                "Records": [
                    {"eventSource": "aws:s3", "s3": {"bucket": {"name": cfg.bucket}, "object": {"key": key}}}
                ]
            }
        )["results"][0]["status"]
        == "extracted"
    )
    banjo = inbound.invoke(stack.receipt(mail(sender=f"Ban Jo <{BANJO}>", subject="Banjo here"), ses_id(2)))
    # 2. A large mail: its forward goes to S3 as a claim check (queue-payloads/).
    large = inbound.invoke(
        stack.receipt(mail(sender=jo, subject=SUBJECT, text=BODY + " " + "x" * 300_000), ses_id(3))
    )
    assert large["status"] == "forwarded" and stack.s3_keys("queue-payloads/"), large
    # 3. Spam from both: held (spam/, the quarantine table, the spam log group).
    for n, sender in ((4, jo), (5, f"Ban Jo <{BANJO}>")):
        held = inbound.invoke(
            stack.receipt(mail(sender=sender, subject=SUBJECT), ses_id(n), verdicts={"spam": "FAIL"})
        )
        assert held["status"] == "quarantined", held
    # 4. A delivery report naming Jo (bounces/), and SES's bounce of the ack (suppression, send status).
    report = mail(
        sender="Mail Delivery System <MAILER-DAEMON@mx.corp.example>",
        subject="Undelivered Mail Returned to Sender",
        text=f"Your message to {JO} could not be delivered.",
        headers={"X-Failed-Recipients": JO},
    )
    assert inbound.invoke(stack.receipt(report, ses_id(6), source=""))["status"] == "dsn"
    # 5. The owner's reply with an attachment (reply-attachments/, replay memory), and a mail to Jo's
    #    thread address from someone else (rejected/).
    [fwd, *_] = stack.peek(cfg.forward_queue)
    reply = mail(
        sender=OWNER,
        to=fwd.reply_to,
        subject=f"Re: {SUBJECT}",
        text=f"Thanks {NAME}",
        attachments=[("offer.pdf", b"%PDF-1.4 offer", "application/pdf")],
    )
    assert (
        replies.invoke(stack.receipt(reply, ses_id(7), to=fwd.reply_to, source="owner@example.net"))["status"]
        == "queued"
    )
    thread = thread_address(cid, cfg.thread_secret, cfg.thread_domain)
    forged = mail(sender="Eve <eve@evil.example>", to=thread, subject=f"Re: {SUBJECT}", text=f"> {BODY}")
    assert (
        replies.invoke(stack.receipt(forged, ses_id(8), to=thread, source="eve@evil.example"))["status"]
        == "rejected"
    )
    # 6. The senders: the ack to Jo and Banjo, the forwards, the reply (send status, idempotency).
    for name, queue in (
        ("forward-sender", "forward_queue"),
        ("ack-sender", "ack_queue"),
        ("reply-sender", "reply_queue"),
    ):
        stack.run_sender(fns[name], getattr(cfg, queue))
    for n, address in ((9, JO), (10, BANJO)):
        assert notify_bounce(stack, inbound, address, f"ack-{ses_id(1 if address == JO else 2)}", f"sns-{n}")
    # 7. A mail of Jo's never handled: its staging object and its event in the async DLQ.
    never = stack.receipt(mail(sender=jo, subject=SUBJECT, text=BODY), ses_id(11))
    sqs.send(
        wiring_queue(cfg, "invocations") + "-dlq", json.dumps({"function": "inbound-handler", "event": never})
    )

    assert found(stack, JO) and found(stack, BANJO)
    # The logs never held them: no address, name, subject, text, file name or conversation id.
    logs = "\n".join(f.output() for f in [*fns.values(), extractor])
    for secret in (JO, BANJO, NAME, SUBJECT, BODY, FILE, cid, banjo["conversationId"], "Quartz", "Zebra"):
        assert secret.lower() not in logs.lower(), secret
    banjo_before = sorted(found(stack, BANJO) + found(stack, banjo["conversationId"]))

    done = forget_cli(" JO@corp.example ", "--json", "--endpoint", stack.url)
    assert done.returncode == 0, done.stdout + done.stderr
    removed = json.loads(done.stdout)
    assert removed["conversations"] == [cid] and len(removed["quarantined"]) == 1
    assert any(k.startswith("queue-payloads/") for k in removed["objects"])
    assert f"staging/{ses_id(11)}" in removed["objects"] and removed["messages"]
    assert any("logs copied out" in line for line in removed["unreachable"])
    assert found(stack, JO) == [] and found(stack, cid) == []
    after = sorted(found(stack, BANJO) + found(stack, banjo["conversationId"]))
    assert after == banjo_before  # the longer address is untouched


def notify_bounce(stack: Stack, fn: RieProcess, recipient: str, corr: str, sns_id: str) -> bool:
    from local.events import sns_event

    message = {
        "notificationType": "Bounce",
        "mail": {
            "messageId": sns_id,
            "destination": [recipient],
            "source": stack.cfg.public_email,
            "headers": [{"name": "X-Correlation-ID", "value": corr}],
        },
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": recipient}],
        },
    }
    topic = f"arn:aws:sns:{stack.cfg.region}:123456789012:{stack.cfg.feedback_topic}"
    return bool(fn.invoke(sns_event(json.dumps(message), topic, sns_id))["results"][0])


@pytest.mark.parametrize(
    "address", ["", "  ", "jo", "@corp.example", "jo@corp", "a b@corp.example", "<jo@corp.example>"]
)
def test_forget_refuses_anything_but_one_exact_address(address: str) -> None:
    done = forget_cli(address, "--endpoint", "http://127.0.0.1:9", timeout=60)
    assert done.returncode == 2 and "not one e-mail address" in done.stderr, done.stderr


# --- the raw copies, the ack budget, and a send already queued ----------------------------------------

WAIT = {"SANDBOX_WAIT_SECONDS": "1", "RETRY_DELAYS_SECONDS": "0", "ATTEMPT_RESERVE_SECONDS": "1"}


def abuse_report(about: str) -> bytes:
    """An ARF report (RFC 5965) from a provider's feedback loop about the ack sent to ``about``."""
    return (
        b"From: Feedback Loop <fbl@isp.example>\r\nTo: hello@example.com\r\nSubject: Abuse report\r\n"
        b"Message-ID: <fbl-1@isp.example>\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/report; report-type=feedback-report; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nThis is an email abuse report.\r\n"
        b"--b\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\n"
        b"User-Agent: isp-fbl/1.0\r\nVersion: 1\r\nOriginal-Rcpt-To: " + about.encode() + b"\r\n\r\n"
        b"--b\r\nContent-Type: message/rfc822\r\n\r\nFrom: hello@example.com\r\n"
        b"To: " + about.encode() + b"\r\n"
        b"Subject: Thanks for your message\r\n\r\nHello Jolene, thanks.\r\n--b--\r\n"
    )


def new_account(owner: str) -> None:
    """The fresh-account model (local/fresh.py): example.com verified, the owner's address verified, the
    contact's not: SES's sandbox holds a reply to them."""
    from local import fresh

    fresh.set_fresh(True)
    verify_domain_on_fresh_model()
    client("sesv2").create_email_identity(EmailIdentity=owner)
    assert fresh.click(owner)


def test_forget_reaches_the_raw_copies_the_ack_budget_and_a_reply_the_sandbox_holds(
    stack: Stack, fns: dict[str, RieProcess], rie_function: Callable[..., RieProcess]
) -> None:
    """Every kind of item a contact leaves, seeded through the functions: the conversation and its ack
    budget count, a mail held unparsed and released (its raw copy under attachments/quarantine/), an abuse
    report about their ack (its copy under attachments/complaint/), and the owner's reply that SES's sandbox
    holds. After `forget` none remains, and production access does not send the held reply."""
    from common.mail.threads import release_address
    from common.store import layout, sendstatus
    from common.store import quarantine as records
    from local import fresh
    from tests.support import mailgen

    cfg = stack.cfg
    jo = f"{NAME} <{JO}>"
    inbound, replies = fns["inbound-handler"], fns["reply-handler"]

    def ses_id(n: int) -> str:
        return f"{n:040d}"

    first = inbound.invoke(stack.receipt(mail(sender=jo, subject=SUBJECT, text=BODY), ses_id(21)))
    assert first["status"] == "forwarded" and first["ack"], first
    cid = first["conversationId"]
    budget = [i for i in dynamodb.scan(cfg.send_status_table) if str(i["id"]).startswith("ack-budget#")]
    assert any("domain:corp.example" in i for i in budget), budget
    # A mail over a parsing cap, held unparsed, released by the owner: copied whole beside the archive.
    unparsed = mailgen.many_parts(2_000).replace(b"Jane <jane@corp.example>", jo.encode())
    held = inbound.invoke(stack.receipt(unparsed, ses_id(22)))
    assert held["status"] == "quarantined" and held["reason"].startswith("not parsed"), held
    qid = records.quarantine_id(held["messageId"])
    release = release_address(qid, cfg.thread_secret, cfg.thread_domain)
    released = replies.invoke(
        stack.receipt(
            mail(sender=OWNER, to=release, subject=f"Release {qid}", text=""),
            ses_id(23),
            to=release,
            source="owner@example.net",
        )
    )
    assert released["status"] == "released", released
    assert stack.s3_keys(layout.released_original(held["messageId"]))
    # An abuse report about the ack sent to Jo: archived, and attached to the owner's notice.
    complaint = inbound.invoke(stack.receipt(abuse_report(JO), ses_id(24), source="fbl@isp.example"))
    assert complaint["status"] == "complaint", complaint
    assert stack.s3_keys(layout.complaint_report(ses_id(24)))
    # The owner's reply to Jo on a new account: SES's sandbox holds it (Jo is not verified).
    [fwd] = [m for m in stack.peek(cfg.forward_queue) if m.conversation_id == cid]
    new_account("owner@example.net")
    try:
        reply = mail(sender=OWNER, to=fwd.reply_to, subject=f"Re: {SUBJECT}", text=f"Thanks {NAME}")
        queued = replies.invoke(stack.receipt(reply, ses_id(25), to=fwd.reply_to, source="owner@example.net"))
        assert queued["status"] == "queued", queued
        # held out of sight longer than forget runs: forget cannot delete it from the queue
        sender = rie_function("reply-sender", env={**WAIT, "SANDBOX_WAIT_SECONDS": "45"})
        [batch] = stack.run_sender(sender, cfg.reply_queue)
        assert batch.failed and stack.sent() == []
        assert (sendstatus.get_record(cfg, f"reply-{ses_id(25)}") or {})["status"] == "held"

        done = forget_cli(JO, "--json", "--endpoint", stack.url)
        assert done.returncode == 0, done.stdout + done.stderr
        removed = json.loads(done.stdout)
        assert layout.released_original(held["messageId"]) in removed["objects"]
        assert layout.complaint_report(ses_id(24)) in removed["objects"]
        assert [c for c in removed["cancelled"] if f"reply-{ses_id(25)}" in c and "held" in c], removed
        assert any("ack-budget#" in r and "corp.example" in r for r in removed["records"]), removed
        assert not [m for m in removed["messages"] if cfg.reply_queue + "/" in m]  # it was out of sight

        fresh.grant_production()  # `email-handler model grant-production`: the sandbox lets it through now
        deadline = time.monotonic() + 120
        while not (batches := stack.run_sender(sender, cfg.reply_queue)) and time.monotonic() < deadline:
            time.sleep(1)  # until SANDBOX_WAIT_SECONDS is over and the held reply is visible again
        [again] = batches
        assert again.failed == [] and again.deleted
        stack.run_sender(rie_function("forward-sender", env=WAIT), cfg.forward_queue)
        assert [m for m in stack.sent() if JO in m.destinations] == []
        cancelled = [
            json.loads(line)
            for line in sender.output().splitlines()
            if line.startswith("{") and '"send cancelled"' in line
        ]
        assert cancelled and "forgotten" in cancelled[0]["reason"]
    finally:
        fresh.set_fresh(False)
    assert found(stack, JO) == [] and found(stack, cid) == []
    budget = [i for i in dynamodb.scan(cfg.send_status_table) if str(i["id"]).startswith("ack-budget#")]
    assert not any("domain:corp.example" in i for i in budget), budget
