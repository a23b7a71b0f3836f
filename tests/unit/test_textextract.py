"""Text extraction on the host: ordinary files, the text people expect, clear reasons, hostile files.

Every extract() call below runs the real path: a forked child with its memory and time limits.
The same hostile files are asserted for time and peak memory inside the 256 MB image in
tests/docker/test_extractor_container.py.
"""

import json
import random
import time
from collections.abc import Callable

import pytest

from common.extractor import text as textextract
from common.extractor.errors import clean
from common.extractor.handler import page_ranges
from common.extractor.text import Limits, RejectedError
from tests.support import docgen

LIMITS = Limits()
MB = 1024 * 1024


def reject_reason(data: bytes, name: str, limits: Limits = LIMITS) -> str:
    with pytest.raises(RejectedError) as err:
        textextract.extract(data, name, limits)
    assert "0x" not in err.value.reason and " at " not in err.value.reason  # no addresses, no reprs
    return err.value.reason


# --- ordinary files ---------------------------------------------------------------------------


def test_pdf_pages_are_joined_with_form_feeds() -> None:
    pdf = docgen.make_pdf(["Page one\nsecond line", "Page two", "Café Zürich – naïve"])
    result = textextract.extract(pdf, "cv.pdf", LIMITS)
    pages = result.text.split("\f")
    assert len(pages) == 3 and result.pages == 3
    assert "Page one" in pages[0] and "second line" in pages[0]
    assert "Page two" in pages[1]
    assert "Café Zürich – naïve" in pages[2]
    assert (result.extractor, result.kind) == ("pypdf", "pdf")
    assert not result.warnings and not result.unreadable_pages and not result.truncated


def test_upper_case_extension_and_wrong_extension_use_content() -> None:
    pdf = docgen.make_pdf(["content decides"])
    assert "content decides" in textextract.extract(pdf, "CV.PDF", LIMITS).text
    assert textextract.extract(pdf, "misnamed.docx", LIMITS).kind == "pdf"
    assert textextract.extract(docgen.make_docx(["a docx"]), "misnamed.pdf", LIMITS).text == "a docx"


def test_docx_paragraphs_tables_headers_footers_in_order() -> None:
    data = docgen.make_docx(
        ["Intro paragraph", "日本語 and emoji 🎉"],
        table=[["Role", "Salary"], ["Engineer", "€100k"]],
        header="ACME Corp — Confidential",
        footer="Page footer",
        after_table=["Closing words"],
    )
    result = textextract.extract(data, "Job Spec.DOCX", LIMITS)
    lines = result.text.split("\n")
    assert lines[0] == "ACME Corp — Confidential"
    assert (
        lines.index("Intro paragraph")
        < lines.index("Role\tSalary")
        < lines.index("Engineer\t€100k")
        < lines.index("Closing words")
    )
    assert "日本語 and emoji 🎉" in lines
    assert lines[-1] == "Page footer"
    assert (result.extractor, result.kind) == ("ooxml", "docx")


# --- the text people expect (docs/extractor.md) ------------------------------------------------


def test_docx_text_from_every_place_word_keeps_it_once_and_nothing_it_hides() -> None:
    result = textextract.extract(docgen.docx_every_construct(), "every.docx", LIMITS)
    assert result.text.split("\n") == [
        "default header words",
        "first page header words",
        "even page header words",
        "Body first paragraph",
        "Kept words inserted words moved here words",  # w:ins and w:moveTo in; w:del and w:moveFrom out
        "Note anchor",
        "Commented words",
        "simple field result",  # w:fldSimple
        "complex field result",  # fldChar result without the instrText field code
        "block content control",  # w:sdt content, not its alias or placeholder
        "Before inline content control after",
        "text box words",  # once: mc:Choice taken, the VML copy in mc:Fallback skipped
        "Anchor of a box",
        "outer cell\tcell with table inner cell one inner cell two",  # a nested table stays in its cell
        "linked words",
        "left\tright",  # a w:tab in a run, not the tab stop in the paragraph properties
        "E=mc2",
        "footnote words",
        "endnote words",  # without the separator notes
        "default footer words",
        "first page footer words",
        "even page footer words",
        "comment words",
    ]
    assert result.pages == 7  # docProps/app.xml, as Word last counted


def test_docx_pages_unknown_without_app_xml_and_templates_extract() -> None:
    plain = docgen.docx_package(docgen._p(docgen._r("no page count saved")))
    assert textextract.extract(plain, "a.docx", LIMITS).pages is None
    template = textextract.extract(docgen.docx_template(), "letter.dotx.docx", LIMITS)
    assert template.text == "Template body words"


