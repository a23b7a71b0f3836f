"""The local modes' provisioning: the deploy's own plan (deploy.resources.shared, the production roles
of deploy.iam) on the emulator, plus what AWS does for us and the local event wiring needs instead.

* The six function roles carry the production policies, so enforced IAM locally checks what AWS will
  check; their trust also names the account, because locally nothing is the Lambda service.
* With ``wiring``: a queue subscribed to the SES feedback topic (SNS -> inbound-handler) and a queue
  that stands in for Lambda's asynchronous invocations (SES receipt actions), each with the three
  attempts and DLQ of an asynchronous invocation (local/wiring.py polls them).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from common.aws.sts import account_id
from deploy import iam, resources
from deploy.config import Config
from deploy.functions import FUNCTIONS
from deploy.plan import Change, Run

# Lambda retries an asynchronous invocation twice: three receives, then the local DLQ.
ASYNC_ATTEMPTS = 3
ASYNC_RETRY_S = 10


def wiring_queue(cfg: Config, purpose: str) -> str:
    """Queues of the local event wiring: ``ses-feedback``, ``invocations``."""
    return cfg.name(f"wiring-{purpose}")


def provision(
    cfg: Config,
    report: Callable[[Change], None] | None = None,
    *,
    apply: bool = True,
    wiring: bool = False,
) -> list[Change]:
    """The shared resources and the six function roles (with ``wiring``, the local wiring's queues too)."""
    run = Run(cfg, apply, report)
    resources.shared(run)
    # As the deploy: PRIVATE_EMAIL's identity (on the fresh-account model it waits for
    # `email-handler model verify-address`) and the alert topic's e-mail subscription (it waits for
    # `email-handler model confirm-subscriptions`).
    resources.owner_identity(run)
    resources.subscription(
        run,
        resources.topic_arn(cfg, cfg.alert_topic),
        "email",
        cfg.private_email,
        f"{cfg.alert_topic} -> owner e-mail",
    )
    if wiring:
        wiring_resources(run)
    roles(run)
    return run.changes


def trust(account: str) -> str:
    """Locally nothing is the Lambda service: the account's own principals (the local admin, which
    hands each function its role's credentials) may assume the role too."""
    statements = json.loads(iam.TRUST)["Statement"] + [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account}:root"}, "Action": "sts:AssumeRole"}
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def roles(run: Run) -> dict[str, str]:
    """The six production roles in the emulator (same policies, trust also the account): function -> ARN."""
    account = account_id()
    return {f.name: iam.converge_role(run, account, f.name, trust(account)) for f in FUNCTIONS}


def ensure_role(cfg: Config, function: str, report: Callable[[Change], None] | None = None) -> str:
    """Create or converge one function's local role now; returns its ARN."""
    account = account_id()
    return iam.converge_role(Run(cfg, apply=True, report=report), account, function, trust(account))


def wiring_resources(run: Run) -> None:
    """SNS and SES invoke Lambda asynchronously: the same three attempts, then a DLQ."""
    cfg = run.cfg
    feedback, invocations = (wiring_queue(cfg, p) for p in ("ses-feedback", "invocations"))
    feedback_arn = resources.topic_arn(cfg, cfg.feedback_topic)
    resources.queue_with_dlq(
        run,
        feedback,
        ASYNC_RETRY_S,
        ASYNC_ATTEMPTS,
        extra={"Policy": resources.allow_sender(feedback, feedback_arn, "sns.amazonaws.com")},
    )
    resources.queue_with_dlq(run, invocations, ASYNC_RETRY_S, ASYNC_ATTEMPTS)
    resources.subscription(
        run, feedback_arn, "sqs", resources.queue_arn(cfg, feedback), f"{cfg.feedback_topic} -> {feedback}"
    )
