"""`email-handler search` at an owner's scale: 10,000 conversations (one archived mail each) and 2,000
extracted attachment texts, seeded straight into a moto server's bucket and conversations table in the
project's layout (common/store/layout.py), then synced into a fresh index (ops/search.py) as the
command does. Reported: the first sync's time, a second sync's (nothing new: nothing read), and the
query time (p50/p95) over a fixed query set; beside it, the anchor, `grep -r -l -i -F` of each query
over the same texts written one file per document.
"""

from __future__ import annotations

import random
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CONVERSATIONS = 10_000
ATTACHMENTS = 2_000
ROUNDS = 5  # each query is timed this many times
GOAL_P95_S = 0.2
# Words, a phrase, a rare word, an unspaced-script substring, an accented word (found folded), a
# word common to many mails, and two words together: each has hits in the seeded text.
QUERIES = (
    "invoice",
    '"quarterly report"',
    "zanzibarquokka",
    "東京",
    "cafe",
    "meeting",
    "kubernetes engineer",
    "salary",
    "portfolio",
    "orleans",
)
GREP_QUERIES = {  # the same searches as fixed strings for grep (it folds case, not accents)
    '"quarterly report"': "quarterly report",
    "cafe": "café",
    "kubernetes engineer": "kubernetes",
    "orleans": "orléans",
}
FILLER = tuple(
    [
        "please",
        "find",
        "attached",
        "the",
        "documents",
        "we",
        "discussed",
        "during",
        "the",
        "call",
        "about",
        "the",
        "position",
        "and",
        "the",
        "team",
        "schedule",
        "budget",
        "project",
        "review",
        "deadline",
        "customer",
        "contract",
        "proposal",
        "design",
        "service",
        "release",
        "notes",
        "travel",
        "office",
        "remote",
        "hiring",
        "process",
        "interview",
        "feedback",
        "offer",
        "candidate",
        "reference",
        "onboarding",
    ]
)
TOPICS = (
    "invoice for march",
    "quarterly report attached",
    "meeting tomorrow",
    "kubernetes engineer role",
    "salary range",
    "portfolio link",
    "rendez-vous au café",
    "bureau à Orléans",
    "東京都に住んでいます",
)


def text(rng: random.Random, words: int) -> str:
    out = [rng.choice(FILLER) for _ in range(words)]
    for _ in range(max(1, words // 60)):
        out.insert(rng.randrange(len(out) + 1), rng.choice(TOPICS))
    return " ".join(out)


def seed(cfg: Any, folder: Path) -> dict[str, int]:
    """The bucket and table as the handlers leave them; the same texts under ``folder`` for grep."""
    from common.aws import client
    from common.store import layout
    from tests.support.mailgen import mail

    rng = random.Random(47)
    s3, ddb = client("s3"), client("dynamodb")
    puts: list[tuple[str, bytes]] = []
    items: list[dict[str, Any]] = []
    for n in range(CONVERSATIONS):
        cid, mid = f"contact{n}-at-corp{n % 97}.example", f"{n:040x}"
        body = text(rng, 150) + (" zanzibarquokka" if n % 1000 == 0 else "")
        raw = mail(sender=f"Contact {n} <contact{n}@corp{n % 97}.example>", subject=f"Hello {n}", text=body)
        puts.append((layout.archive(cid, mid), raw))
        (folder / f"{cid}.txt").write_text(body, encoding="utf-8")
        items.append(
            {
                "conversationId": {"S": cid},
                "senderEmail": {"S": f"contact{n}@corp{n % 97}.example"},
                "subject": {"S": f"Hello {n}"},
                "timestamp": {"S": "2026-01-01T00:00:00Z"},
                "publicAddress": {"S": cfg.public_email},
            }
        )
        if n % (CONVERSATIONS // ATTACHMENTS) == 0:
            extracted = text(rng, 2000)
            name = f"doc{n}.pdf"
            puts.append((layout.extracted_text(layout.attachment(cid, mid, name)), extracted.encode()))
            (folder / f"{cid}-{name}.txt").write_text(extracted, encoding="utf-8")

    def put(pair: tuple[str, bytes]) -> None:
        s3.put_object(Bucket=cfg.bucket, Key=pair[0], Body=pair[1])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, puts))
    for i in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": item}} for item in items[i : i + 25]]
        unprocessed: dict[str, Any] = {cfg.conversations_table: batch}
        while unprocessed:
            unprocessed = ddb.batch_write_item(RequestItems=unprocessed).get("UnprocessedItems") or {}
    return {"objects": len(puts), "bytes": sum(len(b) for _, b in puts)}


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_s": round(statistics.median(ordered), 4),
        "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
    }


