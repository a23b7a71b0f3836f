"""Enforced IAM: the functions run under their production roles (deploy/iam.py) on an emulator that
checks every request the way AWS does, so a permission missing from a role fails here, not on AWS."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from common.aws import client
from deploy import iam
from local.env import function_credentials
from local.rie import InvokeError, RieProcess
from tests.conftest import IAM_ENFORCED
from tests.support.harness import Stack
from tests.support.mailgen import mail

pytestmark = pytest.mark.skipif(not IAM_ENFORCED, reason="IAM=off: the emulator does not enforce IAM")
ACCOUNT = "123456789012"


def as_role(stack: Stack, function: str, service: str) -> Any:
    creds = function_credentials(stack.cfg, function, ensure_role=False)
    return boto3.client(
        service,
        endpoint_url=stack.url,
        region_name=stack.cfg.region,
        aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=creds["AWS_SESSION_TOKEN"],
    )


def denied(call: Callable[[], object]) -> str:
    with pytest.raises(Exception) as err:
        call()
    code = err.value.response["Error"]["Code"]  # type: ignore[attr-defined]
    assert code in ("AccessDenied", "AccessDeniedException"), err.value
    return code


def test_the_local_roles_carry_exactly_the_deployed_policies(stack: Stack) -> None:
    for function in ("inbound-handler", "ack-sender", "attachment-extractor"):
        name = stack.cfg.name(function)
        found = client("iam").get_role_policy(RoleName=name, PolicyName=iam.POLICY_NAME)["PolicyDocument"]
        assert iam.canonical(iam._document(found)) == iam.canonical(iam.policy(stack.cfg, ACCOUNT, function))


def test_a_role_may_do_what_its_policy_says_and_nothing_else(stack: Stack) -> None:
    cfg = stack.cfg
    s3 = as_role(stack, "inbound-handler", "s3")
    s3.put_object(Bucket=cfg.bucket, Key="withheld/x/1/a.exe", Body=b"x")  # write: allowed
    denied(
        lambda: s3.get_object(Bucket=cfg.bucket, Key="withheld/x/1/a.exe")
    )  # withheld parts are write-only
    denied(lambda: s3.list_objects_v2(Bucket=cfg.bucket, Prefix="withheld/"))  # may list only what it reads
    # the archive it writes it may read too: a shortened forward's download link is signed as this role
    s3.put_object(Bucket=cfg.bucket, Key="conversations/x/1.eml", Body=b"x")
    assert s3.get_object(Bucket=cfg.bucket, Key="conversations/x/1.eml")["Body"].read() == b"x"
    assert s3.list_objects_v2(Bucket=cfg.bucket, Prefix="staging/").get("KeyCount") == 0
    sqs = as_role(stack, "inbound-handler", "sqs")
    url = f"{stack.url}/{ACCOUNT}/{cfg.ack_queue}"
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    denied(lambda: sqs.receive_message(QueueUrl=url))
    denied(lambda: sqs.get_queue_url(QueueName=cfg.ack_queue))  # finding 1: URLs are built instead
    denied(
        lambda: as_role(stack, "attachment-extractor", "dynamodb").get_item(
            TableName=cfg.conversations_table, Key={"conversationId": {"S": "x"}}
        )
    )
    denied(
        lambda: as_role(stack, "ack-sender", "sns").publish(
            TopicArn=f"arn:aws:sns:{cfg.region}:{ACCOUNT}:{cfg.feedback_topic}", Message="x"
        )
    )


def test_removing_one_needed_action_from_a_role_makes_the_scenario_fail(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    """The harness has teeth: the same first contact that passes under the full policy fails, with
    AccessDenied, when the role loses sqs:SendMessage."""
    inbound = rie_function("inbound-handler")
    name, doc = stack.cfg.name("inbound-handler"), iam.policy(stack.cfg, ACCOUNT, "inbound-handler")
    ack_queue = f"arn:aws:sqs:{stack.cfg.region}:{ACCOUNT}:{stack.cfg.ack_queue}"
    statements = [
        s for s in doc["Statement"] if not (s["Action"] == ["sqs:SendMessage"] and ack_queue in s["Resource"])
    ]
    assert len(statements) == len(doc["Statement"]) - 1
    client("iam").put_role_policy(
        RoleName=name, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps({**doc, "Statement": statements})
    )
    with pytest.raises(InvokeError, match="not authorized to perform: sqs:SendMessage"):
        inbound.invoke(stack.receipt(mail(), "0000000000000000000000000000000000000a01"))
    client("iam").put_role_policy(RoleName=name, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps(doc))
    assert (
        inbound.invoke(stack.receipt(mail(), "0000000000000000000000000000000000000a02"))["status"]
        == "forwarded"
    )


def test_ses_sandbox_refuses_unverified_recipients_and_the_deployed_sender_policy_sends_to_verified_ones(
    stack: Stack, rie_function: Callable[..., RieProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the sandbox SES sends only to verified identities and also authorises the send against each
    recipient's identity: the forward to the verified owner goes out under forward-sender's deployed
    policy; the ack to an unverified contact is not attempted (common/inbound/receipt.py), so no DLQ
    fills."""
    from common.runtime.config import dlq_name
    from local.iam import SES_SANDBOX

    cfg = stack.cfg
    monkeypatch.setitem(SES_SANDBOX, "on", True)
    client("ses").verify_email_identity(EmailAddress=cfg.private_email)
    inbound, forward = rie_function("inbound-handler"), rie_function("forward-sender")
    assert (
        inbound.invoke(stack.receipt(mail(), "0000000000000000000000000000000000000b01"))["status"]
        == "forwarded"
    )
    stack.run_sender(forward, cfg.forward_queue)
    stack.run_sender(rie_function("ack-sender"), cfg.ack_queue)
    assert [m.destinations for m in stack.sent()] == [[cfg.private_email]]  # the forward, and nothing else
    assert stack.depth(cfg.ack_queue) == 0 and stack.receive(dlq_name(cfg.ack_queue)) == []

    # A send policy naming only the domain identity fails: in the sandbox SES also checks the
    # recipient's identity, so even the forward to the verified owner would be denied.
    name, doc = cfg.name("forward-sender"), iam.policy(cfg, ACCOUNT, "forward-sender")
    domain_only = [
        {**s, "Resource": [f"arn:aws:ses:{cfg.region}:{ACCOUNT}:identity/{cfg.domain_name}"]}
        if s["Resource"] == [f"arn:aws:ses:{cfg.region}:{ACCOUNT}:identity/*"]
        else s
        for s in doc["Statement"]
    ]
    assert domain_only != doc["Statement"]
    client("iam").put_role_policy(
        RoleName=name,
        PolicyName=iam.POLICY_NAME,
        PolicyDocument=json.dumps({**doc, "Statement": domain_only}),
    )
    assert (
        inbound.invoke(stack.receipt(mail(), "0000000000000000000000000000000000000b02"))["status"]
        == "forwarded"
    )
    stack.run_sender(forward, cfg.forward_queue)
    assert len(stack.sent()) == 1  # nothing more went out
    [denied] = stack.receive(dlq_name(cfg.forward_queue))
    assert denied["MessageAttributes"]["errorCode"]["StringValue"] == "AccessDeniedException"


