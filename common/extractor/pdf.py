"""PDF to text with pypdf, page by page, in the extraction child (common.extractor.isolate).

The page tree is walked here rather than through ``reader.pages``: pypdf flattens the whole tree
first (a 100,000-page file took 25 s and 288 MB before its entry limit stopped it), while only the
first ``max_pages`` are ever read. Each page is extracted on its own: an unreadable page becomes a
"skip" event and the next page is read.

A file pypdf cannot open (no ``startxref`` line: pdfminer.six's own samples simple1.pdf and
simple3.pdf end at the trailer) or whose page tree cannot be found through its cross-reference
table is opened a second time with its cross-reference table rebuilt from the objects in the file,
as pdfminer.six and PDFium do: pypdf rebuilds it itself (non-strict) when ``startxref`` points at
no table, so the copy it reads ends with a ``startxref`` that does just that.
"""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Generator, Iterator
from typing import Any

from common.extractor.errors import MEMORY, RejectedError, describe

INHERITED = ("/Resources", "/MediaBox", "/CropBox", "/Rotate")
MAX_TREE_DEPTH = 256  # real files nest a few levels; pypdf's own flattening stops at 100
MAX_SCANNED_OBJECTS = 100_000  # looked at for pages when the page tree is missing
MB = 1024 * 1024
_IDENTITY = ("/Identity-H", "/Identity-V")
_ODD_CATEGORIES = ("Cc", "Cn", "Co", "Cs")
# Appended to a file whose cross-reference table is unusable: offset 0 is the header, not a table,
# so pypdf (non-strict) rebuilds the table by scanning the file for "N G obj" (_rebuild_xref_table).
REBUILD_XREF = b"\nstartxref\n0\n%%EOF\n"


def events(data: bytes, max_pages: int, start: int, memory_bytes: int) -> Iterator[tuple[Any, ...]]:
    """("info", {...}), then per page from ``start`` on ("begin", i) and ("page", i, text, flags) or
    ("skip", i, reason), then ("walked", {...}); or ("fatal", reason) when the file cannot be opened."""
    import pypdf

    try:
        _configure(pypdf, stream_limit(memory_bytes), len(data))
        reader, tree, rebuilt = _open_or_rebuild(pypdf, data)
        claimed = _claimed(tree) if tree is not None else None
    except RejectedError as rejected:
        yield ("fatal", rejected.reason)
        return
    except MemoryError:
        raise
    except Exception as exc:  # pypdf raises PdfReadError and, on malformed input, almost anything else
        yield ("fatal", _fatal_reason(exc, memory_bytes))
        return
    spare = rebuilt[0] if rebuilt is not None and rebuilt[0] is not reader else None
    yield (
        "info",
        {"claimed": claimed, "version": pypdf.__version__, "rebuilt": rebuilt is not None and spare is None},
    )
    # Without a page tree: pages by type through the table, else through every object the file holds.
    walker = _pages(reader, tree) if tree is not None else _orphan_pages(reader, spare)
    index, more, damage = yield from _walk(walker, max_pages, start)
    yield ("walked", {"found": index, "more": more, "damage": damage, "recovered": tree is None})


def _open_or_rebuild(pypdf: Any, data: bytes) -> tuple[Any, Any, tuple[Any, Any] | None]:
    """The reader and page tree of the file as sent, or of the file with its cross-reference table
    rebuilt when that opens where the first did not, or finds the page tree the first did not; and
    the rebuilt (reader, tree) when one was made."""
    rebuilt: tuple[Any, Any] | None = None
    try:
        reader, tree = _open(pypdf, data)
    except (RejectedError, MemoryError):
        raise
    except Exception as exc:  # pypdf raises PdfReadError and, on malformed input, almost anything
        reason = describe(exc)
        if reason == MEMORY or reason.startswith("over a safety limit"):
            raise
        rebuilt = _rebuilt(pypdf, data)
        if rebuilt is None:
            raise  # the first reason: what is wrong with the file as sent
        reader, tree = rebuilt
    if tree is None and rebuilt is None:  # a page tree the table does not lead to: try the objects
        rebuilt = _rebuilt(pypdf, data)
        if rebuilt is not None and rebuilt[1] is not None:
            reader, tree = rebuilt
    return reader, tree, rebuilt


