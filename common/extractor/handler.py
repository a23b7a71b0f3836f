"""attachment-extractor logic: `attachments/<cid>/<id>/<file>` -> `extracted-text/<cid>/<id>/<file>.txt`.

A file that cannot be read (encrypted, corrupt, zip bomb, wrong content, over a limit) gets a
small JSON error record beside the output path and a WARNING; the invocation still succeeds so
S3 does not retry it forever. S3 errors (throttling, outages) propagate so the event is retried.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from common.aws import s3
from common.extractor import text as textextract
from common.runtime import events
from common.runtime.config import Config
from common.runtime.log import get_logger
from common.store import layout

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

log = get_logger("attachment-extractor")
SUPPORTED = ("pdf", "docx")


class ExtractorResult(TypedDict):
    status: Literal["ok"]
    results: list[dict[str, Any]]  # one per S3 record: extracted | rejected | skipped | ignored | gone


def handle(cfg: Config, event: Any, context: LambdaContext | None = None) -> ExtractorResult:
    results = [extract_object(cfg, obj.bucket, obj.key, context) for obj in events.s3_objects(event)]
    return {"status": "ok", "results": results}


def _limits(cfg: Config, context: LambdaContext | None) -> textextract.Limits:
    budget = cfg.extract_time_budget_s
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if callable(remaining):  # always leave time to write the result before Lambda's timeout
        budget = max(1.0, min(budget, remaining() / 1000 - 5))
    return textextract.Limits(cfg.max_input_bytes, cfg.max_pages, cfg.max_output_chars, budget)


def extract_object(cfg: Config, bucket: str, key: str, context: LambdaContext | None = None) -> dict[str, Any]:
    if not layout.is_attachment(key):
        log.warning("object ignored", extra={"key": key, "reason": "not attachments/<cid>/<id>/<file>"})
        return {"key": key, "status": "ignored", "reason": "not an attachment key"}
    filename = key.rsplit("/", 1)[1]
    if textextract.extension(filename) not in SUPPORTED:
        # Other stored types (ics, png, xlsx, ...) are kept as they are; nothing to import or parse.
        log.info("attachment not extracted", extra={"key": key, "reason": "type has no text extractor"})
        return {"key": key, "status": "skipped", "reason": f"no extractor for .{textextract.extension(filename)}"}

    limits = _limits(cfg, context)
    obj = s3.get(bucket, key)
    if obj is None:
        log.warning("object gone", extra={"key": key, "reason": "deleted before extraction"})
        return {"key": key, "status": "gone"}
    size, etag = int(obj.get("ContentLength", 0)), str(obj.get("ETag", "")).strip('"')
    started = time.perf_counter()
    try:
        if size > limits.max_input_bytes:
            obj["Body"].close()  # never download what we will not parse
            raise textextract.Rejected(f"input is {size} bytes, over the {limits.max_input_bytes}-byte limit")
        result = textextract.extract(obj["Body"].read(), filename, limits)
    except textextract.Rejected as rejected:
        record = {"source": key, "reason": rejected.reason, "extension": textextract.extension(filename),
                  "bytes": size, "etag": etag}
        s3.put_json(bucket, layout.extraction_error(key), record)
        log.warning("attachment rejected", extra={"key": key, "reason": rejected.reason})
        return {"key": key, "status": "rejected", "reason": rejected.reason, "errorKey": layout.extraction_error(key)}

    ms = int((time.perf_counter() - started) * 1000)
    metadata = {
        "pages": str(result.pages),
        "characters": str(len(result.text)),
        "extraction-ms": str(ms),
        "extractor": result.extractor,
        "extractor-version": result.extractor_version,
        "source-etag": etag,
    }
    if result.truncated:
        metadata["truncated"] = "; ".join(result.truncated)
    s3.put(bucket, layout.extracted_text(key), result.text.encode("utf-8"), "text/plain; charset=utf-8", metadata)
    s3.delete(bucket, layout.extraction_error(key))  # an earlier failure record is superseded (no-op if none)
    log.info("attachment extracted", extra={"key": key, "pages": result.pages, "characters": len(result.text),
                                            "extraction_ms": ms, "kind": result.kind})
    return {"key": key, "status": "extracted", "outputKey": layout.extracted_text(key), "pages": result.pages,
            "characters": len(result.text), "truncated": result.truncated}
