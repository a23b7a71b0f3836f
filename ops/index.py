"""The search index on the owner's machine behind ``email-handler search`` (ops/search.py).

The index is one SQLite file with an FTS5 table (docs/decisions.md, "Search: SQLite FTS5 on the owner's
machine"), synced from the stores before each search: the conversations table (scanned whole: it is
the records the filters and ``conversations show`` read) and the bucket's archive
(``conversations/<cid>/<id>.eml``) and extracted texts (``extracted-text/<cid>/<id>/<file>.txt``).
A sync lists both prefixes and reads only the objects whose ETag it has not indexed; what the bucket
no longer holds (``forget``, retention) leaves the index in the same sync. ``forget`` also removes the
contact's rows at once (:func:`forget_locally`) and leaves a tombstone, so an object that outlived its
deletion is never indexed again.

Hostile text is bounded: each document's text is cut at :data:`TEXT_CAP` characters (and read with a
ranged GET, so a 5 MB text is never downloaded whole), a query keeps at most :data:`MAX_TERMS` words,
each word or "phrase" is passed to FTS5 as a quoted string (never as FTS5 syntax), results are capped,
and a query that runs past :data:`QUERY_BUDGET_S` is interrupted.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from email.utils import getaddresses
from pathlib import Path
from typing import Any

from common.aws import dynamodb, s3
from common.errors import EmailHandlerError
from common.mail import parse
from common.runtime.clock import iso_z
from common.store import layout
from deploy.config import Config

DIR = Path(__file__).resolve().parents[1] / ".build" / "search"
DIR_VARIABLE = "EMAIL_HANDLER_SEARCH_DIR"
TEXT_CAP = 1_000_000  # characters of one document's text that are indexed (the rest is not searched)
MAIL_CAP = 40 * 1024 * 1024  # bytes of one archived mail read: SES receives at most 40 MB
MAX_TERMS = 16  # words or phrases of one query; more are dropped (and the user is told)
MAX_TERM_CHARS = 200
MAX_LIMIT = 200
QUERY_BUDGET_S = 2.0
# The body is indexed in chunks, and a hit's snippet is cut from its best chunk: FTS5's snippet() and
# highlight() cost grows with the matches in the text they read (measured: snippet() over a 1 MB text
# of one repeated phrase took 193 s, highlight() 2.6 s; over a 4,000-character chunk, milliseconds).
# A chunk's rowid is its document's id * CHUNKS_PER_DOCUMENT + its number.
CHUNK_CHARS = 4_000
CHUNK_OVERLAP = 200
CHUNKS_PER_DOCUMENT = 1024  # > TEXT_CAP / (CHUNK_CHARS / 2 - CHUNK_OVERLAP): room for every chunk
FETCHERS = 8  # concurrent GETs: a sync is bound by round trips to S3, not by this machine
# What the index keeps of each conversation record: the filters' fallbacks for a text whose mail is
# not indexed (`conversations show` reads the whole record from the table).
RECORD_FIELDS = ("conversationId", "senderEmail", "publicAddress", "timestamp")
COMMIT_EVERY = 500
SCHEMA_VERSION = "1"

# Scripts written without spaces between words (Han, kana, Hangul syllables, half-width katakana).
# unicode61 would make a whole run one token, so "東京" could not be found inside "東京都": each such
# character is indexed (and queried) as its own token, a query's run being the phrase of its characters.
# The separator is U+200B (a format character, which unicode61 reads as a separator and a terminal
# does not show); it is removed from what is printed.
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f])")
ZWSP = "\u200b"
_QUERY_PART = re.compile(r'"([^"]*)"?|(\S+)')
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # SQLite ends a string at NUL: controls are spaces

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    etag TEXT NOT NULL,
    kind TEXT NOT NULL,            -- 'mail' | 'attachment'
    cid TEXT NOT NULL,
    mid TEXT NOT NULL,
    filename TEXT NOT NULL DEFAULT '',
    received TEXT NOT NULL,        -- S3 LastModified, ISO 8601 UTC: when the store received it
    sender TEXT NOT NULL DEFAULT '',
    sender_address TEXT NOT NULL DEFAULT '',
    recipients TEXT NOT NULL DEFAULT '',
    subject TEXT NOT NULL DEFAULT '',
    attachments INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS objects_mid ON objects(mid, kind);
CREATE INDEX IF NOT EXISTS objects_cid ON objects(cid);
CREATE TABLE IF NOT EXISTS conversations(
    cid TEXT PRIMARY KEY, sender TEXT NOT NULL, address TEXT NOT NULL, record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS forgotten(cid TEXT PRIMARY KEY, at TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS text USING fts5(
    subject, who, body, filename, tokenize = 'unicode61 remove_diacritics 2'
);
"""


