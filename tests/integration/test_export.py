"""`email-handler export DIR` after real mail: contacts' mail through inbound-handler, the owner's reply
through reply-handler and reply-sender, an attachment's text through attachment-extractor. The export is
read back with Python's ``mailbox`` and checked against the stores byte for byte; an interrupted export
resumes without writing anything twice; ``--since`` takes only what is newer."""

from __future__ import annotations

import copy
import json
import mailbox
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from common.aws import client, dynamodb
from deploy.config import Config
from local.rie import RieProcess
from ops.export import STATE, Export, mboxrd_unquoted, plain
from tests.conftest import REPO, load_event
from tests.integration.test_admin_aws import cli as aws_cli
from tests.integration.test_admin_aws import prd  # noqa: F401 (the fixture: env prd provisioned on moto)
from tests.support import docgen
from tests.support.harness import Stack
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
JANE, BOB = "Jane Smith <jane@corp.example>", "Bob <bob@other.example>"
# Lines an mbox writer must quote, and one it must quote again (mboxrd), in a contact's mail and in
# the owner's reply.
FROM_LINES = "Hello,\nFrom the desk of Jane: see the CV.\n>From an earlier mail, quoted\nJane\n"
REPLY_TEXT = "Thanks Jane.\nFrom Monday on I am free.\n"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        name: rie_module(name, env={"RETRY_DELAYS_SECONDS": "0"})
        for name in ("inbound-handler", "reply-handler", "reply-sender", "attachment-extractor")
    }


def export_cli(stack: Stack, directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ops.main", "export", str(directory), *args, "--endpoint", stack.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def receive(stack: Stack, fns: dict[str, RieProcess], raw: bytes, mid: str, to: str = "") -> str:
    result = fns["inbound-handler"].invoke(stack.receipt(raw, mid, to=to or None))
    assert result["status"] == "forwarded", result
    return str(result["conversationId"])


def extract(stack: Stack, fns: dict[str, RieProcess], key: str) -> None:
    """attachment-extractor on ``key`` with the S3 event the bucket's notification sends."""
    event = load_event("s3-attachment.json")
    record = copy.deepcopy(event["Records"][0])
    record["s3"]["bucket"]["name"] = stack.cfg.bucket
    record["s3"]["object"]["key"] = quote_plus(key, safe="/")
    result = fns["attachment-extractor"].invoke({"Records": [record]})
    assert [r["status"] for r in result["results"]] == ["extracted"], result


def owner_reply(stack: Stack, fns: dict[str, RieProcess], cid: str, mid: str) -> None:
    [fwd] = [m for m in stack.peek(stack.cfg.forward_queue) if m.conversation_id == cid]
    reply = mail(sender=OWNER, to=fwd.reply_to, subject="Re: Hello", text=REPLY_TEXT)
    queued = fns["reply-handler"].invoke(
        stack.receipt(reply, mid, to=fwd.reply_to, source="owner@example.net")
    )
    assert queued["status"] == "queued", queued
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)


def seed(stack: Stack, fns: dict[str, RieProcess]) -> str:
    """Jane writes to hello@ with a PDF, the owner answers, Jane writes again; Bob writes to jobs@.
    Returns Jane's conversation id. A second between steps: S3 keeps whole seconds."""
    cv = docgen.make_pdf(["Jane Smith, invoice INV-4471"])
    jane = receive(
        stack,
        fns,
        mail(sender=JANE, text=FROM_LINES, attachments=[("cv.pdf", cv, "application/pdf")]),
        "0000000000000000000000000000000000000e01",
    )
    extract(stack, fns, f"attachments/{jane}/0000000000000000000000000000000000000e01/cv.pdf")
    receive(
        stack,
        fns,
        mail(sender=BOB, to="jobs@example.com"),
        "0000000000000000000000000000000000000e02",
        "jobs@example.com",
    )
    time.sleep(1.1)
    owner_reply(stack, fns, jane, "0000000000000000000000000000000000000e03")
    time.sleep(1.1)
    receive(
        stack,
        fns,
        mail(sender=JANE, subject="Re: Hello", text="Great, Monday it is."),
        "0000000000000000000000000000000000000e04",
    )
    return jane


