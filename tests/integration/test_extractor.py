"""attachment-extractor through the host RIE against a real moto server."""

from __future__ import annotations

import boto3
import pytest

from common.local.rie import InvokeError
from tests.support.extraction import BUCKET, PREFIX, error_reason, outputs, sample_files, upload


@pytest.fixture
def s3(moto_server):
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
    for obj in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    client.delete_bucket(Bucket=BUCKET)


def test_extracts_pdf_and_docx_and_records_rejections(rie_function, s3) -> None:
    fn = rie_function("attachment-extractor")
    event = upload(s3, sample_files())
    result = fn.invoke(event)
    statuses = {r["key"].rsplit("/", 1)[1]: r["status"] for r in result["results"]}
    assert statuses == {"My CV (2026).PDF": "extracted", "Job Spec.docx": "extracted", "locked.pdf": "rejected",
                        "not really.pdf": "rejected", "bomb.docx": "rejected"}
    out = outputs(s3)
    base = "extracted-text/" + PREFIX[len("attachments/"):]
    text, meta = out[base + "My CV (2026).PDF.txt"]
    assert text.decode() .split("\f")[1].strip() == "Experience: Zürich, Café"
    assert meta["pages"] == "2" and meta["extractor"] == "pypdf" and int(meta["characters"]) == len(text.decode())
    assert meta["extractor-version"] and int(meta["extraction-ms"]) >= 0
    docx_text = out[base + "Job Spec.docx.txt"][0].decode()
    assert docx_text.split("\n") == ["ACME", "Role description", "Salary\t€100k", "p1"]
    assert "password" in error_reason(out[base + "locked.pdf.error.json"][0])
    assert "not a PDF" in error_reason(out[base + "not really.pdf.error.json"][0])
    assert "zip bomb" in error_reason(out[base + "bomb.docx.error.json"][0])
    assert '"message": "attachment rejected"' in fn.output()

    # Idempotent: the same event again writes the same text.
    fn.invoke(event)
    assert outputs(s3)[base + "My CV (2026).PDF.txt"][0] == text


def test_s3_errors_propagate_so_the_event_is_retried(rie_function, moto_server) -> None:
    fn = rie_function("attachment-extractor", env={"EMAIL_BUCKET": "unused"})
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                          "s3": {"bucket": {"name": "no-such-bucket"}, "object": {"key": PREFIX + "cv.pdf", "size": 1}}}]}
    with pytest.raises(InvokeError) as err:
        fn.invoke(event)
    assert err.value.payload["errorType"] == "NoSuchBucket"  # botocore modelled ClientError subclass
