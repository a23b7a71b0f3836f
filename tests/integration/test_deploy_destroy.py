"""`email-handler destroy` and `email-handler replay` against a deployment: destroy removes what the
deploy made (keeping the data unless asked), replay re-invokes the events Lambda gave up on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from common.aws import client
from deploy.functions import FUNCTIONS, SENDERS
from deploy.main import Options, plan_lines
from tests.support.deploy import (
    ACCOUNT,
    BUCKET,
    PREFIX,
    Throttled,
    changed,
    images,
    run,
)
from tests.support.ownerkeys import pgp_owner


def test_destroy_removes_what_the_deploy_made_and_keeps_the_data_unless_asked(env: dict[str, str]) -> None:
    from deploy.destroy import destroy

    run(env)
    lines: list[str] = []
    plan = destroy(Options(dry_run=True), environ=env, report=lines.append)
    assert {c.action for c in plan} == {"delete"} and len(
        client("lambda").list_functions()["Functions"]
    ) == len(FUNCTIONS)
    done = destroy(Options(), environ=env, report=lines.append)
    assert plan_lines(plan) == plan_lines(done)
    assert client("lambda").list_functions()["Functions"] == []
    assert not [r for r in client("iam").list_roles()["Roles"] if r["RoleName"].startswith(PREFIX)]
    assert client("ses").describe_active_receipt_rule_set().get("Metadata") is None
    assert client("events").list_rules(NamePrefix=PREFIX)["Rules"] == []
    assert client("cloudwatch").list_dashboards()["DashboardEntries"] == []
    client("s3").head_bucket(Bucket=BUCKET)  # the mail is kept
    assert any("kept" in line and BUCKET in line for line in lines)
    destroy(Options(), delete_data=True, environ=env, report=lines.append)
    assert BUCKET not in [b["Name"] for b in client("s3").list_buckets()["Buckets"]]
    assert changed(destroy(Options(), delete_data=True, environ=env, report=lines.append)) == []


def test_destroy_removes_every_mailbox_key_found_under_its_path(env: dict[str, str], tmp_path: Path) -> None:
    from deploy.destroy import destroy

    key = tmp_path / "p1.asc"
    key.write_text(pgp_owner().armored)
    box = "p1@partner1.example"
    keyed = {
        **env,
        "PUBLIC_ADDRESSES": json.dumps({"hello@example.com": {"forward_to": [box]}}),
        "MAILBOX_KEYS": json.dumps({box: str(key)}),
    }
    run(keyed)
    path = "/service-email-handler/prd/mailbox-key"
    [stored] = client("ssm").get_parameters_by_path(Path=path, Recursive=True)["Parameters"]
    assert stored["Value"] == key.read_text()
    # found under the path, not from MAILBOX_KEYS (its files may be gone by then)
    destroy(Options(), environ={k: v for k, v in keyed.items() if k != "MAILBOX_KEYS"}, report=lambda _: None)
    assert client("ssm").get_parameters_by_path(Path=path, Recursive=True)["Parameters"] == []


def test_replay_reinvokes_the_events_lambda_gave_up_on(env: dict[str, str]) -> None:
    from deploy.replay import replay

    run(env)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    event = {
        "Records": [
            {
                "eventSource": "aws:s3",
                "s3": {"bucket": {"name": BUCKET}, "object": {"key": "attachments/a/b/c.pdf"}},
            }
        ]
    }
    record = {
        "version": "1.0",
        "requestContext": {
            "requestId": "r-1",
            "condition": "RetriesExhausted",
            "functionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-attachment-extractor:live",
        },
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
    }
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
    listed = replay(Options(dry_run=True), environ=env, report=lambda line: None)
    assert [(e["function"], e["requestId"], e["outcome"]) for e in listed] == [
        (f"{PREFIX}-attachment-extractor:live", "r-1", "would replay")
    ]
    # moto cannot invoke an image function (HTTP 500): the replay says so and keeps the event for the next
    # one.
    [entry] = replay(Options(), environ=env, report=lambda line: None)  # the dry run left the message visible
    assert entry["requestId"] == "r-1" and entry["outcome"].startswith(("replayed", "failed"))
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    left = int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])
    assert left == (0 if entry["outcome"] == "replayed" else 1)


def test_destroy_removes_the_event_source_mappings_made_on_the_alias_before_the_queues(
    env: dict[str, str],
) -> None:
    """The senders' mappings are made on the ``live`` alias. ListEventSourceMappings filters by the exact
    function (qualifier included): asked with the plain function name it does not list them (moto:
    none; AWS documents the alias filter), so destroy lists them by queue ARN and by alias ARN."""
    from deploy.destroy import destroy

    run(env)
    lam = client("lambda")
    mappings = lam.list_event_source_mappings()["EventSourceMappings"]
    assert len(mappings) == len(SENDERS) + 1  # + the extractor's attachment queue
    sender = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-{SENDERS[0].name}"
    # what the plain name (or unqualified ARN) lists for a mapping made on the alias: nothing
    assert lam.list_event_source_mappings(FunctionName=sender.rsplit(":", 1)[-1])["EventSourceMappings"] == []
    assert lam.list_event_source_mappings(FunctionName=sender)["EventSourceMappings"] == []
    assert len(lam.list_event_source_mappings(FunctionName=f"{sender}:live")["EventSourceMappings"]) == 1
    # a mapping of another application on one of our queues stays
    lam.create_function(
        FunctionName="other-app",
        Role=f"arn:aws:iam::{ACCOUNT}:role/{PREFIX}-ack-sender",
        PackageType="Image",
        Code={"ImageUri": images()[SENDERS[0].name].image_uri},
    )
    queue = mappings[0]["EventSourceArn"]
    lam.create_event_source_mapping(EventSourceArn=queue, FunctionName="other-app")
    changes = destroy(Options(), environ=env, report=lambda line: None)
    kinds = [c.kind for c in changes]
    assert kinds.count("event-source") == len(SENDERS) + 1
    assert max(i for i, k in enumerate(kinds) if k == "event-source") < min(
        i for i, k in enumerate(kinds) if k == "sqs-queue"
    )
    assert [
        m["FunctionArn"].rsplit(":", 1)[-1] for m in lam.list_event_source_mappings()["EventSourceMappings"]
    ] == ["other-app"]


def test_a_dry_run_replay_lists_every_failed_event_and_leaves_them_all_visible(env: dict[str, str]) -> None:
    """More failed events than one receive returns: the dry run lists each once (it hides what it has
    listed, then shows it again), and the replay after it still finds every one."""
    from deploy.replay import replay

    run(env)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    arn = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-attachment-extractor:live"
    for n in range(23):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(
                {"requestContext": {"requestId": f"r-{n}", "functionArn": arn}, "requestPayload": {"n": n}}
            ),
        )
    listed = replay(Options(dry_run=True), environ=env, report=lambda line: None)
    assert sorted(e["requestId"] for e in listed) == sorted(f"r-{n}" for n in range(23))
    assert {e["outcome"] for e in listed} == {"would replay"}
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == (
        "23",
        "0",
    )
    assert len(replay(Options(), environ=env, report=lambda line: None)) == 23


def test_replay_invokes_the_live_alias_whatever_the_record_names(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record naming a version (or the unqualified function) is replayed on ``live``: an old version runs
    old code and has no on-failure destination. A record of another function is skipped."""
    from deploy.replay import replay

    run(env)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    base = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:"
    for n, arn in enumerate(
        [f"{base}{PREFIX}-inbound-handler:3", f"{base}{PREFIX}-reply-handler", f"{base}other-app:live"]
    ):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(
                {"requestContext": {"requestId": f"r-{n}", "functionArn": arn}, "requestPayload": {"n": n}}
            ),
        )
    invoked: list[str] = []

    def accept(request: Any, **_: Any) -> Any:
        from urllib.parse import unquote

        from botocore.awsrequest import AWSResponse

        invoked.append(unquote(request.url.split("/functions/")[1].split("/invocations")[0]))
        return AWSResponse(request.url, 202, {}, Throttled(b""))

    import boto3

    original = boto3.session.Session.client

    def made(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        new = original(self, service, *args, **kwargs)
        new.meta.events.register("before-send.lambda.Invoke", accept)
        return new

    monkeypatch.setattr(boto3.session.Session, "client", made)  # replay makes its clients anew
    done = {e["requestId"]: e for e in replay(Options(), environ=env, report=lambda line: None)}
    assert sorted(invoked) == [f"{base}{PREFIX}-inbound-handler:live", f"{base}{PREFIX}-reply-handler:live"]
    assert (done["r-0"]["function"], done["r-0"]["outcome"]) == (f"{PREFIX}-inbound-handler:live", "replayed")
    assert done["r-2"]["outcome"] == "skipped: not a function of this deployment"
