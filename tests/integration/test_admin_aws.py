"""The owner/operator CLI against a deployment "on AWS" (`--env`, `--region`): the deployment's resource
names, the addresses read from the deployed inbound-handler's configuration, the default credential
chain. AWS here is the session's moto server (AWS_ENDPOINT_URL), provisioned as `email-handler deploy`
provisions environment `prd`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from common.aws import client, dynamodb
from deploy import config, resources
from deploy.config import Config
from local.env import admin_credentials
from tests.conftest import REPO
from tests.support.harness import Stack

DEPLOYED = {
    "DOMAIN_NAME": "mail.example",
    "PUBLIC_EMAIL": "hi@mail.example",
    "PRIVATE_EMAIL": "me@home.example",
    "OWNER_EMAILS": "me@home.example,me@work.example",
}


@pytest.fixture
def prd(stack: Stack, moto_server: str) -> Config:
    """Environment prd provisioned on moto, with an inbound-handler whose configuration names the owner."""
    cfg = config.load({"ENVIRONMENT": "prd", "AWS_REGION": "us-east-1", **DEPLOYED})
    # What the CLI reads (moto keeps SES configuration-set destinations per account, so a second full
    # provisioning next to the local one would collide there).
    run = resources.Run(cfg, True, None)
    for field_name, (key, ttl, indexes) in resources.TABLES.items():
        resources._table(run, getattr(cfg, field_name), key, ttl, indexes)
    for queue in resources.sender_queues(cfg):
        resources.queue_with_dlq(run, queue, 60, cfg.max_receive_count)
    iam = client("iam")
    role = iam.create_role(
        RoleName="prd-inbound",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "lambda.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    client("lambda").create_function(
        FunctionName=cfg.name("inbound-handler"),
        Role=role,
        PackageType="Image",
        Code={
            "ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/"
            "service-email-handler-prd-inbound-handler:c-1"
        },
        Environment={"Variables": {**DEPLOYED, "THREAD_SECRET": "never-printed-secret-0123456789"}},
    )
    return cfg


def cli(moto_server: str, *args: str) -> subprocess.CompletedProcess[str]:
    # A user's shell for AWS: no local defaults, credentials from the environment, no --endpoint.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DOMAIN_NAME", "PUBLIC_EMAIL", "PRIVATE_EMAIL"))
    }
    # The emulator enforces IAM: the shell holds an administrator's keys (the local admin's, here).
    env |= {"AWS_ENDPOINT_URL": moto_server, **admin_credentials()}
    return subprocess.run(
        [sys.executable, "-m", "ops.main", *args, "--env", "prd", "--region", "us-east-1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_block_allow_unblock_on_a_deployment_use_its_tables_and_its_owner(
    prd: Config, moto_server: str
) -> None:
    done = cli(moto_server, "block", "@spam.example")
    assert done.returncode == 0, done.stderr
    assert dynamodb.get(prd.sender_lists_table, {"entry": "@spam.example"})["list"] == "block"
    assert (
        dynamodb.scan(config.load({"ENVIRONMENT": "local"}).sender_lists_table) == []
    )  # not the local tables
    # The owner's addresses come from the deployed configuration, so they are protected.
    refused = cli(moto_server, "block", "@work.example")
    assert refused.returncode == 2 and "covers the owner's address me@work.example" in refused.stderr
    assert "THREAD_SECRET" not in refused.stderr + refused.stdout and "never-printed" not in refused.stdout
    listed = json.loads(cli(moto_server, "block", "--json").stdout)
    assert [e["entry"] for e in listed] == ["@spam.example"] and listed[0]["source"].startswith("cli:")
    assert cli(moto_server, "unblock", "@spam.example").returncode == 0
    assert dynamodb.scan(prd.sender_lists_table) == []


def test_read_commands_on_a_deployment(prd: Config, moto_server: str) -> None:
    dynamodb.put(
        prd.conversations_table,
        {
            "conversationId": "x-at-y.example",
            "senderEmail": "x@y.example",
            "subject": "Hi",
            "timestamp": "2026-11-24T07:00:00Z",
        },
    )
    [conversation] = json.loads(cli(moto_server, "conversations", "--json").stdout)
    assert conversation["conversationId"] == "x-at-y.example"
    assert "x-at-y.example" in cli(moto_server, "conversations").stdout
    queues = json.loads(cli(moto_server, "dlq", "list", "--json").stdout)
    assert {q["queue"] for q in queues} == {resources.dlq_name(q) for q in resources.sender_queues(prd)}
    assert json.loads(cli(moto_server, "quarantine", "list", "--json").stdout) == []
    assert json.loads(cli(moto_server, "suppression", "list", "--json").stdout) == []


def test_redrive_does_not_stop_at_a_false_empty_receive_nor_leave_messages_in_flight(
    prd: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On AWS a short-poll ReceiveMessage samples some servers and may answer empty while the queue holds
    messages; a message another consumer holds is invisible until its visibility timeout ends. Redrive
    long-polls and ends only when SQS counts nothing visible or in flight."""
    from common.aws import sqs
    from ops import admin

    dlq = resources.dlq_name(prd.forward_queue)
    sqs.send(dlq, json.dumps({"kind": "forward", "n": 1}))
    real = sqs.receive

    def sampled(
        queue_name: str,
        max_messages: int = 10,
        wait_s: int = 1,
        visibility_s: int | None = None,
        api: Any = None,
    ) -> list[dict[str, Any]]:
        if wait_s == 0:  # a short poll that sampled only servers without the message
            return []
        return real(queue_name, max_messages, wait_s, visibility_s, api)

    monkeypatch.setattr(sqs, "receive", sampled)
    done = admin.redrive(dlq, poll_s=1)
    assert (done.moved, done.source, done.left) == (1, prd.forward_queue, 0)
    assert [json.loads(m["Body"])["n"] for m in real(prd.forward_queue, wait_s=1)] == [1]

    # a message in flight (another consumer took it for 2 s): waited for, then moved
    sqs.send(dlq, json.dumps({"kind": "forward", "n": 2}))
    assert len(real(dlq, wait_s=1, visibility_s=2)) == 1
    said: list[str] = []
    done = admin.redrive(dlq, poll_s=1, say=said.append)
    assert (done.moved, done.left) == (1, 0) and said and "in-flight" in said[0]
    # one that stays in flight longer than the patience is reported, not waited for forever
    sqs.send(dlq, json.dumps({"kind": "forward", "n": 3}))
    assert len(real(dlq, wait_s=1, visibility_s=60)) == 1
    done = admin.redrive(dlq, poll_s=1, patience_s=1.5)
    assert (done.moved, done.left) == (0, 1)


