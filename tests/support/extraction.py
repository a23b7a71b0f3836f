"""Shared setup for the extractor's integration and container tests."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import quote_plus

from tests.conftest import load_event
from tests.support import docgen

BUCKET = "service-email-handler-local-mail"
PREFIX = "attachments/jane-smith-linkedin-a1b2c3/0000msg1/"


def sample_files() -> dict[str, bytes]:
    return {
        "My CV (2026).PDF": docgen.make_pdf(["Jane Smith\nSenior Engineer", "Experience: Zürich, Café"]),
        "Job Spec.docx": docgen.make_docx(["Role description"], table=[["Salary", "€100k"]], header="ACME", footer="p1"),
        "locked.pdf": docgen.encrypt_pdf(docgen.make_pdf(["x"]), "pw"),
        "not really.pdf": b"plain text pretending",
        "bomb.docx": docgen.zip_bomb_docx(),
    }


def upload(s3: Any, files: dict[str, bytes]) -> dict[str, Any]:
    """Put the files under attachments/ and return the S3 event (keys URL-encoded as S3 does)."""
    event = load_event("s3-attachment.json")
    template = event["Records"][0]
    records = []
    for name, data in files.items():
        s3.put_object(Bucket=BUCKET, Key=PREFIX + name, Body=data)
        record = copy.deepcopy(template)
        record["s3"]["bucket"]["name"] = BUCKET
        record["s3"]["object"]["key"] = quote_plus(PREFIX + name, safe="/")
        record["s3"]["object"]["size"] = len(data)
        records.append(record)
    return {"Records": records}


def outputs(s3: Any) -> dict[str, tuple[bytes, dict[str, str]]]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="extracted-text/").get("Contents", [])
    out = {}
    for obj in listed:
        got = s3.get_object(Bucket=BUCKET, Key=obj["Key"])
        out[obj["Key"]] = (got["Body"].read(), got["Metadata"])
    return out


def error_reason(body: bytes) -> str:
    return str(json.loads(body)["reason"])
