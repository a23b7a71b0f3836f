"""HTML to text: our tokenizer (common.mail.htmltext) against the stdlib's html.parser, on this Python;
and the forward's sanitiser (common.mail.htmlsafe: the same tokenizer, trackers removed) beside it.

Each case is converted by both, in this process: wall time, and the peak of Python allocations
(tracemalloc) in a second run. The stdlib reader is the one common.mail.htmltext replaced; on Python 3.13.0
its
unclosed-comment case grows with the square of the input (CVE-2025-6069, fixed in 3.13.5), so that
case is kept small here. The last row is our reader at the bound (MAX_HTML_CHARS of the densest
markup); the whole-path figure for a 38 MB mail is in the "caps" section.
"""

from __future__ import annotations

import platform
import time
import tracemalloc
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

from common.mail.htmlsafe import sanitize
from common.mail.htmltext import MAX_HTML_CHARS, convert


class _StdlibText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _stdlib(html: str) -> str:
    parser = _StdlibText()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)


def _newsletter(size: int) -> str:
    block = (
        '<table class="row"><tr><td style="padding:8px"><a href="https://shop.example/item?id=1&amp;ref=mail">'
        '<img src="cid:logo" alt="Logo &gt; shop"></a><p>Great offers&nbsp;this week &#8212; 20% off.</p>'
        "<!-- tracking --></td></tr></table>\n"
    )
    return (
        "<html><head><style>td{color:red}</style></head><body>"
        + block * (size // len(block))
        + "</body></html>"
    )


CASES: tuple[tuple[str, Callable[[], str]], ...] = (
    ("newsletter-style HTML, 200 KB", lambda: _newsletter(200_000)),
    ("<b>x</b> repeated, 1 MB", lambda: "<b>x</b>" * 125_000),
    ("'<!--' repeated, unclosed, 10 KB", lambda: "<!--" * 2_500),
    (
        f"<b>x</b> repeated, {MAX_HTML_CHARS // 1_000_000} MB (ours only: the bound)",
        lambda: "<b>x</b>" * (MAX_HTML_CHARS // 8),
    ),
    (
        f"nested <blockquote>, {MAX_HTML_CHARS // 1_000_000} MB (ours only: the bound)",
        lambda: "<blockquote>" * (MAX_HTML_CHARS // 12),
    ),
    (
        f"<img> with attributes, {MAX_HTML_CHARS // 1_000_000} MB (ours only: the bound)",
        lambda: _IMG * (MAX_HTML_CHARS // len(_IMG)),
    ),
)
_IMG = '<img src="https://a.example/p.jpg" width=600 style="width:600px">'


def _measure(fn: Callable[[str], Any], html: str) -> tuple[float, float]:
    """Wall time of one run, then the allocation peak of another (tracemalloc slows every allocation)."""
    started = time.perf_counter()
    fn(html)
    seconds = time.perf_counter() - started
    tracemalloc.start()
    fn(html)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round(seconds, 3), round(peak / 1e6, 1)


def run() -> dict[str, Any]:
    rows = []
    for name, build in CASES:
        html = build()
        ours = _measure(lambda h: convert(h), html)
        safe = _measure(lambda h: sanitize(h), html)
        stdlib = _measure(_stdlib, html) if "ours only" not in name else (None, None)
        rows.append(
            {
                "case": name,
                "chars": len(html),
                "ours_s": ours[0],
                "ours_peak_mb": ours[1],
                "sanitize_s": safe[0],
                "sanitize_peak_mb": safe[1],
                "stdlib_s": stdlib[0],
                "stdlib_peak_mb": stdlib[1],
            }
        )
    return {"python": platform.python_version(), "max_html_chars": MAX_HTML_CHARS, "cases": rows}


def table(r: dict[str, Any]) -> str:
    lines = [
        f"Python {r['python']}; HTML read up to {r['max_html_chars']:,} characters",
        f"{'case':<52} {'chars':>10} {'ours s':>8} {'ours MB':>8} {'safe s':>7} {'safe MB':>8} "
        f"{'stdlib s':>9} {'stdlib MB':>10}",
    ]
    for c in r["cases"]:
        std = (
            f"{c['stdlib_s']:>9} {c['stdlib_peak_mb']:>10}"
            if c["stdlib_s"] is not None
            else f"{'-':>9} {'-':>10}"
        )
        lines.append(
            f"{c['case']:<52} {c['chars']:>10,} {c['ours_s']:>8} {c['ours_peak_mb']:>8} "
            f"{c['sanitize_s']:>7} {c['sanitize_peak_mb']:>8} {std}"
        )
    return "\n".join(lines)
