"""``email-handler search``: the owner's mail and its attachments' text, from the index on this machine
(ops/index.py), synced before each search."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli.command import arg, command
from ops.admin import TARGET, fail, target
from ops.index import MAX_LIMIT, MAX_TERMS, QueryError, connect, fts_query, index_path, search, sync

# --- the command -----------------------------------------------------------------------------------


def progress_bar(stream: Any) -> Callable[[int, int], None] | None:
    """A one-line bar on ``stream`` when it is a terminal and the sync reads more than a screenful."""
    # the bar is this module's own text; the command's streams drop CR (cli/termsafe.py), the bar needs it
    stream = getattr(stream, "inner", stream)
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        if total < 200:
            return
        if done == total or done % 50 == 0:
            width = 30
            filled = width * done // total
            stream.write(f"\rsync [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
            if done == total:
                stream.write("\n")
            stream.flush()

    return show


@command(
    "search the owner's mail and its attachments' text (an index on this machine, synced first)",
    arg("query", help='words and "phrases" (all must match); accents and case are ignored'),
    arg("--from", dest="sender", default="", help="only mail whose sender's address contains this"),
    arg("--address", default="", help="only mail written to this public address"),
    arg("--since", default="", help="only mail received on or after this date (YYYY-MM-DD or ISO time)"),
    arg("--until", default="", help="only mail received on or before this date (YYYY-MM-DD or ISO time)"),
    arg("--has-attachment", action="store_true", help="only mail with an attachment"),
    arg("--limit", type=int, default=20, help=f"at most this many hits (≤ {MAX_LIMIT})"),
    arg("--no-sync", action="store_true", help="search the index as it is, without syncing it first"),
    arg("--index", type=Path, help="the index file (default: .build/search/<bucket>.sqlite3)"),
    *TARGET,
)
def cmd_search(args: argparse.Namespace) -> int:
    try:
        fts_query(args.query)
    except QueryError as exc:
        return fail(f"search: {exc}")
    t = target(args)
    path = args.index or index_path(t.cfg)
    db = connect(path)
    try:
        if not args.no_sync:
            report = sync(db, t.cfg, progress_bar(sys.stderr))
            print(
                f"[sync] {report.fetched} read, {report.removed} pruned, {report.listed} in the bucket "
                f"({t.where}; index {path})",
                file=sys.stderr,
            )
        _, dropped = fts_query(args.query)
        if dropped:
            print(
                f"[note] only the first {MAX_TERMS} terms are searched ({dropped} dropped)", file=sys.stderr
            )
        hits = search(
            db,
            args.query,
            sender=args.sender,
            address=args.address,
            since=args.since,
            until=args.until,
            has_attachment=args.has_attachment,
            limit=args.limit,
        )
    except QueryError as exc:
        return fail(f"search: {exc}")
    finally:
        db.close()
    if args.json:
        print(json.dumps([h.document() for h in hits], indent=2, ensure_ascii=False))
        return 0
    if not hits:
        print(f"(no match for {args.query!r})")
        return 0
    for h in hits:
        where = f"[{h.attachment}] " if h.attachment else ""
        print(f"{h.date[:16].replace('T', ' ')}  {h.conversation_id}  {h.sender}  {where}{h.snippet}")
    return 0