def spaced(text: str) -> str:
    """``text`` with each character of an unspaced script standing alone (see :data:`_CJK`)."""
    return _CJK.sub(ZWSP + r"\1" + ZWSP, text)


def index_path(cfg: Config, folder: Path | None = None) -> Path:
    """One index per bucket (on AWS the bucket's name holds the account and the region), in
    ``$EMAIL_HANDLER_SEARCH_DIR`` when set, else the project's .build/search/."""
    return (folder or Path(os.environ.get(DIR_VARIABLE) or DIR)) / f"{cfg.bucket}.sqlite3"


def connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
    return db


# --- sync ------------------------------------------------------------------------------------------


@dataclass
class SyncReport:
    listed: int = 0  # objects the bucket holds under the two prefixes
    fetched: int = 0  # objects read (GET) in this sync: only new or changed ones
    indexed: int = 0
    removed: int = 0  # documents the bucket no longer holds, pruned
    conversations: int = 0
    skipped: list[str] = field(default_factory=list)  # keys read but not indexable (gone meanwhile)


@dataclass(frozen=True, slots=True)
class Listed:
    key: str
    etag: str
    received: str
    cid: str
    mid: str
    filename: str  # attachments: the attachment's name; mails: ''


def classify(key: str, etag: str, modified: datetime) -> Listed | None:
    """An archived mail or an extracted text of the bucket's layout (common/store/layout.py), or None."""

    parts = key.split("/")
    received = iso_z(modified.astimezone(UTC))
    if key.startswith(layout.CONVERSATIONS) and len(parts) == 3 and parts[2].endswith(".eml") and parts[1]:
        return Listed(key, etag, received, parts[1], parts[2].removesuffix(".eml"), "")
    if (
        key.startswith(layout.EXTRACTED)
        and len(parts) == 4
        and all(parts)
        and key.endswith(".txt")
        and parts[3] != ".txt"
    ):
        return Listed(key, etag, received, parts[1], parts[2], parts[3].removesuffix(".txt"))
    return None


def listing(cfg: Config) -> dict[str, Listed]:

    out: dict[str, Listed] = {}
    for prefix in (layout.CONVERSATIONS, layout.EXTRACTED):
        for o in s3.listing(cfg.bucket, prefix):
            item = classify(str(o["Key"]), str(o.get("ETag", "")), o["LastModified"])
            if item is not None:
                out[item.key] = item
    return out


def sync_conversations(db: sqlite3.Connection, cfg: Config) -> int:

    items = dynamodb.scan(cfg.conversations_table, RECORD_FIELDS)
    db.execute("DELETE FROM conversations")
    db.executemany(
        "INSERT OR REPLACE INTO conversations VALUES (?, ?, ?, ?)",
        [
            (
                str(i["conversationId"]),
                str(i.get("senderEmail", "")).lower(),
                str(i.get("publicAddress", "")).lower(),
                json.dumps(i, default=str, ensure_ascii=False),
            )
            for i in items
        ],
    )
    return len(items)


