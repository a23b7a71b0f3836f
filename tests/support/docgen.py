"""Real PDF and DOCX files made in the tests (and the benchmark), no fixtures checked in.

Ordinary documents (``make_pdf``, ``make_docx``, ``docx_package``), and hostile ones,
built to the letter: a DOCX whose zip directory lies about sizes, 99 MB of XML under a
ratio guard, a stream with ``/Length 999999999``, a 20,000-deep page tree, a 500 MB content
stream, 100,000 pages, a form-XObject time bomb, encrypted and legacy Office files. The big ones
take seconds to build: ``cached()`` keeps them under ``.build/cache/docgen`` keyed by this file's
source, so a test session (and the next one) builds each once.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

CACHE = Path(__file__).resolve().parents[2] / ".build" / "cache" / "docgen"
MB = 1024 * 1024


def cached(name: str, build: Callable[[], bytes]) -> bytes:
    """``build()``'s bytes, made once per version of this module and kept on disk."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    path = CACHE / f"{name}-{digest}.bin"
    if path.exists():
        return path.read_bytes()
    data = build()
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob(f"{name}-*.bin"):  # made by an earlier version of this module
        stale.unlink(missing_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return data


# --- PDF ---------------------------------------------------------------------------------------

HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _pdf_objects(objs: dict[int, bytes]) -> tuple[io.BytesIO, dict[int, int]]:
    """The header and the numbered objects; returns the file so far and each object's offset."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objs):
        offsets[num] = out.tell()
        out.write(b"%d 0 obj\n" % num + objs[num] + b"\nendobj\n")
    return out, offsets


def assemble_pdf(objs: dict[int, bytes], root: int = 1) -> bytes:
    """A PDF file from numbered object bodies, with a correct cross-reference table."""
    out, offsets = _pdf_objects(objs)
    xref = out.tell()
    size = max(objs) + 1
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
    for num in range(1, size):
        out.write(b"%010d 00000 n \n" % offsets[num] if num in offsets else b"0000000000 00000 f \n")
    out.write(b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, xref))
    return out.getvalue()


def pdf_stream(data: bytes, entries: bytes = b"", length: int | None = None) -> bytes:
    return (
        b"<< /Length %d %s >>\nstream\n" % (len(data) if length is None else length, entries)
        + data
        + b"\nendstream"
    )


def _pdf_string(line: str) -> bytes:
    raw = line.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def text_ops(text: str) -> bytes:
    return (
        b"BT /F1 11 Tf 14 TL 72 760 Td "
        + b" T* ".join(_pdf_string(line) + b" Tj" for line in text.split("\n"))
        + b" ET"
    )


def make_pdf(
    pages: list[str],
    *,
    claimed_pages: int | None = None,
    padding_bytes: int = 0,
    broken_pages: tuple[int, ...] = (),
) -> bytes:
    """A valid PDF: one Helvetica (WinAnsi) text page per entry; lines split on '\\n'.

    claimed_pages lies in the page tree's /Count; padding_bytes embeds an unused binary
    stream so the file is large without more text; broken_pages (1-based) get a content stream
    whose /Length is 999999999, so reading that page fails while the others read.
    """
    n = len(pages)
    objs: dict[int, bytes] = {}
    first_page = 5
    kids = " ".join(f"{first_page + 2 * i} 0 R" for i in range(n))
    objs[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objs[2] = f"<< /Type /Pages /Kids [{kids}] /Count {claimed_pages or n} >>".encode()
    objs[3] = HELVETICA
    blob = os.urandom(padding_bytes)
    image = (
        b"<< /Type /XObject /Subtype /Image /Width 1 /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Length %d >>"
    )
    objs[4] = image % (max(1, padding_bytes), len(blob)) + b"\nstream\n" + blob + b"\nendstream"
    for i, text in enumerate(pages):
        page_id, content_id = first_page + 2 * i, first_page + 2 * i + 1
        objs[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> /XObject << /Im0 4 0 R >> >> >>"
        ).encode()
        objs[content_id] = pdf_stream(text_ops(text), length=999_999_999 if i + 1 in broken_pages else None)
    return assemble_pdf(objs)


def pdf_without_page_tree(pages: list[str]) -> bytes:
    """make_pdf's file with the catalog's /Pages pointing at an object that does not exist."""
    return make_pdf(pages).replace(
        b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Catalog /Pages 99 0 R >>"
    )


def encrypt_pdf(data: bytes, user_password: str, algorithm: str = "RC4-128") -> bytes:
    """pypdf's own encryption; "AES-128"/"AES-256" need the cryptography package, as reading does."""
    import pypdf
    from pypdf.constants import UserAccessPermissions

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.encrypt(
        user_password=user_password,
        owner_password="owner-secret",
        algorithm=algorithm,
        permissions_flag=UserAccessPermissions(0),
    )  # "no copy, no print": what such files look like in the wild
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _page_dict(parent: int, contents: int, resources: bytes = b"<< /Font << /F1 3 0 R >> >>") -> bytes:
    return b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources %s >>" % (
        parent,
        contents,
        resources,
    )


