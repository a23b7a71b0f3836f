"""attachment-extractor logic: `attachments/<cid>/<id>/<file>` -> `extracted-text/<cid>/<id>/<file>.txt`.

Every PDF/DOCX attachment ends with one of two records: the text, or a small JSON error record
beside the output path (encrypted, damaged, zip bomb, wrong content, over a limit) and a WARNING.
The invocation still succeeds so a bad file is not retried forever. S3 errors (throttling,
outages) fail the record (or, for a direct S3 event, the invocation) so it is retried. The parse
itself runs in a child process sized to what this sandbox has left (common.extractor.isolate), so
no document can exhaust the function's memory or time.
"""

from __future__ import annotations

import json
import time
import traceback
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from common.errors import EventError
from common.extractor import isolate
from common.extractor import text as textextract
from common.extractor.errors import loggable
from common.runtime import events, outcomes
from common.runtime.config import ExtractorConfig
from common.runtime.log import get_logger
from common.store import extracted, layout

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

log = get_logger("attachment-extractor")
SUPPORTED = ("pdf", "docx")
MAX_LISTED = 20  # page ranges listed per metadata value (S3 allows 2 KB of user metadata in all)


class ExtractorResult(TypedDict):
    status: Literal["ok"]
    results: list[dict[str, Any]]  # one per S3 record: extracted | rejected | skipped | ignored | gone


class BatchResult(ExtractorResult):
    batchItemFailures: list[dict[str, str]]  # SQS records to retry (ReportBatchItemFailures)


def handle(
    cfg: ExtractorConfig, event: Any, context: LambdaContext | None = None
) -> ExtractorResult | BatchResult:
    """An SQS batch from the attachment queue (each body an S3 event notification), or an S3 event
    itself (``email-handler invoke``, tests/fixtures/events/s3-attachment.json)."""
    records = event.get("Records") if isinstance(event, dict) else None
    if (
        isinstance(records, list)
        and records
        and isinstance(records[0], dict)
        and records[0].get("eventSource") == "aws:sqs"
    ):
        return _batch(cfg, event, context)
    results = [extract_object(cfg, obj.bucket, obj.key, context) for obj in events.s3_objects(event)]
    return {"status": "ok", "results": results}