def test_redrive_of_every_dlq_skips_the_on_failure_destination_and_names_replay(
    prd: Config, moto_server: str
) -> None:
    """The deploy's async-dlq (Lambda's on-failure destination) is no queue's DLQ: `dlq redrive` with no
    queue named moved the senders' messages only after failing on it ("expected exactly one")."""
    from common.aws import sqs
    from deploy.lambdas import async_dlq

    client("sqs").create_queue(QueueName=async_dlq(prd))
    sqs.send(resources.dlq_name(prd.forward_queue), json.dumps({"kind": "forward", "n": 1}))
    done = cli(moto_server, "dlq", "redrive")
    assert done.returncode == 0, done.stderr
    assert (
        f"skipped: {async_dlq(prd)} is no queue's dead-letter queue" in done.stderr
        and "replay" in done.stderr
    )
    assert f"1 message(s) moved to {prd.forward_queue}" in done.stdout
    named = cli(moto_server, "dlq", "redrive", "async")
    assert named.returncode == 2 and "email-handler replay" in named.stderr


def test_dlq_list_shows_every_message_and_takes_none(prd: Config, moto_server: str) -> None:
    """A visibility-0 look answers the same first messages again: 25 failed forwards listed as 10."""
    from common.aws import sqs

    dlq = resources.dlq_name(prd.forward_queue)
    for n in range(25):
        sqs.send(
            dlq,
            json.dumps(
                {"kind": "forward", "to": [f"c{n}@x.example"], "subject": f"s{n}", "idempotency_key": f"k{n}"}
            ),
        )
    done = cli(moto_server, "dlq", "list", "forward", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(r["subject"] for r in json.loads(done.stdout)) == sorted(f"s{n}" for n in range(25))
    assert sqs.attributes(dlq)["ApproximateNumberOfMessages"] == "25"  # shown again, none taken