def pdf_deep_page_tree(depth: int = 20_000) -> bytes:
    """One page under ``depth`` nested /Pages nodes."""
    objs = {1: b"<< /Type /Catalog /Pages 10 0 R >>", 3: HELVETICA, 4: pdf_stream(text_ops("deep page"))}
    for d in range(depth):
        parent = b"/Parent %d 0 R " % (9 + d) if d else b""
        objs[10 + d] = b"<< /Type /Pages /Kids [%d 0 R] /Count 1 %s>>" % (11 + d, parent)
    objs[10 + depth] = _page_dict(9 + depth, 4)
    return assemble_pdf(objs)


def pdf_content_bomb(inflated_mb: int = 500) -> bytes:
    """Page 1 is ordinary; page 2's content stream inflates to ``inflated_mb`` MB (about 1,000:1)."""
    bomb = Deflated.repeated(b"", b" ", inflated_mb * MB, b"").zlib_stream()
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [4 0 R 5 0 R] /Count 2 >>",
        3: HELVETICA,
        4: _page_dict(2, 6),
        5: _page_dict(2, 7),
        6: pdf_stream(text_ops("Before the bomb")),
        7: pdf_stream(bomb, b"/Filter /FlateDecode"),
    }
    return assemble_pdf(objs)


def pdf_many_pages(count: int = 100_000, per_node: int = 1000) -> bytes:
    """``count`` pages (100 intermediate nodes of 1,000), all drawing one shared content stream."""
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>", 3: HELVETICA, 4: pdf_stream(text_ops("same page"))}
    nodes = (count + per_node - 1) // per_node
    page_id, node_ids = 10 + nodes, []
    for k in range(nodes):
        node_id = 10 + k
        kids = []
        for _ in range(min(per_node, count - k * per_node)):
            objs[page_id] = b"<< /Type /Page /Parent %d 0 R /Contents 4 0 R >>" % node_id
            kids.append(b"%d 0 R" % page_id)
            page_id += 1
        objs[node_id] = (
            b"<< /Type /Pages /Parent 2 0 R /Kids [%s] /Count %d /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (b" ".join(kids), len(kids))
        )
        node_ids.append(b"%d 0 R" % node_id)
    objs[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(node_ids), count)
    return assemble_pdf(objs)