def sync(
    db: sqlite3.Connection, cfg: Config, progress: Callable[[int, int], None] | None = None
) -> SyncReport:
    """Bring the index to what the stores hold now, reading only what it has not indexed."""
    report = SyncReport()
    # the table's scan and the bucket's listing wait on two services: side by side
    with ThreadPoolExecutor(1) as pool:
        listed_later = pool.submit(listing, cfg)
        report.conversations = sync_conversations(db, cfg)
        listed = listed_later.result()
    report.listed = len(listed)
    known = {str(k): str(e) for k, e in db.execute("SELECT key, etag FROM objects")}
    gone = [k for k in known if k not in listed]
    for k in gone:
        delete_key(db, k)
    report.removed = len(gone)
    tombs = dict(db.execute("SELECT cid, at FROM forgotten").fetchall())
    todo = sorted(
        (item for item in listed.values() if wanted(item, known, tombs)),
        key=lambda item: item.key,  # conversations/ before extracted-text/: a mail before its texts
    )
    for n, (item, body) in enumerate(fetch_all(cfg, todo), 1):
        report.fetched += 1
        if body is None:
            report.skipped.append(item.key)
        else:
            store(db, item, body)
            report.indexed += 1
        if n % COMMIT_EVERY == 0:
            db.commit()
        if progress is not None:
            progress(n, len(todo))
    db.execute(
        "INSERT OR REPLACE INTO meta VALUES ('synced', ?)", (datetime.now(UTC).isoformat(timespec="seconds"),)
    )
    db.commit()
    return report


def wanted(item: Listed, known: dict[str, str], forgotten: dict[str, str]) -> bool:
    """Read ``item``? Not when the index holds it with this ETag, nor when its conversation was
    forgotten here and it is no newer than what the index held then (an object the stores should no
    longer have)."""
    return known.get(item.key) != item.etag and item.received > forgotten.get(item.cid, "")


def fetch_all(cfg: Config, todo: list[Listed]) -> Iterator[tuple[Listed, bytes | None]]:
    """Each object's first bytes (a mail whole up to :data:`MAIL_CAP`, a text up to four bytes a
    character of :data:`TEXT_CAP`), fetched :data:`FETCHERS` at a time, in ``todo``'s order."""

    def get(item: Listed) -> bytes | None:
        return s3.head_bytes(cfg.bucket, item.key, MAIL_CAP if not item.filename else 4 * TEXT_CAP)

    with ThreadPoolExecutor(FETCHERS) as pool:
        yield from zip(todo, pool.map(get, todo), strict=True)


def delete_key(db: sqlite3.Connection, key: str) -> None:
    row = db.execute("SELECT id FROM objects WHERE key = ?", (key,)).fetchone()
    if row is not None:
        base = int(row["id"]) * CHUNKS_PER_DOCUMENT
        db.execute("DELETE FROM text WHERE rowid BETWEEN ? AND ?", (base, base + CHUNKS_PER_DOCUMENT - 1))
        db.execute("DELETE FROM objects WHERE id = ?", (row["id"],))


def store(db: sqlite3.Connection, item: Listed, body: bytes) -> None:
    delete_key(db, item.key)
    if item.filename:
        text = body.decode("utf-8", "replace")[:TEXT_CAP]
        row: dict[str, Any] = {"kind": "attachment", "subject": "", "who": "", "body": text}
    else:
        row = mail_row(body)
    cur = db.execute(
        "INSERT INTO objects(key, etag, kind, cid, mid, filename, received, sender, sender_address,"
        " recipients, subject, attachments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            item.key,
            item.etag,
            row["kind"],
            item.cid,
            item.mid,
            item.filename,
            item.received,
            row.get("who", ""),
            row.get("address", ""),
            row.get("recipients", ""),
            row.get("subject", ""),
            row.get("attachments", 0),
        ),
    )
    base = int(cur.lastrowid or 0) * CHUNKS_PER_DOCUMENT
    heads = (spaced(row["subject"]), spaced(row["who"]), spaced(item.filename))
    db.executemany(
        "INSERT INTO text(rowid, subject, who, body, filename) VALUES (?, ?, ?, ?, ?)",
        [
            (base + n, *(heads[:2] if n == 0 else ("", "")), spaced(part), heads[2] if n == 0 else "")
            for n, part in enumerate(chunks(row["body"]))
        ],
    )


