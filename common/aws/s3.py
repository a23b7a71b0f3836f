"""S3: the one module that talks to the mail bucket."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from common.aws import client, error_code, session


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


def head_bytes(bucket: str, key: str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of ``key`` (a ranged GetObject: S3 sends no more); None when it is gone."""
    try:
        response = client("s3").get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit - 1}")
    except Exception as exc:
        code = error_code(exc)
        if code == "InvalidRange":  # S3 answers a range over an empty object with 416
            return b""
        if code == "NoSuchKey":
            return None
        raise
    return bytes(response["Body"].read())


def put(
    bucket: str, key: str, body: bytes, content_type: str, metadata: dict[str, str] | None = None
) -> None:
    client("s3").put_object(
        Bucket=bucket, Key=key, Body=body, ContentType=content_type, Metadata=metadata or {}
    )


def copy(bucket: str, source: str, key: str, content_type: str) -> None:
    """Copy ``source`` to ``key`` inside S3 (CopyObject: s3:GetObject on the source, s3:PutObject on the
    destination); nothing passes through the function, whatever the size (up to S3's 5 GB)."""
    client("s3").copy_object(
        Bucket=bucket,
        Key=key,
        CopySource={"Bucket": bucket, "Key": source},
        ContentType=content_type,
        MetadataDirective="REPLACE",
    )


def put_json(bucket: str, key: str, document: Any) -> None:
    body = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False).encode()
    put(bucket, key, body, "application/json")


def delete(bucket: str, key: str) -> None:
    client("s3").delete_object(Bucket=bucket, Key=key)


def keys(bucket: str, prefix: str) -> list[str]:
    """Every key under ``prefix`` (all pages): operator tools, and one conversation's archive."""
    return [str(o["Key"]) for o in listing(bucket, prefix)]


def listing(bucket: str, prefix: str) -> list[dict[str, Any]]:
    """ListObjectsV2's entry (``Key``, ``LastModified``, ``Size``, ``ETag``) of every object under
    ``prefix``, all pages."""
    out: list[dict[str, Any]] = []
    for page in client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += page.get("Contents", [])
    return out


# SigV4 query-string authentication takes X-Amz-Expires up to 604,800 s, seven days (S3 API reference,
# "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)").
PRESIGN_MAX_SECONDS = 7 * 24 * 3600
# A URL signed with temporary credentials stops working when they expire, whatever X-Amz-Expires says
# (S3 User Guide, "Download and upload objects with presigned URLs", section "Expiration time for presigned
# URLs": https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html#PresignedUrl-Expiration).
# A role session lasts 12 hours at most (IAM API reference, UpdateRole MaxSessionDuration: 1 to 12 hours;
# Lambda's role credentials were seen to stop after 12 hours, boto/boto3#2392), and Lambda does not tell
# the function when its credentials expire, so 12 hours is the most such a link can promise.
TEMPORARY_CREDENTIALS_MAX_SECONDS = 12 * 3600


@dataclass(frozen=True)
class Link:
    """A presigned GET: ``url`` works until ``expires`` at the latest; ``temporary``: it was signed with
    temporary credentials of unknown remaining life, so it may stop working sooner."""

    url: str
    expires: datetime
    temporary: bool


def presign_get(bucket: str, key: str, seconds: int, now: datetime | None = None) -> Link:
    """A SigV4 presigned GetObject URL of ``key``, signed with this process's credentials (a function's
    own role: the link works only while that role may s3:GetObject the key, deploy/iam.py), valid for
    ``seconds`` capped at S3's seven days and, for temporary credentials, at what a role session can last.
    On AWS a virtual-hosted URL on the Regional endpoint; against an emulator, boto3's own choice."""
    credentials = session().get_credentials()  # the chain every client() resolves too
    temporary = credentials is None or bool(credentials.token)
    seconds = max(
        1, min(seconds, PRESIGN_MAX_SECONDS, TEMPORARY_CREDENTIALS_MAX_SECONDS if temporary else seconds)
    )
    # SigV4 explicitly: S3 accepts SigV2 only from older buckets and regions (S3 API reference, Signature
    # Version 2). On AWS a virtual-hosted URL on the bucket's Regional endpoint: botocore's default presigns
    # on the global s3.amazonaws.com, which answers a bucket elsewhere with a 307 redirect for its first
    # 24 hours (re:Post knowledge center "s3-http-307-response"), or 400 in Regions launched after March 2019
    # (S3 User Guide, "Request routing"); a redirect to another host breaks the signature (it signs Host).
    # A custom endpoint (moto, LocalStack) keeps boto3's choice: a bucket is no subdomain of it.
    custom = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    signer = client("s3", signature_version="s3v4", addressing_style=None if custom else "virtual")
    url = signer.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=seconds
    )
    return Link(url=url, expires=(now or datetime.now(UTC)) + timedelta(seconds=seconds), temporary=temporary)