def _fatal_reason(exc: Exception, memory_bytes: int) -> str:
    reason = describe(exc)
    if reason == MEMORY:
        return f"PDF could not be opened: needs more than the {memory_bytes // MB} MB memory limit"
    if reason.startswith("over a safety limit"):
        return f"PDF is {reason}"
    return f"damaged PDF: {reason}"


def _walk(
    walker: Iterator[Any], max_pages: int, start: int
) -> Generator[tuple[Any, ...], None, tuple[int, bool, str]]:
    """("begin", i) and the page's event for each page from ``start`` on, up to ``max_pages``; returns
    the pages found, whether there are more, and what stopped the walk early."""
    index, more, damage = 0, False, ""
    while True:
        try:
            page = next(walker)
        except StopIteration:
            break
        except MemoryError:
            damage = "page tree needs more memory than the limit"
            break
        except RejectedError as rejected:
            damage = rejected.reason
            break
        except Exception as exc:
            damage = f"page tree damaged after page {index}: {describe(exc)}"
            break
        if index >= max_pages:
            more = True
            break
        if index >= start:
            yield ("begin", index)  # so the parent knows which page a killed child was on
            yield _page(index, page)
        index += 1
    return index, more, damage


def _open(pypdf: Any, data: bytes) -> tuple[Any, Any]:
    """The reader (decrypted with the empty password when needed) and its page tree (None if missing)."""
    reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        _decrypt(reader)
    catalog: Any = reader.trailer["/Root"].get_object()
    tree = catalog.get("/Pages")
    if tree is not None and not hasattr(tree.get_object(), "keys"):
        tree = None  # a dangling reference: the pages are found by their type below
    return reader, tree


def _rebuilt(pypdf: Any, data: bytes) -> tuple[Any, Any] | None:
    """``_open`` with the cross-reference table rebuilt from the file's objects, or None."""
    try:
        return _open(pypdf, data + REBUILD_XREF)
    except (RejectedError, MemoryError):
        raise
    except Exception:
        return None


