"""`email-handler search` against mail that came in through the real path (inbound-handler and
attachment-extractor under the RIE, the moto server): a word only inside a PDF finds its conversation
until `forget`; the sync reads only what is new and prunes what the stores lost; non-Latin text,
folded accents, a hostile 5 MB text and FTS5 syntax in a query."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from common.aws import client
from deploy.config import Config
from local.env import admin_credentials
from local.rie import RieProcess
from ops.index import DIR_VARIABLE, TEXT_CAP
from tests.conftest import REPO
from tests.integration.test_admin_aws import prd  # noqa: F401 (the fixture: environment prd on moto)
from tests.support import docgen
from tests.support.extraction import FUNCTION_ENV
from tests.support.harness import Stack
from tests.support.mailgen import mail

JANE, BOB = "jane@corp.example", "bob@other.example"
PDF_WORD = "Zanzibarquokka"  # only inside the PDF's text


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        "inbound-handler": rie_module("inbound-handler", env={"RETRY_DELAYS_SECONDS": "0"}),
        "attachment-extractor": rie_module("attachment-extractor", env=FUNCTION_ENV),
    }


def cli(stack: Stack, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`email-handler ...` as the owner runs it (its own process), with the index in ``folder``."""
    return subprocess.run(
        [sys.executable, "-m", "ops.main", *args, "--endpoint", stack.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, DIR_VARIABLE: str(folder)},
    )


