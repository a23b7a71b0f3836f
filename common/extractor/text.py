"""PDF and DOCX to text, with limits. Pure logic: bytes in, text out; no AWS here.

pypdf and python-docx are imported only when a file of that kind arrives, so the other
functions (and other attachment types) never pay for them.
"""

from __future__ import annotations

import io
import signal
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from common.mail.sanitize import extension

PDF_MAGIC = b"%PDF-"
ZIP_MAGIC = b"PK\x03\x04"
# DOCX zip-bomb guards: a real CV or job spec is far below both.
MAX_DOCX_UNCOMPRESSED = 100 * 1024 * 1024
MAX_DOCX_PARTS = 2000
MAX_COMPRESSION_RATIO = 200


class Rejected(Exception):
    """The file cannot be turned into text; ``reason`` says why (goes into the error record)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    max_input_bytes: int = 25 * 1024 * 1024
    max_pages: int = 500
    max_output_chars: int = 2_000_000
    time_budget_s: float = 50.0


@dataclass
class Extraction:
    text: str
    kind: str  # "pdf" | "docx"
    extractor: str
    extractor_version: str
    pages: int = 0
    truncated: list[str] = field(default_factory=list)  # which limits cut the output


def detect(data: bytes) -> str | None:
    """'pdf' | 'docx' | None by content (magic bytes); the extension is only a hint."""
    if PDF_MAGIC in data[:1024]:  # the spec tolerates junk before the header
        return "pdf"
    if data.startswith(ZIP_MAGIC):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                if "word/document.xml" in z.namelist():
                    return "docx"
        except zipfile.BadZipFile:
            return None
    return None


def extract(data: bytes, filename: str, limits: Limits) -> Extraction:
    if len(data) > limits.max_input_bytes:
        raise Rejected(f"input is {len(data)} bytes, over the {limits.max_input_bytes}-byte limit")
    kind = detect(data)
    ext = extension(filename)
    if kind is None:
        if ext in ("pdf", "docx"):
            raise Rejected(f"content is not a {ext.upper()} file (magic bytes do not match)")
        raise Rejected(f"unsupported file type '.{ext}'")
    with _time_budget(limits.time_budget_s):
        result = _pdf(data, limits) if kind == "pdf" else _docx(data, limits)
    if len(result.text) > limits.max_output_chars:
        result.text = result.text[: limits.max_output_chars]
        result.truncated.append("characters")
    return result


class _OutOfTime(Exception):
    pass


@contextmanager
def _time_budget(seconds: float) -> Iterator[None]:
    """Interrupt a runaway parse (pathological object streams) with SIGALRM on the main thread."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def _alarm(signum: int, frame: object) -> None:
        raise _OutOfTime()

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _OutOfTime:
        raise Rejected(f"extraction exceeded the {seconds:g} s time budget") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _pdf(data: bytes, limits: Limits) -> Extraction:
    import pypdf
    from pypdf.errors import PdfReadError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # e.g. AES without a crypto provider
                raise Rejected(f"encrypted PDF cannot be opened: {exc}") from None
            if not opened:
                raise Rejected("encrypted PDF needs a password")
        present = len(reader.pages)  # pypdf counts the real page tree, not /Count
        claimed = _claimed_pages(reader, present)
    except Rejected:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise Rejected(f"corrupt PDF: {type(exc).__name__}: {exc}") from None
    result = Extraction("", "pdf", "pypdf", pypdf.__version__)
    texts: list[str] = []
    chars = 0
    for index in range(min(present, limits.max_pages)):
        try:
            page_text = reader.pages[index].extract_text() or ""
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
            if index == 0:
                raise Rejected(f"corrupt PDF: page 1: {type(exc).__name__}: {exc}") from None
            result.truncated.append(f"unreadable page {index + 1}")
            break
        texts.append(page_text)
        chars += len(page_text)
        if chars > limits.max_output_chars:
            break
    if claimed != present:
        result.truncated.append(f"pages ({claimed} claimed, {present} present)")
    if present > limits.max_pages:
        result.truncated.append(f"pages ({present} present, limit {limits.max_pages})")
    result.pages = len(texts)
    result.text = "\f".join(texts)  # form feeds keep page boundaries
    return result


def _claimed_pages(reader: object, present: int) -> int:
    try:
        return int(reader.trailer["/Root"]["/Pages"]["/Count"])  # type: ignore[attr-defined]
    except (KeyError, TypeError, ValueError):
        return present


def _docx(data: bytes, limits: Limits) -> Extraction:
    _check_zip(data)
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises a variety (KeyError, ValueError, lxml errors)
        raise Rejected(f"corrupt DOCX: {type(exc).__name__}: {exc}") from None

    def blocks(container: object) -> Iterator[str]:
        for item in container.iter_inner_content():  # type: ignore[attr-defined]
            if isinstance(item, Paragraph):
                yield item.text
            elif isinstance(item, Table):
                for row in item.rows:
                    yield "\t".join(cell.text.replace("\n", " ") for cell in row.cells)

    parts: list[str] = []
    seen_parts: set[int] = set()
    headers: list[str] = []
    footers: list[str] = []
    for section in document.sections:
        for target, part in ((headers, section.header), (footers, section.footer)):
            if part.is_linked_to_previous or id(part.part) in seen_parts:
                continue
            seen_parts.add(id(part.part))
            target.extend(line for line in blocks(part) if line.strip())
    parts.extend(headers)
    parts.extend(blocks(document))
    parts.extend(footers)
    result = Extraction("\n".join(parts), "docx", "python-docx", docx.__version__)
    result.pages = len(document.sections)
    return result


def _check_zip(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
    except zipfile.BadZipFile as exc:
        raise Rejected(f"corrupt DOCX: {exc}") from None
    if len(infos) > MAX_DOCX_PARTS:
        raise Rejected(f"DOCX has {len(infos)} parts (limit {MAX_DOCX_PARTS}): possible zip bomb")
    total = sum(i.file_size for i in infos)
    if total > MAX_DOCX_UNCOMPRESSED:
        raise Rejected(f"DOCX expands to {total} bytes (limit {MAX_DOCX_UNCOMPRESSED}): possible zip bomb")
    for i in infos:
        if i.compress_size and i.file_size / i.compress_size > MAX_COMPRESSION_RATIO and i.file_size > 1_000_000:
            raise Rejected(f"DOCX part {i.filename} compresses {i.file_size // i.compress_size}:1: possible zip bomb")

