"""Typed views of the Lambda events this project receives.

Each parser accepts the event exactly as AWS (or the local wiring, which builds the
same shapes) delivers it and raises :class:`EventError` with a precise reason otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from common.errors import EventError

VERDICTS = ("spam", "virus", "spf", "dkim", "dmarc")


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            raise EventError(f"event has no {'.'.join(path)}")
        obj = obj[key]
    return obj


def _records(event: Any, source: str) -> list[dict[str, Any]]:
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        raise EventError("event has no Records")
    for r in records:
        got = r.get("eventSource") or r.get("EventSource") if isinstance(r, dict) else None
        if got != source:
            raise EventError(f"expected {source} records, got {got!r}")
    return records


@dataclass(frozen=True, slots=True)
class SesReceipt:
    """One SES receipt-rule delivery (the Lambda action's event record)."""

    message_id: str
    source: str  # envelope MAIL FROM ('' for bounces)
    # receipt.recipients: the envelope's RCPT TO addresses this rule matched (inbound-handler's rule
    # matches every address either rule does: common/store/staging.py)
    recipients: tuple[str, ...]
    timestamp: str
    verdicts: dict[str, str]  # spam/virus/spf/dkim/dmarc -> PASS|FAIL|GRAY|PROCESSING_FAILED|DISABLED
    dmarc_policy: str = ""  # only present when DMARC failed: none|quarantine|reject
    subject: str = ""
    header_from: str = (
        ""  # commonHeaders.from[0]: SES's reading of From, for logs before (or without) a parse
    )

    @classmethod
    def from_event(cls, event: Any) -> SesReceipt:
        record = _records(event, "aws:ses")[0]
        mail = _get(record, "ses", "mail")
        receipt = _get(record, "ses", "receipt")
        message_id = mail.get("messageId")
        if not isinstance(message_id, str) or not message_id or "/" in message_id:
            raise EventError("ses.mail.messageId missing or not a plain id")
        # receipt.recipients only: the envelope's, which SES writes. mail.destination is the To and Cc
        # fields (the sender's words), so it never stands in for them.
        recipients = receipt.get("recipients")
        if not isinstance(recipients, list) or not recipients:
            raise EventError("ses.receipt.recipients missing or empty")
        verdicts = {
            v: str((receipt.get(f"{v}Verdict") or {}).get("status", "PROCESSING_FAILED")).upper()
            for v in VERDICTS
        }
        return cls(
            message_id=message_id,
            source=str(mail.get("source") or ""),
            recipients=tuple(str(r) for r in recipients),
            timestamp=str(mail.get("timestamp") or receipt.get("timestamp") or ""),
            verdicts=verdicts,
            dmarc_policy=str(receipt.get("dmarcPolicy") or "").lower(),
            subject=str((mail.get("commonHeaders") or {}).get("subject") or ""),
            header_from=str(next(iter((mail.get("commonHeaders") or {}).get("from") or []), "")),
        )


@dataclass(frozen=True, slots=True)
class S3Object:
    bucket: str
    key: str  # URL-decoded ('+' and %xx), as S3 event notifications encode it
    size: int = 0
    event_name: str = ""


def s3_objects(event: Any) -> list[S3Object]:
    out = []
    for r in _records(event, "aws:s3"):
        out.append(
            S3Object(
                bucket=str(_get(r, "s3", "bucket", "name")),
                key=unquote_plus(str(_get(r, "s3", "object", "key"))),
                size=int(r["s3"]["object"].get("size") or 0),
                event_name=str(r.get("eventName", "")),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class SqsRecord:
    message_id: str
    body: str
    receive_count: int
    attributes: dict[str, Any] = field(default_factory=dict)
    queue_arn: str = ""
    receipt_handle: str = ""
    message_attributes: dict[str, Any] = field(default_factory=dict)


def sqs_records(event: Any) -> list[SqsRecord]:
    out = []
    for r in _records(event, "aws:sqs"):
        attrs = r.get("attributes") or {}
        out.append(
            SqsRecord(
                message_id=str(_get(r, "messageId")),
                body=str(r.get("body", "")),
                receive_count=int(attrs.get("ApproximateReceiveCount", "1")),
                attributes=attrs,
                queue_arn=str(r.get("eventSourceARN", "")),
                receipt_handle=str(r.get("receiptHandle", "")),
                message_attributes=r.get("messageAttributes") or {},
            )
        )
    return out


def sns_messages(event: Any) -> list[dict[str, Any]]:
    """SNS-delivered JSON messages (SES feedback notifications arrive this way).

    A message that is not a JSON object is kept as ``{"_snsMessageId": ..., "_text": <message>}``
    for the caller to log and ignore: SES publishes a plain-text validation message to a topic when
    an event destination is created ("Successfully validated SNS topic for Amazon SES event
    publishing."), and failing on it would only make Lambda retry it and then drop it."""
    out = []
    for r in _records(event, "aws:sns"):
        sns = _get(r, "Sns")
        text = str(sns.get("Message", ""))
        try:
            message = json.loads(text)
        except json.JSONDecodeError:
            message = None
        if not isinstance(message, dict):
            message = {"_text": text}
        message.setdefault("_snsMessageId", sns.get("MessageId", ""))
        out.append(message)
    return out


@dataclass(frozen=True, slots=True)
class OwnerTask:
    """An EventBridge event for inbound-handler: the daily quarantine digest (a schedule's
    ``Scheduled Event``, from an EventBridge rule or EventBridge Scheduler) or an operator's release.

    Shape (docs/CONTRACT.md): ``{"source": "aws.events" | "aws.scheduler" | "service-email-handler",
    "detail-type": "Scheduled Event" | "Quarantine Release", "time": ISO, "detail": {"task":
    "quarantine-digest" | "quarantine-release", "id": "<quarantine id>", "by": "<who>"}}``; a
    ``Scheduled Event`` without ``detail.task`` is the digest.
    """

    task: str  # quarantine-digest | quarantine-release
    time: str
    quarantine_id: str = ""
    by: str = ""

    @classmethod
    def from_event(cls, event: Any) -> OwnerTask:
        detail = event.get("detail") if isinstance(event, dict) else None
        if not isinstance(detail, dict):
            raise EventError("EventBridge event has no detail object")
        default = "quarantine-digest" if event.get("detail-type") == "Scheduled Event" else ""
        task = str(detail.get("task") or default)
        if task not in OWNER_TASKS:
            raise EventError(f"unsupported task {task!r} (detail-type {event.get('detail-type')!r})")
        qid = str(detail.get("id") or "")
        if task == "quarantine-release" and not qid.isalnum():
            raise EventError("quarantine-release needs detail.id, a quarantine id")
        return cls(task, str(event.get("time") or ""), qid.lower(), str(detail.get("by") or "operator")[:200])


OWNER_TASKS = ("quarantine-digest", "quarantine-release")


def kind(event: Any) -> str:
    """'ses' | 's3' | 'sqs' | 'sns' by the first record's source; 'eventbridge' for an EventBridge event."""
    if isinstance(event, dict) and "detail-type" in event and "Records" not in event:
        return "eventbridge"
    try:
        first = event["Records"][0]
        source = first.get("eventSource") or first.get("EventSource")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise EventError("event has no Records") from None
    kinds = {"aws:ses": "ses", "aws:s3": "s3", "aws:sqs": "sqs", "aws:sns": "sns"}
    if source not in kinds:
        raise EventError(f"unsupported event source {source!r}")
    return kinds[source]
