"""attachment-extractor through the host RIE against a real moto server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local.rie import InvokeError, RieProcess
from tests.support.extraction import (
    CORPUS_ENV,
    CORPUS_INVOKE_TIMEOUT_S,
    PREFIX,
    TEXT_PREFIX,
    check_corpus_record,
    corpus_files,
    empty_mail_bucket,  # noqa: F401 (the s3 fixture)
    error_reason,
    outputs,
    record_for,
    require_corpus,
    sample_files,
    upload,
)

CORPUS = corpus_files()


@pytest.fixture(scope="module")
def extractor(rie_module: Callable[..., RieProcess]) -> RieProcess:
    """With the corpus' budget (tests/support/extraction.py): what these tests check never depends on
    the machine's speed."""
    return rie_module("attachment-extractor", env=CORPUS_ENV)


def test_extracts_pdf_and_docx_and_records_rejections(extractor: RieProcess, s3: Any) -> None:
    event = upload(s3, sample_files())
    result = extractor.invoke(event)
    statuses = {r["key"].rsplit("/", 1)[1]: r["status"] for r in result["results"]}
    assert statuses == {
        "My CV (2026).PDF": "extracted",
        "Job Spec.docx": "extracted",
        "locked.pdf": "rejected",
        "not really.pdf": "rejected",
        "bomb.docx": "rejected",
    }
    out = outputs(s3)
    text, meta = out[TEXT_PREFIX + "My CV (2026).PDF.txt"]
    assert text.decode().split("\f")[1].strip() == "Experience: Zürich, Café"
    assert (
        meta["pages"] == "2"
        and meta["extractor"] == "pypdf"
        and int(meta["characters"]) == len(text.decode())
    )
    assert meta["extractor-version"] and int(meta["extraction-ms"]) >= 0
    docx_text, docx_meta = out[TEXT_PREFIX + "Job Spec.docx.txt"]
    assert docx_text.decode().split("\n") == ["ACME", "Role description", "Salary\t€100k", "p1"]
    assert (
        docx_meta["pages"] == "1" and docx_meta["extractor"] == "ooxml"
    )  # python-docx's template saves Word's count
    assert error_reason(out[TEXT_PREFIX + "locked.pdf.error.json"][0]) == "encrypted PDF needs a password"
    assert (
        error_reason(out[TEXT_PREFIX + "not really.pdf.error.json"][0])
        == "content is not a PDF file (no %PDF- header)"
    )
    assert "zip bomb" in error_reason(out[TEXT_PREFIX + "bomb.docx.error.json"][0])
    assert '"message": "attachment rejected"' in extractor.output()

    # Idempotent: the same event again writes the same text.
    extractor.invoke(event)
    assert outputs(s3)[TEXT_PREFIX + "My CV (2026).PDF.txt"][0] == text


def test_partial_results_are_logged_with_their_reasons(extractor: RieProcess, s3: Any) -> None:
    from tests.support import docgen

    event = upload(s3, {"damaged page.pdf": docgen.make_pdf(["one", "two"], broken_pages=(1,))})
    result = extractor.invoke(event)["results"][0]
    assert result["status"] == "extracted" and result["unreadablePages"] == [1]
    kind, body, meta = record_for(s3, "damaged page.pdf")
    assert kind == "text" and body.decode() == "\ftwo" and meta["unreadable-pages"] == "1"
    assert '"message": "attachment extracted in part"' in extractor.output()


def test_the_log_never_quotes_the_document_a_parser_message_quotes(extractor: RieProcess, s3: Any) -> None:
    """pypdf's message about a damaged object quotes the file's bytes: the error record beside the
    document keeps the whole reason, the function's log only its head."""
    secret = b"QUARTZLANTERN7731"
    pdf = b"%PDF-1.4\n1 0 obj\n" + secret + b"\nendobj\ntrailer\n<< /Root 1 0 R >>\nstartxref\n0\n%%EOF\n"
    result = extractor.invoke(upload(s3, {"quoted.pdf": pdf}))["results"][0]
    assert result["status"] == "rejected" and secret.decode() in result["reason"], result
    assert secret.decode() in error_reason(record_for(s3, "quoted.pdf")[1])
    lines = [line for line in extractor.output().splitlines() if "attachment rejected" in line]
    assert lines and '"reason": "damaged PDF"' in lines[-1], lines
    assert secret.decode() not in extractor.output()