def stream_limit(memory_bytes: int) -> int:
    """Largest decoded stream: pypdf's default is 75 MB; inside a smaller memory allowance a
    quarter of it (decoding holds a few copies), so pypdf's clean LimitReachedError comes first."""
    return max(8 * MB, min(75 * MB, memory_bytes // 4))


def _configure(pypdf: Any, limit: int, size: int) -> None:
    pypdf.overwrite_configuration(
        disable_legacy_handling=True,
        maximum_declared_stream_length=max(size, MB),  # no stream is longer than the file
        zlib_maximum_output_length=limit,
        lzw_maximum_output_length=limit,
        run_length_maximum_output_length=limit,
        brotli_maximum_output_length=limit,
        jbig2_maximum_output_length=limit,
        array_based_stream_maximum_output_length=limit,
        image_maximum_buffer_size=limit,
        jbig2dec_binary=None,  # never start an external program on an attachment
    )


def _decrypt(reader: Any) -> None:
    from pypdf.errors import DependencyError

    try:
        opened = reader.decrypt("")  # "no copy / no print" files have an empty user password
    except DependencyError as exc:
        raise RejectedError(f"encrypted PDF cannot be opened: {describe(exc)}") from None
    except NotImplementedError as exc:
        raise RejectedError(f"encrypted PDF uses an unsupported scheme: {describe(exc)}") from None
    if not opened:
        raise RejectedError("encrypted PDF needs a password")


def _claimed(tree: Any) -> int | None:
    try:
        return int(tree.get_object()["/Count"])
    except Exception:
        return None


def _pages(reader: Any, tree: Any) -> Iterator[Any]:
    """Leaf pages in document order, attributes inherited as pypdf does; cycles and revisits skipped."""
    from pypdf import PageObject
    from pypdf.generic import DictionaryObject, IndirectObject, NameObject

    stack: list[tuple[Any, dict[str, Any], int]] = [(tree, {}, 0)]
    seen: set[Any] = set()
    while stack:
        ref, inherited, depth = stack.pop()
        if ref is None:
            continue
        key = (ref.idnum, ref.generation) if isinstance(ref, IndirectObject) else id(ref)
        if key in seen:
            continue
        seen.add(key)
        node = ref.get_object()
        if not isinstance(node, DictionaryObject):
            continue  # a dangling or broken reference in /Kids
        if "/Kids" in node and node.get("/Type") != "/Page":
            if depth >= MAX_TREE_DEPTH:
                raise RejectedError(f"page tree nested deeper than {MAX_TREE_DEPTH} levels")
            inherit = {**inherited, **{k: node.raw_get(k) for k in INHERITED if k in node}}
            kids: Any = node["/Kids"].get_object()
            stack.extend((kid, inherit, depth + 1) for kid in reversed(list(kids)))
            continue
        page = PageObject(reader, ref if isinstance(ref, IndirectObject) else None)
        if not isinstance(ref, IndirectObject):
            page.update(node)
        for name, value in inherited.items():
            if name not in page:
                page[NameObject(name)] = value
        yield page


def _orphan_pages(reader: Any, fallback: Any = None) -> Iterator[Any]:
    """Without a page tree, every object of /Type /Page, in object-number order (what pdfminer.six
    does too): a damaged file's pages, perhaps with stale ones of earlier revisions. None listed in
    the table: those of ``fallback`` (the reader of the rebuilt table) instead."""
    found = False
    for page in _typed_pages(reader):
        found = True
        yield page
    if not found and fallback is not None:
        yield from _typed_pages(fallback)


def _typed_pages(reader: Any) -> Iterator[Any]:
    from pypdf import PageObject
    from pypdf.generic import DictionaryObject, IndirectObject

    numbers = sorted(
        {(num, gen) for gen, entries in reader.xref.items() for num in entries}
        | {(num, 0) for num in reader.xref_objStm}
    )
    for num, gen in numbers[:MAX_SCANNED_OBJECTS]:
        try:
            node = reader.get_object(IndirectObject(num, gen, reader))
        except Exception:
            continue
        if isinstance(node, DictionaryObject) and node.get("/Type") == "/Page":
            yield PageObject(reader, IndirectObject(num, gen, reader))


def _page(index: int, page: Any) -> tuple[Any, ...]:
    try:
        text = page.extract_text() or ""
    except MemoryError:
        return ("skip", index, "needs more memory than the limit")
    except Exception as exc:
        return ("skip", index, describe(exc))
    flags: list[str] = []
    if not text.strip():
        flags.append("no-text")
    elif _unmapped_fonts(page) or _garbled(text):
        flags.append("suspect-encoding")
    return ("page", index, text, flags)


def _unmapped_fonts(page: Any) -> bool:
    """A composite font with an Identity encoding and no /ToUnicode: its codes are glyph ids, and
    pypdf has no way to turn them into characters (CJK files from many producers)."""
    try:
        fonts = page["/Resources"]["/Font"].get_object()
        for ref in fonts.values():
            font = ref.get_object()
            if (
                font.get("/Subtype") == "/Type0"
                and font.get("/Encoding") in _IDENTITY
                and "/ToUnicode" not in font
            ):
                return True
    except Exception:
        return False
    return False


def _garbled(text: str) -> bool:
    """Control, unassigned, private-use or replacement characters in more than 1 in 10 characters."""
    visible = [c for c in text if not c.isspace()]
    odd = sum(1 for c in visible if c == "\ufffd" or unicodedata.category(c) in _ODD_CATEGORIES)
    return odd >= 3 and odd * 10 > len(visible)
