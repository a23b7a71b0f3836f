"""The headline figures of docs/development.md, rendered from bench/results.json.

``make bench`` rewrites the section between the two marker comments after it writes results.json, and
``python -m bench report`` does it alone (``--check`` only says whether the page is current), so the
page shows the figures of the last run with its dates and cannot drift from them. The keys are the
fixed ones other tools read (docs/development.md#benchmarks); one that a run did not produce is
rendered "not measured yet", never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy.functions import FUNCTIONS

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results.json"
DOC = REPO / "docs" / "development.md"
BEGIN = "<!-- bench:figures:begin (written by `python -m bench report` from bench/results.json) -->"
END = "<!-- bench:figures:end -->"
NOT_MEASURED = "not measured yet"


def _get(results: dict[str, Any], dotted: str) -> Any:
    node: Any = results
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _when(results: dict[str, Any], *sections: str) -> str:
    """The day each section that feeds a figure was measured (``measured`` holds UTC timestamps)."""
    stamps = (_get(results, f"measured.{s}") for s in sections)
    days = sorted({str(stamp)[:10] for stamp in stamps if stamp})
    return ", ".join(days) if days else NOT_MEASURED


def _percentiles(results: dict[str, Any], key: str) -> str | None:
    p50, p95 = _get(results, f"{key}.p50_s"), _get(results, f"{key}.p95_s")
    return None if p50 is None or p95 is None else f"p50 {p50} s, p95 {p95} s"


def _burst(results: dict[str, Any]) -> str | None:
    b = _get(results, "burst")
    if not isinstance(b, dict) or any(k not in b for k in ("mails", "lost", "dlq", "duplicates")):
        return None
    return (
        f"{b['mails']:,} mails: {b['lost']} lost, {b['dlq']} in a DLQ, {b['duplicates']} duplicates; "
        f"the last forward after {b.get('minutes_to_last_forward', '?')} min; "
        f"bottleneck {b.get('bottleneck') or 'not recorded'}"
    )


def _cost(results: dict[str, Any]) -> str | None:
    usd = _get(results, "cost.per_1000_mails_usd")
    return None if usd is None else f"${usd}"


def _plain(results: dict[str, Any]) -> str:
    usd = _get(results, "cost.plain_forwarder_per_1000_mails_usd")
    return f"a plain SES forwarder: {NOT_MEASURED if usd is None else f'${usd}'}"


def _cold(results: dict[str, Any]) -> str | None:
    found = [(fn.name, _get(results, f"images.functions.{fn.name}.cold_net_vs_baseline")) for fn in FUNCTIONS]
    if all(net is None for _, net in found):
        return None
    return ", ".join(f"{name} {NOT_MEASURED if net is None else net}" for name, net in found)


def _floor(results: dict[str, Any]) -> str | None:
    ratio = _get(results, "senders.full_vs_floor")
    if ratio is None:
        return None
    per_s, floor = _get(results, "senders.full.sends_per_s"), _get(results, "senders.floor_sends_per_s")
    return f"{ratio}" + (f" ({per_s} sends/s against a floor of {floor}/s)" if per_s and floor else "")


def _search(results: dict[str, Any]) -> str | None:
    s = _get(results, "search")
    if not isinstance(s, dict) or "query_p95_s" not in s:
        return None
    return (
        f"query p95 {s['query_p95_s']} s; sync of {s['conversations']:,} conversations and "
        f"{s['attachments']:,} texts {s['sync_s']} s, again {s['resync_s']} s ({s['resync_read']} read)"
    )


def _grep(results: dict[str, Any]) -> str:
    p95 = _get(results, "search.grep.p95_s")
    return f"p95 ≤ 0.2 s; grep -r over the same text: {NOT_MEASURED if p95 is None else f'p95 {p95} s'}"


Value = Callable[[dict[str, Any]], str | None]  # None: the run did not produce the figure
Target = Callable[[dict[str, Any]], str]
# (what, key, its value, its target or baseline, the sections the figure comes from)
Row = tuple[str, str, Value, Target, tuple[str, ...]]
ROWS: tuple[Row, ...] = (
    (
        "a contact's mail → its forward accepted by SES",
        "latency.receipt_to_forward.p50_s|p95_s",
        lambda r: _percentiles(r, "latency.receipt_to_forward"),
        lambda r: "p95 ≤ 2 s",
        ("flow",),
    ),
    (
        "the owner's reply → accepted by SES",
        "latency.reply_to_send.p50_s|p95_s",
        lambda r: _percentiles(r, "latency.reply_to_send"),
        lambda r: "p95 ≤ 2 s",
        ("flow",),
    ),
    (
        "a burst of first contacts within a minute, account concurrency 10",
        "burst.mails|lost|dlq|duplicates|minutes_to_last_forward|bottleneck",
        _burst,
        lambda r: "≤ 10 min, nothing lost, duplicated or dead-lettered",
        ("flow",),
    ),
    (
        "cost per 1,000 first-contact mails on AWS",
        "cost.per_1000_mails_usd",
        _cost,
        _plain,
        ("flow", "cost"),
    ),
    (
        "cold start net of the container, (function − hello) / (baseline − hello)",
        "images.functions.<function>.cold_net_vs_baseline",
        _cold,
        lambda r: "handlers ≤ 1.3, senders ≤ 1.2",
        ("images",),
    ),
    (
        "senders' full path against the three-request floor",
        "senders.full_vs_floor",
        _floor,
        lambda r: "≥ 0.9",
        ("senders",),
    ),
    (
        "search: query time on the owner's index, and its sync from the local stack",
        "search.query_p95_s|sync_s|resync_s",
        _search,
        _grep,
        ("search",),
    ),
)


def render(results: dict[str, Any]) -> str:
    """The section between the markers, markers included."""
    lines = [
        BEGIN,
        "| figure | key in `bench/results.json` | value | target or baseline | measured |",
        "|---|---|---|---|---|",
    ]
    for what, key, value, target, sections in ROWS:
        shown = value(results)
        when = _when(results, *sections) if shown is not None else "—"
        cell = key.replace("|", "\\|")  # a table cell ends at a bare "|", even inside a code span
        lines.append(f"| {what} | `{cell}` | {shown or NOT_MEASURED} | {target(results)} | {when} |")
    source = _get(results, "transcribed")
    if source:
        lines += ["", f"These figures were transcribed into `bench/results.json` {source}"]
    lines.append(END)
    return "\n".join(lines)


def updated(page: str, results: dict[str, Any]) -> str:
    """``page`` with its figures section rendered from ``results``."""
    head, begin, rest = page.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{DOC.name} lacks the figures markers {BEGIN!r} … {END!r}")
    return head + render(results) + tail


def load(path: Path = RESULTS) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write(results: dict[str, Any], doc: Path = DOC) -> bool:
    """Rewrite the page's figures from ``results``; True when the page changed."""
    page = doc.read_text(encoding="utf-8")
    new = updated(page, results)
    if new != page:
        doc.write_text(new, encoding="utf-8")
    return new != page


def main(argv: list[str]) -> int:
    """``python -m bench report [--check]``."""
    results = load()
    if argv == ["--check"]:
        current = updated(DOC.read_text(encoding="utf-8"), results) == DOC.read_text(encoding="utf-8")
        print(f"{DOC.relative_to(REPO)}: figures {'match' if current else 'differ from'} {RESULTS.name}")
        return 0 if current else 1
    if argv:
        print("usage: python -m bench report [--check]")
        return 2
    changed = write(results)
    print(f"{DOC.relative_to(REPO)}: figures {'updated' if changed else 'already current'}")
    return 0
