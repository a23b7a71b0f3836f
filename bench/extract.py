"""PDF extraction: pypdf (what the image ships) next to pdfminer.six and pypdfium2, same files, same run.

Each library runs in its own subprocess so peak RSS (VmHWM) is its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support import docgen

_RUNNER = r"""
import json, sys, time

def hwm_kb():
    # VmHWM belongs to this process image; ru_maxrss would carry the parent's peak across exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
lib, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if lib == "pypdf":
    from common.extractor.text import Limits, extract
    data = open(path, "rb").read()
    r = extract(data, "f.pdf", Limits(max_pages=10_000, max_input_bytes=1 << 30, max_output_chars=1 << 30, time_budget_s=0))
    pages, chars = r.pages, len(r.text)
elif lib == "pdfminer.six":
    from pdfminer.high_level import extract_text
    text = extract_text(path)
    pages, chars = text.count("\f"), len(text)
else:
    import pypdfium2 as pdfium
    doc = pdfium.PdfDocument(path)
    texts = [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
    pages, chars = len(texts), sum(map(len, texts))
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "pages": pages, "chars": chars,
                  "peak_rss_mb": hwm_kb() / 1024}))
"""

LIBS = ("pypdf", "pdfminer.six", "pypdfium2")


def _files(tmp: Path) -> dict[str, Path]:
    text = "\n".join(f"Line {i}: the quick brown fox jumps over the lazy dog, Zürich café." for i in range(40))
    hundred = tmp / "100-pages.pdf"
    hundred.write_bytes(docgen.make_pdf([f"Page {p}\n{text}" for p in range(100)]))
    big = tmp / "20-mb.pdf"
    big.write_bytes(docgen.make_pdf([f"Page {p}\n{text}" for p in range(100)], padding_bytes=20 * 1024 * 1024))
    return {"100 pages": hundred, "20 MB": big}


def run() -> dict[str, Any]:
    results: dict[str, Any] = {}
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in _files(Path(tmp)).items():
            row: dict[str, Any] = {"bytes": path.stat().st_size}
            for lib in LIBS:
                out = subprocess.run([sys.executable, "-c", _RUNNER, lib, str(path)], cwd=repo,
                                     capture_output=True, text=True, check=True)
                r = json.loads(out.stdout)
                row[lib] = {"pages_per_s": round(r["pages"] / r["seconds"], 1), "peak_rss_mb": round(r["peak_rss_mb"], 1),
                            "seconds": round(r["seconds"], 3), "pages": r["pages"]}
            row["pypdf_vs_pdfminer"] = round(row["pypdf"]["pages_per_s"] / row["pdfminer.six"]["pages_per_s"], 2)
            results[label] = row
    return results


def table(results: dict[str, Any]) -> str:
    lines = [f"{'file':10} {'library':13} {'pages/s':>9} {'peak RSS MB':>12}"]
    for label, row in results.items():
        for lib in LIBS:
            lines.append(f"{label:10} {lib:13} {row[lib]['pages_per_s']:>9} {row[lib]['peak_rss_mb']:>12}")
        lines.append(f"{label:10} pypdf / pdfminer.six = {row['pypdf_vs_pdfminer']}x (target >= 1.0; RSS target <= 256 MB)")
    return "\n".join(lines)
