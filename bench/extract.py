"""Text extraction: pypdf through the extractor (what the image ships) next to pypdfium2 and
pdfminer.six, on the real documents of the shared corpus and on two generated files, same run.

Each library reads each file in its own subprocess, so peak RSS (VmHWM) is that file's own; the
extractor's figure includes its parse child, its time the fork. Word recall of a library on a file
is the share of another library's words it also found, against the better of the two others (the
one it agrees with most: a reference full of mojibake says nothing); DOCX recall is against
python-docx's paragraphs.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support import docgen
from tests.support.extraction import corpus_files

_RUNNER = r"""
import json, sys, time

def hwm_mb():
    # VmHWM belongs to this process image; ru_maxrss would carry the parent's peak across exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
lib, path = sys.argv[1], sys.argv[2]
child_peak = 0.0
# Imports before the clock: the figure is the library's work on the file, not Python's start.
if lib == "extractor":
    import pypdf
    from common.extractor.text import Limits, extract
elif lib == "pdfminer.six":
    from pdfminer.high_level import extract_text
elif lib == "pypdfium2":
    import pypdfium2 as pdfium
else:
    import docx
t0 = time.perf_counter()
try:
    if lib == "extractor":
        data = open(path, "rb").read()
        r = extract(data, path, Limits(max_pages=100_000, max_input_bytes=1 << 30, max_output_chars=1 << 30,
                                       time_budget_s=600))
        pages, text, child_peak = r.pages or 0, r.text, r.peak_rss_mb
    elif lib == "pdfminer.six":
        text = extract_text(path)
        pages = text.count("\f")
    elif lib == "pypdfium2":
        doc = pdfium.PdfDocument(path)
        texts = [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
        pages, text = len(texts), "\f".join(texts)
    else:  # python-docx, the DOCX reference
        text = "\n".join(p.text for p in docx.Document(path).paragraphs)
        pages = 0
    error = ""
except Exception as exc:
    pages, text, error = 0, "", type(exc).__name__
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "pages": pages, "text": text, "error": error,
                  "peak_rss_mb": max(hwm_mb(), child_peak)}))
