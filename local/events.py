"""SES-shaped events built locally: the receipt event SES gives a Lambda action, and the SQS event an
event-source mapping gives a sender. Used by the SMTP ingress, `email-handler inject`, the local
wiring and the tests, so all of them exercise the handlers with the shapes AWS delivers.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from common.mail.headers import parse_mailbox
from common.mail.limits import header_block
from common.mail.parse import raw_fields
from common.runtime.clock import iso_z
from common.runtime.events import VERDICTS

SES_HEADERS_LIMIT = 10 * 1024  # SES: "headersTruncated … if the headers are larger than 10 KB"


def message_id_for(raw: bytes) -> str:
    """An SES-like message id (lowercase alphanumerics), unique per message and time."""
    return hashlib.sha256(raw + str(time.time_ns()).encode()).hexdigest()[:40]


def envelope_sender(raw: bytes) -> str | None:
    """The SMTP MAIL FROM a saved message file implies (SES's ``mail.source``): its Return-Path
    (``<>`` is a bounce: ''), else the From mailbox's address (the angle-addr when there is one);
    None when neither names an address, so the caller asks for one instead of inventing a null
    sender (which would make an ordinary mail look like a bounce)."""

    fields = {name.lower(): value for name, value in reversed(raw_fields(header_block(raw)))}
    return_path = fields.get("return-path", "").strip()
    if return_path:
        inner = return_path.strip().removeprefix("<").removesuffix(">").strip()
        if not inner:
            return ""
        if "@" in inner:
            return parse_mailbox(return_path).address or inner
    address = parse_mailbox(fields.get("from", "")).address
    return address if "@" in address else None


def receipt_event(
    raw: bytes,
    message_id: str,
    recipients: list[str],
    source: str | None = None,
    verdicts: dict[str, str] | None = None,
    dmarc_policy: str = "",
    destination: list[str] | None = None,
    function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local",
) -> dict[str, Any]:
    """The event of an SES receipt rule's Lambda action (after an S3 action stored ``raw``).

    Only the top header block is read (no MIME parse, so no message can break the tooling), and the
    header list is cut after 10 KB with ``headersTruncated``, as SES does."""

    fields = [
        (k, v.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        for k, v in raw_fields(header_block(raw))
    ]
    first = {k.lower(): v for k, v in reversed(fields)}
    headers, size = [], 0
    for name, value in fields:
        size += len(name) + len(value)
        if size > SES_HEADERS_LIMIT:
            break
        headers.append({"name": name, "value": value})
    if source is None:  # the envelope sender: Return-Path if the file has one, else From
        source = envelope_sender(raw)
        source = "unknown@localhost" if source is None else source
    now = iso_z(millis=True)
    all_verdicts = {v: "PASS" for v in VERDICTS} | {
        k.lower(): val.upper() for k, val in (verdicts or {}).items()
    }
    receipt: dict[str, Any] = {
        "timestamp": now,
        "processingTimeMillis": 1,
        "recipients": recipients,
        **{f"{v}Verdict": {"status": s} for v, s in all_verdicts.items()},
        "action": {"type": "Lambda", "functionArn": function_arn, "invocationType": "Event"},
    }
    if dmarc_policy:
        receipt["dmarcPolicy"] = dmarc_policy
    return {
        "Records": [
            {
                "eventSource": "aws:ses",
                "eventVersion": "1.0",
                "ses": {
                    "mail": {
                        "timestamp": now,
                        "source": source,
                        "messageId": message_id,
                        "destination": recipients if destination is None else destination,
                        "headersTruncated": len(headers) < len(fields),
                        "headers": headers,
                        "commonHeaders": {
                            "from": [first.get("from", "")[:2000]],
                            "to": [first.get("to", "")[:2000]],
                            "subject": first.get("subject", "")[:2000],
                            "messageId": first.get("message-id", "")[:1000],
                        },
                    },
                    "receipt": receipt,
                },
            }
        ]
    }


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str = "us-east-1") -> dict[str, Any]:
    """The event an SQS event-source mapping delivers for messages from ReceiveMessage."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    k: {
                        "stringValue": v.get("StringValue"),
                        "dataType": v.get("DataType", "String"),
                        "stringListValues": [],
                        "binaryListValues": [],
                    }
                    for k, v in (m.get("MessageAttributes") or {}).items()
                },
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


def sns_event(message: str, topic_arn: str, message_id: str, subject: str = "") -> dict[str, Any]:
    """The event SNS delivers to a subscribed Lambda."""
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": topic_arn + ":local",
                "Sns": {
                    "Type": "Notification",
                    "MessageId": message_id,
                    "TopicArn": topic_arn,
                    "Subject": subject or None,
                    "Message": message,
                    "Timestamp": iso_z(millis=True),
                },
            }
        ]
    }