def test_docx_merged_cells_keep_the_columns_after_them() -> None:
    row = '<w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr>' + docgen._p(docgen._r("wide")) + "</w:tc>"
    table = f"<w:tbl><w:tr>{row}<w:tc>{docgen._p(docgen._r('right'))}</w:tc></w:tr></w:tbl>"
    assert textextract.extract(docgen.docx_package(table), "t.docx", LIMITS).text == "wide\t\tright"


def test_pdf_unreadable_pages_are_skipped_and_listed() -> None:
    pages = ["first words", "second words", "third words", "fourth words"]
    result = textextract.extract(docgen.make_pdf(pages, broken_pages=(1, 3)), "x.pdf", LIMITS)
    assert result.text.split("\f") == ["", "second words", "", "fourth words"]
    assert sorted(result.unreadable_pages) == [1, 3] and result.pages == 4
    assert (
        result.unreadable_pages[1]
        == "over a safety limit: Declared stream length of 999999999 exceeds maximum allowed length."
    )
    reason = reject_reason(docgen.make_pdf(["a", "b"], broken_pages=(1, 2)), "x.pdf")
    assert reason.startswith("no page could be read (page 1: over a safety limit")


def test_pdf_without_its_page_tree_is_read_from_its_page_objects() -> None:
    result = textextract.extract(docgen.pdf_without_page_tree(["first page", "second page"]), "x.pdf", LIMITS)
    assert result.text == "first page\fsecond page" and result.warnings == ["page-tree-missing"]
    no_pages = docgen.assemble_pdf({1: b"<< /Type /Catalog /Pages 9 0 R >>", 2: docgen.HELVETICA})
    assert (
        reject_reason(no_pages, "x.pdf")
        == "damaged PDF: the page tree (/Pages) is missing and no page object was found"
    )


def _xref_entries(pdf: bytes, keep: int) -> bytes:
    """``pdf`` with a cross-reference table that lists only its first ``keep`` objects."""
    head, _, tail = pdf.partition(b"xref\n")
    lines = tail.split(b"\n")
    size = int(lines[0].split()[1])
    return head + b"xref\n0 %d\n" % keep + b"\n".join(lines[1 : 1 + keep] + lines[1 + size :])


def test_a_pdf_without_startxref_is_read_through_a_rebuilt_cross_reference_table() -> None:
    """pdfminer.six's simple1.pdf shape: the file ends at its trailer (tests/fixtures/docs has it)."""
    pdf = docgen.make_pdf(["Hello World", "second page"])
    cut = pdf[: pdf.rindex(b"startxref")] + b"%%EOF\n"
    result = textextract.extract(cut, "x.pdf", LIMITS)
    assert result.text == "Hello World\fsecond page" and result.warnings == ["xref-rebuilt"]
    assert reject_reason(b"%PDF-1.4\n1 0 obj\n<< >>\nendobj\n%%EOF\n", "x.pdf").startswith("damaged PDF: ")


def test_pages_the_table_does_not_list_are_found_among_the_files_objects() -> None:
    """The page tree is gone and the table lists the catalog alone: the pages are still in the file."""
    damaged = _xref_entries(docgen.pdf_without_page_tree(["first page", "second page"]), 2)
    result = textextract.extract(damaged, "x.pdf", LIMITS)
    assert result.text == "first page\fsecond page" and result.warnings == ["page-tree-missing"]
    stale = _xref_entries(docgen.make_pdf(["one", "two"]), 2)  # a tree the table does not lead to
    assert textextract.extract(stale, "x.pdf", LIMITS).text == "one\ftwo"


def test_encrypted_pdfs_with_an_empty_user_password_open_and_others_say_password() -> None:
    pdf = docgen.make_pdf(["secret text"])
    for algorithm in ("RC4-128", "AES-128", "AES-256"):  # AES needs cryptography, in the image as on the host
        assert (
            "secret text" in textextract.extract(docgen.encrypt_pdf(pdf, "", algorithm), "e.pdf", LIMITS).text
        ), algorithm
    for algorithm in ("RC4-128", "AES-256"):
        assert (
            reject_reason(docgen.encrypt_pdf(pdf, "hunter2", algorithm), "e.pdf")
            == "encrypted PDF needs a password"
        )


# --- garbage reported as such (item 4) --------------------------------------------------------