def pdf_xobject_time_bomb(pages: int = 20, invocations: int = 1000, operations: int = 1000) -> bytes:
    """Page 1 is ordinary; every later page draws one form XObject ``invocations`` times, each
    drawing ``operations`` one-letter texts: under pypdf's per-page limits (5,000 form invocations),
    and 20 s to 2 minutes of pypdf per page on this machine, depending on its load."""
    form = b" ".join([b"BT /F1 1 Tf 0 0 Td (x) Tj ET"] * operations)
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: HELVETICA,
        4: pdf_stream(text_ops("Ordinary first page")),
        5: pdf_stream(b" ".join([b"/X Do"] * invocations)),
        6: pdf_stream(
            form, b"/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /Font << /F1 3 0 R >> >>"
        ),
    }
    kids = []
    for i in range(pages):
        page_id = 10 + i
        resources = b"<< /Font << /F1 3 0 R >> /XObject << /X 6 0 R >> >>"
        objs[page_id] = _page_dict(2, 4 if i == 0 else 5, resources)
        kids.append(b"%d 0 R" % page_id)
    objs[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    return assemble_pdf(objs)


def pdf_xref_bomb(entries: int = 2_000_000) -> bytes:
    """A 21 KB PDF whose compressed cross-reference stream lists ``entries`` objects: pypdf builds
    a table of all of them before reading a page (291 MB and 44 s on the host), and no pypdf
    limit stops it below 2,000,000. Only the child's memory limit does."""
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: _page_dict(2, 4),
        4: pdf_stream(text_ops("xref page")),
        5: HELVETICA,
    }
    out, offsets = _pdf_objects(objs)
    xref_at = out.tell()
    # 4 bytes an entry (type, 2-byte offset, generation): 8 MB decoded, under any stream limit.
    rows = [struct.pack(">BHB", 0, 0, 255)] + [struct.pack(">BHB", 1, offsets[n], 0) for n in range(1, 6)]
    rows.append(struct.pack(">BHB", 1, xref_at, 0))
    table = zlib.compress(b"".join(rows) + struct.pack(">BHB", 1, offsets[5], 0) * (entries - len(rows)), 9)
    out.write(
        b"6 0 obj\n<< /Type /XRef /Size %d /W [1 2 1] /Root "
        b"1 0 R /Filter /FlateDecode /Length %d >>\nstream\n"
        % (entries, len(table))
        + table
        + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % xref_at
    )
    return out.getvalue()


def pdf_scanned(pages: int = 2) -> bytes:
    """What a scanner makes: every page one full-page image, no text at all."""
    pixels = zlib.compress(bytes(random.Random(7).randrange(256) for _ in range(64 * 64)))
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: HELVETICA,
        4: pdf_stream(
            pixels,
            b"/Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 /Filter /FlateDecode",
        ),
        5: pdf_stream(b"q 612 0 0 792 0 0 cm /Im0 Do Q"),
    }
    kids = []
    for i in range(pages):
        objs[10 + i] = _page_dict(2, 5, b"<< /XObject << /Im0 4 0 R >> >>")
        kids.append(b"%d 0 R" % (10 + i))
    objs[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), pages)
    return assemble_pdf(objs)


def pdf_to_unicode(mapping: dict[int, int], shown: bytes) -> bytes:
    """One Helvetica page showing the bytes ``shown``, whose /ToUnicode CMap maps each code of
    ``mapping`` to the UTF-16 value given, any value: U+D800 alone is what a crafted file can say."""
    chars = b"\n".join(b"<%02X> <%04X>" % (code, value) for code, value in sorted(mapping.items()))
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"/CMapName /Custom def /CMapType 2 def\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"%d beginbfchar\n%s\nendbfchar\nendcmap CMapName currentdict /CMap defineresource pop end end"
        % (len(mapping), chars)
    )
    escaped = shown.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    return assemble_pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            3: HELVETICA[:-2] + b" /ToUnicode 6 0 R >>",
            4: _page_dict(2, 5),
            5: pdf_stream(b"BT /F1 11 Tf 72 760 Td (" + escaped + b") Tj ET"),
            6: pdf_stream(cmap),
        }
    )


def pdf_identity_h_without_tounicode(
    glyph_ids: tuple[int, ...] = (0x0F3A, 0x0021, 0x1B07, 0x0003, 0x0244, 0x000E),
) -> bytes:
    """A CJK-style page: a Type0 font, /Identity-H encoding, no /ToUnicode. The codes are glyph
    ids of the (absent) embedded font, so no reader without the font's own tables can map them."""
    codes = b"".join(struct.pack(">H", g) for g in glyph_ids)
    content = b"BT /F1 12 Tf 72 700 Td <" + codes.hex().upper().encode() + b"> Tj ET"
    objs = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        3: b"<< /Type /Font /Subtype /Type0 /BaseFont /ABCDEF+MSMincho /Encoding /Identity-H "
        b"/DescendantFonts [6 0 R] >>",
        4: _page_dict(2, 5),
        5: pdf_stream(content),
        6: b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /ABCDEF+MSMincho /CIDToGIDMap /Identity "
        b"/CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /DW 1000 >>",
    }
    return assemble_pdf(objs)


# --- DOCX --------------------------------------------------------------------------------------


def make_docx(
    paragraphs: list[str],
    table: list[list[str]] | None = None,
    header: str = "",
    footer: str = "",
    after_table: list[str] | None = None,
) -> bytes:
    """An ordinary DOCX written by python-docx (its template is a Word-made file)."""
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