def query_times(db: Any) -> tuple[dict[str, float], dict[str, int]]:
    from ops import index as search

    samples, hits = [], {}
    for _ in range(ROUNDS):
        for q in QUERIES:
            began = time.perf_counter()
            found = search.search(db, q, limit=20)
            samples.append(time.perf_counter() - began)
            hits[q] = len(found)
    return percentiles(samples), hits


def grep_times(folder: Path) -> tuple[dict[str, float], dict[str, int]]:
    grep = shutil.which("grep")
    if grep is None:
        return {}, {}
    samples, files = [], {}
    for _ in range(ROUNDS):
        for q in QUERIES:
            needle = GREP_QUERIES.get(q, q)
            began = time.perf_counter()
            done = subprocess.run([grep, "-r", "-l", "-i", "-F", needle, str(folder)], capture_output=True)
            samples.append(time.perf_counter() - began)
            files[q] = len(done.stdout.splitlines())
    return percentiles(samples), files


def run() -> dict[str, Any]:
    from local.env import local_env
    from ops import index as search
    from tests.support.sendload import emulator_process

    with emulator_process(local_env()) as cfg, tempfile.TemporaryDirectory() as tmp:
        texts = Path(tmp) / "texts"
        texts.mkdir()
        began = time.monotonic()
        seeded = seed(cfg, texts)
        seed_s = time.monotonic() - began
        db = search.connect(Path(tmp) / "index.sqlite3")
        began = time.monotonic()
        first = search.sync(db, cfg)
        sync_s = time.monotonic() - began
        began = time.monotonic()
        second = search.sync(db, cfg)
        resync_s = time.monotonic() - began
        index_bytes = sum(p.stat().st_size for p in Path(tmp).glob("index.sqlite3*"))
        query, hits = query_times(db)
        db.close()
        grep, grep_files = grep_times(texts)
    return {
        "conversations": CONVERSATIONS,
        "attachments": ATTACHMENTS,
        "seeded": {**seeded, "seconds": round(seed_s, 1)},
        "sync_s": round(sync_s, 1),
        "sync_read": first.fetched,
        "resync_s": round(resync_s, 2),
        "resync_read": second.fetched,
        "index_mb": round(index_bytes / 1e6, 1),
        "query": query,
        "query_p95_s": query["p95_s"],
        "goal_p95_s": GOAL_P95_S,
        "hits": hits,
        "grep": {**grep, "files": grep_files},
        "queries": list(QUERIES),
        "rounds": ROUNDS,
    }


def table(r: dict[str, Any]) -> str:
    if "sync_s" not in r:
        return str(r)
    grep = r.get("grep") or {}
    return "\n".join(
        [
            f"seeded {r['conversations']:,} conversations and {r['attachments']:,} attachment texts "
            f"({r['seeded']['objects']:,} objects, {r['seeded']['bytes'] / 1e6:.0f} MB) "
            f"in {r['seeded']['seconds']} s",
            f"first sync   {r['sync_s']} s  ({r['sync_read']:,} objects read; index {r['index_mb']} MB)",
            f"second sync  {r['resync_s']} s  ({r['resync_read']} objects read)",
            f"query        p50 {r['query']['p50_s']} s, p95 {r['query']['p95_s']} s "
            f"(goal p95 ≤ {r['goal_p95_s']} s; {len(r['queries'])} queries x {r['rounds']})",
            f"grep -r      p50 {grep.get('p50_s', '-')} s, p95 {grep.get('p95_s', '-')} s "
            "(the same texts, one file each)",
        ]
    )
