"""DOCX to text: the package read straight from the zip, each XML part streamed through expat.

Why not python-docx (measured, see docs/decisions.md "Text extraction engines"): it inflates every part of the
package, media included, into memory and builds a full lxml tree of each XML part (a 99 MB
document.xml took 1.5 GB), and its text API leaves out footnotes, endnotes, comments, tracked
insertions, text boxes, content controls, simple fields and nested tables. Here nothing but the
XML parts that carry text is inflated, bytes are counted as they come out of the inflater (the zip
directory's sizes are not trusted), no tree is built, and parsing stops at the output limit.

Runs in the extraction child (common.extractor.isolate): it yields events, it never raises.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote
from xml.parsers import expat

from common.errors import EmailHandlerError
from common.extractor.errors import RejectedError, describe

READER_VERSION = "2"
MAX_PARTS = 2000
MAX_PART_BYTES = 64 * 1024 * 1024  # inflated XML per part; a 1,000-page thesis is ~10 MB
MAX_TOTAL_BYTES = 160 * 1024 * 1024  # inflated XML over all parts read
MAX_SMALL_PART = 1024 * 1024  # relationships, app.xml
CHUNK = 64 * 1024

W = (
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
)
MATH = (
    "http://schemas.openxmlformats.org/officeDocument/2006/math",
    "http://purl.oclc.org/ooxml/officeDocument/math",
)
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
# Subtrees whose text is not the document's: deleted or moved-away revisions, field codes,
# content-control properties (aliases, placeholders, list items), note separators.
SKIP = {"del", "moveFrom", "instrText", "delInstrText", "sdtPr", "rPr", "pPr", "fldData"}
NOTE_TYPES_SKIPPED = {"separator", "continuationSeparator", "continuationNotice"}
# (relationship type suffix, output group); the output keeps this order, headers first.
PARTS = (
    ("/header", "headers"),
    ("/footnotes", "notes"),
    ("/endnotes", "notes"),
    ("/footer", "footers"),
    ("/comments", "comments"),
)


class _StopParsingError(EmailHandlerError):
    """Ends the walk early once the text budget is used up."""


def events(data: bytes, max_chars: int) -> Iterator[tuple[Any, ...]]:
    try:
        package = _Package(data)
        main = package.main_part()
        related = package.relationships(main)
        yield ("info", {"pages": package.app_pages(), "version": READER_VERSION})
        budget = _Budget(max_chars)
        groups: dict[str, list[str]] = {"headers": [], "notes": [], "footers": [], "comments": []}
        for suffix, group in PARTS:
            groups[group].extend(sorted((t for r, t in related if r.endswith(suffix)), key=_natural))
        for name in groups["headers"]:
            yield from _part_lines(package, name, budget, keep_empty=False)
        yield from _part_lines(package, main, budget, keep_empty=True)
        for name in groups["notes"] + groups["footers"] + groups["comments"]:
            yield from _part_lines(package, name, budget, keep_empty=False)
    except RejectedError as rejected:
        yield ("fatal", rejected.reason)
    except _StopParsingError:
        yield ("truncated", "characters")
    except MemoryError:
        raise  # the isolation layer reports the limit
    except Exception as exc:  # zipfile/zlib/expat raise many types for damaged input
        yield ("fatal", f"damaged DOCX: {describe(exc)}")


def _part_lines(package: _Package, name: str, budget: _Budget, keep_empty: bool) -> Iterator[tuple[Any, ...]]:
    """Stream one part's lines, a batch after each inflated chunk, so a kill keeps what came before."""
    lines: list[str] = []

    def emit(line: str) -> None:
        if keep_empty or line.strip():
            lines.append(line)
            budget.spend(len(line) + 1)

    walker = _TextWalker(emit)
    try:
        for _ in package.feed(name, walker.parser()):
            if lines:
                yield ("lines", lines[:])
                lines.clear()
    except _StopParsingError:
        yield ("lines", lines[:])  # the lines up to the limit
        raise
    if lines:
        yield ("lines", lines[:])


class _Budget:
    def __init__(self, max_chars: int):
        self.left = max_chars

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _StopParsingError()


def _natural(name: str) -> tuple[int, str]:
    digits = "".join(c for c in name.rsplit("/", 1)[-1] if c.isdigit())
    return (int(digits) if digits else 0, name)


