"""The contact's HTML read as the system reads it: parsed once by lexbor (common.mail.htmldoc), then
converted to text (common.mail.htmltext) and sanitised for the forward (common.mail.htmlsafe: trackers
removed, CSS scoped, written out by the library), each pass timed on the same tree.

Two tables. The cases: real-looking mail and the densest markup, wall time of each pass and the peak
of Python allocations of the whole path (tracemalloc, in a second run). The scaling: the security
issue's worst shapes at 1x, 2x and 4x, CPU seconds of the whole path and the 2x/1x and 4x/2x ratios
(linear: about 2; quadratic: about 4). Two shapes are quadratic in every HTML5 parser measured
(lexbor, html5lib, html5ever): nested elements (the "p in button scope" walk of the stack of open
elements), bounded by the tag cap (MAX_HTML_TAGS: its sizes stop there, past it nothing more is
read); and distinct attributes on one element (the duplicate-name check), bounded only by
MAX_HTML_CHARS (docs/decisions.md, "Reading HTML mail": an open risk).
"""

from __future__ import annotations

import platform
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from common.mail import htmldoc
from common.mail.htmldoc import MAX_HTML_CHARS, MAX_HTML_TAGS
from common.mail.htmlsafe import sanitize
from common.mail.htmltext import convert
from common.reply.text import read_reply, reply_text, unread_html_lines


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
    ("'<!--' repeated, unclosed, 1 MB", lambda: "<!--" * 250_000),
    ("nested <div>, 100,000 deep", lambda: "<div>" * 100_000 + "x"),
    ("nested tables, 20,000 deep", lambda: "<table><tr><td>" * 20_000 + "x"),
    (
        f"<b>x</b> repeated, {MAX_HTML_CHARS // 1_000_000} MB (the bound)",
        lambda: "<b>x</b>" * (MAX_HTML_CHARS // 8),
    ),
    (
        f"<img> with attributes, {MAX_HTML_CHARS // 1_000_000} MB (the bound)",
        lambda: _IMG * (MAX_HTML_CHARS // len(_IMG)),
    ),
)
_IMG = '<img src="https://a.example/p.jpg" width=600 style="width:600px">'


def _passes(html: str) -> tuple[float, float, float, int]:
    """Wall seconds of the parse, the text conversion and the sanitiser on that one tree; chars read."""
    started = time.perf_counter()
    doc = htmldoc.read(html)
    parsed = time.perf_counter()
    convert(doc)
    converted = time.perf_counter()
    sanitize(doc, scope="s")
    done = time.perf_counter()
    return parsed - started, converted - parsed, done - converted, doc.read


def _peak(html: str) -> float:
    tracemalloc.start()
    sanitize(htmldoc.read(html), scope="s")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round(peak / 1e6, 1)


def _reply(size: int) -> str:
    """The owner's HTML reply quoting a contact's mail of ``size`` characters."""
    return f"<div>Thanks, see below.</div><hr><blockquote type=cite>{_newsletter(size)}</blockquote>"


def _reply_path(html: str) -> None:
    doc = htmldoc.read(html)
    reading = read_reply(reply_text("", doc))
    unread_html_lines("", doc, reading)


def _forward_path(html: str) -> None:
    doc = htmldoc.read(html)
    convert(doc)
    sanitize(doc, scope="s")


# The security issue's worst shapes, each built at a scale (1, 2, 4) and run through the path that
# reads it: the forward's (parse, text, sanitise) or the reply's (parse, own text, unread lines).
SHAPES: dict[str, tuple[Callable[[int], str], Callable[[str], None]]] = {
    # A list of root selectors (no white space: a stretch of more than MAX_TAG_SEPARATORS is cut
    # before the parser, and this shape is about the CSS scoper behind it).
    "repeated root selector in <style>, 1.5 MB at 4x": (
        lambda k: "<style>" + "html," * (75_000 * k) + "p{color:red}</style><p>Hi",
        _forward_path,
    ),
    "nested <div>, 25,000 deep at 4x (the tag cap)": (
        lambda k: "<div>" * (MAX_HTML_TAGS // 4 * k) + "x",
        _forward_path,
    ),
    "one element with 20,000 attributes at 4x": (
        lambda k: "<p " + " ".join(f"a{i}=x" for i in range(5_000 * k)) + ">x",
        _forward_path,
    ),
    "one element with 400,000 attributes at 4x (past MAX_TAG_SEPARATORS)": (
        lambda k: "<p>x</p><p " + " ".join(f"a{i}" for i in range(100_000 * k)) + ">x",
        _forward_path,
    ),
    "unterminated tags and quotes, many attribute starts, 8 MB at 4x": (
        lambda k: (
            ('<img src="x a=" b=\'c <a href="https://www.google.com/url?q=' + 'a="' * 50) * (10_000 * k)
        ),
        _forward_path,
    ),
    "tags with style attributes, 1 MB at 4x": (
        lambda k: '<img src="https://x.example/a.png" style="width:0.1em;height:1pt">' * (4_000 * k),
        _forward_path,
    ),
    "unclosed '<!--', 1.5 MB at 4x": (lambda k: "<!--" * (96_000 * k), _forward_path),
    "a reply quoting a mail, 500 KB at 4x": (lambda k: _reply(125_000 * k), _reply_path),
}


def scaling() -> list[dict[str, Any]]:
    rows = []
    for shape, (build, path) in SHAPES.items():
        seconds, chars = [], []
        for k in (1, 2, 4):
            html = build(k)
            chars.append(len(html))
            started = time.process_time()
            path(html)
            seconds.append(round(time.process_time() - started, 3))
        rows.append(
            {
                "shape": shape,
                "chars_1x": chars[0],
                "chars_4x": chars[2],
                "s_1x": seconds[0],
                "s_2x": seconds[1],
                "s_4x": seconds[2],
                "ratio_2x_1x": round(seconds[1] / max(seconds[0], 1e-3), 1),
                "ratio_4x_2x": round(seconds[2] / max(seconds[1], 1e-3), 1),
            }
        )
    return rows


def run() -> dict[str, Any]:
    rows = []
    for name, build in CASES:
        html = build()
        parse_s, text_s, safe_s, read = _passes(html)
        rows.append(
            {
                "case": name,
                "chars": len(html),
                "read": read,
                "parse_s": round(parse_s, 3),
                "text_s": round(text_s, 3),
                "sanitize_s": round(safe_s, 3),
                "peak_mb": _peak(html),
            }
        )
    return {
        "python": platform.python_version(),
        "max_html_chars": MAX_HTML_CHARS,
        "max_html_tags": MAX_HTML_TAGS,
        "cases": rows,
        "scaling": scaling(),
    }


def table(r: dict[str, Any]) -> str:
    lines = [
        f"Python {r['python']}; HTML read up to {r['max_html_chars']:,} characters and "
        f"{r.get('max_html_tags', 0):,} tags",
        f"{'case':<46} {'chars':>10} {'read':>10} {'parse s':>8} {'text s':>7} {'safe s':>7} {'peak MB':>8}",
    ]
    for c in r["cases"]:
        lines.append(
            f"{c['case']:<46} {c['chars']:>10,} {c.get('read', 0):>10,} {c.get('parse_s', '-'):>8} "
            f"{c.get('text_s', '-'):>7} {c.get('sanitize_s', '-'):>7} {c.get('peak_mb', '-'):>8}"
        )
    lines += [
        "",
        "Worst shapes at 1x, 2x, 4x (CPU s of the whole path; linear: each ratio about 2, quadratic 4)",
        f"{'shape':<50} {'chars 4x':>10} {'1x s':>7} {'2x s':>7} {'4x s':>7} {'2x/1x':>6} {'4x/2x':>6}",
    ]
    for row in r.get("scaling", []):
        lines.append(
            f"{row['shape']:<50} {row.get('chars_4x', 0):>10,} {row['s_1x']:>7} {row['s_2x']:>7} "
            f"{row['s_4x']:>7} {row.get('ratio_2x_1x', '-'):>6} {row.get('ratio_4x_2x', '-'):>6}"
        )
    return "\n".join(lines)
