"""`email-handler deploy`, identity: each function's IAM policy names only its own resources, the
deployer policy (docs/deploy.md) is enough to deploy and destroy, and calls refused while a fresh grant
propagates are retried."""

from __future__ import annotations

import json
from typing import Any

import pytest

from common.aws import client, reset_clients
from deploy.functions import FUNCTIONS, SENDERS
from deploy.main import Options
from tests.support.deploy import (
    ACCOUNT,
    BUCKET,
    PREFIX,
    Throttled,
    as_user,
    changed,
    deployer_user,
    run,
)


def test_iam_policies_name_only_their_own_resources(env: dict[str, str]) -> None:
    from deploy.iam import policy
    from deploy.preflight import load_config
    from local.iam import takes_no_resource

    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    for f in FUNCTIONS:
        statements = policy(cfg, ACCOUNT, f.name)["Statement"]
        # "*" only for an action with no resource type (ses:GetAccount: does the sandbox refuse a recipient?)
        resources = [
            r for s in statements if not all(takes_no_resource(a) for a in s["Action"]) for r in s["Resource"]
        ]
        assert all(r.startswith("arn:aws:") and not r.endswith(":*:*") for r in resources), f.name
        assert [s["Action"] for s in statements if "*" in s["Resource"]] in ([], [["ses:GetAccount"]])
        sends = [s for s in statements if "ses:SendRawEmail" in s["Action"]]
        assert bool(sends) == (f in SENDERS), f.name  # only senders send
        topics = [r for s in statements if "sns:Publish" in s["Action"] for r in s["Resource"]]
        assert topics in ([], [f"arn:aws:sns:us-east-1:{ACCOUNT}:{PREFIX}-alerts"])
    extractor = {a for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"] for a in s["Action"]}
    assert not any(a.startswith(("dynamodb:", "sns:", "ses:")) for a in extractor)
    queues = [
        s["Resource"]
        for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"]
        if "sqs:SendMessage" in s["Action"]
    ]
    assert queues == [
        [f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq"]
    ]  # Lambda's on-failure destination
    polled = [
        s["Resource"]
        for s in policy(cfg, ACCOUNT, "attachment-extractor")["Statement"]
        if "sqs:ReceiveMessage" in s["Action"]
    ]
    assert polled == [
        [f"arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-attachment-events"]
    ]  # its event source, nothing else


def test_the_deployer_policy_is_enough_for_deploy_and_destroy(env: dict[str, str]) -> None:
    """Under enforced IAM, a user with only the printed deployer policy deploys, redeploys and destroys.

    The emulator evaluates an action with no resource type against "*" as AWS does
    (local.iam.NO_RESOURCE_ACTIONS), so the SES identity and receipt-rule calls prove the
    policy's Resource elements too, not only its action list."""
    from deploy.destroy import destroy

    ses = client("ses")
    assert ses.list_identities()["Identities"] == []  # a fresh account: the deploy verifies the domain
    deployer = deployer_user(env)
    changes, _ = as_user(deployer, lambda: run(env))
    assert {
        ("ses-identity", "create"),
        ("ses-rule-set", "create"),
        ("ses-receipt-rule", "create"),
        ("ses-active-rule-set", "create"),
        ("ses-mail-from", "create"),
    } <= {(c.kind, c.action) for c in changes}
    assert changed(as_user(deployer, lambda: run(env))[0]) == []
    # drift the deployer has to converge: a receipt rule, the MAIL FROM domain, the feedback destination
    thread = next(
        r
        for r in ses.describe_receipt_rule_set(RuleSetName=PREFIX)["Rules"]
        if r["Name"] == f"{PREFIX}-thread"
    )
    ses.update_receipt_rule(RuleSetName=PREFIX, Rule={**thread, "Enabled": False})
    ses.set_identity_mail_from_domain(Identity="example.com", MailFromDomain="elsewhere.example.com")
    fixed = changed(as_user(deployer, lambda: run(env))[0])
    assert ("ses-receipt-rule", f"{PREFIX}-thread", "update") in fixed and (
        "ses-mail-from",
        "bounce.example.com",
        "update",
    ) in fixed
    # moto has no SetReceiptRulePosition or DeleteReceiptRule; its IAM check runs before it looks the action
    # up
    for call in (
        lambda: client("ses").set_receipt_rule_position(RuleSetName=PREFIX, RuleName=f"{PREFIX}-public"),
        lambda: client("ses").delete_receipt_rule(RuleSetName=PREFIX, RuleName="not-there"),
    ):
        try:
            as_user(deployer, call)
        except Exception as exc:
            assert "AccessDenied" not in str(exc), exc
    # replay's dry run lists the async DLQ (hiding, then showing again what it listed)
    from deploy.replay import replay

    url = client("sqs").get_queue_url(QueueName=f"{PREFIX}-async-dlq")["QueueUrl"]
    client("sqs").send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            {
                "requestContext": {
                    "requestId": "r-1",
                    "functionArn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{PREFIX}-inbound-handler",
                },
                "requestPayload": {},
            }
        ),
    )
    assert (
        len(as_user(deployer, lambda: replay(Options(dry_run=True), environ=env, report=lambda line: None)))
        == 1
    )
    as_user(deployer, lambda: destroy(Options(), delete_data=True, environ=env, report=lambda line: None))
    assert client("lambda").list_functions()["Functions"] == []
    assert ses.list_receipt_rule_sets()["RuleSets"] == []