def chunks(text: str) -> Iterator[str]:
    """``text`` in pieces of about :data:`CHUNK_CHARS`, cut at a space, each overlapping the next by
    :data:`CHUNK_OVERLAP` characters so that a phrase across a cut is still found; at least one."""
    start = 0
    while True:
        end = min(len(text), start + CHUNK_CHARS)
        if end < len(text):
            space = text.rfind(" ", start + CHUNK_CHARS // 2, end)
            end = space if space > 0 else end
        yield text[start:end]
        if end >= len(text):
            return
        start = max(start + 1, end - CHUNK_OVERLAP)


def mail_row(raw: bytes) -> dict[str, Any]:
    """What a mail contributes, read by the project's own parser (common/mail/parse.py)."""

    mail = parse.parse(raw)
    who = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
    recipients = " ".join(
        a.lower()
        for _, a in getaddresses([mail.headers.get(h, "") for h in ("to", "cc", "delivered-to")])
        if a
    )
    return {
        "kind": "mail",
        "who": who,
        "address": mail.from_address,
        "recipients": recipients,
        "subject": mail.subject[:TEXT_CAP],
        "body": mail.body_text[:TEXT_CAP],
        "attachments": sum(1 for a in mail.attachments if a.role == "file"),
    }


def forget_locally(cfg: Config, address: str, cids: Iterable[str], folder: Path | None = None) -> int:
    """Remove a forgotten contact's rows from this machine's index now (when there is one), and
    remember each conversation with the newest time the index held of it (S3's clock, not this
    machine's), so that no object of theirs from before the forget is indexed again, while a mail
    they send later is."""
    path = index_path(cfg, folder)
    if not path.exists():
        return 0
    db = connect(path)
    try:
        cids = set(cids) | {
            str(r["cid"])
            for r in db.execute(
                "SELECT cid FROM objects WHERE sender_address = ?"
                " UNION SELECT cid FROM conversations WHERE sender = ?",
                (address, address),
            )
        }
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        removed = 0
        for cid in cids:
            newest = db.execute("SELECT max(received) FROM objects WHERE cid = ?", (cid,)).fetchone()[0]
            for row in db.execute("SELECT key FROM objects WHERE cid = ?", (cid,)).fetchall():
                delete_key(db, str(row["key"]))
                removed += 1
            db.execute("DELETE FROM conversations WHERE cid = ?", (cid,))
            db.execute("INSERT OR REPLACE INTO forgotten VALUES (?, ?)", (cid, newest or now))
        db.commit()
        return removed
    finally:
        db.close()


# --- query -----------------------------------------------------------------------------------------


class QueryError(EmailHandlerError, ValueError):
    """A query with nothing to search for, or bad filter values."""


def fts_query(query: str) -> tuple[str, int]:
    """The user's words and "phrases" as an FTS5 expression of quoted strings (implicitly ANDed), and
    how many terms were dropped past :data:`MAX_TERMS`. Inside a quoted string FTS5 reads no operator,
    column filter or prefix mark: the tokenizer sees only text."""
    terms: list[str] = []
    for phrase, word in _QUERY_PART.findall(_CONTROL.sub(" ", query[: MAX_TERMS * MAX_TERM_CHARS])):
        text = (phrase or word)[:MAX_TERM_CHARS]
        if any(c.isalnum() for c in text):
            terms.append('"' + spaced(text).replace('"', '""') + '"')
    if not terms:
        raise QueryError('nothing to search for: give words or a "phrase"')
    return " ".join(terms[:MAX_TERMS]), max(0, len(terms) - MAX_TERMS)


def moment(value: str, end: bool = False) -> str:
    """``YYYY-MM-DD`` or an ISO 8601 time as an ISO 8601 UTC string; a date given as ``--until``
    includes its whole day."""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            at = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1 if end else 0)
        else:
            at = datetime.fromisoformat(value.replace("Z", "+00:00"))
            at = at if at.tzinfo else at.replace(tzinfo=UTC)
    except ValueError:
        raise QueryError(f"not a date or ISO 8601 time: {value!r}") from None
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Ranked first, joined after: each document's best chunk (SQLite gives a bare column of a min()
# aggregate the values of the row holding the minimum: SQLite's SELECT documentation, "Bare columns in
# an aggregate query"). With no filter the best documents are cut to the limit before any join, so a
# word in thousands of documents joins only the few shown; a filter needs the join to decide.
SELECT = f"""
WITH hits AS MATERIALIZED (
    SELECT rowid AS chunk, bm25(text, 4.0, 2.0, 1.0, 2.0) AS score FROM text WHERE text MATCH :q
),
best AS MATERIALIZED (
    SELECT chunk / {CHUNKS_PER_DOCUMENT} AS doc, chunk, min(score) AS score FROM hits GROUP BY doc {{cut}}
)
SELECT o.key, o.kind, o.cid, o.mid, o.filename, o.received,
       coalesce(m.received, o.received) AS date,
       coalesce(nullif(m.sender, ''), c.sender, '') AS sender,
       coalesce(m.subject, '') AS subject,
       best.chunk AS chunk,
       best.score AS score
FROM best
JOIN objects o ON o.id = best.doc
LEFT JOIN objects m ON m.mid = o.mid AND m.cid = o.cid AND m.kind = 'mail'
LEFT JOIN conversations c ON c.cid = o.cid
WHERE 1
"""
CUT = "ORDER BY score LIMIT :limit"
ORDER = " ORDER BY score LIMIT :limit"
SNIPPET = "SELECT snippet(text, -1, '[', ']', '…', 12) FROM text WHERE text MATCH :q AND rowid = :chunk"
FILTERS = {
    "sender": " AND instr(lower(coalesce(nullif(m.sender, ''), c.sender, '')), :sender) > 0",
    "address": " AND (instr(coalesce(m.recipients, ''), :address) > 0 OR c.address = :address)",
    "since": " AND coalesce(m.received, o.received) >= :since",
    "until": " AND coalesce(m.received, o.received) < :until",
    "attached": " AND (o.kind = 'attachment' OR coalesce(m.attachments, 0) > 0)",
}