class _Package:
    """The zip as an OPC package: parts by name, relationships, bytes counted as inflated."""

    def __init__(self, data: bytes):
        if not data.startswith(b"PK\x03\x04"):
            raise RejectedError("content is not a DOCX file (not a zip package)")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            if b"PK\x05\x06" not in data[-(65536 + 22) :]:
                raise RejectedError(
                    "truncated DOCX: the zip's central directory is missing (file cut short)"
                ) from None
            raise RejectedError("damaged DOCX: the zip's central directory cannot be read") from None
        infos = self.zip.infolist()
        if len(infos) > MAX_PARTS:
            raise RejectedError(f"DOCX has {len(infos)} parts (limit {MAX_PARTS}): possible zip bomb")
        self.parts = {unquote(i.filename).lstrip("/").lower(): i for i in infos}
        self.inflated = 0

    def main_part(self) -> str:
        for rel_type, target in self.relationships(""):
            if rel_type.endswith("/officeDocument"):
                return target
        if "word/document.xml" in self.parts:
            return "word/document.xml"
        for folder, kind in (("xl/", "a spreadsheet (XLSX)"), ("ppt/", "a presentation (PPTX)")):
            if any(name.startswith(folder) for name in self.parts):
                raise RejectedError(f"not a Word document: the package is {kind}")
        raise RejectedError("not a Word document: the zip has no word/document.xml")

    def relationships(self, source: str) -> list[tuple[str, str]]:
        """[(type, target part)] of a part ("" for the package), internal targets only."""
        folder, base = posixpath.split(source)
        rels_name = posixpath.join(folder, "_rels", base + ".rels")
        if rels_name.lower() not in self.parts:
            return []
        found: list[tuple[str, str]] = []

        def start(name: str, attrs: dict[str, str]) -> None:
            if (
                name.endswith(" Relationship")
                and attrs.get("TargetMode") != "External"
                and attrs.get("Target")
            ):
                target = unquote(attrs["Target"])
                path = (
                    target.lstrip("/")
                    if target.startswith("/")
                    else posixpath.normpath(posixpath.join(folder, target))
                )
                found.append((attrs.get("Type", ""), path))

        parser = _new_parser()
        parser.StartElementHandler = start
        self.parse(rels_name, parser, MAX_SMALL_PART)
        return found

    def app_pages(self) -> int | None:
        """Pages as Word last counted them (docProps/app.xml); None when the file does not say."""
        target = next(
            (t for r, t in self.relationships("") if r.endswith("/extended-properties")), "docProps/app.xml"
        )
        if target.lower() not in self.parts:
            return None
        text: list[str] = []
        inside = [False]

        def start(name: str, attrs: dict[str, str]) -> None:
            inside[0] = name.rsplit(" ", 1)[-1] == "Pages"

        def end(name: str) -> None:
            inside[0] = False

        def chars(data: str) -> None:
            if inside[0]:
                text.append(data)

        parser = _new_parser()
        parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
        try:
            self.parse(target, parser, MAX_SMALL_PART)
        except RejectedError:
            return None
        value = "".join(text).strip()
        return int(value) if value.isdigit() and int(value) > 0 else None

    def parse(self, name: str, parser: Any, limit: int = MAX_PART_BYTES) -> None:
        for _ in self.feed(name, parser, limit):
            pass

    def feed(self, name: str, parser: Any, limit: int = MAX_PART_BYTES) -> Iterator[None]:
        """Inflate a part into ``parser`` chunk by chunk (yielding after each), counting real bytes."""
        info = self.parts.get(name.lower())
        if info is None:
            return  # a dangling relationship: nothing to read
        if info.flag_bits & 0x1:
            raise RejectedError(f"DOCX part is encrypted (zip encryption): {info.filename}")
        read = 0
        try:
            with self.zip.open(info) as stream:
                while chunk := stream.read(CHUNK):
                    read += len(chunk)
                    self.inflated += len(chunk)
                    if read > limit:
                        raise RejectedError(
                            f"DOCX part inflates to more than {limit // 2**20} MB, possible zip bomb: "
                            f"{info.filename}"
                        )
                    if self.inflated > MAX_TOTAL_BYTES:
                        raise RejectedError(
                            f"DOCX XML inflates to more than {MAX_TOTAL_BYTES // 2**20} MB: possible zip bomb"
                        )
                    parser.Parse(chunk, False)
                    yield
            parser.Parse(b"", True)
        except expat.ExpatError as exc:
            raise RejectedError(
                f"damaged DOCX: part {info.filename} is not well-formed XML "
                f"({expat.ErrorString(exc.code)}, line {exc.lineno})"
            ) from None
        except zipfile.BadZipFile as exc:
            raise RejectedError(f"damaged DOCX: part {info.filename}: {describe(exc)}") from None
        except EOFError:
            raise RejectedError(f"damaged DOCX: part {info.filename} is cut short") from None


def _new_parser() -> Any:
    """expat with namespaces ("uri local") and no DTDs: OOXML never has one, so any is hostile."""
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def no_dtd(*_: Any) -> None:
        raise RejectedError("DOCX part declares a DTD (never valid in OOXML): refused")

    parser.StartDoctypeDeclHandler = no_dtd
    parser.EntityDeclHandler = no_dtd
    return parser


