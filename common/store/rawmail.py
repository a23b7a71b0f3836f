"""The raw mails the bucket keeps, byte for byte as SES received them (one writer per prefix).

* ``conversations/<cid>/<id>.eml``: the archive of every delivered mail;
* ``sent/<cid>/<id>.eml``: every reply of the owner as reply-sender sent it (``<id>``: SES's id of the send);
* ``bounces/<day>/<id>.eml``: delivery reports and automatic replies, kept without forward or ack;
* ``spam/<day>/<id>.eml``: quarantined mail, read back when it is released;
* ``rejected/<day>/<id>.eml``: mail to a thread address that is not an authorised owner reply.

A held or rejected copy carries its reason as S3 metadata (ASCII, at most 1 KB: S3's user metadata
is ASCII and 2 KB in all).
"""

from __future__ import annotations

from datetime import datetime

from common.aws import s3
from common.runtime.config import Delivery
from common.store import layout

RFC822 = "message/rfc822"


def reason_metadata(reason: str, limit: int = 1024) -> dict[str, str]:
    """``reason`` as S3 user metadata: non-ASCII escaped, cut to ``limit`` characters."""
    return {"reason": reason.encode("ascii", "backslashreplace").decode()[:limit]}


def archive(cfg: Delivery, cid: str, mid: str, raw: bytes) -> str:
    key = layout.archive(cid, mid)
    s3.put(cfg.bucket, key, raw, RFC822)
    return key


def keep_sent(bucket: str, cid: str, ses_id: str, raw: bytes) -> str:
    key = layout.sent(cid, ses_id)
    s3.put(bucket, key, raw, RFC822)
    return key


def keep_report(cfg: Delivery, when: datetime, mid: str, raw: bytes) -> str:
    key = layout.bounce(when, mid)
    s3.put(cfg.bucket, key, raw, RFC822)
    return key


def hold(cfg: Delivery, when: datetime, mid: str, raw: bytes, reason: str) -> str:
    key = layout.quarantined(when, mid)
    s3.put(cfg.bucket, key, raw, RFC822, metadata=reason_metadata(reason))
    return key


def reject(cfg: Delivery, when: datetime, mid: str, raw: bytes, reason: str) -> str:
    key = layout.rejected(when, mid)
    s3.put(cfg.bucket, key, raw, RFC822, metadata=reason_metadata(reason))
    return key


def held(cfg: Delivery, key: str) -> bytes | None:
    """A quarantined mail's raw bytes; None when the object is gone."""
    obj = s3.get(cfg.bucket, key)
    return None if obj is None else bytes(obj["Body"].read())


def archived(cfg: Delivery, cid: str, first: str, limit: int, max_bytes: int) -> list[bytes]:
    """Up to ``limit`` archived mails of conversation ``cid`` (``first``: the SES message id to read
    first, the contact's latest), each at most ``max_bytes`` (a larger one is skipped: the record's
    lastMessageBody still stands for it). What the contact sent, as the reply's quote evidence."""
    prefix = f"{layout.CONVERSATIONS}{cid}/"
    keys = [k for k in s3.keys(cfg.bucket, prefix) if k.endswith(".eml")]
    wanted = layout.archive(cid, first) if first else ""
    keys = sorted(keys, key=lambda k: (k != wanted, k))[:limit]
    out = []
    for key in keys:
        obj = s3.get(cfg.bucket, key)
        if obj is not None and int(obj.get("ContentLength", 0)) <= max_bytes:
            out.append(bytes(obj["Body"].read()))
    return out
