"""PDF and DOCX to text, with limits that hold. Pure logic: bytes in, text out; no AWS here.

Every parse runs in a child process (common.extractor.isolate) with an address-space limit and
a SIGKILL deadline; the child streams pages (PDF) or lines (DOCX) back as it goes. Running out of
memory or time therefore ends in an error record or in partial text marked as truncated, never in
a dead invocation. PDF pages are read one by one: an unreadable page is left empty and listed,
and a page that kills its child (memory, crash, page time limit) is skipped by a new child that
carries on from the next page.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from common.extractor import isolate, ooxml, pdf
from common.extractor.errors import RejectedError
from common.mail.charsets import well_formed
from common.mail.sanitize import extension

__all__ = ["Extraction", "Limits", "RejectedError", "detect", "extension", "extract"]

MB = 1024 * 1024
PDF_MAGIC = b"%PDF-"
ZIP_MAGIC = b"PK\x03\x04"
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
MAX_RESTARTS = 8  # children started after one was lost on a page
# What a mismatched file most often is, for the reason text.
_KNOWN = (
    (b"{\\rtf", "an RTF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"<!DOCTYPE html", "an HTML page"),
    (b"<html", "an HTML page"),
    (b"Rar!", "a RAR archive"),
    (b"\x1f\x8b", "a gzip file"),
)


@dataclass(frozen=True)
class Limits:
    max_input_bytes: int = 25 * MB
    max_pages: int = 500
    max_output_chars: int = 2_000_000
    time_budget_s: float = 50.0
    memory_bytes: int = 192 * MB  # the most address space one parse may add
    sandbox: isolate.Sandbox | None = None  # the function's memory: a parse gets what is left of it
    page_time_s: float | None = None  # one PDF page; default a quarter of the budget, at least 5 s

    @property
    def page_time(self) -> float:
        return self.page_time_s if self.page_time_s is not None else max(5.0, self.time_budget_s / 4)

    def allowance(self) -> int:
        """Measured just before each fork, when the input, boto3 and pypdf are resident in this process."""
        return min(self.memory_bytes, isolate.child_allowance(self.sandbox))


@dataclass
class Extraction:
    text: str
    kind: str  # "pdf" | "docx"
    extractor: str
    extractor_version: str
    pages: int | None = None  # PDF: pages in the text (form feeds between); DOCX: Word's count, if saved
    truncated: list[str] = field(default_factory=list)  # which limits cut the output
    unreadable_pages: dict[int, str] = field(default_factory=dict)  # 1-based page -> reason
    pages_without_text: list[int] = field(default_factory=list)
    suspect_pages: list[int] = field(default_factory=list)
    warnings: list[str] = field(
        default_factory=list
    )  # "no-text-layer", "suspect-encoding", "page-tree-missing", "xref-rebuilt"
    peak_rss_mb: float = 0.0  # of the last child


def detect(data: bytes) -> str | None:
    """'pdf' | 'zip' | 'ole' by content (magic bytes); the extension is only a hint."""
    if PDF_MAGIC in data[:1024]:  # the spec tolerates junk before the header
        return "pdf"
    if data.startswith(ZIP_MAGIC):
        return "zip"
    if data.startswith(OLE_MAGIC):
        return "ole"
    return None


def extract(data: bytes, filename: str, limits: Limits) -> Extraction:
    if len(data) > limits.max_input_bytes:
        raise RejectedError(f"input is {len(data)} bytes, over the {limits.max_input_bytes}-byte limit")
    if not data:
        raise RejectedError("empty file (0 bytes)")
    kind, ext = detect(data), extension(filename)
    if kind == "ole":
        raise RejectedError(_ole_reason(data))
    if kind is None:
        if ext in ("pdf", "docx"):
            what = next((name for magic, name in _KNOWN if data[:64].lstrip().startswith(magic)), "")
            raise RejectedError(f"content is not a {ext.upper()} file ({what or _missing(ext)})")
        raise RejectedError(f"unsupported file type: .{ext}")
    deadline = time.monotonic() + limits.time_budget_s
    result = _pdf(data, limits, deadline) if kind == "pdf" else _docx(data, limits, deadline)
    result.text = well_formed(result.text)  # whatever the parser returned: storable as UTF-8
    if len(result.text) > limits.max_output_chars:
        result.text = result.text[: limits.max_output_chars]
    return result


def _missing(ext: str) -> str:
    return "no %PDF- header" if ext == "pdf" else "not a zip package"


def _ole_reason(data: bytes) -> str:
    if "EncryptedPackage".encode("utf-16-le") in data:
        return "password-protected DOCX (Office encryption): no text without the password"
    if "WordDocument".encode("utf-16-le") in data:
        return "legacy Word 97-2003 document (.doc), not DOCX"
    return "legacy Office (OLE) file, not PDF or DOCX"


def _events(
    target: Any, args: tuple[Any, ...], allowance: int, deadline: float, step_s: float | None = None
) -> closing[Generator[isolate.Event, None, None]]:
    return closing(isolate.run(target, args, memory_bytes=allowance, deadline=deadline, step_s=step_s))


def _pdf(data: bytes, limits: Limits, deadline: float) -> Extraction:
    import pypdf  # in the parent too: every child (and every restart) starts with it imported

    result = Extraction("", "pdf", "pypdf", pypdf.__version__)
    texts: list[str] = []
    info: dict[str, Any] | None = None
    walked: dict[str, Any] = {}
    chars, restarts = 0, 0
    while True:
        current: int | None = None  # the page a child is working on
        allowance = limits.allowance()
        try:
            with _events(
                pdf.events,
                (data, limits.max_pages, len(texts), allowance),
                allowance,
                deadline,
                limits.page_time,
            ) as events:
                for event in events:
                    tag = event[0]
                    if tag == "fatal":
                        raise RejectedError(event[1])
                    if tag == "info":
                        info = event[1]
                    elif tag == "begin":
                        current = event[1]
                    elif tag in ("page", "skip"):
                        current = None
                        chars += _add_page(result, texts, event)
                        if chars > limits.max_output_chars:
                            result.truncated.append("characters")
                            return _finish_pdf(result, texts, info, {})
                    elif tag == "walked":
                        walked = event[1]
                    elif tag == "end":
                        result.peak_rss_mb = max(result.peak_rss_mb, event[1]["peak_rss_mb"])
            break
        except isolate.StoppedError as stop:
            if info is None:
                raise RejectedError(f"PDF could not be opened: {stop.reason}") from None
            out_of_time = time.monotonic() >= deadline
            # Out of time between pages is the budget, not damage: a child restarted after a slow
            # page spends its first moments re-opening the file and walking back to that page.
            if current is None and not out_of_time:  # lost while walking the page tree, not on a page
                walked = {"damage": f"page tree: {stop.reason}"}
                break
            if (
                current is None or out_of_time or restarts >= MAX_RESTARTS
            ):  # the page in hand is not read either
                result.truncated.append(f"{stop.reason}: pages after {len(texts)} not read")
                break
            result.unreadable_pages[current + 1] = stop.reason
            texts.append("")
            restarts += 1
    return _finish_pdf(result, texts, info, walked)


def _add_page(result: Extraction, texts: list[str], event: tuple[Any, ...]) -> int:
    index = event[1]
    while len(texts) < index:  # never expected: keep page numbers aligned all the same
        texts.append("")
    if event[0] == "skip":
        result.unreadable_pages[index + 1] = event[2]
        texts.append("")
        return 0
    text, flags = event[2].replace("\f", "\n"), event[3]  # form feeds mean page boundaries, nothing else
    texts.append(text)
    if "no-text" in flags:
        result.pages_without_text.append(index + 1)
    if "suspect-encoding" in flags:
        result.suspect_pages.append(index + 1)
    return len(text)


def _finish_pdf(
    result: Extraction, texts: list[str], info: dict[str, Any] | None, walked: dict[str, Any]
) -> Extraction:
    claimed = info.get("claimed") if info else None
    damage = walked.get("damage", "")
    if not texts:
        if walked.get("recovered"):
            raise RejectedError("damaged PDF: the page tree (/Pages) is missing and no page object was found")
        raise RejectedError(damage or "PDF has no pages")
    if len(result.unreadable_pages) == len(texts):
        first = min(result.unreadable_pages)
        raise RejectedError(f"no page could be read (page {first}: {result.unreadable_pages[first]})")
    if damage:
        result.truncated.append(damage)
    if walked.get("more"):
        claims = f", the document claims {claimed}" if claimed else ""
        result.truncated.append(f"pages (limit {len(texts)}{claims})")
    elif walked.get("found") is not None and claimed is not None and claimed != walked["found"]:
        result.truncated.append(f"pages ({claimed} claimed, {walked.get('found')} present)")
    readable = len(texts) - len(result.unreadable_pages)
    if len(result.pages_without_text) == readable:
        result.warnings.append("no-text-layer")
    if result.suspect_pages:
        result.warnings.append("suspect-encoding")
    if walked.get("recovered"):  # order and completeness unknown; stale pages of old revisions possible
        result.warnings.append("page-tree-missing")
    if info and info.get("rebuilt"):  # read through a cross-reference table rebuilt from the objects
        result.warnings.append("xref-rebuilt")
    result.pages = len(texts)
    result.text = "\f".join(texts)  # form feeds keep page boundaries
    return result


def _docx(data: bytes, limits: Limits, deadline: float) -> Extraction:
    result = Extraction("", "docx", "ooxml", ooxml.READER_VERSION)
    lines: list[str] = []
    try:
        with _events(ooxml.events, (data, limits.max_output_chars), limits.allowance(), deadline) as events:
            for event in events:
                tag = event[0]
                if tag == "fatal":
                    raise RejectedError(event[1])
                if tag == "info":
                    result.pages = event[1]["pages"]
                elif tag == "lines":
                    lines.extend(event[1])
                elif tag == "truncated":
                    result.truncated.append(event[1])
                elif tag == "end":
                    result.peak_rss_mb = event[1]["peak_rss_mb"]
    except isolate.StoppedError as stop:
        if not lines:
            raise RejectedError(f"DOCX could not be read: {stop.reason}") from None
        result.truncated.append(f"{stop.reason}: text after line {len(lines)} not read")
    result.text = "\n".join(lines)
    return result
