"""S3: the one module that talks to the mail bucket."""

from __future__ import annotations

import json
from typing import Any

from common.aws import client, error_code


def get(bucket: str, key: str) -> dict[str, Any] | None:
    """GetObject response (Body unread, ContentLength known) or None if the key does not exist.

    S3 answers a missing key with 403, not NoSuchKey, unless the caller may ``s3:ListBucket``
    (S3 API reference, GetObject). The roles may list only their own prefixes (``s3:prefix``
    condition, deploy/iam.py), so a 403 is settled by listing the key itself: absent -> None,
    present -> the denial was real and is raised. A missing bucket raises: broken infrastructure.
    """
    try:
        return client("s3").get_object(Bucket=bucket, Key=key)
    except Exception as exc:
        code = error_code(exc)
        if code == "NoSuchKey" or (code in ("AccessDenied", "403") and not exists(bucket, key, exc)):
            return None
        raise


def exists(bucket: str, key: str, denial: BaseException) -> bool:
    """Is ``key`` in the bucket? Asked after a denied read; a denied listing re-raises that read's error."""
    try:
        listed = client("s3").list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    except Exception:
        raise denial from None
    return any(o.get("Key") == key for o in listed.get("Contents", []))


def put(bucket: str, key: str, body: bytes, content_type: str, metadata: dict[str, str] | None = None) -> None:
    client("s3").put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type, Metadata=metadata or {})


def copy(bucket: str, source: str, key: str, content_type: str) -> None:
    """Copy ``source`` to ``key`` inside S3 (CopyObject: s3:GetObject on the source, s3:PutObject on the
    destination); nothing passes through the function, whatever the size (up to S3's 5 GB)."""
    client("s3").copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": source},
                             ContentType=content_type, MetadataDirective="REPLACE")


def put_json(bucket: str, key: str, document: Any) -> None:
    body = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False).encode()
    put(bucket, key, body, "application/json")


def delete(bucket: str, key: str) -> None:
    client("s3").delete_object(Bucket=bucket, Key=key)


def keys(bucket: str, prefix: str) -> list[str]:
    """Every key under ``prefix`` (all pages): operator tools only."""
    out: list[str] = []
    for page in client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [str(o["Key"]) for o in page.get("Contents", [])]
    return out
