"""Run the benchmarks, write bench/results.json and print the tables.

``python -m bench`` runs every section (``make bench``); ``python -m bench cost senders`` runs only
those and updates their part of results.json. Either then renders the headline figures into
docs/development.md (bench/report.py); ``python -m bench report`` does only that. The terminal gets
progress and tables only: everything else written to stdout or stderr while a section runs (the
functions' JSON log lines, library warnings) goes to ``.build/bench/bench.log``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from bench import (
    coldstart,
    cost,
    extract,
    flow,
    forward_size,
    html_text,
    images,
    mail_caps,
    replies,
    reply_passes,
    report,
    search,
    senders,
)

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results.json"
LOG = REPO / ".build" / "bench" / "bench.log"

Section = tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], str]]
SECTIONS: dict[str, Section] = {
    "images": ("images: size, cold start, warm invoke", images.run, images.table),
    "coldstart": (
        "cold starts against a reference build (BENCH_REFERENCE_TAG), alternated pairs in one run",
        coldstart.run,
        coldstart.table,
    ),
    "extract": ("PDF extraction: pypdf vs peers", extract.run, extract.table),
    "cost": (
        "cost per mail: AWS calls per inbound mail and per send, sender CPU per send",
        cost.run,
        cost.table,
    ),
    "senders": ("senders on the emulator: throughput, latency, rate limit", senders.run, senders.table),
    "flow": (
        "end to end on the embedded stack: latency, a burst of first contacts at concurrency 10",
        flow.run,
        flow.table,
    ),
    "replies": (
        "owner replies: the public reply corpus (exact, leaked, partly lost, lost)",
        replies.run,
        replies.table,
    ),
    "passes": (
        "owner replies: every pass over mail-supplied text at 1x, 2x, 4x its size (linear)",
        reply_passes.run,
        reply_passes.table,
    ),
    "caps": (
        "inbound-handler parsing caps: time and peak RSS per case",
        mail_caps.run,
        mail_caps.table,
    ),
    "html": (
        "HTML mail: one lexbor parse, read for text and sanitised; worst shapes at 1x, 2x, 4x",
        html_text.run,
        html_text.table,
    ),
    "search": (
        "search: sync of 10,000 conversations and 2,000 attachment texts, query p95 beside grep -r",
        search.run,
        search.table,
    ),
    "size": (
        "large mail and SESv2's 40 MB forward: time and peak RSS of inbound-handler and forward-sender",
        forward_size.run,
        forward_size.table,
    ),
}


@contextlib.contextmanager
def terminal_only(log_path: Path) -> Iterator[TextIO]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so threads, logging
    handlers and child processes included) to ``log_path``; yield a stream to the terminal."""
    from common.runtime.log import flush

    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    console = os.fdopen(os.dup(saved[0]), "w", buffering=1)
    try:
        yield console
    finally:
        flush()  # log lines still queued in mypylogger's listener belong in the file
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        console.close()


def headline(results: dict[str, Any]) -> None:
    """The figures to watch first, under fixed keys (docs/development.md#benchmarks): ``latency.*``
    and ``burst.*`` from the flow section, ``cost.per_1000_mails_usd`` and
    ``cost.plain_forwarder_per_1000_mails_usd`` from the flow and cost sections together,
    ``inbound.aws_calls_per_mail`` and ``senders.aws_calls_per_send`` (beside their floors)."""
    flow_results, cost = results.get("flow"), results.get("cost")
    if flow_results:
        latency = flow_results["latency"]
        results["latency"] = {k: latency[k] for k in ("receipt_to_forward", "reply_to_send")}
        burst = flow_results["burst"]
        keys = ("mails", "lost", "dlq", "duplicates", "minutes_to_last_forward", "bottleneck")
        results["burst"] = {k: burst[k] for k in keys}
    if flow_results and cost:
        cost.update(flow.cost_per_1000_mails(flow_results, cost))
    if not cost:
        return
    inbound, sends = cost["inbound"], cost["senders"]
    results["inbound"] = {"aws_calls_per_mail": inbound["aws_calls_per_mail"], "floor": inbound["floor"]}
    results.setdefault("senders", {}).update(
        aws_calls_per_send=sends["aws_calls_per_send"],
        aws_calls_floor=sends["floor"],
        **{k: v for k, v in sends.items() if k.startswith("sender_cpu_ms")},
    )


def previous(chosen: list[str]) -> dict[str, Any]:
    """What a partial run keeps of results.json: every section it does not run, unless the file holds
    figures transcribed from the docs (they lack the details the headline combines), which a new run
    replaces whole."""
    if len(chosen) == len(SECTIONS) or not RESULTS.exists():
        return {}
    kept: dict[str, Any] = json.loads(RESULTS.read_text())
    return {} if "transcribed" in kept else kept


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["report"]:
        return report.main(args[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help=f"any of {', '.join(SECTIONS)} (default: all); `report` alone only renders the figures",
    )
    chosen = parser.parse_args(args).sections or list(SECTIONS)
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    results = previous(chosen)
    results.update(machine={"python": platform.python_version(), "cpus": os.cpu_count()})
    print(
        f"[bench] sections: {', '.join(chosen)}; function logs and library output: {LOG.relative_to(REPO)}",
        flush=True,
    )
    for name in chosen:
        title, run, table = SECTIONS[name]
        print(f"\n== {title} ==", flush=True)
        began = time.monotonic()
        try:
            with terminal_only(LOG):
                results[name] = run()
        except BaseException:
            print(f"[bench] {name} failed; its output is in {LOG}", file=sys.stderr, flush=True)
            raise
        results.setdefault("measured", {})[name] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(table(results[name]), flush=True)
        print(f"[bench] {name}: {time.monotonic() - began:.0f} s", flush=True)
    headline(results)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    report.write(results)
    print(f"wrote its figures into {report.DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