@dataclass(frozen=True, slots=True)
class Hit:
    conversation_id: str
    message_id: str
    date: str
    sender: str
    subject: str
    attachment: str  # the attachment's name when the hit is in its text, else ''
    snippet: str
    score: float
    key: str

    def document(self) -> dict[str, Any]:
        """``--json``'s item: the names the conversation records use."""
        return {
            "conversationId": self.conversation_id,
            "messageId": self.message_id,
            **{k: v for k, v in asdict(self).items() if k not in ("conversation_id", "message_id")},
        }


def search(
    db: sqlite3.Connection,
    query: str,
    *,
    sender: str = "",
    address: str = "",
    since: str = "",
    until: str = "",
    has_attachment: bool = False,
    limit: int = 20,
) -> list[Hit]:
    expression, _ = fts_query(query)
    params: dict[str, Any] = {"q": expression, "limit": max(1, min(limit, MAX_LIMIT))}
    sql = ""
    for name, value in (
        ("sender", sender.lower()),
        ("address", address.lower()),
        ("since", moment(since) if since else ""),
        ("until", moment(until, end=True) if until else ""),
    ):
        if value:
            sql += FILTERS[name]
            params[name] = value
    if has_attachment:
        sql += FILTERS["attached"]
    sql = SELECT.format(cut="" if sql else CUT) + sql + ORDER
    deadline = time.monotonic() + QUERY_BUDGET_S
    db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        rows = db.execute(sql, params).fetchall()
        snippets = [db.execute(SNIPPET, {"q": expression, "chunk": r["chunk"]}).fetchone()[0] for r in rows]
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise QueryError(f"the query ran past its {QUERY_BUDGET_S:.0f} s budget: narrow it") from None
        raise
    finally:
        db.set_progress_handler(None, 0)
    return [
        Hit(
            conversation_id=r["cid"],
            message_id=r["mid"],
            date=r["date"],
            sender=r["sender"],
            subject=r["subject"],
            attachment=r["filename"],
            snippet=" ".join(snippet.replace(ZWSP, "").split()),
            score=round(float(r["score"]), 4),
            key=r["key"],
        )
        for r, snippet in zip(rows, snippets, strict=True)
    ]
