"""Every pass reply-handler makes over mail-supplied text, at 1×, 2× and 4× its size: each must grow
linearly (docs/reply.md, "Linear passes"), whatever the reply or the conversation's archived mail holds.

A pass is timed in this process (best of three, ``time.perf_counter``); ``ratio`` is the 4× time over
the 1× time (linear: about 4; the section flags any pass above ``MAX_RATIO``). The cases are the shapes
that made a pass quadratic before, or could: an owner quoting a large mail the contact sent (each
quoted line of the contact's re-walked its quote block), attribution-shaped lines between quote
blocks, long blank runs, HTML rules, command lines, the owner's names and addresses, and the evidence
read of an archived mail (parse, HTML to text, the contact's lines)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from common.mail import parse
from common.mail.htmltext import html_to_text
from common.reply.scrub import hide_addresses, hide_names
from common.reply.text import (
    Evidence,
    command_lines,
    extract_metadata,
    known_lines,
    owner_controls_in,
    read_reply,
    reply_text,
)
from tests.support.mailgen import mail

BASE_CHARS = 128 * 1024  # the 1× size; 4× is 512 KB, above the 429 KB mail that was lost
SIZES = (1, 2, 4)
MAX_RATIO = 8.0  # 4× the size in at most 8× the time (noise on a shared machine; quadratic is 16×)


def _contact_text(chars: int) -> str:
    line = "An ordinary line of the contact's long mail, number {n}, about the role and the dates.\n"
    out, n, size = [], 0, 0
    while size < chars:
        out.append(line.format(n=n))
        size += len(out[-1])
        n += 1
    return "".join(out)


def _quoting_reply(chars: int) -> tuple[str, Evidence]:
    contact = _contact_text(chars)
    quoted = "".join("> " + line + "\n" for line in contact.splitlines())
    head = "Thanks, Tuesday works.\n\nOn Mon, 3 Nov 2026 at 10:00, Jane <jane@corp.example> wrote:\n"
    ev = Evidence(known_lines(read_reply(contact).own), ("hello@example.com",), ("jane@corp.example",))
    return head + quoted, ev


def _inline(chars: int) -> str:
    pair = "> When can we meet, and where?\nTuesday 4 Nov 2026 at 10:00, jane@corp.example:\n"
    return pair * (chars // len(pair))


def _blank_runs(chars: int) -> str:
    return ("On 3 Nov 2026 jane@corp.example wrote:" + "\n" * 200 + "> q\n") * (chars // 240)


def _html(chars: int) -> str:
    block = '<div>Fine.</div><hr><div style="border-top:solid 1px">older</div><p>text &amp; more</p>\n'
    return block * (chars // len(block))


def _commands(chars: int) -> str:
    block = "[company: Acme]\n[block: @x.example]\nSome text of the owner's.\n"
    return block * (chars // len(block))


def _names(chars: int) -> str:
    block = "Ana Lindqvist <owner@example.net> wrote to LINDQVIST, Ana and A. Lindqvist.\n"
    return block * (chars // len(block))


def _archived(chars: int) -> bytes:
    text = _contact_text(chars // 2)
    html = "<html><body>" + "".join(f"<p>{line}</p>" for line in text.splitlines()) + "</body></html>"
    return mail(subject="Role", text=text, html=html)


def _evidence(raw: bytes) -> frozenset[str]:
    sent = parse.parse(raw)
    texts = [sent.body_text, sent.text, html_to_text(sent.html)]
    return frozenset().union(*(known_lines(read_reply(t).own) for t in texts if t))


def _reading(reply: tuple[str, Evidence]) -> object:
    return read_reply(*reply)


PASSES: tuple[tuple[str, Callable[[int], Any], Callable[[Any], object]], ...] = (
    ("reply quoting the contact's mail, with its evidence", _quoting_reply, _reading),
    ("inline answers naming times and addresses", _inline, read_reply),
    ("attribution lines over long blank runs", _blank_runs, read_reply),
    ("HTML-only reply: rules, then text", _html, lambda html: reply_text("", html)),
    (
        "command lines: metadata, controls, the owner's lines",
        _commands,
        lambda text: (extract_metadata(text), owner_controls_in(command_lines(read_reply(text)))),
    ),
    (
        "the owner's names and addresses hidden",
        _names,
        lambda text: hide_names(
            hide_addresses(text, ("owner@example.net",), "hello@example.com"), ("Ana Lindqvist",), "Alex"
        ),
    ),
    ("evidence read of an archived mail (text and HTML)", _archived, _evidence),
)


def _best(fn: Callable[[Any], object], arg: Any) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return min(times)


def run() -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for name, make, fn in PASSES:
        seconds = [_best(fn, make(BASE_CHARS * k)) for k in SIZES]
        ratio = seconds[-1] / max(seconds[0], 1e-6)
        rows.append({"pass": name, "seconds": [round(s, 4) for s in seconds], "ratio": round(ratio, 1)})
    return {
        "base_kb": BASE_CHARS // 1024,
        "sizes": list(SIZES),
        "passes": rows,
        "max_ratio": MAX_RATIO,
        "all_linear": all(r["ratio"] <= MAX_RATIO for r in rows),
    }


def table(r: dict[str, Any]) -> str:
    sizes = " ".join(f"{k * r['base_kb']:>7} KB" for k in r["sizes"])
    lines = [f"  {'pass':<55}{sizes}  4x/1x"]
    for row in r["passes"]:
        times = " ".join(f"{s:>8.3f} s" for s in row["seconds"])
        flag = "" if row["ratio"] <= r["max_ratio"] else "  NOT LINEAR"
        lines.append(f"  {row['pass']:<55}{times}  {row['ratio']:>5}{flag}")
    lines.append(f"  all linear (4x/1x <= {r['max_ratio']}): {r['all_linear']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.reply_passes: this section alone, without results.json
    print(table(run()))
