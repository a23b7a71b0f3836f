"""What invokes the functions: resource-based permissions, the SQS event sources (the senders' queues,
the attachment queue S3 notifies), the SNS subscription for SES feedback and the daily digest schedule."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from common.aws import control_client, or_none
from deploy import propagation, receiving
from deploy.config import Config
from deploy.functions import FUNCTIONS, Function
from deploy.lambdas import ALIAS, alias_arn, function_name
from deploy.plan import Run
from deploy.resources import attachment_queue, queue_arn, topic_arn

BATCH_SIZE = 10
# Invoked once per received mail by its SES receipt rule's Lambda action (deploy.receiving).
ONE_PER_MAIL = ("inbound-handler", "reply-handler")
# AddPermission: SourceAccount guards against a bucket deleted and recreated by another account (S3)
# and names the account for SES; SNS documents SourceArn alone (the topic ARN holds the account).
SOURCE_ACCOUNT_PRINCIPALS = ("s3.amazonaws.com", "ses.amazonaws.com")


def _function_exists(run: Run, name: str) -> bool:
    return (
        run.apply
        or or_none(
            lambda: control_client("lambda").get_function(FunctionName=name), "ResourceNotFoundException"
        )
        is not None
    )


def _statement_view(statement: dict[str, Any]) -> dict[str, Any]:
    condition = statement.get("Condition", {})
    return {
        "principal": (statement.get("Principal") or {}).get("Service"),
        "source_arn": condition.get("ArnLike", {}).get("AWS:SourceArn"),
        "source_account": condition.get("StringEquals", {}).get("AWS:SourceAccount"),
    }


class Grant(NamedTuple):
    """A service's permission to invoke a function's ``live`` alias for one source."""

    function: str
    sid: str
    principal: str
    source_arn: str


def receiving_permissions(cfg: Config, account: str, rule_set: str) -> list[Grant]:
    """SNS (SES feedback) and the two receipt rules, each for its own source alone."""
    thread_rule, public_rule = receiving.rule_names(cfg)
    return [
        Grant("inbound-handler", "sns-ses-feedback", "sns.amazonaws.com", topic_arn(cfg, cfg.feedback_topic)),
        Grant(
            "reply-handler",
            "ses-receipt-thread",
            "ses.amazonaws.com",
            receiving.rule_arn(cfg, account, rule_set, thread_rule),
        ),
        Grant(
            "inbound-handler",
            "ses-receipt-public",
            "ses.amazonaws.com",
            receiving.rule_arn(cfg, account, rule_set, public_rule),
        ),
    ]


def permission(run: Run, account: str, function: str, sid: str, principal: str, source_arn: str) -> None:
    """Let an AWS service invoke the function's ``live`` alias for ``source_arn`` only (reconciled)."""
    api, name = control_client("lambda"), function_name(run.cfg, function)
    statements: list[dict[str, Any]] = []
    if _function_exists(run, name):
        found = or_none(
            lambda: api.get_policy(FunctionName=name, Qualifier=ALIAS), "ResourceNotFoundException"
        )
        statements = json.loads(found["Policy"]).get("Statement", []) if found else []
    current = next((s for s in statements if s.get("Sid") == sid), None)
    with_account = principal in SOURCE_ACCOUNT_PRINCIPALS
    wanted = {
        "principal": principal,
        "source_arn": source_arn,
        "source_account": account if with_account else None,
    }
    differ = [k for k, v in wanted.items() if current is not None and _statement_view(current)[k] != v]

    def add() -> None:
        api.add_permission(
            FunctionName=name,
            Qualifier=ALIAS,
            StatementId=sid,
            Action="lambda:InvokeFunction",
            Principal=principal,
            SourceArn=source_arn,
            **({"SourceAccount": account} if with_account else {}),
        )

    def replace(_: Any) -> None:
        api.remove_permission(FunctionName=name, Qualifier=ALIAS, StatementId=sid)
        add()

    run.converge(
        "lambda-permission",
        f"{name}:{ALIAS} {sid}",
        current,
        differ,
        create=add,
        update=replace,
        create_detail=principal,
    )


def source_queue(cfg: Config, spec: Function) -> str:
    """The queue a function consumes through an SQS event source ("" for none)."""
    if spec.name == "attachment-extractor":
        return attachment_queue(cfg)
    return str(getattr(cfg, spec.queue_field)) if spec.queue_field else ""


def event_source_settings(spec: Function) -> dict[str, Any]:
    """Partial batch responses, no batching window, concurrency bounded by the function's table."""
    return {
        "BatchSize": BATCH_SIZE,
        "MaximumBatchingWindowInSeconds": 0,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "ScalingConfig": {"MaximumConcurrency": spec.batch_concurrency},
    }


