"""A cheap static IAM check (tests/support/iamscan.py): every boto3 call in shipped code maps to an IAM
action, and each function's policy in deploy/iam.py allows the actions its code can reach. The
enforced emulator proves the same at run time for the paths the suites exercise; this covers the
paths they do not, and the grants no emulator sees (the event-source mapping, the log group)."""

from __future__ import annotations

from typing import Any

import pytest

from deploy import config
from deploy.functions import FUNCTIONS, SENDERS
from deploy.iam import SENDER_QUEUE_ACTIONS, policy
from local.env import local_env
from tests.support import iamscan

ACCOUNT = "123456789012"
CFG = config.load(local_env())


def arn_statements(doc: dict[str, Any], action: str) -> list[str]:
    return [
        r for s in doc["Statement"] if s["Effect"] == "Allow" and action in s["Action"] for r in s["Resource"]
    ]


def test_every_boto3_call_in_shipped_code_maps_to_an_iam_action() -> None:
    scan = iamscan.Scan()
    modules = iamscan.shipped_modules()
    assert not [m for m in modules if m.startswith("local")]
    calls = {
        (m, op)
        for m in modules
        if m.startswith(iamscan.AWS_PACKAGE)
        for name in (scan.module(m).top if scan.module(m) else {})
        for op in scan.aws_calls(m, name)
    }
    assert calls, "the scan found no boto3 call in common/aws: it is broken"
    assert {op for _, op in calls} - set(iamscan.OPS) == set()
    # outside common/aws a client is only handed to a library, and the table says what the library calls
    stray = scan.stray_calls(modules)
    assert set(stray) == set(iamscan.ELSEWHERE), stray


@pytest.mark.parametrize("function", [f.name for f in FUNCTIONS])
def test_each_function_policy_allows_what_its_code_can_reach(function: str) -> None:
    needs = iamscan.needs(function)
    assert needs.unmapped == set() and needs.stray == {}
    assert needs.actions, f"nothing reached from images/{function}/app.py: the scan is broken"
    doc = policy(CFG, ACCOUNT, function)
    assert iamscan.missing(needs.actions, doc) == set()
    # What no code in the image calls but Lambda does as the role: its own log group ...
    group = f"arn:aws:logs:{CFG.region}:{ACCOUNT}:log-group:/aws/lambda/{CFG.name(function)}:*"
    assert group in arn_statements(doc, "logs:PutLogEvents") and group in arn_statements(
        doc, "logs:CreateLogStream"
    )
    spec = next(f for f in FUNCTIONS if f.name == function)
    if spec in SENDERS:  # ... the event-source mapping polls the sender's queue with the function's role
        queue = f"arn:aws:sqs:{CFG.region}:{ACCOUNT}:{getattr(CFG, spec.queue_field)}"
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
            assert action in SENDER_QUEUE_ACTIONS and queue in arn_statements(doc, action), action
    else:  # ... and an asynchronous invocation that failed goes to the async DLQ as the role
        assert f"arn:aws:sqs:{CFG.region}:{ACCOUNT}:{CFG.name('async-dlq')}" in arn_statements(
            doc, "sqs:SendMessage"
        )


def test_the_check_catches_a_removed_grant() -> None:
    doc = policy(CFG, ACCOUNT, "inbound-handler")
    without = {**doc, "Statement": [s for s in doc["Statement"] if s["Action"] != ["sqs:SendMessage"]]}
    assert iamscan.missing(iamscan.needs("inbound-handler").actions, without) == {"sqs:SendMessage"}


def source(module: str) -> str:
    return (iamscan.REPO / (module.replace(".", "/") + ".py")).read_text()


def test_the_check_catches_a_new_boto3_call_with_no_grant() -> None:
    # A new common.aws function with an operation nobody mapped, called from inbound-handler's code.
    aws = (
        source("common.aws.sqs")
        + "\n\ndef purge(name):\n    client('sqs').purge_queue(QueueUrl=queue_url(name))\n"
    )
    handler = (
        source("common.inbound.handler")
        + "\n\ndef _drain(cfg):\n    from common.aws import sqs\n    sqs.purge('x')\n"
        "\n\nhandle_all = [handle, _drain]\n"
    )
    needs = iamscan.needs(
        "inbound-handler", iamscan.Scan({"common.aws.sqs": aws, "common.inbound.handler": handler})
    )
    assert needs.unmapped == {("sqs", "purge_queue")}
    # A mapped operation the role lacks: inbound-handler starts receiving from a queue.
    receive = (
        source("common.inbound.handler") + "\n\ndef _peek(cfg):\n    from common.aws import sqs\n"
        "    return sqs.receive(cfg.ack_queue)\n\n\nhandle_all = [handle, _peek]\n"
    )
    needs = iamscan.needs("inbound-handler", iamscan.Scan({"common.inbound.handler": receive}))
    assert iamscan.missing(needs.actions, policy(CFG, ACCOUNT, "inbound-handler")) == {"sqs:ReceiveMessage"}
    # The same call where the handler never reaches it does not count (the scan follows references).
    unreached = (
        source("common.inbound.handler") + "\n\ndef _peek(cfg):\n    from common.aws import sqs\n"
        "    return sqs.receive(cfg.ack_queue)\n"
    )
    assert (
        "sqs:ReceiveMessage"
        not in iamscan.needs("inbound-handler", iamscan.Scan({"common.inbound.handler": unreached})).actions
    )
    # boto3 used directly outside common/aws is reported.
    direct = (
        source("common.store.staging")
        + "\n\ndef _raw():\n    import boto3\n    boto3.client('s3').put_object(Bucket='b', Key='k')\n"
    )
    assert iamscan.needs("inbound-handler", iamscan.Scan({"common.store.staging": direct})).stray == {
        "common.store.staging": {"put_object"}
    }
