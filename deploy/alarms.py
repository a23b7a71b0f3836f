"""CloudWatch alarms to the owner's alert topic: a dead-letter queue that is not empty (a send that
failed for good, an asynchronous event Lambda gave up on) and a function that raised errors."""

from __future__ import annotations

from functools import partial
from typing import Any

from common.aws import control_client
from common.runtime.config import dlq_name
from deploy.functions import FUNCTIONS
from deploy.lambdas import async_dlq, function_name
from deploy.plan import Run, differing
from deploy.resources import attachment_queue, sender_queues, topic_arn


def _not_empty(queue: str, why: str) -> dict[str, Any]:
    return {
        "AlarmName": f"{queue}-not-empty",
        "Namespace": "AWS/SQS",
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": queue}],
        "Statistic": "Maximum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "AlarmDescription": why,
    }


def wanted(run: Run) -> list[dict[str, Any]]:
    cfg = run.cfg
    out = [
        _not_empty(dlq_name(q), f"A send failed for good: its message is in {dlq_name(q)}")
        for q in sender_queues(cfg)
    ]
    extract = dlq_name(attachment_queue(cfg))
    out.append(
        _not_empty(extract, f"An attachment's notification failed 5 times (S3 errors): it is in {extract}")
    )
    out.append(
        _not_empty(
            async_dlq(cfg),
            f"An event SES, S3 or SNS sent was not handled after Lambda's retries: it "
            f"is in {async_dlq(cfg)} (email-handler replay re-invokes it)",
        )
    )
    out += [
        {
            "AlarmName": f"{function_name(cfg, f.name)}-errors",
            "Namespace": "AWS/Lambda",
            "MetricName": "Errors",
            "Dimensions": [{"Name": "FunctionName", "Value": function_name(cfg, f.name)}],
            "Statistic": "Sum",
            "Period": 300,
            "EvaluationPeriods": 1,
            "Threshold": 0.0,
            "ComparisonOperator": "GreaterThanThreshold",
            "AlarmDescription": f"{f.name} raised errors in the last 5 minutes",
        }
        for f in FUNCTIONS
    ]
    action = topic_arn(cfg, cfg.alert_topic)
    return [
        {
            **a,
            "AlarmActions": [action],
            "OKActions": [],
            "TreatMissingData": "notBreaching",
            "ActionsEnabled": True,
        }
        for a in out
    ]


def alarms(run: Run) -> None:
    cw = control_client("cloudwatch")
    alarms_ = wanted(run)
    names = [a["AlarmName"] for a in alarms_]
    current = {
        a["AlarmName"]: a
        for start in range(0, len(names), 100)
        for a in cw.describe_alarms(AlarmNames=names[start : start + 100]).get("MetricAlarms", [])
    }
    for alarm in alarms_:
        have = current.get(alarm["AlarmName"])
        run.converge(
            "cloudwatch-alarm",
            alarm["AlarmName"],
            have,
            differing(have or {}, alarm),
            create=partial(cw.put_metric_alarm, **alarm),
            update=partial(_put, cw, alarm),
            create_detail="-> " + run.cfg.alert_topic,
        )


def _put(cw: Any, alarm: dict[str, Any], _differ: Any) -> None:
    cw.put_metric_alarm(**alarm)
