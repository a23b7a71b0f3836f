"""The dashboard's declaration (deploy/dashboard.py): region-correct widgets over the metric names the
functions emit and the deployment's own queues, and the console link `status` prints."""

from __future__ import annotations

import json

from deploy import config, dashboard

CFG = config.load(
    {
        "DOMAIN_NAME": "example.com",
        "PRIVATE_EMAIL": "owner@example.net",
        "ENVIRONMENT": "stg",
        "AWS_REGION": "eu-west-1",
    }
)
PREFIX = "service-email-handler-stg"


def body() -> dict:
    wanted = dashboard.wanted(CFG)
    assert wanted["DashboardName"] == PREFIX
    return dict(json.loads(wanted["DashboardBody"]))


def test_every_widget_reads_the_deployments_region_and_none_overlap() -> None:
    widgets = body()["widgets"]
    assert {w["properties"]["region"] for w in widgets} == {"eu-west-1"}
    cells = [
        (x, y)
        for w in widgets
        for x in range(w["x"], w["x"] + w["width"])
        for y in range(w["y"], w["y"] + w["height"])
    ]
    assert len(cells) == len(set(cells)) and max(x for x, _ in cells) < 24  # the grid is 24 units wide


def test_the_outcome_counts_are_the_functions_metric_names_for_this_environment() -> None:
    outcomes, by_reason, ages, dlqs = (w["properties"]["metrics"] for w in body()["widgets"])
    assert [m[:4] for m in outcomes] == [
        ["service-email-handler", name, "Environment", "stg"]
        for name in (
            "MailForwarded",
            "MailQuarantined",
            "AcksSent",
            "RepliesSent",
            "SendsHeld",
            "SendsFailed",
            "AttachmentTextReady",
            "ExtractionErrors",
        )
    ]
    [[search]] = by_reason
    assert search["expression"] == (
        """SEARCH('{"service-email-handler",Environment,Reason} MetricName="MailQuarantined" """
        """Environment="stg"', 'Sum', 300)"""
    )
    assert [(m[1], m[3]) for m in ages] == [
        ("ApproximateAgeOfOldestMessage", f"{PREFIX}-{q}")
        for q in ("ack", "forward", "reply", "attachment-events")
    ]
    assert [(m[1], m[3]) for m in dlqs] == [
        ("ApproximateNumberOfMessagesVisible", f"{PREFIX}-{q}")
        for q in ("ack-dlq", "forward-dlq", "reply-dlq", "attachment-events-dlq", "async-dlq")
    ]


def test_the_console_link_names_the_region_twice_and_the_dashboard() -> None:
    assert dashboard.console_url(CFG) == (
        "https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1"
        f"#dashboards/dashboard/{PREFIX}"
    )