def _batch(cfg: ExtractorConfig, event: Any, context: LambdaContext | None) -> BatchResult:
    """Each SQS record on its own: an S3 error fails that record alone, which SQS redelivers and after
    maxReceiveCount moves to the DLQ ("Handling errors for an SQS event source in Lambda",
    https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html)."""

    results: list[dict[str, Any]] = []
    failures: list[dict[str, str]] = []
    for record in events.sqs_records(event):
        try:
            body = json.loads(record.body)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("Event") == "s3:TestEvent":
            # S3 sends it once when the notification is configured (S3 User Guide, "Event message structure").
            log.info(
                "notification ignored", extra={"sqs_message_id": record.message_id, "reason": "S3 test event"}
            )
            continue
        try:
            objects = events.s3_objects(body)
        except (EventError, KeyError, TypeError) as exc:
            log.warning(
                "queue message dropped",
                extra={"sqs_message_id": record.message_id, "reason": f"not an S3 event notification: {exc}"},
            )
            results.append({"status": "ignored", "reason": "not an S3 event notification"})
            continue
        try:
            results += [extract_object(cfg, obj.bucket, obj.key, context) for obj in objects]
        except Exception as exc:  # S3 throttling or an outage: this record is retried, the others are done
            log.warning(
                "notification failed",
                extra={
                    "sqs_message_id": record.message_id,
                    "receive_count": record.receive_count,
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            failures.append({"itemIdentifier": record.message_id})
    return {"status": "ok", "results": results, "batchItemFailures": failures}


def _limits(cfg: ExtractorConfig, context: LambdaContext | None) -> textextract.Limits:
    budget = cfg.extract_time_budget_s
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if callable(remaining):  # always leave time to write the result before Lambda's timeout
        budget = max(1.0, min(budget, remaining() / 1000 - 5))
    box = isolate.sandbox()
    return textextract.Limits(
        cfg.max_input_bytes,
        cfg.max_pages,
        cfg.max_output_chars,
        budget,
        memory_bytes=box.total if box else textextract.Limits.memory_bytes,
        sandbox=box,
    )


def extract_object(
    cfg: ExtractorConfig, bucket: str, key: str, context: LambdaContext | None = None
) -> dict[str, Any]:
    if not layout.is_attachment(key):
        log.warning("object ignored", extra={"key": key, "reason": "not attachments/<cid>/<id>/<file>"})
        return {"key": key, "status": "ignored", "reason": "not an attachment key"}
    filename = key.rsplit("/", 1)[1]
    if textextract.extension(filename) not in SUPPORTED:
        # Other stored types (ics, png, xlsx, ...) are kept as they are; nothing to import or parse.
        log.info("attachment not extracted", extra={"key": key, "reason": "type has no text extractor"})
        return {
            "key": key,
            "status": "skipped",
            "reason": f"no extractor for .{textextract.extension(filename)}",
        }

    obj = extracted.attachment(bucket, key)
    if obj is None:
        log.warning("object gone", extra={"key": key, "reason": "deleted before extraction"})
        return {"key": key, "status": "gone"}
    size, etag = int(obj.get("ContentLength", 0)), str(obj.get("ETag", "")).strip('"')
    started = time.perf_counter()
    try:
        if size > cfg.max_input_bytes:
            obj["Body"].close()  # never download what we will not parse
            raise textextract.RejectedError(
                f"input is {size} bytes, over the {cfg.max_input_bytes}-byte limit"
            )
        data = obj["Body"].read()
        limits = _limits(cfg, context)  # after the download: the budget is the time left now
        try:
            result = textextract.extract(data, filename, limits)
        except textextract.RejectedError:
            raise
        except Exception as exc:  # a bug of ours must still leave a record, and say so loudly
            # its type and where, never its message: a parser's message can quote the document
            log.error(
                "extractor failed",
                extra={"key": key, "error_type": type(exc).__name__, "stack": _frames(exc)},
            )
            raise textextract.RejectedError(
                f"extractor failed ({type(exc).__name__}); see the function's log"
            ) from None
        finally:
            del data
    except textextract.RejectedError as rejected:
        return _rejected(cfg, bucket, key, rejected.reason, size, etag)

    ms = int((time.perf_counter() - started) * 1000)
    extracted.record_text(bucket, key, result.text, _text_metadata(result, ms, etag))
    outcomes.record(cfg, outcomes.Outcome.TEXT_READY, _about(key, size, result))
    details: dict[str, Any] = {
        "key": key,
        "pages": result.pages,
        "characters": len(result.text),
        "extraction_ms": ms,
        "kind": result.kind,
        "peak_rss_mb": result.peak_rss_mb,
        "warnings": result.warnings,
        "truncated": result.truncated,
    }
    if result.unreadable_pages:
        details["unreadable_pages"] = {
            str(page): loggable(reason)
            for page, reason in sorted(result.unreadable_pages.items())[:MAX_LISTED]
        }
    if result.unreadable_pages or result.truncated or result.warnings:
        log.warning("attachment extracted in part", extra=details)
    else:
        log.info("attachment extracted", extra=details)
    return {
        "key": key,
        "status": "extracted",
        "outputKey": layout.extracted_text(key),
        "pages": result.pages,
        "characters": len(result.text),
        "truncated": result.truncated,
        "warnings": result.warnings,
        "unreadablePages": sorted(result.unreadable_pages),
    }


def _frames(exc: BaseException) -> list[str]:
    """Where ``exc`` was raised: file, line and function of each frame, no source line or message."""

    return [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)][-8:]


def _about(key: str, size: int, result: textextract.Extraction | None = None) -> outcomes.Mail:
    """An attachment's outcome: its mail's ids from its key (``attachments/<cid>/<id>/<file>``), its
    size and, once extracted, its text's."""
    _, cid, mid, filename = key.split("/", 3)
    sizes = {"bytes": size}
    if result is not None:
        sizes |= {"characters": len(result.text), "pages": result.pages or 0}
    return outcomes.Mail(mid, cid, sizes={k: v for k, v in sizes.items() if v}, attachment=filename)


def _rejected(
    cfg: ExtractorConfig, bucket: str, key: str, reason: str, size: int, etag: str
) -> dict[str, Any]:
    """The error record of an attachment that was not extracted, beside where its text would be."""
    record = {
        "source": key,
        "reason": reason,
        "extension": textextract.extension(key.rsplit("/", 1)[1]),
        "bytes": size,
        "etag": etag,
    }
    error_key = extracted.record_rejection(bucket, key, record)
    log.warning("attachment rejected", extra={"key": key, "reason": loggable(reason)})
    # The reason's head only: what follows it quotes the document (common/extractor/errors.py).
    outcomes.record(cfg, outcomes.Outcome.EXTRACTION_ERROR, _about(key, size), loggable(reason))
    return {
        "key": key,
        "status": "rejected",
        "reason": reason,
        "errorKey": error_key,
    }


def _text_metadata(result: textextract.Extraction, ms: int, etag: str) -> dict[str, str]:
    """The extracted text's S3 metadata: what the extraction found, its time and the source's ETag."""
    metadata = {
        "characters": str(len(result.text)),
        "extraction-ms": str(ms),
        "extractor": result.extractor,
        "extractor-version": result.extractor_version,
        "source-etag": etag,
    }
    if result.pages is not None:  # a DOCX says how many pages only if Word saved the count
        metadata["pages"] = str(result.pages)
    if result.truncated:
        metadata["truncated"] = "; ".join(result.truncated)[:512]
    if result.warnings:
        metadata["warnings"] = ",".join(result.warnings)
    listed = {"unreadable-pages": sorted(result.unreadable_pages), "suspect-pages": result.suspect_pages}
    if "no-text-layer" not in result.warnings:  # when no page has text, the warning says it all
        listed["pages-without-text"] = result.pages_without_text
    metadata.update((name, page_ranges(pages)) for name, pages in listed.items() if pages)
    # S3 sends user metadata as HTTP headers: ASCII only.
    return {name: value.encode("ascii", "replace").decode() for name, value in metadata.items()}


def page_ranges(pages: list[int]) -> str:
    """[1, 2, 3, 7, 9, 10] -> "1-3,7,9-10", at most MAX_LISTED ranges ("..." when more)."""
    ranges: list[str] = []
    start = previous = pages[0]
    for page in [*pages[1:], None]:
        if page is not None and page == previous + 1:
            previous = page
            continue
        ranges.append(str(start) if start == previous else f"{start}-{previous}")
        if page is not None:
            start = previous = page
    return ",".join(ranges[:MAX_LISTED]) + (",..." if len(ranges) > MAX_LISTED else "")
