"""S3: the one module that talks to the mail bucket."""

from __future__ import annotations

import json
from typing import Any

from common.aws import client, error_code


def get(bucket: str, key: str) -> dict[str, Any] | None:
    """GetObject response (Body unread, ContentLength known) or None if the key does not exist.

    A missing bucket is not "not found": it raises, because it means broken infrastructure.
    """
    try:
        return client("s3").get_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if error_code(exc) == "NoSuchKey":
            return None
        raise


def put(bucket: str, key: str, body: bytes, content_type: str, metadata: dict[str, str] | None = None) -> None:
    client("s3").put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type, Metadata=metadata or {})


def put_json(bucket: str, key: str, document: Any) -> None:
    body = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False).encode()
    put(bucket, key, body, "application/json")


def delete(bucket: str, key: str) -> None:
    client("s3").delete_object(Bucket=bucket, Key=key)
