"""The CLI never writes a mail's control characters to the operator's terminal (cli.termsafe)."""

from __future__ import annotations

import io
import re

import pytest

from cli.termsafe import clean
from deploy import config
from ops import admin
from ops import main as cli
from tests.support.mailgen import mail

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ATTACK = "\x1b]0;pwned\x07\x1b[2J\x1b[H\rFake line\x08\x9b31m\u202egnp.exe\u2066x\u2069 end"


def local_cfg() -> config.Config:
    return config.load(
        {
            "DOMAIN_NAME": "example.com",
            "PUBLIC_EMAIL": "hello@example.com",
            "PRIVATE_EMAIL": "owner@example.net",
            "THREAD_SECRET": "x" * 32,
        }
    )


def test_clean_keeps_text_tabs_newlines_and_non_latin_scripts() -> None:
    assert clean("a\tb\nc \u05e9\u05dc\u05d5\u05dd 日本 é") == "a\tb\nc \u05e9\u05dc\u05d5\u05dd 日本 é"
    assert not UNSAFE.search(clean(ATTACK)) and "Fake line" in clean(ATTACK)


@pytest.mark.parametrize("as_json", [False, True])
def test_quarantine_show_prints_no_control_characters(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    from common.aws import s3
    from common.store import quarantine

    cfg = local_cfg()
    raw = mail(sender="Eve\u202e <eve@corp.example>", subject="Hi \u202eexe.pdf", text=ATTACK + "\n" + ATTACK)
    item = {
        "id": "q1",
        "key": "spam/2026-11-25/q1.eml",
        "status": "held",
        "reason": "subject \x1b[31mmatch",
        "sender": "Eve <eve@corp.example>",
        "subject": "Hi \x1b]0;x\x07",
    }
    monkeypatch.setattr(admin, "target", lambda args: admin.Target(cfg, False, "test"))
    monkeypatch.setattr(quarantine, "get", lambda c, qid: item)
    monkeypatch.setattr(s3, "get", lambda bucket, key: {"Body": io.BytesIO(raw)})
    assert cli.main(["quarantine", "show", "q1", *(["--json"] if as_json else [])]) == 0
    out, err = capsys.readouterr()
    assert "Fake line" in out and not UNSAFE.search(out + err), repr(out)


def test_quarantine_show_raw_refuses_a_terminal() -> None:
    """``--raw`` is the sender's bytes unfiltered: to a terminal it refuses, before reading anything."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ops.main", "quarantine", "show", "q1", "--raw"],
            stdout=follower,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        os.close(follower)
        follower = -1
        written = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            written += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 2 and written == b""
    assert b"> held.eml" in done.stderr and b"terminal" in done.stderr


def test_quarantine_show_raw_writes_the_bytes_to_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    from common.aws import s3
    from common.store import quarantine

    cfg = local_cfg()
    raw = mail(sender="Eve <eve@corp.example>", subject="Hi", text=ATTACK)
    monkeypatch.setattr(admin, "target", lambda args: admin.Target(cfg, False, "test"))
    monkeypatch.setattr(quarantine, "get", lambda c, qid: {"id": "q1", "key": "spam/x/q1.eml"})
    monkeypatch.setattr(s3, "get", lambda bucket, key: {"Body": io.BytesIO(raw)})
    assert cli.main(["quarantine", "show", "q1", "--raw"]) == 0
    assert capsysbinary.readouterr().out == raw  # byte for byte, on purpose: a file is not a terminal