def test_scans_have_no_text_layer_and_identity_fonts_without_tounicode_are_suspect() -> None:
    scan = textextract.extract(docgen.pdf_scanned(pages=2), "scan.pdf", LIMITS)
    assert scan.warnings == ["no-text-layer"] and scan.pages == 2 and not scan.text.strip()
    cjk = textextract.extract(docgen.pdf_identity_h_without_tounicode(), "cjk.pdf", LIMITS)
    assert cjk.warnings == ["suspect-encoding"] and cjk.suspect_pages == [1]
    ordinary = textextract.extract(docgen.make_pdf(["Zürich café"]), "ok.pdf", LIMITS)
    assert ordinary.warnings == [] and ordinary.suspect_pages == []


def test_a_blank_page_among_text_pages_is_listed_not_a_warning() -> None:
    result = textextract.extract(docgen.make_pdf(["words", " ", "more words"]), "x.pdf", LIMITS)
    assert result.pages_without_text == [2] and result.warnings == []


# --- clear reasons (item 5) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "name", "expected"),
    [
        (lambda: b"", "empty.pdf", "empty file (0 bytes)"),
        (lambda: b"", "empty.docx", "empty file (0 bytes)"),
        (
            docgen.ole_encrypted_docx,
            "locked.docx",
            "password-protected DOCX (Office encryption): no text without the password",
        ),
        (docgen.ole_legacy_doc, "old.docx", "legacy Word 97-2003 document (.doc), not DOCX"),
        (
            docgen.truncated_docx,
            "cut.docx",
            "truncated DOCX: the zip's central directory is missing (file cut short)",
        ),
        (lambda: b"GIF89a not really a pdf", "cv.pdf", "content is not a PDF file (a GIF image)"),
        (lambda: b"{\\rtf1\\ansi hello}", "cv.docx", "content is not a DOCX file (an RTF document)"),
        (lambda: b"plain words", "cv.pdf", "content is not a PDF file (no %PDF- header)"),
        (
            lambda: docgen.write_zip({"xl/workbook.xml": b"<a/>"}),
            "sheet.docx",
            "not a Word document: the package is a spreadsheet (XLSX)",
        ),
        (docgen.docx_with_dtd, "laughs.docx", "DOCX part declares a DTD (never valid in OOXML): refused"),
        (lambda: b"BEGIN:VCALENDAR", "invite.ics", "unsupported file type: .ics"),
    ],
)
def test_each_failure_has_its_own_precise_reason(
    build: Callable[[], bytes], name: str, expected: str
) -> None:
    assert reject_reason(build(), name) == expected


def test_damaged_files_say_what_is_damaged() -> None:
    assert reject_reason(b"%PDF-1.4\n" + b"\x00garbage" * 100, "x.pdf").startswith("damaged PDF: ")
    bad_xml = docgen.write_zip(
        {**docgen._members(docgen.make_docx(["x"])), "word/document.xml": b"<w:document><unclosed>"}
    )
    assert reject_reason(bad_xml, "x.docx").startswith(
        "damaged DOCX: part word/document.xml is not well-formed XML"
    )


def test_reasons_never_carry_memory_addresses() -> None:
    raw = "{'/Font': IndirectObject(3607, 0, 140389868798544)} <docx.opc.part.Part object at 0x7f3a2b1c9d90>"
    assert clean(raw) == "{'/Font': 3607 0 R} <docx.opc.part.Part object>"


# --- limits -----------------------------------------------------------------------------------


def test_pdf_claiming_thousands_of_pages_is_bounded() -> None:
    pdf = docgen.make_pdf(["real one", "real two"], claimed_pages=50_000)
    result = textextract.extract(pdf, "liar.pdf", Limits(max_pages=100))
    assert "real one" in result.text and result.pages == 2
    assert "pages (50000 claimed, 2 present)" in result.truncated
    many = textextract.extract(
        docgen.make_pdf([f"p{i}" for i in range(12)]), "long.pdf", Limits(max_pages=10)
    )
    assert many.pages == 10 and many.truncated == ["pages (limit 10, the document claims 12)"]


def test_limits_on_input_and_output() -> None:
    pdf = docgen.make_pdf(["x" * 80] * 3)
    assert (
        reject_reason(pdf, "a.pdf", Limits(max_input_bytes=100))
        == f"input is {len(pdf)} bytes, over the 100-byte limit"
    )
    result = textextract.extract(pdf, "a.pdf", Limits(max_output_chars=50))
    assert len(result.text) == 50 and "characters" in result.truncated
    docx = textextract.extract(docgen.make_docx(["y" * 80] * 3), "a.docx", Limits(max_output_chars=100))
    assert len(docx.text) <= 100 and docx.truncated == ["characters"]