"""

PDF_LIBS = ("extractor", "pypdfium2", "pdfminer.six")
# Words: two letters or more. Digits and lone letters are mostly formula fragments; pdfminer.six
# writes "(cid:13)" for glyphs it cannot map; marks (Arabic harakat, accents) are compared without.
_WORD = re.compile(r"[^\W\d_]{2,}")
_CID = re.compile(r"\(cid:\d+\)")


def _words(text: str) -> Counter[str]:
    plain = "".join(
        c for c in unicodedata.normalize("NFKD", _CID.sub(" ", text)) if unicodedata.category(c) != "Mn"
    )
    return Counter(_WORD.findall(plain.lower()))


def recall(found: str, reference: str) -> float | None:
    ref = _words(reference)
    total = sum(ref.values())
    if not total:
        return None
    return sum((ref & _words(found)).values()) / total


def _run(lib: str, path: Path) -> dict[str, Any]:
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _RUNNER, lib, str(path)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return dict(json.loads(out.stdout))


def _generated(tmp: Path) -> dict[str, Path]:
    text = "\n".join(
        f"Line {i}: the quick brown fox jumps over the lazy dog, Zürich café." for i in range(40)
    )
    hundred = tmp / "100-pages.pdf"
    hundred.write_bytes(docgen.make_pdf([f"Page {p}\n{text}" for p in range(100)]))
    big = tmp / "20-mb.pdf"
    big.write_bytes(
        docgen.make_pdf([f"Page {p}\n{text}" for p in range(100)], padding_bytes=20 * 1024 * 1024)
    )
    return {"100 pages": hundred, "20 MB": big}


def _summary(rows: list[dict[str, Any]], lib: str) -> dict[str, Any]:
    ok = [r[lib] for r in rows if not r[lib]["error"]]
    recalls = [r[lib]["recall"] for r in rows if r[lib]["recall"] is not None]
    long = [r[lib] for r in rows if not r[lib]["error"] and r[lib]["pages"] >= 10]
    pages, seconds = sum(r["pages"] for r in ok), sum(r["seconds"] for r in ok)
    peaks = sorted(r["peak_rss_mb"] for r in ok)
    return {
        "files_read": len(ok),
        "errors": len(rows) - len(ok),
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_s": round(pages / seconds, 1) if seconds else 0.0,
        "pages_per_s_files_10_pages_up": round(
            sum(r["pages"] for r in long) / sum(r["seconds"] for r in long), 1
        )
        if long
        else None,
        "recall_median": round(statistics.median(recalls), 3) if recalls else None,
        "recall_min": round(min(recalls), 3) if recalls else None,
        "files_recall_below_0_9": sum(1 for r in recalls if r < 0.9),
        "peak_rss_mb_p90": round(peaks[int(0.9 * (len(peaks) - 1))], 1) if peaks else None,
        "peak_rss_mb_max": round(peaks[-1], 1) if peaks else None,
    }


def _corpus(paths: list[Path]) -> dict[str, Any]:
    rows = []
    for path in paths:
        runs = {lib: _run(lib, path) for lib in PDF_LIBS}
        row: dict[str, Any] = {"file": path.name}
        for lib in PDF_LIBS:
            run = runs[lib]
            against = [
                recall(run["text"], runs[o]["text"]) for o in PDF_LIBS if o != lib and not runs[o]["error"]
            ]
            known = [r for r in against if r is not None]
            row[lib] = {
                "seconds": round(run["seconds"], 3),
                "pages": run["pages"],
                "error": run["error"],
                "peak_rss_mb": round(run["peak_rss_mb"], 1),
                "recall": None if run["error"] or not known else max(known),
            }
        rows.append(row)
    return {"files": len(rows), "libraries": {lib: _summary(rows, lib) for lib in PDF_LIBS}, "per_file": rows}


def _docx(paths: list[Path]) -> dict[str, Any]:
    recalls, extra = [], 0
    for path in paths:
        ours, reference = _run("extractor", path), _run("python-docx", path)
        value = recall(ours["text"], reference["text"])
        if value is not None:
            recalls.append(value)
        extra += sum((_words(ours["text"]) - _words(reference["text"])).values())
    return {
        "files": len(paths),
        "recall_vs_python_docx_min": round(min(recalls), 3) if recalls else None,
        "recall_vs_python_docx_median": round(statistics.median(recalls), 3) if recalls else None,
        "words_python_docx_misses": extra,
    }


def run() -> dict[str, Any]:
    results: dict[str, Any] = {"generated": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in _generated(Path(tmp)).items():
            row: dict[str, Any] = {"bytes": path.stat().st_size}
            for lib in PDF_LIBS:
                r = _run(lib, path)
                row[lib] = {
                    "pages_per_s": round(r["pages"] / r["seconds"], 1),
                    "peak_rss_mb": round(r["peak_rss_mb"], 1),
                    "seconds": round(r["seconds"], 3),
                    "pages": r["pages"],
                }
            results["generated"][label] = row
    files = corpus_files()
    results["corpus"] = _corpus([p for p in files if p.suffix == ".pdf"]) if files else None
    results["docx"] = _docx([p for p in files if p.suffix == ".docx"]) if files else None
    return results


def table(results: dict[str, Any]) -> str:
    lines = [f"{'generated':10} {'library':13} {'pages/s':>9} {'peak RSS MB':>12}"]
    for label, row in results["generated"].items():
        for lib in PDF_LIBS:
            lines.append(f"{label:10} {lib:13} {row[lib]['pages_per_s']:>9} {row[lib]['peak_rss_mb']:>12}")
    corpus = results.get("corpus")
    if not corpus:
        lines.append("real documents: no corpus found (set CORPUS_DOCS to ../shared/corpus/docs)")
        return "\n".join(lines)
    lines.append(
        f"\nreal PDFs ({corpus['files']} files): {'library':13} {'read':>5} {'pages':>6} {'pages/s':>8} "
        f"{'>=10 p':>7} {'recall med':>10} {'min':>6} {'<0.9':>5} {'RSS p90':>8} {'max':>6}"
    )
    for lib, s in corpus["libraries"].items():
        lines.append(
            f"{'':22}{lib:13} {s['files_read']:>5} {s['pages']:>6} {s['pages_per_s']:>8} "
            f"{s['pages_per_s_files_10_pages_up'] or '-':>7} {s['recall_median']:>10} {s['recall_min']:>6} "
            f"{s['files_recall_below_0_9']:>5} {s['peak_rss_mb_p90']:>8} {s['peak_rss_mb_max']:>6}"
        )
    lines.append(
        "recall: share of another library's words found, the better of the two;"
        " extractor = pypdf in the parse child (fork included); RSS target <= 256 MB"
    )
    docx = results.get("docx")
    if docx:
        lines.append(
            f"real DOCX ({docx['files']} files): recall vs python-docx min "
            f"{docx['recall_vs_python_docx_min']}, "
            f"median {docx['recall_vs_python_docx_median']}; words python-docx misses (notes, comments, "
            f"text boxes, other headers): {docx['words_python_docx_misses']}"
        )
    return "\n".join(lines)
