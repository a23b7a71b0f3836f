"""`make up` end to end, with LocalStack and with moto: the compose stack (emulator, six functions, init,
wiring, SMTP ingress), the same end-to-end scenario over SMTP against each."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.functions import FUNCTIONS
from local.rie import free_port, invoke
from tests.support.cases import CASES, Case, event_for
from tests.support.scenario import LocalSystem, run_scenario

# The first test of each stack also pays for `make up` (LocalStack: about 1.5 min, more on a busy machine).
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]
TAG = os.environ.get("IMAGE_TAG") or "latest"


def _localstack_or_skip() -> None:
    """LocalStack must be had (pulled, or built offline from the lock); under CI=true not having it
    is a failure, never a skip."""
    made = subprocess.run(
        [str(REPO / "scripts/localstack-image.sh")], capture_output=True, text=True, timeout=1800
    )
    if made.returncode != 0:
        why = made.stderr.strip().splitlines()[-1:] or ["scripts/localstack-image.sh failed"]
        if os.environ.get("CI") == "true":
            pytest.fail(f"LocalStack cannot be had under CI=true: {why[0]}")
        pytest.skip(f"LocalStack cannot be had: {why[0]}")


@pytest.fixture(scope="module", params=["localstack", "moto"])
def stack(request: pytest.FixtureRequest, docker_client: Any) -> Iterator[dict[str, int]]:
    """`scripts/compose.sh up` (what `make up` runs) under its own project name and free ports, once with
    EMULATOR=auto, which must pick LocalStack (it can be had: pulled or built offline), once with moto."""
    emulator = request.param
    if emulator == "localstack":
        _localstack_or_skip()
    # Its own compose project per image tag and emulator, so trees building side by side do not collide.
    project = f"seh-test-{TAG}-{emulator}"
    ports = {f.name: free_port() for f in FUNCTIONS} | {
        "aws": free_port(),
        "smtp": free_port(),
        "dynamodb": free_port(),
    }
    env = {
        **os.environ,
        "EMULATOR": "auto" if emulator == "localstack" else "moto",
        "COMPOSE_PROJECT_NAME": project,
        "EMULATOR_PORT": str(ports["aws"]),
        "SMTP_PORT": str(ports["smtp"]),
        "DYNAMODB_PORT": str(ports["dynamodb"]),
        **{f"{f.name.upper().replace('-', '_')}_PORT": str(ports[f.name]) for f in FUNCTIONS},
        # A failed send is retried after 1 s instead of the queue's 18 minutes, so the DLQ step takes seconds.
        "WIRING_VISIBILITY_TIMEOUT": "1",
    }
    started = time.monotonic()
    up = subprocess.run(
        [str(REPO / "scripts/compose.sh"), "up"], env=env, capture_output=True, text=True, timeout=1800
    )
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        routed = "routing DynamoDB to moto" in up.stdout
        if emulator == "localstack":
            assert "[up] ready. AWS emulator (LocalStack 4.4.0, " in up.stdout, up.stdout[-2000:]
            # offline, LocalStack's DynamoDB cannot start: moto answers DynamoDB, and the summary says so
            assert (f"DynamoDB: moto at http://127.0.0.1:{ports['dynamodb']}" in up.stdout) == routed
            assert routed or "DynamoDB: LocalStack's own" in up.stdout
            assert "IAM: not enforced: LocalStack's community edition does not enforce IAM" in up.stdout
        else:
            assert "[up] ready. AWS emulator (moto)" in up.stdout and not routed
            assert "IAM: enforced: each function runs with its own role's credentials" in up.stdout
        assert "admin credentials: .build/local/credentials (profile local-admin" in up.stdout
        # emulator (+ moto for DynamoDB) + 6 functions + wiring + smtp healthy; init provisioned and exited 0
        assert f"all {10 if routed else 9} services healthy, 1 one-shot done" in up.stdout
        assert f"http://127.0.0.1:{ports['ack-sender']}" in up.stdout  # prints how to reach each function
        assert f"smtp://127.0.0.1:{ports['smtp']}" in up.stdout and "email-handler outbox" in up.stdout
        print(f"\n[compose] {emulator}: up in {time.monotonic() - started:.0f}s")
        yield ports | {"routed": int(routed), "emulator": emulator, "project": project}
    finally:
        down = subprocess.run(
            [str(REPO / "scripts/compose.sh"), "down"], env=env, capture_output=True, text=True, timeout=120
        )
    # `make down` stops it all: no container of the project is left behind.
    assert down.returncode == 0, down.stderr[-2000:]
    assert (
        docker_client.containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})
        == []
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.function)
def test_compose_function_answers(stack: dict[str, int], case: Case) -> None:
    case.check(invoke(f"http://127.0.0.1:{stack[case.function]}", event_for(case)))


def admin_client(service: str, port: int) -> Any:
    """What the host CLI uses: the local admin of .build/local/credentials (make up wrote it)."""
    import boto3

    from local.env import CREDENTIALS_FILE, admin_credentials

    keys = admin_credentials(CREDENTIALS_FILE)
    return boto3.client(
        service,
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
    )


def test_compose_emulator_reachable_from_host(stack: dict[str, int]) -> None:
    s3 = admin_client("s3", stack["aws"])
    s3.create_bucket(Bucket="compose-probe")
    assert "compose-probe" in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_compose_dynamodb_answers_where_the_summary_says(stack: dict[str, int]) -> None:
    """The stack's tables live where `make up` said DynamoDB is (moto beside LocalStack offline: init
    created them through AWS_ENDPOINT_URL_DYNAMODB), and every other service stays on the emulator."""
    client = admin_client
    dynamodb_port = stack["dynamodb"] if stack["routed"] else stack["aws"]
    assert (
        "service-email-handler-local-conversations"
        in client("dynamodb", dynamodb_port).list_tables()["TableNames"]
    )
    queues = client("sqs", stack["aws"]).list_queues()["QueueUrls"]
    assert any(q.endswith("service-email-handler-local-ack") for q in queues)
    if stack["routed"]:
        assert client("sqs", stack["dynamodb"]).list_queues().get("QueueUrls", []) == []


def test_compose_end_to_end_over_smtp(stack: dict[str, int]) -> None:
    started = time.monotonic()
    run_scenario(LocalSystem(smtp_port=stack["smtp"], endpoint=f"http://127.0.0.1:{stack['aws']}"))
    print(f"\n[compose] {stack['emulator']}: scenario in {time.monotonic() - started:.0f}s")


def test_compose_each_function_runs_as_its_role_and_may_do_only_what_it_allows(
    stack: dict[str, int], docker_client: Any
) -> None:
    """The credentials inside the inbound-handler container are its role session's (moto: enforced, so a
    call outside deploy/iam.py's policy is denied; LocalStack community enforces nothing, and says so)."""
    import boto3

    [container] = docker_client.containers.list(
        filters={
            "label": [
                f"com.docker.compose.project={stack['project']}",
                "com.docker.compose.service=inbound-handler",
            ]
        }
    )
    env = dict(item.split("=", 1) for item in container.attrs["Config"]["Env"])
    assert (
        env["AWS_ACCESS_KEY_ID"].startswith("ASIA") and env["AWS_SESSION_TOKEN"]
    )  # not local.env's "testing"
    if stack["emulator"] != "moto":
        return

    def as_inbound(service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=f"http://127.0.0.1:{stack['aws']}",
            region_name="us-east-1",
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=env["AWS_SESSION_TOKEN"],
        )

    identity = as_inbound("sts").get_caller_identity()["Arn"]
    assert identity.endswith(":assumed-role/service-email-handler-local-inbound-handler/inbound-handler")
    bucket = "service-email-handler-local-mail"
    s3 = as_inbound("s3")
    s3.put_object(
        Bucket=bucket, Key="withheld/compose-iam/1/x.exe", Body=b"x"
    )  # its policy: withheld parts, write only
    for denied in (
        lambda: s3.get_object(Bucket=bucket, Key="withheld/compose-iam/1/x.exe"),  # not readable
        lambda: as_inbound("sqs").receive_message(
            QueueUrl=f"http://127.0.0.1:{stack['aws']}/123456789012/service-email-handler-local-ack"
        ),
    ):
        with pytest.raises(Exception, match="AccessDenied"):
            denied()


