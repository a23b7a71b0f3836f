import pytest

from common.extractor import text as textextract
from common.extractor.text import Limits, Rejected
from tests.support import docgen

LIMITS = Limits()


def test_pdf_pages_are_joined_with_form_feeds() -> None:
    pdf = docgen.make_pdf(["Page one\nsecond line", "Page two", "Café Zürich – naïve"])
    result = textextract.extract(pdf, "cv.pdf", LIMITS)
    pages = result.text.split("\f")
    assert len(pages) == 3 and result.pages == 3
    assert "Page one" in pages[0] and "second line" in pages[0]
    assert "Page two" in pages[1]
    assert "Café Zürich – naïve" in pages[2]
    assert (result.extractor, result.kind) == ("pypdf", "pdf")


def test_upper_case_extension_and_wrong_extension_use_content() -> None:
    pdf = docgen.make_pdf(["content decides"])
    assert "content decides" in textextract.extract(pdf, "CV.PDF", LIMITS).text
    assert textextract.extract(pdf, "misnamed.docx", LIMITS).kind == "pdf"


def test_content_not_matching_extension_is_rejected_with_reason() -> None:
    with pytest.raises(Rejected, match="not a PDF"):
        textextract.extract(b"GIF89a not really a pdf", "cv.pdf", LIMITS)


def test_docx_paragraphs_tables_headers_footers_in_order() -> None:
    data = docgen.make_docx(["Intro paragraph", "日本語 and emoji 🎉"], table=[["Role", "Salary"], ["Engineer", "€100k"]],
                            header="ACME Corp — Confidential", footer="Page footer", after_table=["Closing words"])
    result = textextract.extract(data, "Job Spec.DOCX", LIMITS)
    lines = result.text.split("\n")
    assert lines[0] == "ACME Corp — Confidential"
    assert lines.index("Intro paragraph") < lines.index("Role\tSalary") < lines.index("Engineer\t€100k") < lines.index("Closing words")
    assert "日本語 and emoji 🎉" in lines
    assert lines[-1] == "Page footer"
    assert result.extractor == "python-docx"


def test_encrypted_pdf_with_empty_password_opens_and_with_password_is_rejected() -> None:
    pdf = docgen.make_pdf(["secret text"])
    assert "secret text" in textextract.extract(docgen.encrypt_pdf(pdf, ""), "e.pdf", LIMITS).text
    with pytest.raises(Rejected, match="password"):
        textextract.extract(docgen.encrypt_pdf(pdf, "hunter2"), "e.pdf", LIMITS)


def test_corrupt_and_truncated_files_are_rejected() -> None:
    pdf = docgen.make_pdf(["a"] * 5)
    with pytest.raises(Rejected, match="PDF"):
        textextract.extract(b"%PDF-1.4\n" + b"\x00garbage" * 100, "x.pdf", LIMITS)
    truncated = pdf[: len(pdf) // 3]
    try:
        result = textextract.extract(truncated, "x.pdf", LIMITS)
    except Rejected as exc:
        assert "PDF" in exc.reason
    else:  # pypdf may recover what precedes the cut; it must not invent more pages
        assert result.pages <= 5
    with pytest.raises(Rejected, match="DOCX|not a DOCX"):
        textextract.extract(docgen.make_docx(["x"])[:500], "x.docx", LIMITS)


def test_zip_bomb_and_too_many_parts_are_rejected() -> None:
    with pytest.raises(Rejected, match="zip bomb"):
        textextract.extract(docgen.zip_bomb_docx(), "bomb.docx", LIMITS)
    with pytest.raises(Rejected, match="parts"):
        textextract.extract(docgen.many_parts_docx(), "parts.docx", LIMITS)


def test_pdf_claiming_thousands_of_pages_is_bounded() -> None:
    pdf = docgen.make_pdf(["real one", "real two"], claimed_pages=50_000)
    result = textextract.extract(pdf, "liar.pdf", Limits(max_pages=100))
    assert "real one" in result.text and result.pages == 2
    assert "pages (50000 claimed, 2 present)" in result.truncated
    many = textextract.extract(docgen.make_pdf([f"p{i}" for i in range(12)]), "long.pdf", Limits(max_pages=10))
    assert many.pages == 10 and "pages (12 present, limit 10)" in many.truncated


def test_limits_on_input_and_output() -> None:
    pdf = docgen.make_pdf(["x" * 80] * 3)
    with pytest.raises(Rejected, match="over the 100-byte limit"):
        textextract.extract(pdf, "a.pdf", Limits(max_input_bytes=100))
    result = textextract.extract(pdf, "a.pdf", Limits(max_output_chars=50))
    assert len(result.text) == 50 and "characters" in result.truncated


def test_unsupported_type_is_rejected_without_parsing() -> None:
    with pytest.raises(Rejected, match="unsupported"):
        textextract.extract(b"BEGIN:VCALENDAR", "invite.ics", LIMITS)