def test_the_wiring_polls_each_sender_queue_with_the_senders_role(stack: Stack) -> None:
    """As Lambda's event-source mapping uses the function's execution role: without sqs:ReceiveMessage
    the ack queue is not polled (the wiring says so and is not healthy), without sqs:DeleteMessage a
    handled batch stays in the queue; with the deployed policy it works."""
    import time

    from common.aws import sqs
    from deploy.functions import FUNCTIONS, SENDERS
    from local.wiring import Endpoint, Wiring

    cfg = stack.cfg
    invoked: list[dict] = []
    endpoints = {f.name: Endpoint(f.name, "-", invoke=lambda url, event, timeout: {}) for f in FUNCTIONS}

    def record(url: str, event: Any, timeout: float) -> dict[str, Any]:
        invoked.append(event)
        return {}

    endpoints["ack-sender"] = Endpoint("ack-sender", "-", invoke=record)
    name, doc = cfg.name("ack-sender"), iam.policy(cfg, ACCOUNT, "ack-sender")

    def without(action: str) -> None:
        statements = [{**s, "Action": [a for a in s["Action"] if a != action]} for s in doc["Statement"]]
        client("iam").put_role_policy(
            RoleName=name,
            PolicyName=iam.POLICY_NAME,
            PolicyDocument=json.dumps({**doc, "Statement": statements}),
        )

    def until(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := check()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)
        return value

    from local import provision

    provision.provision(cfg, wiring=True)  # the wiring's own queues too
    lines: list[str] = []
    roles = {f.name: function_credentials(cfg, f.name, ensure_role=False) for f in SENDERS}
    without("sqs:ReceiveMessage")
    sqs.send(cfg.ack_queue, "{}")
    wiring = Wiring(cfg, endpoints, visibility_s=2, report=lines.append, roles=roles).start()
    try:
        error = until("the denied poll", lambda: wiring.failing.get(cfg.ack_queue))
        assert "not authorized to perform: sqs:ReceiveMessage" in error and "assumed-role/" + name in error
        assert not wiring.healthy() and invoked == [] and stack.depth(cfg.ack_queue) == 1
        assert any("ack-sender: cannot poll" in line for line in lines)
        until(
            "the other sources",
            lambda: set(wiring.last_poll) == {s.queue for s in wiring.sources} - {cfg.ack_queue},
        )

        without("sqs:DeleteMessage")  # receives again, but cannot delete what was handled
        until("an invocation", lambda: invoked)
        error = until(
            "the denied delete",
            lambda: (
                "sqs:DeleteMessage" in wiring.failing.get(cfg.ack_queue, "") and wiring.failing[cfg.ack_queue]
            ),
        )
        assert stack.depth(cfg.ack_queue) == 1

        client("iam").put_role_policy(
            RoleName=name, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps(doc)
        )
        until("the queue drained", lambda: stack.depth(cfg.ack_queue) == 0)
        until("healthy", wiring.healthy)
        # the handled message came back because it could not be deleted, then the role deleted it (no DLQ)
        assert len(invoked) >= 2 and stack.depth(cfg.ack_queue + "-dlq") == 0
    finally:
        wiring.stop()