class _TextWalker:
    """WordprocessingML to lines: paragraphs as lines, table rows as tab-separated cells.

    Everything under the part's root is walked, so text in insertions, hyperlinks, fields,
    content controls, smart tags and text boxes is found wherever it sits. In
    mc:AlternateContent only the first branch taken counts (Word writes a text box twice: as
    DrawingML in mc:Choice and as VML in mc:Fallback).
    """

    def __init__(self, emit: Callable[[str], None]):
        self.emit_document = emit
        self.path: list[str] = []  # local names of the open elements
        self.skip_depth = 0  # > 0 while inside a skipped subtree
        self.in_text = False
        self.paragraphs: list[list[str]] = []  # open paragraphs (text boxes nest them)
        self.cells: list[list[str]] = []  # open table cells: their paragraphs' texts
        self.rows: list[list[str]] = []  # open table rows: their cells' texts
        self.spans: list[int] = []  # per open cell: grid columns it covers (w:gridSpan)
        self.alternates: list[bool] = []  # per open mc:AlternateContent: has a branch been taken

    def parser(self) -> Any:
        parser = _new_parser()
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.end
        parser.CharacterDataHandler = self.chars
        return parser

    def _line(self, text: str) -> None:
        if self.cells:
            self.cells[-1].append(text)
        else:
            self.emit_document(text)

    def start(self, name: str, attrs: dict[str, str]) -> None:
        ns, _, local = name.rpartition(" ")
        parent = self.path[-1] if self.path else ""
        self.path.append(local)
        if self.skip_depth:
            self.skip_depth += 1
            return
        if ns == MC:
            self._start_alternate(local)
            return
        if ns in MATH:
            self.in_text = local == "t"
            return
        if ns not in W:
            return
        if local in SKIP or (local in ("footnote", "endnote") and _attr(attrs, "type") in NOTE_TYPES_SKIPPED):
            self.skip_depth = 1
        elif local == "p":
            self.paragraphs.append([])
        elif local == "t":
            self.in_text = True
        elif local == "tc":
            self.cells.append([])
            self.spans.append(1)
        elif local == "gridSpan" and parent == "tcPr" and self.spans:
            value = _attr(attrs, "val")
            self.spans[-1] = min(int(value), 64) if value.isdigit() and int(value) > 0 else 1
        elif local == "tr":
            self.rows.append([])
        elif self.paragraphs and parent == "r":
            self._run_character(local, attrs)

    def _start_alternate(self, local: str) -> None:
        """mc:AlternateContent: the first Choice or Fallback is read, the others skipped."""
        if local == "AlternateContent":
            self.alternates.append(False)
        elif local in ("Choice", "Fallback") and self.alternates:
            if self.alternates[-1]:
                self.skip_depth = 1
            else:
                self.alternates[-1] = True

    def _run_character(self, local: str, attrs: dict[str, str]) -> None:
        """A run's elements that stand for a character: tabs, line breaks, non-breaking hyphens."""
        if local in ("tab", "ptab"):
            self.paragraphs[-1].append("\t")
        elif local == "cr" or (local == "br" and _attr(attrs, "type") in ("", "textWrapping")):
            self.paragraphs[-1].append("\n")  # page and column breaks are layout, not text
        elif local == "noBreakHyphen":
            self.paragraphs[-1].append("-")

    def end(self, name: str) -> None:
        self.path.pop()
        if self.skip_depth:
            self.skip_depth -= 1
            return
        ns, _, local = name.rpartition(" ")
        if ns == MC:
            if local == "AlternateContent" and self.alternates:
                self.alternates.pop()
            return
        if ns in MATH:
            self.in_text = False
            return
        if ns not in W:
            return
        if local == "t":
            self.in_text = False
        elif local == "p" and self.paragraphs:
            self._line("".join(self.paragraphs.pop()))
        elif local == "tc" and self.cells:
            cell = " ".join(self.cells.pop()).replace("\n", " ").replace("\t", " ")
            span = self.spans.pop() if self.spans else 1
            if self.rows:  # a merged cell keeps the columns after it in place
                self.rows[-1].extend([cell] + [""] * (span - 1))
        elif local == "tr" and self.rows:
            self._line("\t".join(self.rows.pop()))

    def chars(self, data: str) -> None:
        if self.in_text and not self.skip_depth and self.paragraphs:
            self.paragraphs[-1].append(data)


def _attr(attrs: dict[str, str], local: str) -> str:
    for key, value in attrs.items():
        if key.rpartition(" ")[2] == local:
            return value
    return ""
