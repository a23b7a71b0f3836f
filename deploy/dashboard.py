"""The operator's CloudWatch dashboard ``{project}-{env}``: the mail outcomes the functions count, the
age of the oldest message in each queue a function consumes, and what waits in each dead-letter queue.

The counts are the functions' embedded-metric-format metrics (namespace ``service-email-handler``,
dimension ``Environment``; quarantines also by ``Reason``): docs/owner.md, "Numbers". Dashboards are
global, not regional (AWS::CloudWatch::Dashboard, CloudFormation User Guide), so every metric widget
names the deployment's region itself. One declaration (:func:`wanted`) is what the deploy puts, what
``destroy`` removes and what the CloudFormation export writes.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from common.aws import control_client, or_none
from common.runtime.config import dlq_name
from deploy.config import Config
from deploy.lambdas import async_dlq
from deploy.plan import Run
from deploy.resources import attachment_queue, event_queues, sender_queues

NAMESPACE = "service-email-handler"
DIMENSION = "Environment"
# The metric each outcome is counted under (docs/owner.md, "Numbers"), in the order the graph lists them.
OUTCOME_METRICS = {
    "forwarded": "MailForwarded",
    "quarantined": "MailQuarantined",
    "acked": "AcksSent",
    "replied": "RepliesSent",
    "held": "SendsHeld",
    "send-failed": "SendsFailed",
    "text-ready": "AttachmentTextReady",
    "extraction-error": "ExtractionErrors",
}
PERIOD_S = 300
WIDTH, HEIGHT = 12, 6  # two widgets a row on the dashboard's 24-unit grid
# What GetDashboard answers for a name with no dashboard (CloudWatch API reference, GetDashboard:
# DashboardNotFoundError, error code ResourceNotFound).
NOT_FOUND = "ResourceNotFound"


def name(cfg: Config) -> str:
    return cfg.prefix


def console_url(cfg: Config) -> str:
    """The dashboard in the CloudWatch console of the deployment's region."""
    return (
        f"https://{cfg.region}.console.aws.amazon.com/cloudwatch/home?region={cfg.region}"
        f"#dashboards/dashboard/{name(cfg)}"
    )


def _metric_widget(cfg: Config, title: str, metrics: list[list[Any]], stat: str) -> dict[str, Any]:
    return {
        "type": "metric",
        "width": WIDTH,
        "height": HEIGHT,
        "properties": {
            "title": title,
            "region": cfg.region,
            "view": "timeSeries",
            "stacked": False,
            "stat": stat,
            "period": PERIOD_S,
            "metrics": metrics,
        },
    }


def _queue_metric(metric: str, queue: str) -> list[Any]:
    return ["AWS/SQS", metric, "QueueName", queue, {"label": queue}]


def widgets(cfg: Config) -> list[dict[str, Any]]:
    outcomes = [
        [NAMESPACE, metric, DIMENSION, cfg.env, {"label": outcome}]
        for outcome, metric in OUTCOME_METRICS.items()
    ]
    # A SEARCH finds every reason the functions have reported, without a list of reasons to keep in step.
    # The namespace has hyphens, and a schema name with characters other than letters and digits goes in
    # double quotes (CloudWatch User Guide, "CloudWatch search expression syntax").
    by_reason = (
        f'SEARCH(\'{{"{NAMESPACE}",{DIMENSION},Reason}} MetricName="{OUTCOME_METRICS["quarantined"]}" '
        f"{DIMENSION}=\"{cfg.env}\"', 'Sum', {PERIOD_S})"
    )
    dlqs = [dlq_name(q) for q in event_queues(cfg)] + [async_dlq(cfg)]
    placed = [
        _metric_widget(cfg, "Mail per outcome (count per 5 minutes)", outcomes, "Sum"),
        _metric_widget(
            cfg,
            "Quarantined by reason (count per 5 minutes)",
            [[{"expression": by_reason, "id": "reasons"}]],
            "Sum",
        ),
        _metric_widget(
            cfg,
            "Oldest message waiting (seconds)",
            [
                _queue_metric("ApproximateAgeOfOldestMessage", q)
                for q in (*sender_queues(cfg), attachment_queue(cfg))
            ],
            "Maximum",
        ),
        _metric_widget(
            cfg,
            "Dead-letter queues (messages; email-handler dlq list)",
            [_queue_metric("ApproximateNumberOfMessagesVisible", q) for q in dlqs],
            "Maximum",
        ),
    ]
    for i, widget in enumerate(placed):
        widget["x"], widget["y"] = (i % 2) * WIDTH, (i // 2) * HEIGHT
    return placed


def wanted(cfg: Config) -> dict[str, str]:
    """PutDashboard's arguments (also the CloudFormation resource's properties)."""
    body = {"start": "-PT24H", "widgets": widgets(cfg)}
    return {"DashboardName": name(cfg), "DashboardBody": json.dumps(body, sort_keys=True)}


def dashboard(run: Run) -> None:
    cw = control_client("cloudwatch")
    want = wanted(run.cfg)
    have = or_none(partial(cw.get_dashboard, DashboardName=want["DashboardName"]), NOT_FOUND)
    same = have is not None and json.loads(have["DashboardBody"]) == json.loads(want["DashboardBody"])
    run.converge(
        "cloudwatch-dashboard",
        want["DashboardName"],
        have,
        [] if same else ["DashboardBody"],
        create=partial(_put, run, cw, want),
        update=lambda _differ: _put(run, cw, want),
        create_detail=console_url(run.cfg),
    )


def _put(run: Run, cw: Any, want: dict[str, str]) -> None:
    # PutDashboard saves a body with warnings and lists them (CloudWatch API reference, PutDashboard).
    for message in cw.put_dashboard(**want).get("DashboardValidationMessages", []):
        run.say(f"[deploy] dashboard {want['DashboardName']}: {message.get('Message', message)}")


def remove(run: Run) -> None:
    """``email-handler destroy``."""
    cw, dashboard_name = control_client("cloudwatch"), name(run.cfg)
    found = or_none(partial(cw.get_dashboard, DashboardName=dashboard_name), NOT_FOUND)
    run.remove(
        "cloudwatch-dashboard",
        dashboard_name,
        found is not None,
        partial(cw.delete_dashboards, DashboardNames=[dashboard_name]),
    )
