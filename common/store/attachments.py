"""Attachments kept in the mail bucket: one rule for both pipelines (what is withheld, names, duplicates).

Everything is forwarded except what the owner's deny-list names (``ATTACHMENT_DENY_TYPES``:
executables and scripts, also inside zip archives and forwarded messages, and Windows executables
whatever their name) and what SES refuses to send at all (its "unsupported attachment types": a
message with one of them is rejected whole); the rule is common/mail/withhold.py. Withheld parts
are still stored, under ``withheld/``, which no sender can read, and the forward names them with
the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from common.aws import s3
from common.aws.s3 import Link
from common.mail import charsets, outbound, parse
from common.mail.limits import MAX_STORED_ATTACHMENTS
from common.mail.sanitize import extension
from common.mail.withhold import SES_UNSUPPORTED, withhold_reason
from common.runtime.config import Delivery
from common.store import layout
from common.store.rawmail import reason_metadata

__all__ = [
    "SES_UNSUPPORTED",
    "Link",
    "Stored",
    "Withheld",
    "as_utf8",
    "download_link",
    "store",
    "withhold_reason",
]


@dataclass(slots=True)
class Withheld:
    name: str
    key: str  # where the part is stored (withheld/...)
    reason: str


@dataclass(slots=True)
class Stored:
    attachments: list[outbound.Attachment] = field(default_factory=list)  # what the queue message may attach
    sizes: dict[str, int] = field(default_factory=dict)  # S3 key -> bytes
    withheld: list[Withheld] = field(default_factory=list)

    @property
    def skipped(self) -> list[str]:
        """ "name (why)" for the logs and the result."""
        return [f"{w.name} ({w.reason})" for w in self.withheld]


def as_utf8(data: bytes, charset: str) -> bytes:
    """Text under its declared charset (the part's charset parameter), re-encoded as UTF-8 (what the
    forward labels it), so a Latin-1, Shift_JIS or Outlook ISO-2022-JP part reads right in the
    owner's client. Decoded as the body is (common.mail.charsets.decode): the label's superset
    first, then the fallbacks, and never U+FFFD for a byte some fallback reads."""
    return charsets.decode(data, charset).encode("utf-8")


def store(
    cfg: Delivery,
    parts: Iterable[parse.Attachment],
    key_for: Callable[[str], str],
    withheld_key_for: Callable[[str], str],
) -> Stored:
    """Store every part under ``key_for(name)``, or under ``withheld_key_for(name)`` when it is
    withheld. ``name`` is the part's S3-safe name (common.mail.sanitize.safe_filename), made unique:
    two parts with one name get ``-2``, ``-3`` … in their keys. The forward names each part as the
    sender did (``Attachment.filename``, only made safe to show): the key is storage, not the name."""
    deny = frozenset(t.lower().lstrip(".") for t in cfg.attachment_deny_types)
    out = Stored()
    used: set[str] = set()
    for part in parts:
        if len(out.attachments) + len(out.withheld) >= MAX_STORED_ATTACHMENTS:
            # 10,000 tiny parts must not become 10,000 S3 writes; the archive has them all
            out.withheld.append(
                Withheld(
                    part.filename,
                    "",
                    f"over {MAX_STORED_ATTACHMENTS} attachments; only in the archived original",
                )
            )
            continue
        name = part.safe_name
        stem, dot, ext = name.rpartition(".")
        if not dot:
            stem, ext = name, ""
        n = 2
        while name.lower() in used:  # two parts with the same name must not overwrite each other
            name, n = f"{stem}-{n}{dot}{ext}", n + 1
        used.add(name.lower())
        reason = withhold_reason(name, part.content_type, part.data, deny)
        if not reason and extension(part.filename) != extension(name):
            # the forward shows part.filename: its own extension is judged too
            reason = withhold_reason(part.filename, part.content_type, part.data, deny)
        if reason:
            key = withheld_key_for(name)
            s3.put(
                cfg.bucket,
                key,
                part.data,
                "application/octet-stream",
                metadata=reason_metadata(reason, 500),
            )
            out.withheld.append(Withheld(part.filename, key, reason))
            continue
        ctype, data = part.content_type, part.data
        inline = part.disposition == "inline" or (bool(part.content_id) and not part.disposition)
        if part.role == "text":  # a text part the sender put beside the body: shown inline, in its own type
            ctype = part.declared_type if part.declared_type.startswith("text/") else ctype
            data, inline = as_utf8(part.data, part.charset), part.disposition != "attachment"
        key = key_for(name)
        s3.put(cfg.bucket, key, data, ctype)
        shown = part.filename or name
        out.attachments.append(
            outbound.Attachment(key, shown, ctype, inline=inline, content_id=part.content_id)
        )
        out.sizes[key] = len(data)
    return out


def attach_original(cfg: Delivery, held_key: str, mid: str) -> outbound.Attachment:
    """A held mail released unparsed, attached whole as an opaque file: copied inside S3 from the held
    copy (common/store/layout.py, released_original)."""
    key = layout.released_original(mid)
    s3.copy(cfg.bucket, held_key, key, "application/octet-stream")
    return outbound.Attachment(key, "original.eml", "application/octet-stream")


def attach_report(cfg: Delivery, mid: str, raw: bytes, name: str) -> outbound.Attachment:
    """An abuse complaint attached whole to the owner's notice as an opaque file (the reported mail in
    it may be anything): stored at common/store/layout.py's complaint_report."""
    key = layout.complaint_report(mid)
    s3.put(cfg.bucket, key, raw, "application/octet-stream")
    return outbound.Attachment(key, name, "application/octet-stream")


def download_link(cfg: Delivery, key: str, now: datetime | None = None) -> Link:
    """A presigned link to a stored part for the owner's forward, valid ``FORWARD_LINK_DAYS``."""
    return s3.presign_get(cfg.bucket, key, cfg.forward_link_days * 24 * 3600, now)
