"""Shared setup for the extractor's integration and container tests: the S3 round trip, the
real-world corpus (../shared/corpus/docs, read-only, never copied) and the hostile cases."""

from __future__ import annotations

import copy
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import boto3
import pytest

from tests.conftest import IN_CI, REPO, load_event
from tests.support import docgen

BUCKET = "service-email-handler-local-mail"
PREFIX = "attachments/jane-smith-linkedin-a1b2c3/0000msg1/"
TEXT_PREFIX = "extracted-text/" + PREFIX[len("attachments/") :]
# As on AWS: the function's memory and timeout (deploy/functions.py), which the
# extractor reads to size its child (the RIE would otherwise report 3008 MB and 300 s).
FUNCTION_ENV = {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_LAMBDA_FUNCTION_TIMEOUT": "60"}
# The corpus checks what each document comes out as, and with the production budget (50 s) that depends
# on the machine: under the suites' own load a 51-page PDF reached it and came out `truncated`. So the
# corpus runs get a budget no machine the suites run on reaches (the hostile files test the budget
# itself, with the production timeout), and their invocations wait as long.
CORPUS_BUDGET_S = 600
CORPUS_ENV = {
    **FUNCTION_ENV,
    "AWS_LAMBDA_FUNCTION_TIMEOUT": str(CORPUS_BUDGET_S + 60),
    "EXTRACT_TIME_BUDGET_SECONDS": str(CORPUS_BUDGET_S),
}
CORPUS_INVOKE_TIMEOUT_S = CORPUS_BUDGET_S + 120


def sample_files() -> dict[str, bytes]:
    return {
        "My CV (2026).PDF": docgen.make_pdf(["Jane Smith\nSenior Engineer", "Experience: Zürich, Café"]),
        "Job Spec.docx": docgen.make_docx(
            ["Role description"], table=[["Salary", "€100k"]], header="ACME", footer="p1"
        ),
        "locked.pdf": docgen.encrypt_pdf(docgen.make_pdf(["x"]), "pw"),
        "not really.pdf": b"plain text pretending",
        "bomb.docx": docgen.cached("docx-xml-bomb", docgen.docx_xml_bomb),
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


def outputs(s3: Any, prefix: str = "extracted-text/") -> dict[str, tuple[bytes, dict[str, str]]]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    out = {}
    for obj in listed:
        got = s3.get_object(Bucket=BUCKET, Key=obj["Key"])
        out[obj["Key"]] = (got["Body"].read(), got["Metadata"])
    return out


def error_reason(body: bytes) -> str:
    return str(json.loads(body)["reason"])


@pytest.fixture(name="s3")
def empty_mail_bucket(moto_server: str) -> Iterator[Any]:
    """An S3 client and the empty local mail bucket on the session's moto server, removed afterwards."""
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    clear(client)
    yield client
    clear(client)
    client.delete_bucket(Bucket=BUCKET)


def clear(s3: Any) -> None:
    for obj in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=obj["Key"])


def record_for(s3: Any, name: str) -> tuple[str, bytes, dict[str, str]]:
    """("text" | "error", body, metadata) of one attachment; fails unless exactly one record exists."""
    out = outputs(s3, TEXT_PREFIX + name)
    kinds = {key[len(TEXT_PREFIX + name) :]: value for key, value in out.items()}
    assert set(kinds) in ({".txt"}, {".error.json"}), f"{name}: records {sorted(kinds)}"
    suffix = next(iter(kinds))
    return ("text" if suffix == ".txt" else "error", *kinds[suffix])


# --- the real-world corpus ---------------------------------------------------------------------


def corpus_dir() -> Path | None:
    """``CORPUS_DOCS``, else ``shared/corpus/docs`` beside the repository or its worktree root."""
    candidates = [os.environ.get("CORPUS_DOCS", "")] + [
        str(p / "shared" / "corpus" / "docs") for p in REPO.parents[:2]
    ]
    return next((Path(c) for c in candidates if c and Path(c).is_dir()), None)


# Real-world documents the repository carries itself (each folder with its licence), run with the corpus.
FIXTURE_DOCS = REPO / "tests" / "fixtures" / "docs"


def corpus_files() -> list[Path]:
    root = corpus_dir()
    if root is None:
        return []
    roots = (root, FIXTURE_DOCS)
    return sorted(p for r in roots for p in r.rglob("*") if p.suffix.lower() in (".pdf", ".docx"))


def require_corpus(files: list[Path]) -> None:
    if not files:
        if IN_CI:
            pytest.fail("CI=true and no document corpus: set CORPUS_DOCS to ../shared/corpus/docs")
        pytest.skip("no document corpus (set CORPUS_DOCS)")


# What the corpus files must give beyond "one record": the rest must be text.
CORPUS_ERRORS = {
    "005-libreoffice-writer-password__libreoffice-writer-password.pdf": "encrypted PDF needs a password",
}
CORPUS_WARNINGS = {
    **dict.fromkeys(
        [
            "007-imagemagick-images__imagemagick-ASCII85Decode.pdf",
            "007-imagemagick-images__imagemagick-CCITTFaxDecode.pdf",
            "007-imagemagick-images__imagemagick-lzw.pdf",
            "019-grayscale-image__grayscale-image.pdf",
            "023-cmyk-image__cmyk-image.pdf",
        ],
        "no-text-layer",
    ),  # images only
    # Its /Pages object is missing: pages found by type, two of them stale revisions of garbage.
    "017-unreadable-meta-data__unreadablemetadata.pdf": "suspect-encoding,page-tree-missing",
    # No startxref line: read through a cross-reference table rebuilt from the objects.
    "simple1.pdf": "xref-rebuilt",
    "simple3.pdf": "suspect-encoding,xref-rebuilt",  # its font's /Differences name glyphs oddly
    "contrib__issue-1113-evil-xobjects.pdf": "xref-rebuilt",
}
CORPUS_TEXT = {  # (pages, words that must be there)
    "001-trivial__minimal-document.pdf": (1, "Lorem ipsum dolor sit amet"),
    "004-pdflatex-4-pages__pdflatex-4-pages.pdf": (4, "Hello, here is some text without a meaning"),
    "009-pdflatex-geotopo__GeoTopo-komprimiert.pdf": (117, "Geometrie und Topologie"),
    "011-google-doc-document__google-doc-document.pdf": (1, "Beautiful is better than ugly."),
    "015-arabic__habibi.pdf": (1, "حَبيبي habibi"),
    "026-latex-multicolumn__multicolumn.pdf": (3, "Two-Column Document with Lorem Ipsum"),
    "017-unreadable-meta-data__unreadablemetadata.pdf": (3, "Rotary Potentiometer"),
    "simple1.pdf": (1, "Hello World"),
    "simple3.pdf": (1, "World"),
    "contrib__issue-1113-evil-xobjects.pdf": (1, "Hello world"),
}


def check_corpus_record(path: Path, kind: str, body: bytes, metadata: dict[str, str]) -> None:
    """What every corpus file must come out as, whichever way it went through the handler."""
    if path.name in CORPUS_ERRORS:
        assert kind == "error" and error_reason(body) == CORPUS_ERRORS[path.name], body
        return
    assert kind == "text", body
    text = body.decode("utf-8")
    assert int(metadata["characters"]) == len(text)
    assert "truncated" not in metadata and "unreadable-pages" not in metadata, metadata
    if path.suffix == ".pdf":
        assert int(metadata["pages"]) == text.count("\f") + 1
        assert metadata.get("warnings") == CORPUS_WARNINGS.get(path.name), metadata
        if path.name in CORPUS_TEXT:
            pages, words = CORPUS_TEXT[path.name]
            assert int(metadata["pages"]) == pages and words in text
    else:  # nothing python-docx finds in the body is missing, whatever else (notes, boxes) comes too
        lines = set(text.split("\n"))
        for paragraph in python_docx_paragraphs(path.read_bytes()):
            assert paragraph in lines, paragraph


def python_docx_paragraphs(data: bytes) -> list[str]:
    import docx

    document = docx.Document(io.BytesIO(data))
    return [p.text for p in document.paragraphs if p.text.strip()]


# --- hostile files -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    """One hostile file (tests/support/docgen.py) and what it must come out as, within the function's
    timeout."""

    name: str  # the attachment's file name (its extension is what the handler dispatches on)
    build: Callable[[], bytes]
    kind: str  # "text" | "error"
    expect: str  # error: the reason's start; text: words the text must contain
    metadata: dict[str, str] = field(default_factory=dict)  # text: how metadata values must start
    env: dict[str, str] = field(default_factory=dict)
    memory_mb: int = 256
    max_extraction_ms: int | None = None  # text: the ``extraction-ms`` metadata must not exceed it

    def data(self) -> bytes:
        return docgen.cached(self.name, self.build)

    @property
    def timeout_s(self) -> float:
        return float({**FUNCTION_ENV, **self.env}["AWS_LAMBDA_FUNCTION_TIMEOUT"])


HOSTILE = [
    Hostile(
        "lying-zip-sizes.docx",
        docgen.docx_lying_sizes,
        "error",
        "damaged DOCX: part word/document.xml: BadZipFile: Bad CRC-32",
    ),
    Hostile(
        "xml-bomb-1gb.docx",
        docgen.docx_xml_bomb,
        "error",
        "DOCX part inflates to more than 64 MB, possible zip bomb: word/document.xml",
    ),
    Hostile("99mb-xml.docx", docgen.docx_huge_xml, "text", "", metadata={"truncated": "characters"}),
    Hostile("media-bomb.docx", docgen.zip_bomb_docx, "text", "innocent"),
    Hostile(
        "3000-parts.docx",
        docgen.many_parts_docx,
        "error",
        "DOCX has 3017 parts (limit 2000): possible zip bomb",
    ),
    Hostile("billion-laughs.docx", docgen.docx_with_dtd, "error", "DOCX part declares a DTD"),
    Hostile(
        "encrypted-office.docx",
        docgen.ole_encrypted_docx,
        "error",
        "password-protected DOCX (Office encryption)",
    ),
    Hostile("truncated.docx", docgen.truncated_docx, "error", "truncated DOCX"),
    Hostile("empty.pdf", lambda: b"", "error", "empty file (0 bytes)"),
    Hostile(
        "length-999999999.pdf",
        lambda: docgen.make_pdf(["page one", "page two", "page three"], broken_pages=(2,)),
        "text",
        "page three",
        metadata={"unreadable-pages": "2", "pages": "3"},
    ),
    Hostile(
        "deep-page-tree.pdf", docgen.pdf_deep_page_tree, "error", "page tree nested deeper than 256 levels"
    ),
    Hostile(
        "500mb-content-stream.pdf",
        docgen.pdf_content_bomb,
        "text",
        "Before the bomb",
        metadata={"unreadable-pages": "2"},
    ),
    Hostile(
        "100000-pages.pdf",
        docgen.pdf_many_pages,
        "text",
        "same page",
        metadata={"pages": "500", "truncated": "pages (limit 500, the document claims 100000)"},
    ),
    Hostile(
        "aes-no-copy-no-print.pdf",
        lambda: docgen.encrypt_pdf(docgen.make_pdf(["AES protected words"]), "", "AES-256"),
        "text",
        "AES protected words",
    ),
    Hostile("scan.pdf", docgen.pdf_scanned, "text", "", metadata={"warnings": "no-text-layer"}),
    Hostile(
        "cjk-identity-h.pdf",
        docgen.pdf_identity_h_without_tounicode,
        "text",
        "",
        metadata={"warnings": "suspect-encoding", "suspect-pages": "1"},
    ),
    # The time budget follows the function's timeout: 20 s leaves at most 15 s for the parse
    # (pypdf needs about 20 s per page of this file), 60 s would leave 50. Page 2 meets the 5 s page
    # limit and a new child goes on; which limit then stops that child, the budget or the page limit
    # again, depends on how fast this machine is at the time. Either way the run ends within the
    # budget (15 s, and the second it takes to stop a child). Whether page 2 is recorded as
    # unreadable also depends on the machine's speed (a loaded machine has no budget left for a new
    # child after it), so only what holds at any speed is compared: page 1's text and the truncation.
    Hostile(
        "form-xobject-time-bomb.pdf",
        docgen.pdf_xobject_time_bomb,
        "text",
        "Ordinary first page",
        metadata={"truncated": "stopped at the "},
        env={"AWS_LAMBDA_FUNCTION_TIMEOUT": "20"},
        max_extraction_ms=16_000,
    ),
    # A 160 MB function: its child gets what is left of 160 MB (about 45 MB), and pypdf's table of
    # 2,000,000 cross-reference entries (291 MB on the host) ends as a record, not an OOM kill.
    Hostile(
        "xref-2m-entries.pdf",
        docgen.pdf_xref_bomb,
        "error",
        "PDF could not be opened: needs more than the",
        env={"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "160"},
        memory_mb=160,
    ),
]


def check_hostile(case: Hostile, kind: str, body: bytes, metadata: dict[str, str]) -> None:
    if case.kind == "error":
        assert kind == "error", body[:300]
        assert error_reason(body).startswith(case.expect), error_reason(body)
        return
    assert kind == "text", body[:300]
    assert case.expect in body.decode("utf-8")
    for name, value in case.metadata.items():
        assert metadata.get(name, "").startswith(value), (name, metadata)
    if case.max_extraction_ms is not None:
        assert int(metadata["extraction-ms"]) <= case.max_extraction_ms, metadata
