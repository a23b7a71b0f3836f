"""`email-handler stats [--since WHEN] [--json]`: counts per outcome, from the stores or, over a time
window, from the functions' CloudWatch metrics.

The stores are the same on AWS and on the local emulator, so the same counts come from both. Each
count is a record the path writes anyway:

* ``forwarded``, ``acked``, ``replied``: a send SES accepted is the completed idempotency record of its
  message (common/senders/idempotency.py), whose stored result has the message's ``kind`` and
  ``status: sent``; ``replied`` counts the owner's replies and the new conversations the owner starts.
* ``held``: a send-status record (common/store/sendstatus.py) that carries a sandbox ``heldReason``.
* ``send-failed``: a send-status record whose last failure was final (``finalFailure``: the message is
  in its dead-letter queue) and that has not been sent since (a redrive that went through).
* ``quarantined``: the quarantine records (common/store/quarantine.py), released ones too, by ``reason``.
* ``text-ready`` and ``extraction-error``: the extractor's ``.txt`` and ``.error.json`` objects under
  ``extracted-text/`` (common/store/layout.py).

Records live as long as their table keeps them: idempotency records IDEMPOTENCY_TTL_SECONDS (default
30 days), send-status records 90 days; docs/owner.md, "Numbers".

``--since`` reads the metrics the dashboard shows instead (deploy/dashboard.py: the functions' embedded
metric format, which CloudWatch turns into metrics on AWS only): GetMetricData over the window.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from cli.command import arg, command
from common.aws import client, dynamodb, s3
from common.errors import EmailHandlerError
from common.runtime.outcomes import Outcome
from common.store import layout, quarantine
from deploy.config import Config
from deploy.dashboard import DIMENSION, NAMESPACE, OUTCOME_METRICS
from ops.admin import TARGET, fail, target

OUTCOMES = tuple(str(outcome) for outcome in Outcome)  # the functions' own vocabulary, in its order
SENT_KINDS = {"forward": "forwarded", "ack": "acked", "reply": "replied", "new": "replied"}
SENT = "sent"  # common.senders.status.SendStatus.SENT, as the stored result holds it
FAILED = "failed"  # the status common/senders/handler.py records for a failed send
COMPLETED = "COMPLETED"  # powertools' status of a completed idempotency record
STATUS_RECORD = "corr#"  # a send-status record's key (common/store/sendstatus.py)


def _stored_result(item: dict[str, Any]) -> dict[str, Any]:
    try:
        result = json.loads(str(item.get("data") or "null"))
    except json.JSONDecodeError:
        return {}
    return result if isinstance(result, dict) else {}


def sent(cfg: Config) -> tuple[Counter[str], set[str]]:
    """Sends SES accepted, by outcome, and their correlation ids."""

    counts: Counter[str] = Counter()
    correlations: set[str] = set()
    for item in dynamodb.scan(cfg.idempotency_table):
        result = _stored_result(item) if item.get("status") == COMPLETED else {}
        if result.get("status") != SENT:
            continue
        correlations.add(str(result.get("correlationId", "")))
        outcome = SENT_KINDS.get(str(result.get("kind", "")))
        if outcome:
            counts[outcome] += 1
    return counts, correlations


def send_records(cfg: Config, sent_ids: set[str]) -> Counter[str]:
    """Sends held by the sandbox, and sends that failed for good and were not sent since."""

    counts: Counter[str] = Counter()
    for item in dynamodb.scan(cfg.send_status_table):
        correlation = str(item.get("id", ""))
        if not correlation.startswith(STATUS_RECORD):
            continue
        if item.get("heldReason"):
            counts["held"] += 1
        if (
            item.get("status") == FAILED
            and item.get("finalFailure")
            and correlation.removeprefix(STATUS_RECORD) not in sent_ids
        ):
            counts["send-failed"] += 1
    return counts


def extraction(cfg: Config) -> Counter[str]:

    counts: Counter[str] = Counter()
    for key in s3.keys(cfg.bucket, layout.EXTRACTED):
        if key.endswith(".error.json"):
            counts["extraction-error"] += 1
        elif key.endswith(".txt"):
            counts["text-ready"] += 1
    return counts


def collect(cfg: Config) -> dict[str, Any]:

    counts, sent_ids = sent(cfg)
    counts += send_records(cfg, sent_ids)
    counts += extraction(cfg)
    reasons = Counter(str(i.get("reason") or "unknown") for i in quarantine.everything(cfg))
    counts["quarantined"] = sum(reasons.values())
    return {
        "deployment": cfg.prefix,
        "source": "stores",
        "counts": {outcome: counts.get(outcome, 0) for outcome in OUTCOMES},
        "quarantined_by_reason": dict(sorted(reasons.items())),
    }


# --- over a time window, from CloudWatch --------------------------------------------------------------

AGO = re.compile(r"(\d+)([mhd])")
UNITS = {"m": "minutes", "h": "hours", "d": "days"}
# GetMetricData's queries per request (CloudWatch API reference, GetMetricData).
MAX_QUERIES = 500


class SinceError(EmailHandlerError, ValueError):
    """A --since the command cannot read as a moment in the past."""


def parse_since(text: str, now: datetime) -> datetime:
    """``30m``, ``24h``, ``7d`` before ``now``, or an ISO 8601 date or time (UTC unless it names a zone)."""
    ago = AGO.fullmatch(text.strip())
    if ago:
        return now - timedelta(**{UNITS[ago.group(2)]: int(ago.group(1))})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SinceError(
            f"--since {text!r}: give 30m, 24h, 7d or an ISO 8601 date such as 2026-11-01"
        ) from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when >= now:
        raise SinceError(f"--since {text!r} is not in the past")
    return when


def period(since: datetime, now: datetime) -> int:
    """The period GetMetricData answers for a start that old: "a multiple of 60 seconds" up to 15 days ago,
    of 300 up to 63 days, of 3600 beyond, "or no data points in that time range is returned" (CloudWatch
    API reference, MetricStat)."""
    age = now - since
    return 60 if age <= timedelta(days=15) else 300 if age <= timedelta(days=63) else 3600


def _reason_metrics(cw: Any, cfg: Config) -> dict[str, dict[str, Any]]:
    """The MailQuarantined metrics with a Reason (ListMetrics lists those with data in the last two weeks:
    CloudWatch API reference, ListMetrics)."""

    found: dict[str, dict[str, Any]] = {}
    pages = cw.get_paginator("list_metrics").paginate(
        Namespace=NAMESPACE,
        MetricName=OUTCOME_METRICS["quarantined"],
        Dimensions=[{"Name": DIMENSION, "Value": cfg.env}],
    )
    for metric in (m for page in pages for m in page.get("Metrics", [])):
        names = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
        if set(names) == {DIMENSION, "Reason"}:
            found[names["Reason"]] = metric
    return found


def metric_sums(cw: Any, metrics: list[dict[str, Any]], since: datetime, now: datetime) -> list[int]:
    """The Sum of each metric over [since, now)."""
    totals = [0.0] * len(metrics)
    step = period(since, now)
    for start in range(0, len(metrics), MAX_QUERIES):
        queries = [
            {"Id": f"m{i}", "MetricStat": {"Metric": m, "Period": step, "Stat": "Sum"}, "ReturnData": True}
            for i, m in enumerate(metrics[start : start + MAX_QUERIES], start)
        ]
        pages = cw.get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries, StartTime=since, EndTime=now
        )
        for result in (r for page in pages for r in page.get("MetricDataResults", [])):
            totals[int(result["Id"][1:])] += sum(result.get("Values", []))
    return [round(t) for t in totals]


def collect_metrics(cfg: Config, since: datetime, now: datetime) -> dict[str, Any]:

    cw = client("cloudwatch")
    dimensions = [{"Name": DIMENSION, "Value": cfg.env}]
    outcomes = [
        {"Namespace": NAMESPACE, "MetricName": OUTCOME_METRICS[o], "Dimensions": dimensions} for o in OUTCOMES
    ]
    reasons = _reason_metrics(cw, cfg)
    sums = metric_sums(cw, outcomes + list(reasons.values()), since, now)
    by_reason = {r: n for r, n in zip(reasons, sums[len(OUTCOMES) :], strict=True) if n}
    return {
        "deployment": cfg.prefix,
        "source": "metrics",
        "since": since.isoformat(),
        "until": now.isoformat(),
        "counts": dict(zip(OUTCOMES, sums, strict=False)),
        "quarantined_by_reason": dict(sorted(by_reason.items())),
    }


def table(report: dict[str, Any], where: str) -> str:
    width = max([len(o) for o in OUTCOMES] + [len(r) + 2 for r in report["quarantined_by_reason"]]) + 2
    source = (
        f"CloudWatch metrics since {report['since']}"
        if report["source"] == "metrics"
        else "counted from the stores"
    )
    lines = [f"{report['deployment']} ({where}), {source}"]
    for outcome, count in report["counts"].items():
        lines.append(f"  {outcome:<{width}}{count:>8}")
        if outcome == "quarantined":
            lines += [
                f"    {reason:<{width - 2}}{n:>8}" for reason, n in report["quarantined_by_reason"].items()
            ]
    return "\n".join(lines)


@command(
    "counts per outcome: forwarded, quarantined by reason, acked, replied, held, failed, extraction",
    *TARGET,
    arg(
        "--since",
        help="30m, 24h, 7d or an ISO date: the deployment's CloudWatch metrics over that window (AWS only); "
        "default: everything the stores hold",
    ),
)
def cmd_stats(args: argparse.Namespace) -> int:
    t = target(args)
    if args.since and not t.aws:
        return fail(
            "stats: --since reads the CloudWatch metrics a deployment's functions publish on AWS; the local "
            "modes publish none (without --since, stats counts from the stores)"
        )
    if args.since:
        now = datetime.now(UTC)
        try:
            since = parse_since(args.since, now)
        except SinceError as exc:
            return fail(f"stats: {exc}")
        report = collect_metrics(t.cfg, since, now)
    else:
        report = collect(t.cfg)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(table(report, t.where))
    return 0
