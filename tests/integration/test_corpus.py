"""Issue 17's "Done when": every message of a real-world corpus nobody here wrote reaches an outcome.

The corpus is the fixture set of public mail libraries in ``../shared/corpus/mail/`` (read in place,
never copied; ``MAIL_CORPUS`` points elsewhere). Line endings are made CRLF first, as an SMTP client
sends them (the files have bare LF as their sources do). All messages go through one inbound-handler
under the real RIE against moto (module scope, so the cold start is paid once), then the forwards and
acks through the real senders; each message is then checked on its own:

* the invocation did not fail and nothing is left in ``staging/``;
* the outcome is forwarded, quarantined with a reason, or archived as a delivery status notification;
* a forward reached SES, and its subject and text match an independent parse (the stdlib's
  ``policy.default``, whose decoding shares nothing with common.mail.parse) wherever that parse
  reads them cleanly, and carry no U+FFFD or lone surrogate where it does not;
* every forward and ack was sent (no failed batch, nothing in a DLQ).
"""

from __future__ import annotations

import email
import email.policy
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from common.local.rie import InvokeError
from common.mail.htmltext import html_to_text
from tests.conftest import REPO


def corpus_dir() -> Path | None:
    if os.environ.get("MAIL_CORPUS"):
        return Path(os.environ["MAIL_CORPUS"])
    for parent in REPO.parents:
        if (parent / "shared" / "corpus" / "mail").is_dir():
            return parent / "shared" / "corpus" / "mail"
    return None


CORPUS = corpus_dir()
FILES = sorted(p for p in CORPUS.rglob("*") if p.is_file() and not p.name.startswith(("LICENSE", "README"))) \
    if CORPUS else []
pytestmark = pytest.mark.skipif(not FILES, reason="no mail corpus: set MAIL_CORPUS or provide ../shared/corpus/mail")


def as_smtp(raw: bytes) -> bytes:
    """CRLF line ends, as an SMTP client sends the file (and as SES stores it)."""
    return re.sub(rb"(?<!\r)\n", b"\r\n", raw)


@dataclass
class Run:
    stack: Any
    results: dict[Path, tuple[str, bytes, dict[str, Any]]] = field(default_factory=dict)
    sent: dict[str, Any] = field(default_factory=dict)  # X-Correlation-ID -> SentMail
    failed_batches: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def run(moto_server, local_defaults, rie_module) -> Run:
    from tests.support.harness import Stack

    stack = Stack(moto_server, local_defaults).reset()
    inbound = rie_module("inbound-handler")
    fast = {"RETRY_DELAYS_SECONDS": "0", "MAX_SEND_RATE": "200"}
    senders = {"forward-sender": rie_module("forward-sender", env=fast), "ack-sender": rie_module("ack-sender", env=fast)}
    out = Run(stack)
    for n, path in enumerate(FILES):
        raw, mid = as_smtp(path.read_bytes()), f"corpus{n:034d}"
        try:
            result = inbound.invoke(stack.receipt(raw, mid))
        except InvokeError as exc:
            result = {"status": "invocation failed", "error": str(exc)}
        out.results[path] = (mid, raw, result)
    for name, queue in (("forward-sender", stack.cfg.forward_queue), ("ack-sender", stack.cfg.ack_queue)):
        for batch in stack.run_sender(senders[name], queue, max_batches=200):
            out.failed_batches += [f"{name}: {i} {batch.error}" for i in batch.failed]
        out.failed_batches += [f"{name}: {m['Body'][:200]}" for m in stack.receive(queue + "-dlq")]
    for sent in stack.sent():
        out.sent[str(sent.message["X-Correlation-ID"])] = sent
    out.staging = stack.s3_keys("staging/")
    outcomes = Counter(r["status"] for _, _, r in out.results.values())
    print(f"\n[corpus] {len(FILES)} messages from {CORPUS}: {dict(outcomes)}; {len(out.sent)} sent")
    return out


def test_every_send_succeeded(run: Run) -> None:
    assert run.failed_batches == []


def clean(text: str | None) -> str | None:
    """The reference's reading, or None where the stdlib itself did not read it cleanly."""
    if text is None or re.search("[\ud800-\udfff\ufffd]", text):
        return None
    return re.sub(r"\s+", " ", text).strip()


def reference(raw: bytes) -> tuple[str | None, str | None]:
    """Subject and body text as the stdlib's default policy reads them (None where it cannot)."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        subject = clean(str(msg["subject"])) if msg["subject"] is not None else ""
    except Exception:
        return None, None
    try:
        part = msg.get_body(("plain", "html"))
        body = part.get_content() if part is not None else ""
        if part is not None and part.get_content_subtype() == "html":
            body = html_to_text(body)
    except Exception:
        body = None
    return subject, clean(body) if isinstance(body, str) else None


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CORPUS)) if CORPUS else str(p))
def test_message_reaches_an_outcome(run: Run, path: Path) -> None:
    mid, raw, result = run.results[path]
    assert result["status"] in ("forwarded", "quarantined", "dsn"), result
    assert f"staging/{mid}" not in run.staging
    if result["status"] == "quarantined":
        assert result["reason"] and run.stack.s3_body(result["key"]) == raw
        return
    if result["status"] == "dsn":
        assert result["key"].startswith("bounces/") and run.stack.s3_body(result["key"]) == raw
        return
    assert run.stack.s3_body(f"conversations/{result['conversationId']}/{mid}.eml") == raw
    forward = run.sent.get(f"forward-{mid}")
    assert forward is not None, "the forward never reached SES"
    msg = forward.message
    subject, body = reference(raw)
    if subject is not None:
        assert re.sub(r"\s+", " ", str(msg["Subject"])).strip() == (subject or "(no subject)")
    text = msg.get_body(("plain",)).get_content()
    # Where the stdlib's reading is garbled (8-bit headers, wrong charsets), ours must not be.
    assert not re.search("[\ud800-\udfff\ufffd]", str(msg["Subject"]) + text)
    if body:
        expected, got = words(body), words(text)
        found = sum(min(n, got[w]) for w, n in expected.items())
        assert found >= 0.9 * sum(expected.values()), f"only {found} of {sum(expected.values())} words of the body"