NS = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml" '
    'xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math"'
)
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
MAIN_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
TEMPLATE_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml"


def _p(*runs: str, ppr: str = "") -> str:
    return f"<w:p>{ppr}{''.join(runs)}</w:p>"


def _r(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


def docx_package(
    body: str,
    parts: dict[str, tuple[str, str, str]] | None = None,
    pages: int | None = None,
    main_type: str = MAIN_TYPE,
) -> bytes:
    """A DOCX from WordprocessingML: ``body`` goes into word/document.xml; ``parts`` maps a part
    name under word/ to (relationship type, root element, inner XML)."""
    parts = parts or {}
    overrides = [f'<Override PartName="/word/document.xml" ContentType="{main_type}"/>']
    rels = []
    files: dict[str, str] = {}
    for i, (name, (rel_type, root, inner)) in enumerate(parts.items(), start=1):
        rels.append(f'<Relationship Id="rId{i}" Type="{REL}{rel_type}" Target="{name}"/>')
        files[f"word/{name}"] = (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:{root} {NS}>{inner}</w:{root}>'
        )
        overrides.append(f'<Override PartName="/word/{name}" ContentType="application/xml"/>')
    package_rels = [f'<Relationship Id="rId1" Type="{REL}officeDocument" Target="word/document.xml"/>']
    if pages is not None:
        package_rels.append(
            f'<Relationship Id="rId2" Type="{REL}extended-properties" Target="docProps/app.xml"/>'
        )
        files["docProps/app.xml"] = (
            '<?xml version="1.0"?><Properties xmlns="http://schemas.openxmlformats.org/'
            f'officeDocument/2006/extended-properties"><Pages>{pages}</Pages></Properties>'
        )
    files["[Content_Types].xml"] = (
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/c'
        'ontent-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>' + "".join(overrides) + "</Types>"
    )
    rels_root = (
        '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/re'
        'lationships">'
    )
    files["_rels/.rels"] = rels_root + "".join(package_rels) + "</Relationships>"
    files["word/_rels/document.xml.rels"] = rels_root + "".join(rels) + "</Relationships>"
    files["word/document.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {NS}>'
        f"<w:body>{body}</w:body></w:document>"
    )
    return write_zip({name: xml.encode() for name, xml in files.items()})


def _textbox(text: str) -> str:
    """A text box as Word writes it: DrawingML in mc:Choice, the same text again as VML in mc:Fallback."""
    box = f"<w:txbxContent>{_p(_r(text))}</w:txbxContent>"
    return (
        '<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:anchor><a:graphic><a:graphicData>'
        f"<wps:wsp><wps:txbx>{box}</wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></"
        "mc:Choice>"
        f"<mc:Fallback><w:pict><v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r>"
    )


def _table(rows: list[list[str]]) -> str:
    return (
        "<w:tbl>"
        + "".join("<w:tr>" + "".join(f"<w:tc>{cell}</w:tc>" for cell in row) + "</w:tr>" for row in rows)
        + "</w:tbl>"
    )


def docx_every_construct() -> bytes:
    """Text in every place a DOCX can hold it (body, tables, headers, notes, text boxes), plus text that must
    not come out (deleted revisions,
    field codes, content-control aliases, tab stops, note separators)."""
    nested = _table([[_p(_r("inner cell one")), _p(_r("inner cell two"))]])
    body = "".join(
        [
            _p(_r("Body first paragraph")),
            _p(
                _r("Kept words "),
                '<w:ins w:id="1" w:author="a"><w:r><w:t>inserted words</w:t></w:r></w:ins>',
                '<w:del w:id="2" w:author="a"><w:r><w:delText>deleted words</w:delText></w:r></w:del>',
                '<w:moveFrom w:id="3" w:author="a"><w:r><w:t>moved away words</w:t></w:r></w:moveFrom>',
                '<w:moveTo w:id="4" w:author="a"><w:r><w:t> moved here words</w:t></w:r></w:moveTo>',
            ),
            _p(
                _r("Note anchor"),
                '<w:r><w:footnoteReference w:id="1"/></w:r>',
                '<w:r><w:endnoteReference w:id="1"/></w:r>',
            ),
            _p(
                '<w:commentRangeStart w:id="0"/>',
                _r("Commented words"),
                '<w:commentRangeEnd w:id="0"/>',
                '<w:r><w:commentReference w:id="0"/></w:r>',
            ),
            _p(
                '<w:fldSimple w:instr=" DATE \\@ &quot;d MMMM yyyy&quot; ">',
                _r("simple field result"),
                "</w:fldSimple>",
            ),
            _p(
                '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGEREF _Toc1 \\h '
                "</w:instrText></w:r>"
                '<w:r><w:fldChar w:fldCharType="separate"/></w:r>',
                _r("complex field result"),
                '<w:r><w:fldChar w:fldCharType="end"/></w:r>',
            ),
            '<w:sdt><w:sdtPr><w:alias w:val="Alias must not appear"/><w:placeholder><w:docPart '
            'w:val="x"/></w:placeholder>'
            f"</w:sdtPr><w:sdtContent>{_p(_r('block content control'))}</w:sdtContent></w:sdt>",
            _p(
                _r("Before "),
                '<w:sdt><w:sdtPr><w:alias w:val="Inline alias hidden"/></w:sdtPr><w:sdtContent>'
                + _r("inline content control")
                + "</w:sdtContent></w:sdt>",
                _r(" after"),
            ),
            _p(_r("Anchor of a box"), _textbox("text box words")),
            _table([[_p(_r("outer cell")), _p(_r("cell with table")) + nested]]),
            _p('<w:hyperlink r:id="rIdLink">' + _r("linked words") + "</w:hyperlink>"),
            _p(
                "<w:r><w:t>left</w:t><w:tab/><w:t>right</w:t></w:r>",
                ppr='<w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>',
            ),
            _p("<m:oMathPara><m:oMath><m:r><m:t>E=mc2</m:t></m:r></m:oMath></m:oMathPara>"),
            '<w:sectPr><w:headerReference w:type="default" r:id="rId1"/><w:titlePg/></w:sectPr>',
        ]
    )
    separator = (
        '<w:{0} w:type="separator" w:id="-1"><w:p><w:r><w:separator/><w:t>SEPARATOR</w:t></w:r></w:p></w:{0}>'
    )
    parts = {
        "header1.xml": ("header", "hdr", _p(_r("default header words"))),
        "header2.xml": ("header", "hdr", _p(_r("first page header words"))),
        "header3.xml": ("header", "hdr", _p(_r("even page header words"))),
        "footnotes.xml": (
            "footnotes",
            "footnotes",
            separator.format("footnote") + f'<w:footnote w:id="1">{_p(_r("footnote words"))}</w:footnote>',
        ),
        "endnotes.xml": (
            "endnotes",
            "endnotes",
            separator.format("endnote") + f'<w:endnote w:id="1">{_p(_r("endnote words"))}</w:endnote>',
        ),
        "footer1.xml": ("footer", "ftr", _p(_r("default footer words"))),
        "footer2.xml": ("footer", "ftr", _p(_r("first page footer words"))),
        "footer3.xml": ("footer", "ftr", _p(_r("even page footer words"))),
        "comments.xml": (
            "comments",
            "comments",
            f'<w:comment w:id="0" w:author="a">{_p(_r("comment words"))}</w:comment>',
        ),
    }
    return docx_package(body, parts, pages=7)


def docx_template() -> bytes:
    """A .dotx (Word template): the same package with the template content type."""
    return docx_package(_p(_r("Template body words")), main_type=TEMPLATE_TYPE)


class Deflated:
    """A zip member given as raw deflate data: how the bombs get 1 GB into 1 MB in a second."""

    def __init__(self, data: bytes, crc: int, size: int, adler: int = 1) -> None:
        self.data, self.crc, self.size, self.adler = data, crc, size, adler

    @classmethod
    def of(cls, payload: bytes) -> Deflated:
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        return cls(
            packer.compress(payload) + packer.flush(),
            zlib.crc32(payload),
            len(payload),
            zlib.adler32(payload),
        )

    def zlib_stream(self) -> bytes:
        """The same data as a zlib stream (what a PDF's /FlateDecode holds)."""
        return b"\x78\xda" + self.data + struct.pack(">I", self.adler)

    @classmethod
    def repeated(cls, head: bytes, filler: bytes, size: int, tail: bytes) -> Deflated:
        """head + ``size`` bytes of ``filler`` + tail. Each 1 MB block is compressed once and
        repeated: after a full flush the compressor starts afresh, so every block's output is equal."""
        block = filler * (MB // len(filler))
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        parts = [packer.compress(head) + packer.flush(zlib.Z_FULL_FLUSH)]
        first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        count = size // len(block)
        parts += [first] + [again] * (count - 1)
        parts.append(packer.compress(tail) + packer.flush())
        crc, adler = zlib.crc32(head), zlib.adler32(head)
        for _ in range(count):
            crc, adler = zlib.crc32(block, crc), zlib.adler32(block, adler)
        return cls(
            b"".join(parts),
            zlib.crc32(tail, crc),
            len(head) + count * len(block) + len(tail),
            zlib.adler32(tail, adler),
        )


def write_zip(members: dict[str, bytes | Deflated], declared_sizes: dict[str, int] | None = None) -> bytes:
    """A zip (deflate, no zip64) from members; ``declared_sizes`` makes the local headers and the
    central directory lie about a member's inflated size."""
    out, directory = io.BytesIO(), io.BytesIO()
    for name, member in members.items():
        deflated = member if isinstance(member, Deflated) else Deflated.of(member)
        size = (declared_sizes or {}).get(name, deflated.size)
        fields = struct.pack("<HHHHHIII", 20, 0, 8, 0, 0x21, deflated.crc, len(deflated.data), size)
        offset = out.tell()
        out.write(
            b"PK\x03\x04" + fields + struct.pack("<HH", len(name.encode()), 0) + name.encode() + deflated.data
        )
        directory.write(
            b"PK\x01\x02"
            + struct.pack("<H", 20)
            + fields
            + struct.pack("<HHHHHII", len(name.encode()), 0, 0, 0, 0, 0, offset)
            + name.encode()
        )
    start = out.tell()
    out.write(directory.getvalue())
    out.write(
        b"PK\x05\x06"
        + struct.pack("<HHHHIIH", 0, 0, len(members), len(members), len(directory.getvalue()), start, 0)
    )
    return out.getvalue()


def _members(docx: bytes) -> dict[str, bytes | Deflated]:
    with zipfile.ZipFile(io.BytesIO(docx)) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def _body_xml(inner: str) -> bytes:
    return f'<?xml version="1.0"?><w:document {NS}><w:body>{inner}</w:body></w:document>'.encode()


def zip_bomb_docx(expanded_bytes: int = 300 * MB) -> bytes:
    """A DOCX whose one media part inflates to hundreds of MB of zeros (never needed for text)."""
    members = _members(make_docx(["innocent"]))
    members["word/media/bomb.bin"] = Deflated.repeated(b"", b"\0", expanded_bytes, b"")
    return write_zip(members)


def _xml_bomb_members(inflated_mb: int) -> dict[str, bytes | Deflated]:
    head, tail = _body_xml(_p(_r("bomb")) + "\x00").split(b"\x00")
    members = _members(make_docx(["x"]))
    members["word/document.xml"] = Deflated.repeated(head, b" ", inflated_mb * MB, tail)
    return members


def docx_xml_bomb(inflated_mb: int = 1024) -> bytes:
    """word/document.xml inflates to ``inflated_mb`` MB of whitespace inside the body (honest sizes)."""
    return write_zip(_xml_bomb_members(inflated_mb))


def docx_lying_sizes(inflated_mb: int = 1024) -> bytes:
    """The XML bomb, 1 MB of zip, with the local header and the central directory saying its
    document.xml is 1,000 bytes: a reader that sizes guards from the directory believes it."""
    return write_zip(_xml_bomb_members(inflated_mb), declared_sizes={"word/document.xml": 1000})


def docx_huge_xml(xml_mb: int = 99) -> bytes:
    """About 14 MB of zip holding ``xml_mb`` MB of Word-like paragraphs (run properties, revision
    ids): 7:1, under any compression-ratio guard."""
    rng = random.Random(19)
    vocabulary = [
        "".join(rng.choice("etaoinshrdlucmfwypvbgk") for _ in range(rng.randint(2, 9))) for _ in range(400)
    ]

    def paragraph() -> str:
        runs = "".join(
            f'<w:r w:rsidRPr="00{rng.randrange(16**6):06X}"><w:rPr><w:rFonts w:ascii="Calibri" '
            'w:hAnsi="Calibri"/>'
            f'<w:sz w:val="22"/></w:rPr><w:t xml:space="preserve">'
            f"{' '.join(rng.choice(vocabulary) for _ in range(rng.randint(3, 12)))} </w:t></w:r>"
            for _ in range(rng.randint(1, 4))
        )
        return (
            f'<w:p w:rsidR="00{rng.randrange(16**6):06X}"><w:pPr><w:spacing '
            f'w:after="120"/></w:pPr>{runs}</w:p>'
        )

    pool = [paragraph() for _ in range(4000)]
    body = "".join(rng.choice(pool) for _ in range(xml_mb * MB // 560))
    members = _members(make_docx(["x"]))
    members["word/document.xml"] = _body_xml(body)
    return write_zip(members)


def many_parts_docx(parts: int = 3000) -> bytes:
    members = _members(make_docx(["many parts"]))
    members.update({f"customXml/bulk{i}.xml": b"<a/>" for i in range(parts)})
    return write_zip(members)


def docx_with_dtd() -> bytes:
    """A billion-laughs document.xml: entities expanding to gigabytes."""
    laughs = (
        '<!DOCTYPE w [<!ENTITY a "lol">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
        + "]>"
    )
    members = _members(make_docx(["x"]))
    document = f'<?xml version="1.0"?>{laughs}<w:document {NS}><w:body>{_p(_r("&j;"))}</w:body></w:document>'
    members["word/document.xml"] = document.encode()
    return write_zip(members)


def truncated_docx() -> bytes:
    data = make_docx(["a document cut in half"] * 50)
    return data[: len(data) // 2]


def ole_file(streams: dict[str, bytes]) -> bytes:
    """A minimal Compound File (CFB v3, 512-byte sectors): what Office writes for encrypted
    OOXML (EncryptionInfo + EncryptedPackage) and for .doc files (WordDocument). Streams are
    padded to 4,096 bytes so they live in regular sectors (no mini stream)."""
    sector = 512
    names = list(streams)
    payloads = [streams[n].ljust(max(4096, -(-len(streams[n]) // sector) * sector), b"\0") for n in names]
    fat = [0xFFFFFFFD, 0xFFFFFFFE]  # sector 0: the FAT itself, sector 1: the directory
    starts = []
    for payload in payloads:
        first, count = len(fat), len(payload) // sector
        starts.append(first)
        fat.extend(list(range(first + 1, first + count)) + [0xFFFFFFFE])
    fat_bytes = struct.pack(f"<{len(fat)}I", *fat).ljust(sector, b"\xff")

    def entry(
        name: str, kind: int, start: int, size: int, child: int = 0xFFFFFFFF, right: int = 0xFFFFFFFF
    ) -> bytes:
        encoded = (name + "\0").encode("utf-16-le")
        return (
            encoded.ljust(64, b"\0")
            + struct.pack("<HBBIII", len(encoded), kind, 1, 0xFFFFFFFF, right, child)
            + b"\0" * 36
            + struct.pack("<IQ", start, size)
        )

    directory = entry("Root Entry", 5, 0xFFFFFFFE, 0, child=1)
    for i, name in enumerate(names):
        directory += entry(
            name, 2, starts[i], len(streams[name]), right=i + 2 if i + 1 < len(names) else 0xFFFFFFFF
        )
    directory = directory.ljust(sector, b"\0")
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + b"\0" * 16
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + b"\0" * 6
        + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, 0xFFFFFFFE, 0, 0xFFFFFFFE, 0)
        + struct.pack("<I", 0)
        + b"\xff" * (109 * 4 - 4)
    )
    return header + fat_bytes + directory + b"".join(payloads)


def ole_encrypted_docx() -> bytes:
    return ole_file(
        {
            "EncryptionInfo": b"\x04\x00\x04\x00\x40\x00\x00\x00<encryption/>",
            "EncryptedPackage": os.urandom(4096),
        }
    )


def ole_legacy_doc() -> bytes:
    return ole_file({"WordDocument": b"\xec\xa5" + b"\0" * 600, "1Table": b"\0" * 600})
