"""Attachments kept in the mail bucket: one rule for both pipelines (types, names, duplicates)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from common.aws import s3
from common.mail.parse import Attachment as MailPart
from common.mail.sanitize import extension
from common.runtime.config import Config
from common.store.sendqueue import Attachment


@dataclass(slots=True)
class Stored:
    attachments: list[Attachment] = field(default_factory=list)  # what the queue message may attach
    sizes: dict[str, int] = field(default_factory=dict)  # S3 key -> bytes
    skipped: list[str] = field(default_factory=list)  # "name (why)" for the footer and the logs


def store(cfg: Config, parts: Iterable[MailPart], key_for: Callable[[str], str]) -> Stored:
    """Store the allowed types under ``key_for(name)``; two parts with one name get ``-2``, ``-3`` …"""
    allowed = {t.lower().lstrip(".") for t in cfg.attachment_types}
    out = Stored()
    used: set[str] = set()
    for part in parts:
        if extension(part.safe_name) not in allowed:
            out.skipped.append(f"{part.safe_name} (type not allowed)")
            continue
        name = part.safe_name
        stem, dot, ext = name.rpartition(".")
        n = 2
        while name.lower() in used:  # two parts with the same name must not overwrite each other
            name, n = f"{stem}-{n}{dot}{ext}", n + 1
        used.add(name.lower())
        key = key_for(name)
        s3.put(cfg.bucket, key, part.data, part.content_type)
        out.attachments.append(Attachment(key, name, part.content_type))
        out.sizes[key] = len(part.data)
    return out