def test_page_ranges_for_metadata() -> None:
    assert page_ranges([1, 2, 3, 7, 9, 10]) == "1-3,7,9-10"
    assert page_ranges(list(range(1, 200, 2)))[-4:] == ",..."


# --- hostile files on the host (tests/support/docgen.py) -----------------------------------------


def test_pdf_safety_limits_become_skipped_pages_or_reasons() -> None:
    bomb = textextract.extract(docgen.cached("pdf-content-bomb", docgen.pdf_content_bomb), "bomb.pdf", LIMITS)
    assert bomb.text == "Before the bomb\f" and bomb.unreadable_pages[2].startswith("over a safety limit")
    deep = reject_reason(docgen.cached("pdf-deep-tree", docgen.pdf_deep_page_tree), "deep.pdf")
    assert deep == "page tree nested deeper than 256 levels"


def test_hundred_thousand_pages_read_up_to_the_page_limit() -> None:
    started = time.monotonic()
    result = textextract.extract(docgen.cached("pdf-100k-pages", docgen.pdf_many_pages), "many.pdf", LIMITS)
    assert result.pages == 500 and result.text.count("same page") == 500
    assert result.truncated == ["pages (limit 500, the document claims 100000)"]
    assert time.monotonic() - started < 20


def test_time_budget_cannot_be_caught_by_the_parser() -> None:
    """pypdf's form-XObject code once swallowed the SIGALRM exception; a SIGKILL cannot be swallowed."""
    data = docgen.cached("pdf-xobject-bomb", docgen.pdf_xobject_time_bomb)
    started = time.monotonic()
    result = textextract.extract(data, "slow.pdf", Limits(time_budget_s=6, page_time_s=2))
    elapsed = time.monotonic() - started
    assert elapsed < 7, elapsed
    assert result.text.split("\f")[0] == "Ordinary first page"
    assert (
        result.unreadable_pages[2] == "stopped at the 2 s page time limit"
    )  # page 3 then starts in a new child
    assert result.truncated[-1].startswith("stopped at the time budget: pages after")


def test_a_parse_over_the_memory_limit_ends_as_a_reason() -> None:
    """pypdf tabulates 2,000,000 cross-reference entries of a 21 KB file before any page (291 MB);
    no pypdf limit stops it, the child's address-space limit does."""
    started = time.monotonic()
    reason = reject_reason(
        docgen.cached("xref-2m-entries.pdf", docgen.pdf_xref_bomb), "xref.pdf", Limits(memory_bytes=48 * MB)
    )
    assert reason == "PDF could not be opened: needs more than the 48 MB memory limit"
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    ("name", "build", "expected"),
    [
        (
            "docx-lying-sizes",
            docgen.docx_lying_sizes,
            "damaged DOCX: part word/document.xml: BadZipFile: Bad CRC-32",
        ),
        (
            "docx-xml-bomb",
            docgen.docx_xml_bomb,
            "DOCX part inflates to more than 64 MB, possible zip bomb: word/document.xml",
        ),
        ("docx-many-parts", docgen.many_parts_docx, "DOCX has 3017 parts (limit 2000): possible zip bomb"),
    ],
)
def test_docx_bombs_are_refused_on_bytes_actually_inflated(
    name: str, build: Callable[[], bytes], expected: str
) -> None:
    assert reject_reason(docgen.cached(name, build), f"{name}.docx").startswith(expected)


def test_docx_media_bomb_is_never_inflated_and_huge_xml_stops_at_the_output_limit() -> None:
    media = textextract.extract(docgen.cached("docx-media-bomb", docgen.zip_bomb_docx), "media.docx", LIMITS)
    assert media.text == "innocent"
    data = docgen.cached("docx-99mb-xml", docgen.docx_huge_xml)
    assert len(data) < 16 * MB
    result = textextract.extract(data, "huge.docx", LIMITS)
    assert len(result.text) == LIMITS.max_output_chars and result.truncated == ["characters"]


# --- every string a parser can return is stored ---------------------------------------------------