def stored(stack: Stack, prefix: str) -> list[dict[str, Any]]:
    return client("s3").list_objects_v2(Bucket=stack.cfg.bucket, Prefix=prefix).get("Contents", [])


def expected_mboxes(stack: Stack) -> dict[str, list[tuple[datetime, int, str]]]:
    """mbox file -> (stored at, received 0 / sent 1, key) of every mail it must hold, in order."""
    records = {i["conversationId"]: i for i in dynamodb.scan(stack.cfg.conversations_table)}
    out: dict[str, list[tuple[datetime, int, str]]] = {}
    for rank, prefix in enumerate(("conversations/", "sent/")):
        for obj in stored(stack, prefix):
            cid = obj["Key"].split("/")[1]
            address = records[cid].get("publicAddress") or stack.cfg.public_email
            out.setdefault(f"{address}.mbox", []).append((obj["LastModified"], rank, obj["Key"]))
    return {name: sorted(mails) for name, mails in out.items()}


def imported(path: Path) -> list[bytes]:
    """Each message of an mbox as Python's ``mailbox`` reads it, mboxrd quoting undone."""
    box = mailbox.mbox(path, create=False)
    try:
        return [mboxrd_unquoted(box.get_bytes(key)) for key in box.iterkeys()]
    finally:
        box.close()


def check_mboxes(stack: Stack, directory: Path) -> None:
    want = expected_mboxes(stack)
    assert sorted(p.name for p in directory.glob("*.mbox")) == sorted(want)
    for name, mails in want.items():
        assert imported(directory / name) == [stack.s3_body(key) for *_, key in mails], name


