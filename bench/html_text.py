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

from common.mail import htmltoken, trackers
from common.mail.cssscope import rewrite
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


# Each pass of the HTML stack over mail-supplied text, on the shapes it finds hardest, at 1x, 2x and 4x
# SCALE_BASE characters: linear work takes about 2x and 4x as long (quadratic: 4x and 16x). The last
# shape at 4x is the 1.5 MB mail whose <style> repeats a root selector. tests/unit/test_css.py counts
# the same passes' work without timing it.
SCALE_BASE = 384_000
PASSES: dict[str, Callable[[str], object]] = {
    "tokenizer": lambda h: sum(1 for _ in htmltoken.tokens(h)),
    "sanitiser": lambda h: sanitize(h, scope="s"),
    "CSS scoper": lambda h: rewrite(h, "s"),
    "text": convert,
    "trackers": lambda h: trackers.clean_stylesheet(h, "s"),
}
SHAPES: dict[str, tuple[str, str, str]] = {
    "nested CSS blocks": ("<style>p{", "{(", "</style>"),
    "CSS declarations with URLs": ("<style>p{", "a:url(https://x.example/a.png);", "}</style>"),
    "nested CSS rules with &": ("<style>p{", "& a{b:c}", "}</style>"),
    "tags with style attributes": ("", '<img src="https://x.example/a.png" style="width:0.1em">', ""),
    "repeated root selector": ("<style>", "html ", "{color:red}</style>"),
}


def scaling() -> list[dict[str, Any]]:
    rows = []
    for shape, (head, unit, tail) in SHAPES.items():
        for name, fn in PASSES.items():
            seconds = []
            for times in (1, 2, 4):
                html = head + unit * (SCALE_BASE * times // len(unit)) + tail
                started = time.process_time()
                fn(html)
                seconds.append(round(time.process_time() - started, 3))
            rows.append(
                {
                    "shape": shape,
                    "pass": name,
                    "chars_1x": SCALE_BASE,
                    "s_1x": seconds[0],
                    "s_2x": seconds[1],
                    "s_4x": seconds[2],
                    "ratio_4x": round(seconds[2] / max(seconds[0], 1e-3), 1),
                }
            )
    return rows


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
    return {
        "python": platform.python_version(),
        "max_html_chars": MAX_HTML_CHARS,
        "cases": rows,
        "scaling": scaling(),
    }


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
    lines += [
        "",
        "Each pass at 1x, 2x, 4x (CPU s; linear: 4x takes about 4 times 1x, quadratic 16 times)",
        f"{'shape':<30} {'pass':<11} {'chars 1x':>9} {'1x s':>7} {'2x s':>7} {'4x s':>7} {'4x/1x':>6}",
    ]
    for row in r.get("scaling", []):
        lines.append(
            f"{row['shape']:<30} {row['pass']:<11} {row['chars_1x']:>9,} {row['s_1x']:>7} {row['s_2x']:>7} "
            f"{row['s_4x']:>7} {row['ratio_4x']:>6}"
        )
    return "\n".join(lines)
