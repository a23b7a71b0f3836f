"""What the system sent through SES, read back from the local emulator (moto or LocalStack).

moto keeps every SendRawEmail as a ``RawMessage`` model, listed by its dashboard API
(``/moto-api/data.json``, in the order they were sent); LocalStack lists sent mail at ``/_aws/ses``
(shapes measured against LocalStack 4.4.0, see :func:`from_localstack`). Which one answers is asked
of the endpoint (``/_localstack/health``). Both become the same items: ``id``, ``timestamp``
(ISO 8601 UTC), ``source``, ``destinations``, ``subject`` and ``raw`` (the MIME text), oldest first.
"""

from __future__ import annotations

import email
import email.policy
import json
import time
import urllib.error
import urllib.request
from datetime import UTC
from email.message import EmailMessage
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

from common.runtime.clock import iso_z, parse_iso
from local.guard import admin_headers


def _get_json(url: str, timeout: float = 30, attempts: int = 1, headers: dict[str, str] | None = None) -> Any:
    """``url``'s JSON. With ``attempts`` > 1 a timeout or a 5xx answer is asked again after a second:
    moto builds its data.json from every backend while the functions keep writing to them, and an
    emulator loaded like that can time out or fail one dump that the next one serves."""
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers or {}), timeout=timeout
            ) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or attempt == attempts:
                raise
        except (TimeoutError, urllib.error.URLError) as exc:
            timed_out = isinstance(exc, TimeoutError) or isinstance(exc.reason, TimeoutError)
            if not timed_out or attempt == attempts:
                raise
        time.sleep(1)
    raise AssertionError("unreachable: the last attempt returns or raises")


def is_localstack(endpoint: str) -> bool:
    try:
        _get_json(endpoint.rstrip("/") + "/_localstack/health", timeout=5)
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return True


def _headers(raw: str) -> tuple[str, str, list[str]]:
    msg = email.message_from_string(raw, policy=email.policy.default)
    subject = str(msg.get("Subject", ""))
    try:
        when = parsedate_to_datetime(str(msg["Date"])).astimezone(UTC) if msg["Date"] else None
    except (TypeError, ValueError):
        when = None
    stamp = iso_z(when) if when else ""
    to = [a for _, a in getaddresses([str(v) for k in ("To", "Cc") for v in msg.get_all(k) or []]) if a]
    return stamp, subject, to


def _item(mid: str, source: str, destinations: list[str], raw: str, timestamp: str = "") -> dict[str, Any]:
    stamp, subject, to = _headers(raw)
    return {
        "id": mid,
        "timestamp": timestamp or stamp,
        "source": source,
        "destinations": list(dict.fromkeys(destinations or to)),
        "subject": subject,
        "raw": raw,
    }


def from_moto(endpoint: str) -> list[dict[str, Any]]:

    data = _get_json(endpoint.rstrip("/") + "/moto-api/data.json", attempts=3, headers=admin_headers())
    raws = (data.get("ses") or {}).get("RawMessage") or []
    return [
        _item(
            str(m.get("id", "")),
            str(m.get("source") or ""),
            [getaddresses([d])[0][1] or d for d in m.get("destinations") or []],
            str(m.get("raw_data", "")),
        )
        for m in raws
    ]


def _stamp(text: str) -> str:
    """LocalStack's ``Timestamp`` (``2026-11-23T16:47:09``: UTC, without an offset) with the ``Z``."""
    moment = parse_iso(text)
    return iso_z(moment) if moment else text


def _simple_mime(m: dict[str, Any], destination: dict[str, Any]) -> str:
    """SendEmail keeps no MIME at LocalStack (only Subject and Body): the message SES would build from
    them."""
    msg = EmailMessage()
    msg["From"] = str(m.get("Source") or "")
    for header, key in (("To", "ToAddresses"), ("Cc", "CcAddresses")):
        if destination.get(key):
            msg[header] = ", ".join(destination[key])
    msg["Subject"] = str(m.get("Subject") or "")
    body = m.get("Body") or {}
    msg.set_content(str(body.get("text_part") or ""))
    if body.get("html_part"):
        msg.add_alternative(str(body["html_part"]), subtype="html")
    return msg.as_string()


def from_localstack(endpoint: str) -> list[dict[str, Any]]:
    """LocalStack 4.4.0's ``/_aws/ses``: ``{"messages": [...]}`` in send order. A SendRawEmail item has
    ``Id``, ``Region``, ``Source``, ``RawData`` and ``Timestamp`` but not the envelope destinations
    (they come from the To/Cc headers); a SendEmail item has ``Destination``, ``Subject`` and ``Body``
    instead of ``RawData``. The community edition has no SESv2: the senders' SESv2 SendEmail (raw
    content) reaches this list through the stack's init hook (compose/localstack/start.d), as a raw item."""
    data = _get_json(endpoint.rstrip("/") + "/_aws/ses", attempts=3)
    items = []
    for m in data.get("messages") or []:
        destination = m.get("Destination") or {}
        addresses = (
            [a for k in ("ToAddresses", "CcAddresses", "BccAddresses") for a in destination.get(k) or []]
            if isinstance(destination, dict)
            else list(destination)
        )
        raw = (
            str(m["RawData"])
            if m.get("RawData")
            else _simple_mime(m, destination if isinstance(destination, dict) else {})
        )
        items.append(
            _item(
                str(m.get("Id", "")),
                str(m.get("Source") or ""),
                addresses,
                raw,
                _stamp(str(m.get("Timestamp") or "")),
            )
        )
    return sorted(items, key=lambda i: i["timestamp"])  # stable: same-second sends keep LocalStack's order


def sent(endpoint: str) -> list[dict[str, Any]]:
    return from_localstack(endpoint) if is_localstack(endpoint) else from_moto(endpoint)


def table(items: list[dict[str, Any]]) -> str:
    if not items:
        return "(nothing sent yet)"
    lines = [f"{'time':<21}{'to':<32}subject"]
    for i in items:
        lines.append(f"{i['timestamp']:<21}{', '.join(i['destinations'])[:30]:<32}{i['subject']}")
    return "\n".join(lines)