@pytest.mark.parametrize("setting,enforced", [("on", True), ("off", False)])
def test_the_compose_emulator_enforces_iam_as_the_iam_variable_says(setting: str, enforced: bool) -> None:
    """compose/emulator-moto.yml passes IAM (default on) to `python -m local.emulator`:
    `IAM=off make up` is a stack where moto's "testing" keys work, else only real identities do."""
    import os
    import subprocess
    import sys

    from local.rie import free_port, wait_for_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "local.emulator", "-p", str(port)],
        env={**os.environ, "IAM": setting},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=60, proc=proc)
        sqs = boto3.client(
            "sqs",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        if enforced:
            with pytest.raises(Exception, match="InvalidClientTokenId|security token"):
                sqs.list_queues()
        else:
            assert sqs.list_queues().get("QueueUrls", []) == []
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_handlers_read_thread_secret_from_ssm_and_fail_without_ssm_get_parameter(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    """As on AWS, a function gets no secret in its variables: reply-handler reads THREAD_SECRET from its
    SecureString at cold start, so its role's ssm:GetParameter is what lets it verify a thread address."""
    cfg = stack.cfg
    stored = client("ssm").get_parameter(Name=cfg.thread_secret_parameter, WithDecryption=True)["Parameter"]
    assert stored["Type"] == "SecureString" and stored["Value"] == cfg.thread_secret  # provisioning stored it
    owner_reply = mail(
        sender=cfg.private_email, to=f"new@{cfg.thread_domain}", text="[to: someone@example.org]\nhi"
    )
    reply = rie_function("reply-handler")
    assert "THREAD_SECRET" not in {k for k, v in reply.env.items() if v}
    reply.invoke(
        stack.receipt(owner_reply, "0000000000000000000000000000000000000c01", to=f"new@{cfg.thread_domain}")
    )

    name, doc = cfg.name("reply-handler"), iam.policy(cfg, ACCOUNT, "reply-handler")
    statements = [
        {**s, "Action": [a for a in s["Action"] if a != "ssm:GetParameter"]} for s in doc["Statement"]
    ]
    client("iam").put_role_policy(
        RoleName=name,
        PolicyName=iam.POLICY_NAME,
        PolicyDocument=json.dumps({**doc, "Statement": [s for s in statements if s["Action"]]}),
    )
    cold = rie_function("reply-handler")  # a new cold start, under the changed role (not restored)
    with pytest.raises(InvokeError) as err:
        cold.invoke(
            stack.receipt(
                owner_reply, "0000000000000000000000000000000000000c02", to=f"new@{cfg.thread_domain}"
            )
        )
    assert "ssm:GetParameter" in str(err.value.payload) or "AccessDenied" in str(err.value.payload)


def test_function_credentials_restore_a_role_only_when_asked_and_say_so(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = stack.cfg
    name, doc = cfg.name("ack-sender"), iam.policy(cfg, ACCOUNT, "ack-sender")
    changed = {**doc, "Statement": doc["Statement"][1:]}
    client("iam").put_role_policy(
        RoleName=name, PolicyName=iam.POLICY_NAME, PolicyDocument=json.dumps(changed)
    )
    function_credentials(cfg, "ack-sender")  # not asked: the changed policy stays
    current = client("iam").get_role_policy(RoleName=name, PolicyName=iam.POLICY_NAME)["PolicyDocument"]
    assert iam.canonical(iam._document(current)) == iam.canonical(changed)
    assert capsys.readouterr().err == ""
    function_credentials(cfg, "ack-sender", ensure_role=True)  # asked: restored, loudly
    current = client("iam").get_role_policy(RoleName=name, PolicyName=iam.POLICY_NAME)["PolicyDocument"]
    assert iam.canonical(iam._document(current)) == iam.canonical(doc)
    assert "updated to its production policy" in capsys.readouterr().err


def test_dashboard_actions_are_authorized_against_the_dashboards_global_arn(stack: Stack) -> None:
    """As AWS: a dashboard's ARN has no Region (the deployer policy's statement, deploy/dashboard.py), so a
    statement naming it allows exactly that dashboard, and one written with a Region matches nothing."""
    iam_api = client("iam")
    iam_api.create_user(UserName="dashboards")
    actions = ["cloudwatch:GetDashboard", "cloudwatch:PutDashboard", "cloudwatch:DeleteDashboards"]
    statements = [
        {"Effect": "Allow", "Action": actions, "Resource": f"arn:aws:cloudwatch::{ACCOUNT}:dashboard/ours"},
        {
            "Effect": "Allow",
            "Action": actions,
            "Resource": f"arn:aws:cloudwatch:{stack.cfg.region}:{ACCOUNT}:dashboard/regional",
        },
    ]
    document = {"Version": "2012-10-17", "Statement": statements}
    iam_api.put_user_policy(UserName="dashboards", PolicyName="d", PolicyDocument=json.dumps(document))
    key = iam_api.create_access_key(UserName="dashboards")["AccessKey"]
    cw = boto3.client(
        "cloudwatch",
        endpoint_url=stack.url,
        region_name=stack.cfg.region,
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    body = json.dumps({"widgets": []})
    cw.put_dashboard(DashboardName="ours", DashboardBody=body)
    assert json.loads(cw.get_dashboard(DashboardName="ours")["DashboardBody"]) == {"widgets": []}
    for name in ("other", "regional"):
        denied(functools.partial(cw.put_dashboard, DashboardName=name, DashboardBody=body))
    client("cloudwatch").put_dashboard(DashboardName="other", DashboardBody=body)
    denied(lambda: cw.get_dashboard(DashboardName="other"))
    denied(lambda: cw.delete_dashboards(DashboardNames=["ours", "other"]))  # every named dashboard is checked
    cw.delete_dashboards(DashboardNames=["ours"])
    assert [d["DashboardName"] for d in client("cloudwatch").list_dashboards()["DashboardEntries"]] == [
        "other"
    ]