def event_source(run: Run, account: str, spec: Function) -> None:
    """The function's queue -> its ``live`` alias, partial batch responses, bounded concurrency."""
    api = control_client("lambda")
    queue = source_queue(run.cfg, spec)
    source, target = queue_arn(run.cfg, queue), alias_arn(run.cfg, account, spec.name)
    wanted = event_source_settings(spec)
    current: list[dict[str, Any]] = []
    if _function_exists(run, function_name(run.cfg, spec.name)):
        current = api.list_event_source_mappings(EventSourceArn=source, FunctionName=target).get(
            "EventSourceMappings", []
        )
    mapping = current[0] if current else None
    differ = [
        k
        for k, v in wanted.items()
        if mapping is not None and mapping.get(k, {} if k == "ScalingConfig" else None) != v
    ]

    def create() -> (
        None
    ):  # Lambda checks that the function's role may read the queue when the mapping is made
        propagation.retry(
            run,
            f"event source {queue}",
            lambda: api.create_event_source_mapping(
                EventSourceArn=source, FunctionName=target, Enabled=True, **wanted
            ),
            propagation.ROLE_LACKS_PERMISSION,
        )

    def update(_: Any) -> None:
        if mapping:
            propagation.retry(
                run,
                f"event source {queue}",
                lambda: api.update_event_source_mapping(UUID=mapping["UUID"], **wanted),
                propagation.ROLE_LACKS_PERMISSION,
            )

    run.converge(
        "event-source",
        f"{queue} -> {function_name(run.cfg, spec.name)}:{ALIAS}",
        mapping,
        differ,
        create=create,
        update=update,
        create_detail=f"batch {BATCH_SIZE}, ReportBatchItemFailures, "
        f"max concurrency {spec.batch_concurrency}",
    )


# The owner's daily quarantine digest (common/delivery/quarantine.py): an EventBridge rule on a schedule
# (UTC) invokes inbound-handler's live alias with the event common.runtime.events.OwnerTask reads.
DIGEST_SCHEDULE = "cron(0 7 * * ? *)"
DIGEST_TARGET_ID = "inbound-handler"
# The scheduled event's time and the rule's ARN, with the task named: {"source": "aws.events",
# "detail-type": "Scheduled Event", "time": ISO, "detail": {"task": "quarantine-digest"}}.
DIGEST_INPUT = {
    "InputPathsMap": {"time": "$.time"},
    "InputTemplate": '{"version": "0", "source": "aws.events", "detail-type": "Scheduled Event", '
    '"time": "<time>", "resources": ["<aws.events.rule-arn>"], '
    '"detail": {"task": "quarantine-digest"}}',
}


DIGEST_RULE = {
    "ScheduleExpression": DIGEST_SCHEDULE,
    "State": "ENABLED",
    "Description": "daily quarantine digest to the owner (email-handler)",
}


def digest_target(cfg: Config, account: str) -> dict[str, Any]:
    return {
        "Id": DIGEST_TARGET_ID,
        "Arn": alias_arn(cfg, account, "inbound-handler"),
        "InputTransformer": DIGEST_INPUT,
    }


def digest_permission(cfg: Config, account: str) -> Grant:
    return Grant(
        "inbound-handler", "events-quarantine-digest", "events.amazonaws.com", digest_rule_arn(cfg, account)
    )


def digest_rule_name(cfg: Config) -> str:
    return cfg.name("quarantine-digest")


def digest_rule_arn(cfg: Config, account: str) -> str:
    return f"arn:aws:events:{cfg.region}:{account}:rule/{digest_rule_name(cfg)}"


def digest_schedule(run: Run, account: str) -> None:
    """The rule (schedule, enabled), inbound-handler's permission for it alone, and the rule's target."""
    cfg, events = run.cfg, control_client("events")
    name = digest_rule_name(cfg)
    rule = or_none(lambda: events.describe_rule(Name=name), "ResourceNotFoundException")
    wanted = DIGEST_RULE
    put_rule = lambda *_: events.put_rule(Name=name, **wanted)  # noqa: E731
    run.converge(
        "events-rule",
        name,
        rule,
        [k for k, v in wanted.items() if rule is not None and rule.get(k) != v],
        create=put_rule,
        update=put_rule,
        create_detail=f"{DIGEST_SCHEDULE} (UTC)",
    )
    permission(run, account, *digest_permission(cfg, account))
    targets = events.list_targets_by_rule(Rule=name).get("Targets", []) if rule is not None else []
    current = next((t for t in targets if t.get("Id") == DIGEST_TARGET_ID), None)
    want = digest_target(cfg, account)
    differ = [k for k, v in want.items() if current is not None and current.get(k) != v]
    put_target = lambda *_: events.put_targets(Rule=name, Targets=[want])  # noqa: E731
    run.converge(
        "events-target",
        f"{name} -> {function_name(cfg, 'inbound-handler')}:{ALIAS}",
        current,
        differ,
        create=put_target,
        update=put_target,
        create_detail="task quarantine-digest",
    )


def worst_case_concurrency(cfg: Config, account: str) -> dict[str, int]:
    """What one received mail can make each function use at once, from the deployed event source mappings
    and reservations: an SQS-fed function at most its mappings' MaximumConcurrency ("limits the number of
    concurrent instances that the Amazon SQS event source can invoke", Lambda API, ScalingConfig,
    https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html), or its reservation if lower;
    one invoked by a service per event (SES receipt rule: one invocation per mail), one. A function with
    neither a mapping nor a known event count (S3 invoking it per object) is unbounded: -1."""
    api, out = control_client("lambda"), {}
    for spec in FUNCTIONS:
        name = function_name(cfg, spec.name)
        mappings = api.list_event_source_mappings(FunctionName=alias_arn(cfg, account, spec.name)).get(
            "EventSourceMappings", []
        )
        reserved = api.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
        if mappings:
            bound = sum(int((m.get("ScalingConfig") or {}).get("MaximumConcurrency") or -1) for m in mappings)
            if any(not (m.get("ScalingConfig") or {}).get("MaximumConcurrency") for m in mappings):
                bound = -1
        else:
            bound = 1 if spec.name in ONE_PER_MAIL else -1
        if reserved is not None:
            bound = int(reserved) if bound < 0 else min(bound, int(reserved))
        out[spec.name] = bound
    return out
