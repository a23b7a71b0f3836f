"""The search index's pure logic (ops/search.py): the query is words and phrases, never FTS5 syntax;
unspaced scripts, Arabic and accents are found; each document's text is capped. The sync against the
stores is tested in tests/integration/test_search.py."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops import index as search
from ops.index import Listed, QueryError, fts_query


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = search.connect(tmp_path / "index.sqlite3")
    yield conn
    conn.close()


def attachment(db: sqlite3.Connection, cid: str, name: str, text: str) -> None:
    key = f"extracted-text/{cid}/m-{cid}/{name}.txt"
    search.store(db, Listed(key, "e1", "2026-01-02T03:04:05Z", cid, f"m-{cid}", name), text.encode())
    db.commit()


def found(db: sqlite3.Connection, query: str) -> list[str]:
    return [h.conversation_id for h in search.search(db, query)]


def test_fts5_and_its_tokenizer_are_compiled_into_this_python() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize = 'unicode61 remove_diacritics 2')")


@pytest.mark.parametrize(
    "query",
    [
        "NEAR(alpha beta)",
        '"unbalanced',
        "subject:alpha",
        "alpha OR beta*",
        "^alpha",
        "alpha AND NOT beta",
        "(alpha",
        "alpha -beta",
        "{subject who}: alpha",
        "alpha\x00beta",
    ],
)
def test_fts5_syntax_in_a_query_is_text_and_never_an_error(db: sqlite3.Connection, query: str) -> None:
    attachment(db, "c1", "a.pdf", "alpha beta gamma")
    search.search(db, query)  # no sqlite3.OperationalError


def test_a_query_of_only_punctuation_is_refused_with_a_message() -> None:
    with pytest.raises(QueryError, match="nothing to search for"):
        fts_query('* ( ) " ^ :')


def test_operators_are_quoted_and_terms_are_capped() -> None:
    expression, dropped = fts_query('alpha OR "big phrase" NEAR(x')
    assert expression == '"alpha" "OR" "big phrase" "NEAR(x"'
    assert dropped == 0
    expression, dropped = fts_query(" ".join(f"w{i}" for i in range(40)))
    assert expression.count('"') == 2 * search.MAX_TERMS and dropped == 40 - search.MAX_TERMS


def test_non_latin_text_and_folded_accents_are_found(db: sqlite3.Connection) -> None:
    attachment(db, "ja", "cv.pdf", "私は東京都に住んでいます")
    attachment(db, "zh", "cv.pdf", "我们在北京工作")
    attachment(db, "ko", "cv.pdf", "서울에서 일합니다")
    attachment(db, "ar", "cv.pdf", "مرحبا بالعالم من القاهرة")
    attachment(db, "fr", "cv.pdf", "Rendez-vous au café à Orléans")
    attachment(db, "mix", "cv.pdf", "Python開発者")
    assert found(db, "東京") == ["ja"]
    assert found(db, "京都") == ["ja"]  # a substring across the word's inside
    assert found(db, "北京") == ["zh"]
    assert found(db, "서울") == ["ko"]
    assert found(db, "القاهرة") == ["ar"]
    assert found(db, "cafe orleans") == ["fr"]
    assert found(db, "CAFÉ") == ["fr"]
    assert found(db, "python") == ["mix"] and found(db, "開発") == ["mix"]
    [hit] = search.search(db, "東京")
    assert "[東京]都" in hit.snippet and search.ZWSP not in hit.snippet


def test_a_documents_text_is_capped_and_a_huge_one_stays_quick(db: sqlite3.Connection) -> None:
    filler = "lorem ipsum dolor " * (5 * 1024 * 1024 // 18)
    started = time.monotonic()
    attachment(db, "big", "huge.pdf", "headword " + filler + " tailword")
    assert time.monotonic() - started < 10
    assert found(db, "headword") == ["big"]
    assert found(db, "tailword") == []  # past TEXT_CAP: not indexed
    started = time.monotonic()
    assert found(db, "lorem ipsum") == ["big"]
    assert time.monotonic() - started < search.QUERY_BUDGET_S


def test_filters_and_dates(db: sqlite3.Connection) -> None:
    attachment(db, "c1", "a.pdf", "invoice 4471")
    assert found(db, "invoice") == ["c1"]
    assert search.search(db, "invoice", since="2026-01-03") == []
    assert [h.attachment for h in search.search(db, "invoice", until="2026-01-02")] == ["a.pdf"]
    assert search.search(db, "invoice", has_attachment=True)[0].attachment == "a.pdf"
    with pytest.raises(QueryError):
        search.search(db, "invoice", since="yesterday")


def test_the_separator_of_unspaced_scripts_is_a_separator_to_unicode61() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize = 'unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
    conn.execute("INSERT INTO t VALUES (?)", (search.spaced("東京"),))
    assert [r[0] for r in conn.execute("SELECT term FROM v")] == ["京", "東"]


def test_forget_removes_the_contact_now_and_only_newer_mail_of_theirs_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deploy import config
    from local.env import local_env

    cfg = config.load(local_env())
    monkeypatch.setenv(search.DIR_VARIABLE, str(tmp_path))
    db = search.connect(search.index_path(cfg))
    attachment(db, "jane-at-corp.example", "cv.pdf", "quokka")
    attachment(db, "bob-at-other.example", "cv.pdf", "quokka")
    db.close()
    assert search.forget_locally(cfg, "jane@corp.example", ["jane-at-corp.example"]) == 1
    db = search.connect(search.index_path(cfg))
    assert found(db, "quokka") == ["bob-at-other.example"]
    tombs = dict(db.execute("SELECT cid, at FROM forgotten").fetchall())
    assert tombs == {"jane-at-corp.example": "2026-01-02T03:04:05Z"}  # the newest time the index held

    def listed(received: str) -> Listed:
        cid = "jane-at-corp.example"
        return Listed(f"conversations/{cid}/m2.eml", "e9", received, cid, "m2", "")

    assert not search.wanted(listed("2026-01-02T03:04:05Z"), {}, tombs)  # from before the forget
    assert search.wanted(listed("2026-01-02T03:04:06Z"), {}, tombs)  # written to us since
    assert not search.wanted(listed("2026-01-02T03:04:06Z"), {listed("").key: "e9"}, {})  # indexed already
