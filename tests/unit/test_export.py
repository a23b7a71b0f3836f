"""The export's pure parts (ops/export.py): mboxrd quoting undone exactly, the separator line, where an
object may land under DIR, the journal's torn line and its lock, the directory guard, --since."""

from __future__ import annotations

import mailbox
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ops.export import (
    STATE,
    ExportError,
    Journal,
    Stored,
    _place,
    envelope_line,
    mboxrd_quoted,
    mboxrd_unquoted,
    open_directory,
    parse_since,
)

WHEN = datetime(2026, 11, 28, 9, 5, 7, tzinfo=UTC)
RAW = (
    b"From: Jane <jane@corp.example>\r\nSubject: x\r\n\r\n"
    b"From the top\r\n>From quoted\r\n>>From twice\r\nFromage\r\n From indented\r\n"
)


def test_mboxrd_quoting_round_trips_through_python_mailbox(tmp_path: Path) -> None:
    box = mailbox.mbox(tmp_path / "a.mbox")
    for raw in (RAW, b"From x\r\n\r\nbody\r\n"):  # even a mail whose first line looks like a separator
        box.add(envelope_line(raw, WHEN) + b"\n" + mboxrd_quoted(raw))
    box.flush()
    box.close()
    back = mailbox.mbox(tmp_path / "a.mbox")
    assert [mboxrd_unquoted(back.get_bytes(k)) for k in back.iterkeys()] == [RAW, b"From x\r\n\r\nbody\r\n"]
    written = (tmp_path / "a.mbox").read_bytes()
    assert b"\n>From the top" in written and b"\n>>From quoted" in written and b"\n>>>From twice" in written
    assert b"\nFromage" in written and b"\n From indented" in written  # not separators: left alone


def test_the_separator_names_the_sender_and_the_stored_time() -> None:
    assert envelope_line(RAW, WHEN) == b"From jane@corp.example Sat Nov 28 09:05:07 2026"
    assert envelope_line(b"Return-Path: <b@x.example>\r\nFrom: a@y.example\r\n\r\n", WHEN).startswith(
        b"From b@x.example "
    )
    assert envelope_line(b"From: \xff\xfe odd\r\n\r\n", WHEN).startswith(b"From MAILER-DAEMON ")


def test_only_conversation_objects_land_under_the_directory() -> None:
    def place(key: str, prefix: str = "attachments/") -> str | None:
        return _place(Stored(key, WHEN), prefix)

    assert place("attachments/jane-at-corp.example/m1/cv.pdf") == "jane-at-corp.example/m1/cv.pdf"
    assert place("extracted-text/c/m1/cv.pdf.txt", "extracted-text/") == "c/m1/cv.pdf.txt"
    assert place("extracted-text/c/m1/cv.pdf.error.json", "extracted-text/") is None
    assert place("attachments/complaint/m1/report.eml") is None
    assert place("attachments/quarantine/m1/original.eml") is None
    assert place("attachments/../m1/x") is None and place("attachments/c/./x") is None
    assert place("attachments/c/m1/") is None and place("attachments/c/m1/a/b") is None


def test_the_journal_skips_a_torn_line_and_holds_the_directory(tmp_path: Path) -> None:
    (tmp_path / STATE).write_text('{"key": "a", "mbox": "x.mbox", "size": 10}\n{"key": "b", "mb')
    journal = Journal(tmp_path)
    assert journal.done == {"a"} and journal.sizes == {"x.mbox": 10}
    with pytest.raises(ExportError, match="another export"):
        Journal(tmp_path)
    journal.commit({"key": "c", "mbox": "x.mbox", "size": 20})
    journal.close()
    again = Journal(tmp_path)
    assert again.done == {"a", "c"} and again.sizes == {"x.mbox": 20}
    again.close()


def test_a_directory_that_holds_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="holds no export"):
        open_directory(tmp_path)
    open_directory(tmp_path / "new").close()


def test_since_takes_a_date_or_a_time() -> None:
    assert parse_since("2026-12-01") == datetime(2026, 12, 1, tzinfo=UTC)
    assert parse_since("2026-12-01T10:00:00+02:00") == datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert parse_since("2026-12-01T10:00:00Z") == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert parse_since(None) is None
    with pytest.raises(ExportError, match="ISO 8601"):
        parse_since("last week")