def test_export_reimports_with_mailbox_byte_for_byte(
    stack: Stack, fns: dict[str, RieProcess], tmp_path: Path
) -> None:
    jane = seed(stack, fns)
    [sent_key] = [o["Key"] for o in stored(stack, "sent/")]
    [ses_copy] = [m.raw for m in stack.sent() if "jane@corp.example" in m.destinations]
    assert stack.s3_body(sent_key) == ses_copy  # the reply is kept exactly as SES took it

    out = tmp_path / "export"
    done = export_cli(stack, out)
    assert "hello@example.com.mbox" in done.stdout and "export: mail 4/4" in done.stderr

    check_mboxes(stack, out)
    hello = imported(out / "hello@example.com.mbox")
    assert hello[1] == ses_copy  # received, the owner's reply, received again: the order they happened
    assert b"\nFrom the desk of Jane" in hello[0].replace(b"\r\n", b"\n")
    assert b"\n>From an earlier mail" in hello[0].replace(b"\r\n", b"\n")
    raw_box = (out / "hello@example.com.mbox").read_bytes()
    assert b"\n>From the desk" in raw_box and b"\n>>From an earlier" in raw_box
    assert b"\n>From Monday on" in raw_box
    parsed = list(mailbox.mbox(out / "hello@example.com.mbox"))
    assert [m.get_from().split()[0] for m in parsed] == [
        "jane@corp.example",
        "hello@example.com",
        "jane@corp.example",
    ]
    body = parsed[1].get_payload(decode=True)  # the reply as a mail client reads it (mboxrd unquoting aside)
    assert isinstance(body, bytes) and b">From Monday on I am free." in body

    lines = (out / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    scanned = dynamodb.scan(stack.cfg.conversations_table)
    assert sorted(records, key=lambda r: r["conversationId"]) == sorted(
        (json.loads(json.dumps(i, default=plain)) for i in scanned), key=lambda r: r["conversationId"]
    )

    folder = out / "attachments" / jane / "0000000000000000000000000000000000000e01"
    assert (folder / "cv.pdf").read_bytes() == stack.s3_body(
        f"attachments/{jane}/0000000000000000000000000000000000000e01/cv.pdf"
    )
    text = stack.s3_body(f"extracted-text/{jane}/0000000000000000000000000000000000000e01/cv.pdf.txt")
    assert b"INV-4471" in text and (folder / "cv.pdf.txt").read_bytes() == text

    again = export_cli(stack, out)  # nothing new: nothing written twice
    assert "already written by an earlier run" in again.stdout
    check_mboxes(stack, out)


def test_an_interrupted_export_resumes_and_writes_each_mail_once(
    stack: Stack, fns: dict[str, RieProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(stack, fns)
    out = tmp_path / "export"
    from common.aws import s3

    real_get, reads = s3.get, []

    def ctrl_c_on_the_third_mail(bucket: str, key: str) -> Any:
        reads.append(key)
        if len(reads) == 3:
            raise KeyboardInterrupt
        return real_get(bucket, key)

    monkeypatch.setattr(s3, "get", ctrl_c_on_the_third_mail)
    with pytest.raises(KeyboardInterrupt):
        Export(stack.cfg, out, None).run()
    monkeypatch.setattr(s3, "get", real_get)
    journal = (out / STATE).read_text().splitlines()
    assert len(journal) == 2, journal

    # A run that died after writing a mail to its mbox and before journalling it (the journal's last
    # line lost, a torn line in its place) leaves that mail at the mbox's end: the rerun cuts it off.
    (out / STATE).write_text(journal[0] + "\n" + journal[1][:15])
    done = export_cli(stack, out)
    assert "already written by an earlier run" in done.stdout
    check_mboxes(stack, out)
    keys = [json.loads(line)["key"] for line in (out / STATE).read_text().splitlines()[2:]]
    assert len(keys) == len(set(keys))


def test_since_exports_only_newer_mail_and_adds_it_to_an_earlier_export(
    stack: Stack, fns: dict[str, RieProcess], tmp_path: Path
) -> None:
    seed(stack, fns)
    full = tmp_path / "full"
    export_cli(stack, full)
    time.sleep(1.1)
    since = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    time.sleep(1.1)
    newer = receive(
        stack,
        fns,
        mail(sender="Carol <carol@third.example>", text="From scratch: a new contact."),
        "0000000000000000000000000000000000000e05",
    )

    only = tmp_path / "only-newer"
    export_cli(stack, only, "--since", since)
    [box] = list(only.glob("*.mbox"))
    assert imported(box) == [
        stack.s3_body(f"conversations/{newer}/0000000000000000000000000000000000000e05.eml")
    ]
    records = [json.loads(line) for line in (only / "conversations.jsonl").read_text().splitlines()]
    assert [r["conversationId"] for r in records] == [newer]
    assert not (only / "attachments").exists()

    export_cli(stack, full, "--since", since)  # the increment, into the earlier export
    check_mboxes(stack, full)
    ids = {
        json.loads(line)["conversationId"] for line in (full / "conversations.jsonl").read_text().splitlines()
    }
    assert ids == {i["conversationId"] for i in dynamodb.scan(stack.cfg.conversations_table)}


def test_export_from_a_deployment_on_aws(prd: Config, moto_server: str, tmp_path: Path) -> None:  # noqa: F811
    """`--env prd --region us-east-1`: the deployment's bucket and table, and its default public address
    (read from the deployed inbound-handler) names the mbox of a record that has none."""
    client("s3").create_bucket(Bucket=prd.bucket)
    raw = mail(sender="X <x@y.example>", to="hi@mail.example", text="From afar.\n")
    client("s3").put_object(Bucket=prd.bucket, Key="conversations/x-at-y.example/m1.eml", Body=raw)
    dynamodb.put(
        prd.conversations_table,
        {
            "conversationId": "x-at-y.example",
            "senderEmail": "x@y.example",
            "timestamp": "2026-11-24T07:00:00Z",
        },
    )
    done = aws_cli(moto_server, "export", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["mboxes"] == {"hi@mail.example.mbox": 1}
    assert imported(tmp_path / "out" / "hi@mail.example.mbox") == [raw]