def test_a_pdf_whose_cmap_maps_glyphs_to_lone_surrogates_gets_its_text() -> None:
    """The file's own ToUnicode map sends A to U+D800 and C to U+DC00 (C before A: no pair)."""
    pdf = docgen.pdf_to_unicode({0x41: 0xD800, 0x42: 0x42, 0x43: 0xDC00}, b"ABCAB")
    result = textextract.extract(pdf, "crafted.pdf", LIMITS)
    assert result.text.encode("utf-8").decode("utf-8") == result.text  # storable as it is
    assert result.text.strip() == "\ufffdB\ufffd\ufffdB"
    assert result.warnings == ["suspect-encoding"] and result.suspect_pages == [1]
    paired = docgen.pdf_to_unicode({0x41: 0xD83D, 0x42: 0xDE00}, b"AB")  # a pair: the character it encodes
    assert textextract.extract(paired, "pair.pdf", LIMITS).text.strip() == "\U0001f600"


def _arbitrary(rng: random.Random) -> str:
    """A string of the characters a parser may hand back: lone surrogates, controls (NUL, form feed,
    C1), noncharacters, astral planes, the replacement character, plain text."""
    pools = [
        (0x20, 0x7E),
        (0x00, 0x1F),
        (0x7F, 0x9F),
        (0xD800, 0xDFFF),
        (0xFFF0, 0xFFFF),
        (0x100, 0xD7FF),
        (0xE000, 0xFFEF),
        (0x10000, 0x10FFFF),
    ]
    chars = []
    for _ in range(rng.randrange(0, 120)):
        low, high = rng.choice(pools)
        chars.append(chr(rng.randint(low, high)))
    return "".join(chars)


def _returning(strings: list[str], raising: set[int]) -> Callable[..., str]:
    """A stand-in for PageObject.extract_text: page i's text is strings[i], or it raises with it."""
    calls = iter(range(len(strings)))

    def extract_text(self: object, *args: object, **kwargs: object) -> str:
        i = next(calls)  # the child reads pages in order; each child starts from its own copy
        if i in raising:
            raise ValueError(f"glyph {strings[i][:20]}")
        return strings[i]

    return extract_text


def test_every_string_the_pdf_parser_may_return_reaches_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    """A property test (seeded, so a failure replays): whatever pypdf's extract_text returns for a
    page, or says when it raises, goes through the real path (the forked child, the page events,
    the handler, the record's write) and is stored as well-formed UTF-8, unchanged where it was
    well formed already."""
    import io

    import pypdf

    from common.aws import s3
    from common.extractor import handler
    from common.mail.charsets import well_formed
    from common.store import extracted
    from deploy import config

    rng = random.Random(20261127)
    pages = 40
    cfg = config.load({"DOMAIN_NAME": "example.com", "PUBLIC_EMAIL": "hello@example.com"})
    pdf = docgen.make_pdf([f"page {i}" for i in range(pages)])
    stored: dict[str, bytes] = {}
    monkeypatch.setattr(s3, "put", lambda bucket, key, body, *a, **k: stored.__setitem__(key, body))
    monkeypatch.setattr(s3, "delete", lambda bucket, key: None)
    monkeypatch.setattr(s3, "put_json", lambda b, key, doc: stored.__setitem__(key, json.dumps(doc).encode()))
    for round_ in range(6):
        strings = [_arbitrary(rng) for _ in range(pages)]
        raising = {i for i in range(pages) if rng.random() < 0.1}
        monkeypatch.setattr(pypdf.PageObject, "extract_text", _returning(strings, raising))
        monkeypatch.setattr(
            extracted,
            "attachment",
            lambda bucket, key: {"Body": io.BytesIO(pdf), "ContentLength": len(pdf), "ETag": '"e"'},
        )
        key = f"attachments/jane-at-corp.example/m{round_}/f.pdf"
        outcome = handler.extract_object(cfg, cfg.bucket, key)
        body = stored[f"extracted-text/jane-at-corp.example/m{round_}/f.pdf.txt"]
        text = body.decode("utf-8")  # strict: well-formed UTF-8
        assert outcome["status"] == "extracted" and outcome["characters"] == len(text)
        got = text.split("\f")
        assert len(got) == pages
        for i, page in enumerate(got):
            expected = "" if i in raising else well_formed(strings[i]).replace("\f", "\n")
            assert page == expected, (round_, i)
            if i not in raising and well_formed(strings[i]) == strings[i]:
                assert page == strings[i].replace("\f", "\n")  # nothing well formed is altered
        assert sorted(outcome["unreadablePages"]) == sorted(i + 1 for i in raising)