def test_a_pdf_mapping_glyphs_to_lone_surrogates_gets_its_text_record(extractor: RieProcess, s3: Any) -> None:
    """A crafted ToUnicode map sends glyphs to U+D800 and U+DC00: the text is stored, not retried."""
    from tests.support import docgen

    pdf = docgen.pdf_to_unicode({0x41: 0xD800, 0x42: 0x42, 0x43: 0xDC00}, b"ABCAB")
    assert extractor.invoke(upload(s3, {"crafted.pdf": pdf}))["results"][0]["status"] == "extracted"
    kind, body, meta = record_for(s3, "crafted.pdf")
    assert kind == "text" and body.decode("utf-8").strip() == "\ufffdB\ufffd\ufffdB"
    assert meta["warnings"] == "suspect-encoding"


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_file_gets_its_record(extractor: RieProcess, s3: Any, path: Path) -> None:
    """Every real-world document ends as text or an error record, through the handler under the RIE."""
    require_corpus(CORPUS)
    result = extractor.invoke(upload(s3, {path.name: path.read_bytes()}), timeout=CORPUS_INVOKE_TIMEOUT_S)
    assert result["results"][0]["status"] in ("extracted", "rejected")
    check_corpus_record(path, *record_for(s3, path.name))


def test_corpus_is_present_where_the_suite_looks() -> None:
    require_corpus(CORPUS)
    assert {p.suffix for p in CORPUS} == {".pdf", ".docx"} and len(CORPUS) >= 50


def test_s3_errors_propagate_so_the_event_is_retried(
    rie_function: Callable[..., RieProcess], moto_server: str
) -> None:
    fn = rie_function("attachment-extractor", env={"EMAIL_BUCKET": "unused"})
    event = {
        "Records": [
            {
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "no-such-bucket"}, "object": {"key": PREFIX + "cv.pdf", "size": 1}},
            }
        ]
    }
    with pytest.raises(InvokeError) as err:
        fn.invoke(event)
    # Under its production role the bucket is outside its policy: AWS (and the emulator) answer 403
    # before looking for the bucket. Either way the error propagates and Lambda retries the event.
    assert "AccessDenied" in err.value.payload["errorMessage"]


def test_a_batch_from_the_attachment_queue_reports_only_the_records_to_retry(
    extractor: RieProcess, s3: Any
) -> None:
    """What the attachment queue's event source delivers: SQS records whose bodies are S3 notifications.
    A record S3 cannot serve is reported in batchItemFailures alone; S3's test event and a body that is
    no notification are done with (logged), never retried."""
    import json

    from local.events import sqs_event

    good = upload(s3, {"My CV (2026).PDF": sample_files()["My CV (2026).PDF"]})
    outside = {
        "Records": [
            {
                **good["Records"][0],
                "s3": {"bucket": {"name": "no-such-bucket"}, "object": {"key": PREFIX + "cv.pdf", "size": 1}},
            }
        ]
    }
    bodies = {
        "m-good": good,
        "m-test": {"Service": "Amazon S3", "Event": "s3:TestEvent"},
        "m-outside": outside,
        "m-junk": {"hello": "world"},
    }
    messages = [
        {
            "MessageId": k,
            "ReceiptHandle": k,
            "Body": json.dumps(v),
            "Attributes": {"ApproximateReceiveCount": "1"},
        }
        for k, v in bodies.items()
    ]
    result = extractor.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:attachment-events"))
    assert result["batchItemFailures"] == [{"itemIdentifier": "m-outside"}]
    assert [r["status"] for r in result["results"]] == ["extracted", "ignored"]
    assert TEXT_PREFIX + "My CV (2026).PDF.txt" in outputs(s3)
    log = extractor.output()
    assert '"message": "notification ignored"' in log and '"message": "queue message dropped"' in log
    assert '"message": "notification failed"' in log
