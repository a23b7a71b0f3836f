"""The attachment-extractor's records under ``extracted-text/``: an attachment's text, or a
``.error.json`` saying why there is none. This module is their one writer; it also reads the
attachment the text comes from."""

from __future__ import annotations

from typing import Any

from common.aws import s3
from common.mail.charsets import well_formed
from common.store import layout

__all__ = ["attachment", "record_rejection", "record_text"]


def attachment(bucket: str, key: str) -> dict[str, Any] | None:
    """The stored attachment's GetObject response (its ``Body`` not read yet), or None if it is gone."""
    return s3.get(bucket, key)


def record_rejection(bucket: str, key: str, record: dict[str, Any]) -> str:
    """Store why ``key`` has no text; returns the record's key."""
    error_key = layout.extraction_error(key)
    s3.put_json(bucket, error_key, record)
    return error_key


def record_text(bucket: str, key: str, text: str, metadata: dict[str, str]) -> None:
    """Store ``key``'s text with its metadata (ASCII: S3 sends user metadata as HTTP headers); an
    earlier rejection record of the same attachment is superseded and deleted (a no-op if none).
    The text is made well-formed here too: no string a parser returns can fail the write."""
    s3.put(
        bucket,
        layout.extracted_text(key),
        well_formed(text).encode("utf-8"),
        "text/plain; charset=utf-8",
        metadata,
    )
    s3.delete(bucket, layout.extraction_error(key))