def search(stack: Stack, folder: Path, *args: str) -> tuple[list[dict[str, str]], int]:
    """The hits of `email-handler search ARGS --json` and how many objects its sync read."""
    done = cli(stack, folder, "search", *args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    read = re.search(r"\[sync\] (\d+) read", done.stderr)
    return json.loads(done.stdout), int(read.group(1)) if read else -1


def receive(stack: Stack, fns: dict[str, RieProcess], n: int, raw: bytes) -> dict[str, object]:
    """One mail through inbound-handler, then each stored attachment through the extractor."""
    outcome = fns["inbound-handler"].invoke(stack.receipt(raw, f"{n:040d}"))
    assert outcome["status"] == "forwarded", outcome
    for key in outcome.get("attachments", []):
        event = {
            "Records": [
                {
                    "eventSource": "aws:s3",
                    "s3": {"bucket": {"name": stack.cfg.bucket}, "object": {"key": key}},
                }
            ]
        }
        result = fns["attachment-extractor"].invoke(event)
        assert result["results"][0]["status"] == "extracted", result
    return outcome


def test_a_word_inside_a_pdf_finds_its_conversation_until_forget(
    stack: Stack, fns: dict[str, RieProcess], tmp_path: Path
) -> None:
    pdf = ("portfolio.pdf", docgen.make_pdf([f"Invoice {PDF_WORD} 4471 for services"]), "application/pdf")
    jane = receive(
        stack,
        fns,
        1,
        mail(sender=f"Jane Smith <{JANE}>", subject="My portfolio", text="See attached.", attachments=[pdf]),
    )
    bob = receive(
        stack, fns, 2, mail(sender=f"Bob <{BOB}>", subject="Lunch", text="Lunch at noon? No attachment here.")
    )
    cid = str(jane["conversationId"])

    hits, read = search(stack, tmp_path, PDF_WORD.lower())
    assert read == 3  # two archived mails and one extracted text
    assert [(h["conversationId"], h["attachment"]) for h in hits] == [(cid, "portfolio.pdf")]
    assert f"[{PDF_WORD}]" in hits[0]["snippet"] and JANE in hits[0]["sender"]
    # filters
    assert search(stack, tmp_path, PDF_WORD, "--from", "jane@")[0] != []
    assert search(stack, tmp_path, PDF_WORD, "--from", BOB)[0] == []
    assert search(stack, tmp_path, PDF_WORD, "--has-attachment", "--address", stack.cfg.public_email)[0] != []
    assert search(stack, tmp_path, "lunch", "--has-attachment")[0] == []
    assert search(stack, tmp_path, "lunch", "--since", "2000-01-01", "--until", "2999-12-31")[0] != []
    assert search(stack, tmp_path, "lunch", "--until", "2000-01-01")[0] == []
    # a second sync reads nothing: the index already holds every ETag
    hits, read = search(stack, tmp_path, "noon")
    assert read == 0 and [h["conversationId"] for h in hits] == [bob["conversationId"]]

    # the table line, and `conversations show` opens the hit
    line = cli(stack, tmp_path, "search", PDF_WORD, "--no-sync")
    assert line.returncode == 0 and cid in line.stdout and "[portfolio.pdf]" in line.stdout, line.stdout
    shown = cli(stack, tmp_path, "conversations", "show", cid, "--json")
    assert shown.returncode == 0, shown.stderr
    opened = json.loads(shown.stdout)
    assert opened["record"]["conversationId"] == cid
    assert [m["subject"] for m in opened["messages"]] == ["My portfolio"]
    assert opened["messages"][0]["attachments"] == ["portfolio.pdf"]

    forgot = cli(stack, tmp_path, "forget", JANE)
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    # gone from the local index at once, before any sync
    assert search(stack, tmp_path, PDF_WORD, "--no-sync")[0] == []
    hits, read = search(stack, tmp_path, PDF_WORD)
    assert hits == [] and read == 0
    assert search(stack, tmp_path, "portfolio")[0] == []
    assert search(stack, tmp_path, "noon")[0] != []  # Bob is untouched


def test_a_stale_index_is_pruned_and_a_changed_object_is_read_again(
    stack: Stack, fns: dict[str, RieProcess], tmp_path: Path
) -> None:
    """What leaves the stores another way (retention, a lifecycle rule) leaves the index at the next sync."""
    outcome = receive(
        stack, fns, 3, mail(sender=f"Jane <{JANE}>", subject="Retention", text="Walrus harmonica")
    )
    hits, _ = search(stack, tmp_path, "walrus")
    assert len(hits) == 1
    key = hits[0]["key"]
    body = client("s3").get_object(Bucket=stack.cfg.bucket, Key=key)["Body"].read()
    client("s3").put_object(Bucket=stack.cfg.bucket, Key=key, Body=body.replace(b"Walrus", b"Narwhal"))
    hits, read = search(stack, tmp_path, "narwhal")
    assert read == 1 and [h["conversationId"] for h in hits] == [outcome["conversationId"]]
    client("s3").delete_object(Bucket=stack.cfg.bucket, Key=key)
    hits, read = search(stack, tmp_path, "narwhal")
    assert hits == [] and read == 0
    # an empty text (a PDF of images): S3 answers a ranged GET of an empty object 416 InvalidRange
    cid = outcome["conversationId"]
    empty = f"extracted-text/{cid}/{3:040d}/scan.pdf.txt"
    client("s3").put_object(Bucket=stack.cfg.bucket, Key=empty, Body=b"")
    hits, read = search(stack, tmp_path, "walrus")
    assert hits == [] and read == 1


def test_non_latin_text_accents_hostile_text_and_query_syntax(
    stack: Stack, fns: dict[str, RieProcess], tmp_path: Path
) -> None:
    japanese = receive(
        stack, fns, 4, mail(sender="Taro <taro@example.jp>", subject="応募", text="私は東京都に住んでいます")
    )
    arabic = receive(
        stack, fns, 5, mail(sender="Amal <amal@example.eg>", subject="مرحبا", text="أعمل في القاهرة")
    )
    french = receive(
        stack, fns, 6, mail(sender="Zoé <zoe@example.fr>", subject="Réunion", text="Rendez-vous au café")
    )
    # An attachment's text as the extractor would store it, but hostile: 5 MB of one repeated phrase,
    # a word at its start and one past the index's cap.
    cid = str(french["conversationId"])
    hostile = ("startword " + "lorem ipsum dolor " * (5 * 1024 * 1024 // 18) + " pastcapword").encode()
    assert len(hostile) > 5 * TEXT_CAP
    client("s3").put_object(
        Bucket=stack.cfg.bucket, Key=f"extracted-text/{cid}/{6:040d}/huge.pdf.txt", Body=hostile
    )

    started = time.monotonic()
    assert [h["conversationId"] for h in search(stack, tmp_path, "東京")[0]] == [japanese["conversationId"]]
    assert time.monotonic() - started < 60
    assert [h["conversationId"] for h in search(stack, tmp_path, "القاهرة")[0]] == [arabic["conversationId"]]
    assert [h["conversationId"] for h in search(stack, tmp_path, "cafe")[0]] == [cid]
    assert [h["conversationId"] for h in search(stack, tmp_path, "RÉUNION")[0]] == [cid]
    assert [h["attachment"] for h in search(stack, tmp_path, "startword")[0]] == ["huge.pdf"]
    assert search(stack, tmp_path, "pastcapword")[0] == []
    started = time.monotonic()
    hits, read = search(stack, tmp_path, '"lorem ipsum"')
    assert read == 0 and [h["attachment"] for h in hits] == ["huge.pdf"]
    assert time.monotonic() - started < 30  # a process start, a sync of nothing and a bounded query
    for query in ("NEAR(café", "subject:cafe OR *", '"unbalanced', "cafe AND NOT -x", "^café {who}:"):
        search(stack, tmp_path, query)  # words, never FTS5 syntax: no error
    refused = cli(stack, tmp_path, "search", "* ( ) :", "--no-sync")
    assert refused.returncode == 2 and "nothing to search for" in refused.stderr, refused.stderr


def test_search_on_a_deployment_reads_its_bucket_and_table(
    prd: Config,  # noqa: F811 (the fixture imported above)
    moto_server: str,
    tmp_path: Path,
) -> None:
    """`--env prd --region R`, as on AWS: the deployment's bucket and table (names from its settings and
    the account), the default credential chain; the index is named after that bucket."""
    client("s3").create_bucket(Bucket=prd.bucket)
    raw = mail(
        sender="Ann <ann@x.example>", to="hi@mail.example", subject="Offer", text="Pelicanmarmot on AWS"
    )
    client("s3").put_object(Bucket=prd.bucket, Key=f"conversations/ann-at-x.example/{'a' * 40}.eml", Body=raw)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DOMAIN_NAME", "PUBLIC_EMAIL", "PRIVATE_EMAIL"))
    }
    env |= {"AWS_ENDPOINT_URL": moto_server, **admin_credentials(), DIR_VARIABLE: str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.main",
            "search",
            "pelicanmarmot",
            "--json",
            "--env",
            "prd",
            "--region",
            "us-east-1",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [hit] = json.loads(done.stdout)
    assert (hit["conversationId"], hit["subject"], hit["attachment"]) == ("ann-at-x.example", "Offer", "")
    assert "AWS env prd in us-east-1" in done.stderr
    assert [p.name for p in tmp_path.glob("*.sqlite3")] == [f"{prd.bucket}.sqlite3"]