def refuse(
    monkeypatch: Any, answers: dict[tuple[str, str], tuple[int, dict[str, str], bytes]], times: int
) -> list[str]:
    """Every new client answers ``(service, operation)`` with ``(status, headers, body)`` for its first
    ``times`` calls, as AWS does until a grant made seconds before has propagated; returns the calls seen."""
    import boto3
    from botocore.awsrequest import AWSResponse

    seen: list[str] = []
    original = boto3.session.Session.client

    def made(self: Any, service: str, *args: Any, **kwargs: Any) -> Any:
        new = original(self, service, *args, **kwargs)
        for (svc, operation), (status, headers, body) in answers.items():
            if svc != service:
                continue

            def answer(
                request: Any,
                operation: str = operation,
                status: int = status,
                headers: dict[str, str] = headers,
                body: bytes = body,
                **_: Any,
            ) -> Any:
                seen.append(operation)
                if seen.count(operation) <= times:
                    return AWSResponse(request.url, status, headers, Throttled(body))
                return None

            new.meta.events.register(f"before-send.{service}.{operation}", answer)
        return new

    monkeypatch.setattr(boto3.session.Session, "client", made)
    reset_clients()
    return seen


def test_calls_refused_until_a_fresh_grant_propagates_are_retried(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a role, a policy or a permission is made, Lambda, S3 and SES refuse the calls that check it
    (the error texts AWS users report). The deploy retries those errors, saying why, instead of stopping."""
    from deploy import propagation

    lambda_error = {"x-amzn-ErrorType": "InvalidParameterValueException"}
    answers = {
        ("lambda", "CreateEventSourceMapping"): (
            400,
            lambda_error,
            json.dumps(
                {
                    "Type": "User",
                    "message": "The provided execution role does not have permissions"
                    " to call ReceiveMessage on SQS",
                }
            ).encode(),
        ),
        ("lambda", "PutFunctionEventInvokeConfig"): (
            400,
            lambda_error,
            json.dumps(
                {
                    "Type": "User",
                    "message": "The function execution role does not have permissions"
                    f" to call SendMessage on arn:aws:sqs:us-east-1:{ACCOUNT}:{PREFIX}-async-dlq",
                }
            ).encode(),
        ),
        ("s3", "PutBucketNotificationConfiguration"): (
            400,
            {},
            (
                b"<Error><Code>InvalidArgument</Code><Message>Unable to validate the following "
                b"destination configurations</Message><RequestId>r</RequestId></Error>"
            ),
        ),
        ("ses", "CreateReceiptRule"): (
            400,
            {},
            (
                b"<ErrorResponse><Error><Type>Sender</Type><Code>"
                b"InvalidS3Configuration</Code><Message>Could not write to bucket: "
                + BUCKET.encode()
                + b"</Message></Error><RequestId>r</RequestId></ErrorResponse>"
            ),
        ),
    }
    monkeypatch.setattr(propagation, "STEP_S", 0.0)
    seen = refuse(monkeypatch, answers, times=2)
    changes, lines = run(env)
    assert {op for _, op in answers} <= set(seen)
    for kind in ("event-source", "lambda-on-failure", "s3-notification", "ses-receipt-rule"):
        assert (kind, "create") in {(c.kind, c.action) for c in changes}, kind
    assert sum("waiting for IAM to propagate" in line for line in lines) >= 2 * len(answers)
    assert (
        len(client("lambda").list_event_source_mappings()["EventSourceMappings"]) == len(SENDERS) + 1
    )  # + the extractor's
    # what is not a propagation delay is not retried
    assert not propagation.ROLE_LACKS_PERMISSION.matches(Exception("ResourceConflictException"))
