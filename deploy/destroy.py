"""`email-handler destroy [--dry-run] [--delete-data]`: remove what the deploy made, in reverse order.

Data stays unless ``--delete-data``: the mail bucket, the conversation, sender-list, quarantine,
send-status and suppression tables and the spam log (mail and records an owner cannot get back).
The SES domain identity stays too: its DKIM records are in the owner's DNS and another deployment
may send with it. Our receipt rules leave the active rule set; our own rule set is deactivated
first when it is the active one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from common.aws import control_client, or_none
from common.runtime.config import dlq_name
from deploy import alarms, dashboard, iam, receiving, triggers
from deploy.functions import FUNCTIONS
from deploy.images import repository_name
from deploy.lambdas import alias_arn, async_dlq, function_name
from deploy.main import Options, connect, summarize
from deploy.plan import UNCHANGED, Change, Run
from deploy.resources import TABLES, bucket_exists, event_queues, queue_arn, queue_url, topic_arn


def destroy(
    options: Options,
    delete_data: bool = False,
    environ: Mapping[str, str] | None = None,
    report: Callable[[str], None] = print,
) -> list[Change]:
    target = connect(options, dict(os.environ if environ is None else environ), report, need_secret=False)
    cfg, run = (
        target.cfg,
        Run(
            target.cfg,
            apply=not options.dry_run,
            report=lambda c: report(f"[destroy] {c}") if c.action != UNCHANGED else None,
        ),
    )
    _receiving(run)
    _schedule(run)
    _alarms(run)
    dashboard.remove(run)
    _event_sources(run, control_client("lambda"), target.account)
    _functions(run)
    _queues_and_topics(run)
    _ses_and_parameters(run)
    if delete_data:
        _data(run)
    else:
        report(
            "[destroy] kept (data; --delete-data removes them): "
            f"s3://{cfg.bucket}, the tables, {cfg.spam_log_group}"
        )
    summarize(run, lambda line: report(line.replace("[deploy]", "[destroy]")))
    return run.changes


def _alarms(run: Run) -> None:
    cw = control_client("cloudwatch")
    names = [a["AlarmName"] for a in alarms.wanted(run)]
    existing = {a["AlarmName"] for a in cw.describe_alarms(AlarmNames=names).get("MetricAlarms", [])}
    for name in names:
        run.remove("cloudwatch-alarm", name, name in existing, partial(cw.delete_alarms, AlarmNames=[name]))


def _functions(run: Run) -> None:
    """Each function with its role, log group and image repository."""
    cfg = run.cfg
    lam, iam_api, logs, ecr = (
        control_client("lambda"),
        control_client("iam"),
        control_client("logs"),
        control_client("ecr"),
    )
    for f in FUNCTIONS:
        fn = function_name(cfg, f.name)
        run.remove("lambda-function", fn, _exists(lam, fn), partial(lam.delete_function, FunctionName=fn))
        role = iam.role_name(cfg, f.name)

        def drop_role(role: str) -> None:
            for policy in iam_api.list_role_policies(RoleName=role).get("PolicyNames", []):
                iam_api.delete_role_policy(RoleName=role, PolicyName=policy)
            iam_api.delete_role(RoleName=role)

        run.remove(
            "iam-role",
            role,
            or_none(partial(iam_api.get_role, RoleName=role), "NoSuchEntity") is not None,
            partial(drop_role, role),
        )
        group = f"/aws/lambda/{fn}"
        run.remove("log-group", group, _log_group(group), partial(logs.delete_log_group, logGroupName=group))
        repo = repository_name(cfg, f.name)
        found = or_none(
            partial(ecr.describe_repositories, repositoryNames=[repo]), "RepositoryNotFoundException"
        )
        run.remove(
            "ecr-repository",
            repo,
            found is not None,
            partial(ecr.delete_repository, repositoryName=repo, force=True),
        )


def _queues_and_topics(run: Run) -> None:
    cfg = run.cfg
    sqs = control_client("sqs")
    for name in [q for s in event_queues(cfg) for q in (s, dlq_name(s))] + [async_dlq(cfg)]:
        url = queue_url(name)
        run.remove("sqs-queue", name, url is not None, partial(sqs.delete_queue, QueueUrl=url))
    sns = control_client("sns")
    topics = {t["TopicArn"] for page in sns.get_paginator("list_topics").paginate() for t in page["Topics"]}
    for topic in (cfg.alert_topic, cfg.feedback_topic):
        arn = topic_arn(cfg, topic)
        run.remove("sns-topic", topic, arn in topics, partial(sns.delete_topic, TopicArn=arn))


def _ses_and_parameters(run: Run) -> None:
    """The SES configuration set and the SSM parameters (the HMAC secret, the spam rules, the owner's
    key, each mailbox's key)."""
    cfg = run.cfg
    ses, ssm = control_client("ses"), control_client("ssm")
    config_set = or_none(
        lambda: ses.describe_configuration_set(ConfigurationSetName=cfg.ses_configuration_set),
        "ConfigurationSetDoesNotExist",
    )
    run.remove(
        "ses-config-set",
        cfg.ses_configuration_set,
        config_set is not None,
        lambda: ses.delete_configuration_set(ConfigurationSetName=cfg.ses_configuration_set),
    )
    # Each mailbox's key (MAILBOX_KEYS), found under its path: the configuration destroy is given may no
    # longer name every mailbox the deploys keyed.
    keyed = [
        p["Name"]
        for page in ssm.get_paginator("get_parameters_by_path").paginate(
            Path=f"/{cfg.project}/{cfg.env}/mailbox-key", Recursive=True
        )
        for p in page["Parameters"]
    ]
    for name in (
        cfg.thread_secret_parameter,
        cfg.spam_rules_parameter,
        f"/{cfg.project}/{cfg.env}/owner-key",
        *keyed,
    ):
        found_parameter = or_none(partial(ssm.get_parameter, Name=name), "ParameterNotFound")
        run.remove(
            "ssm-parameter", name, found_parameter is not None, partial(ssm.delete_parameter, Name=name)
        )


def _event_sources(run: Run, lam: Any, account: str) -> None:
    """The SQS mappings (senders, extractor), before their functions and queues (deleting a function
    leaves its mappings behind). They are made on the ``live`` alias and ListEventSourceMappings matches the
    function exactly, qualifier included: the plain name does not list them. So they are found by
    each sender queue's ARN and by each alias ARN (and by the plain name, for a mapping made on the
    function itself); only mappings to this deployment's functions are removed."""
    cfg = run.cfg
    ours = {function_name(cfg, f.name) for f in FUNCTIONS}
    queries: list[dict[str, str]] = [
        {"EventSourceArn": queue_arn(cfg, q)} for q in event_queues(cfg) if queue_url(q)
    ]
    for f in FUNCTIONS:
        if _exists(lam, function_name(cfg, f.name)):
            queries += [
                {"FunctionName": alias_arn(cfg, account, f.name)},
                {"FunctionName": function_name(cfg, f.name)},
            ]
    found: dict[str, dict[str, Any]] = {}
    for query in queries:
        for page in lam.get_paginator("list_event_source_mappings").paginate(**query):
            for mapping in page.get("EventSourceMappings", []):
                parts = str(mapping.get("FunctionArn", "")).split(
                    ":"
                )  # arn:aws:lambda:R:A:function:NAME[:QUALIFIER]
                if len(parts) > 6 and parts[6] in ours:
                    found[mapping["UUID"]] = mapping
    for uuid, mapping in found.items():
        source = mapping["EventSourceArn"].rsplit(":", 1)[-1]
        label = f"{source} -> {mapping['FunctionArn'].split(':function:')[-1]}"
        run.remove("event-source", label, True, partial(lam.delete_event_source_mapping, UUID=uuid))


def _schedule(run: Run) -> None:
    """The digest rule: its targets first (EventBridge refuses to delete a rule that has targets)."""
    events, name = control_client("events"), triggers.digest_rule_name(run.cfg)
    found = or_none(lambda: events.describe_rule(Name=name), "ResourceNotFoundException")

    def delete() -> None:
        ids = [t["Id"] for t in events.list_targets_by_rule(Rule=name).get("Targets", [])]
        if ids:
            events.remove_targets(Rule=name, Ids=ids)
        events.delete_rule(Name=name)

    run.remove("events-rule", name, found is not None, delete, "and its target")


def _exists(lam: object, name: str) -> bool:
    return or_none(lambda: lam.get_function(FunctionName=name), "ResourceNotFoundException") is not None  # type: ignore[attr-defined]


def _log_group(name: str) -> bool:
    found = control_client("logs").describe_log_groups(logGroupNamePrefix=name).get("logGroups", [])
    return any(g["logGroupName"] == name for g in found)


def _receiving(run: Run) -> None:
    cfg, ses = run.cfg, control_client("ses")
    own = receiving.own_rule_set(cfg)
    active = receiving.active_rule_set()
    if active == own:
        run.remove("ses-active-rule-set", own, True, lambda: ses.set_active_receipt_rule_set())
    found = or_none(lambda: ses.describe_receipt_rule_set(RuleSetName=own), "RuleSetDoesNotExist")
    run.remove("ses-rule-set", own, found is not None, lambda: ses.delete_receipt_rule_set(RuleSetName=own))
    if active and active != own:  # our two rules inside another application's active set
        rules = {r["Name"] for r in ses.describe_receipt_rule_set(RuleSetName=active).get("Rules", [])}
        for rule in receiving.rule_names(cfg):
            run.remove(
                "ses-receipt-rule",
                f"{active}/{rule}",
                rule in rules,
                partial(ses.delete_receipt_rule, RuleSetName=active, RuleName=rule),
            )


def _data(run: Run) -> None:
    cfg = run.cfg
    s3, ddb, logs = control_client("s3"), control_client("dynamodb"), control_client("logs")

    def empty_and_delete() -> None:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=cfg.bucket):
            objects = [
                {"Key": o["Key"], "VersionId": o["VersionId"]}
                for o in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if objects:
                s3.delete_objects(Bucket=cfg.bucket, Delete={"Objects": objects, "Quiet": True})
        s3.delete_bucket(Bucket=cfg.bucket)

    run.remove("s3-bucket", cfg.bucket, bucket_exists(cfg.bucket), empty_and_delete, "and every object in it")
    for field in TABLES:
        table = getattr(cfg, field)
        found = or_none(partial(ddb.describe_table, TableName=table), "ResourceNotFoundException")
        run.remove("dynamodb-table", table, found is not None, partial(ddb.delete_table, TableName=table))
    run.remove(
        "log-group",
        cfg.spam_log_group,
        _log_group(cfg.spam_log_group),
        lambda: logs.delete_log_group(logGroupName=cfg.spam_log_group),
    )