def test_compose_export_reimports_with_mailbox(stack: dict[str, int], tmp_path: Path) -> None:
    """`email-handler export` against the stack after a mail over SMTP and the owner's reply to it:
    Python's ``mailbox`` reads every archived mail and every reply as sent back byte for byte (mboxrd
    quoting undone), the mail's "From " line included, and the conversation records parse."""
    import email
    import email.policy
    import json
    import mailbox
    import sys

    from deploy import config
    from local.env import local_env
    from ops.export import mboxrd_unquoted
    from tests.support.mailgen import mail
    from tests.support.scenario import wait_for

    cfg = config.load(local_env())
    system = LocalSystem(smtp_port=stack["smtp"], endpoint=f"http://127.0.0.1:{stack['aws']}")
    mia = "mia@export.example"
    text = "Hi,\nFrom the top: an export.\n"
    system.send(
        mia,
        cfg.public_email,
        mail(sender=f"Mia Box <{mia}>", to=cfg.public_email, subject="Export me", text=text),
    )
    forward = wait_for(
        "Mia's forward",
        lambda: next(
            (
                email.message_from_string(i["raw"], policy=email.policy.default)
                for i in system.outbox()
                if i["destinations"] == [cfg.private_email] and i["subject"] == "Export me"
            ),
            None,
        ),
    )
    thread = forward["Reply-To"].addresses[0].addr_spec
    owner_text = "Hi Mia,\nFrom Monday on.\n"
    system.send(
        cfg.private_email,
        thread,
        mail(sender=f"Owner <{cfg.private_email}>", to=thread, subject="Re: Export me", text=owner_text),
    )
    s3, bucket = admin_client("s3", stack["aws"]), cfg.bucket

    def archived() -> dict[str, bytes]:
        keys = [
            o["Key"]
            for prefix in ("conversations/", "sent/")
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])
            if o["Key"].endswith(".eml") and o["Key"].count("/") == 2
        ]
        return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}

    wait_for(
        "the reply kept as sent", lambda: any(k.startswith("sent/mia-at-export.example/") for k in archived())
    )
    before = archived()
    out = tmp_path / "export"
    done = subprocess.run(
        [sys.executable, "-m", "ops.main", "export", str(out), "--endpoint", system.endpoint],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    exported = []
    for path in out.glob("*.mbox"):
        box = mailbox.mbox(path, create=False)
        exported += [mboxrd_unquoted(box.get_bytes(key)) for key in box.iterkeys()]
        box.close()
    assert len(before) <= len(exported) <= len(archived())
    assert all(body in exported for body in before.values())  # nothing missing, each byte-identical
    [received] = [b for k, b in before.items() if k.startswith("conversations/mia-at-export.example/")]
    [sent] = [b for k, b in before.items() if k.startswith("sent/mia-at-export.example/")]
    assert b"\nFrom the top: an export." in received.replace(b"\r\n", b"\n")
    assert b"\nFrom Monday on." in sent.replace(b"\r\n", b"\n")
    mine = [m for m in exported if m in (received, sent)]
    assert mine == [received, sent]  # in the order they happened, in the public address's mbox
    box_text = (out / f"{cfg.public_email}.mbox").read_bytes().replace(b"\r\n", b"\n")
    assert b"\n>From the top: an export." in box_text and b"\n>From Monday on." in box_text
    records = [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]
    assert "mia-at-export.example" in {r["conversationId"] for r in records}


def test_compose_search_finds_a_mail_and_its_pdf_text_sent_over_smtp(
    stack: dict[str, int], tmp_path: Path
) -> None:
    """`email-handler search` against the compose stack: a mail sent over SMTP, its body and its PDF's
    extracted text found from an index synced from the stack (DynamoDB wherever `make up` routed it)."""
    import json
    import sys

    from deploy import config
    from local.env import local_env
    from ops.index import DIR_VARIABLE
    from tests.support.docgen import make_pdf
    from tests.support.mailgen import mail
    from tests.support.scenario import wait_for

    endpoint = f"http://127.0.0.1:{stack['aws']}"
    system = LocalSystem(smtp_port=stack["smtp"], endpoint=endpoint)
    pdf = make_pdf(["Quotation Xylophonequartz 5512"])
    raw = mail(
        sender="Quinn Search <quinn@search.example>",
        subject="Searchable hello",
        text="Walrusmarmalade is in the body",
        attachments=[("quote.pdf", pdf, "application/pdf")],
    )
    system.send("quinn@search.example", config.load(local_env()).public_email, raw)

    def hits(word: str) -> list[dict[str, Any]]:
        done = subprocess.run(
            [sys.executable, "-m", "ops.main", "search", word, "--json", "--endpoint", endpoint],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, DIR_VARIABLE: str(tmp_path)},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return list(json.loads(done.stdout))

    [body] = wait_for("the mail in the index", lambda: hits("walrusmarmalade"), timeout=120)
    assert body["conversationId"] == "quinn-at-search.example" and body["attachment"] == ""
    [text] = wait_for("the PDF's text in the index", lambda: hits("xylophonequartz"), timeout=120)
    assert text["conversationId"] == "quinn-at-search.example" and text["attachment"] == "quote.pdf"
