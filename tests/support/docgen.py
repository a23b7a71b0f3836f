"""Real PDF and DOCX files made in the tests (and the benchmark), no fixtures checked in."""

from __future__ import annotations

import io
import os
import zipfile


def _pdf_string(line: str) -> bytes:
    raw = line.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def make_pdf(pages: list[str], *, claimed_pages: int | None = None, padding_bytes: int = 0) -> bytes:
    """A valid PDF: one Helvetica (WinAnsi) text page per entry; lines split on '\\n'.

    claimed_pages lies in the page tree's /Count; padding_bytes embeds an unused binary
    stream so the file is large without more text.
    """
    n = len(pages)
    objs: dict[int, bytes] = {}
    first_page = 5
    kids = " ".join(f"{first_page + 2 * i} 0 R" for i in range(n))
    objs[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objs[2] = f"<< /Type /Pages /Kids [{kids}] /Count {claimed_pages or n} >>".encode()
    objs[3] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    blob = os.urandom(padding_bytes)
    image = b"<< /Type /XObject /Subtype /Image /Width 1 /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 /Length %d >>"
    objs[4] = image % (max(1, padding_bytes), len(blob)) + b"\nstream\n" + blob + b"\nendstream"
    for i, text in enumerate(pages):
        ops = b"BT /F1 11 Tf 14 TL 72 760 Td " + b" T* ".join(_pdf_string(line) + b" Tj" for line in text.split("\n")) + b" ET"
        page_id, content_id = first_page + 2 * i, first_page + 2 * i + 1
        objs[page_id] = (f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
                         f"/Resources << /Font << /F1 3 0 R >> /XObject << /Im0 4 0 R >> >> >>").encode()
        objs[content_id] = b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream"
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objs):
        offsets[num] = out.tell()
        out.write(f"{num} 0 obj\n".encode() + objs[num] + b"\nendobj\n")
    xref = out.tell()
    size = max(objs) + 1
    out.write(f"xref\n0 {size}\n0000000000 65535 f \n".encode())
    for num in range(1, size):
        out.write(f"{offsets[num]:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {size} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def encrypt_pdf(data: bytes, user_password: str) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(paragraphs: list[str], table: list[list[str]] | None = None, header: str = "", footer: str = "",
              after_table: list[str] | None = None) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        t = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    for text in after_table or []:
        document.add_paragraph(text)
    section = document.sections[0]
    if header:
        section.header.paragraphs[0].text = header
    if footer:
        section.footer.paragraphs[0].text = footer
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx(expanded_bytes: int = 300 * 1024 * 1024) -> bytes:
    """A DOCX whose one media part inflates to hundreds of MB of zeros."""
    base = make_docx(["innocent"])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        with dst.open("word/media/bomb.bin", "w", force_zip64=True) as f:
            chunk = b"\0" * (1024 * 1024)
            for _ in range(expanded_bytes // len(chunk)):
                f.write(chunk)
    return out.getvalue()


def many_parts_docx(parts: int = 3000) -> bytes:
    base = make_docx(["many parts"])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        for i in range(parts):
            dst.writestr(f"customXml/bulk{i}.xml", b"<a/>")
    return out.getvalue()
