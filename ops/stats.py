"""`email-handler stats [--json]`: counts per outcome, read from the stores.

The stores are the same on AWS and on the local emulator, so the same counts come from both (the
functions' CloudWatch metrics exist only where CloudWatch runs them: the dashboard,
deploy/dashboard.py). Each count is a record the path writes anyway:

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
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from cli import command
from common.runtime import Config
from ops.admin import TARGET, target

OUTCOMES = (
    "forwarded",
    "quarantined",
    "acked",
    "replied",
    "held",
    "send-failed",
    "text-ready",
    "extraction-error",
)
SENT_KINDS = {"forward": "forwarded", "ack": "acked", "reply": "replied", "new": "replied"}
SENT = "sent"  # common.senders.status.SendStatus.SENT, as the stored result holds it
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
    from common.aws import dynamodb

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
    from common.aws import dynamodb

    counts: Counter[str] = Counter()
    for item in dynamodb.scan(cfg.send_status_table):
        correlation = str(item.get("id", ""))
        if not correlation.startswith(STATUS_RECORD):
            continue
        if item.get("heldReason"):
            counts["held"] += 1
        if (
            item.get("status") == "failed"
            and item.get("finalFailure")
            and correlation.removeprefix(STATUS_RECORD) not in sent_ids
        ):
            counts["send-failed"] += 1
    return counts


def extraction(cfg: Config) -> Counter[str]:
    from common.aws import s3
    from common.store import layout

    counts: Counter[str] = Counter()
    for key in s3.keys(cfg.bucket, layout.EXTRACTED):
        if key.endswith(".error.json"):
            counts["extraction-error"] += 1
        elif key.endswith(".txt"):
            counts["text-ready"] += 1
    return counts


def collect(cfg: Config) -> dict[str, Any]:
    from common.store import quarantine

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


def table(report: dict[str, Any], where: str) -> str:
    width = max([len(o) for o in OUTCOMES] + [len(r) + 2 for r in report["quarantined_by_reason"]]) + 2
    lines = [f"{report['deployment']} ({where}), counted from the stores"]
    for outcome, count in report["counts"].items():
        lines.append(f"  {outcome:<{width}}{count:>8}")
        if outcome == "quarantined":
            lines += [
                f"    {reason:<{width - 2}}{n:>8}" for reason, n in report["quarantined_by_reason"].items()
            ]
    return "\n".join(lines)


@command(
    "counts per outcome: forwarded, quarantined by reason, acked, replied, held, failed, extraction", *TARGET
)
def cmd_stats(args: argparse.Namespace) -> int:
    t = target(args)
    report = collect(t.cfg)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(table(report, t.where))
    return 0
