"""Every message of real-world corpora nobody here wrote reaches an outcome, and its forward carries
what the stdlib's reading of it holds.

The corpora are the fixture sets of public mail libraries in ``../shared/corpus/mail/`` (read in
place; ``MAIL_CORPUS`` points elsewhere) and in ``tests/fixtures/corpus/`` (mime4j, enmime; their
licences beside them, tests/fixtures/corpus/README.md). Line endings are made CRLF first, as an SMTP client
sends them (the files have bare LF as their sources do). All messages go through one inbound-handler
under the real RIE against moto (module scope, so the cold start is paid once), then the forwards and
acks through the real senders; each message is then checked on its own:

* the invocation did not fail and nothing is left in ``staging/``;
* the outcome is forwarded, quarantined with a reason, or archived as a report (a delivery status
  notification; an abuse complaint, of which the owner gets a labelled notice): a report is never
  forwarded as mail or acked;
* a forward reached SES, and its subject and text match an independent parse (the stdlib's
  ``policy.default``, whose decoding shares nothing with common.mail.parse) wherever that parse
  reads them cleanly, and carry no U+FFFD or lone surrogate where it does not;
* every forward and ack was sent (no failed batch, nothing in a DLQ);
* every stored PDF or DOCX attachment went through the attachment-extractor (as the S3 event
  would send it) and ended extracted or rejected for a reason of the document's, never a failed
  invocation or an "extractor failed" (a bug of ours);
* no ack went where RFC 3834 section 2 (or a no-reply / role sender) says an automatic reply must
  not go, judged again from the stdlib's reading of the top-level header;
* the forward shows no raw MIME as its text (part headers the stdlib's body does not hold), carries
  or names in its footer every named part of the stdlib's reading (parts by name, and by the very name
  the sender gave it, made safe to show only: no "-2", no replaced symbol, no cut below 255), and at least as
  many parts as the stdlib reads beside the body (parts by count);
* its banner and footer agree: an original the banner calls attached is attached, and nothing the
  footer lists as not attached is.
"""

from __future__ import annotations

import email
import email.errors
import email.parser
import email.policy
import email.utils
import json
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from common.delivery.compose import FOOTER_MARKER
from common.mail.htmltext import html_to_text
from common.mail.parse import ORIGINAL_NAME
from local.rie import InvokeError, RieProcess
from tests.conftest import REPO, load_event


def corpus_dir() -> Path | None:
    if os.environ.get("MAIL_CORPUS"):
        return Path(os.environ["MAIL_CORPUS"])
    for parent in REPO.parents:
        if (parent / "shared" / "corpus" / "mail").is_dir():
            return parent / "shared" / "corpus" / "mail"
    return None


CORPUS = corpus_dir()
OURS = REPO / "tests" / "fixtures" / "corpus"


def messages(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(("LICENSE", "NOTICE", "README", "SOURCES"))
    )


FILES = (messages(CORPUS) if CORPUS else []) + messages(OURS)
ADDED_FROM = b"From: Corpus Sender <corpus-sender@corp.example>\r\n"


def without_from(path: Path) -> bool:
    return (
        email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(path.read_bytes()).get("from")
        is None
    )


# A message without From is quarantined and its forward never judged: each goes through once more
# with a From added, so its structure is judged too.
ADD_FROM, NULL_ENVELOPE, POSTMASTER_ENVELOPE = " +From", " +null envelope", " +postmaster envelope"
# Reports (bounces, complaints) of many MTAs and their look-alikes: sisimai's set-of-emails and the
# project's own RFC 5965 / RFC 3464 samples (tests/fixtures/corpus/README.md). Each goes in with a
# NORMAL envelope sender, so only its structure can say what it is; the file name says what it is:
# arf-* and arf--* are abuse complaints, lhost-*, rhost-*, rfc3464-* and dsn--* delivery reports, the
# rest (RFC 3834 auto-replies, sisimai's "not a bounce", a person's mail) mail to forward.
REPORT_CORPORA = ("sisimai", "reports")
NORMAL_ENVELOPE = "relay@corp.example"


def expected_report(path: Path) -> tuple[str, ...]:
    """The outcomes a report corpus file may have (() for the other corpora). A bounce may also be SES's
    complaint notification (sisimai files those with the bounces); an RFC 3834 auto-reply may carry the
    null Return-Path of automatic mail and be archived with the reports. Neither is ever acked."""
    if path.parent.name not in REPORT_CORPORA:
        return ()
    name = path.name.partition("--")[2] if path.parent.name == "sisimai" else path.name
    if name.startswith("arf"):
        return ("complaint",)
    if name.startswith(("lhost-", "rhost-", "rfc3464-", "dsn")):
        return ("dsn", "complaint")
    return ("forwarded", "dsn") if name.startswith("rfc3834") else ("forwarded",)


CASES = (
    [(p, "") for p in FILES]
    + [(p, ADD_FROM) for p in FILES if without_from(p)]
    # whatever the envelope: a complaint with the null envelope its sender should use still reaches the
    # owner, and a person's mail with a postmaster envelope is forwarded
    + [(p, NULL_ENVELOPE) for p in FILES if p.parent.name == "reports" and p.name.startswith("arf")]
    + [(p, POSTMASTER_ENVELOPE) for p in FILES if p.parent.name == "reports" and p.name.startswith("person")]
)


def envelope(path: Path, variant: str) -> dict[str, str]:
    """The envelope sender to inject with (none given: the file's Return-Path, else its From)."""
    if variant == NULL_ENVELOPE:
        return {"source": ""}
    if variant == POSTMASTER_ENVELOPE:
        return {"source": "postmaster@corp.example"}
    return {"source": NORMAL_ENVELOPE} if expected_report(path) else {}


def label(case: tuple[Path, str]) -> str:
    path, variant = case
    name = (
        str(path.relative_to(OURS.parent))
        if path.is_relative_to(OURS)
        else str(path.relative_to(CORPUS))
        if CORPUS
        else str(path)
    )
    return name + variant


def as_smtp(raw: bytes) -> bytes:
    """CRLF line ends, as an SMTP client sends the file (and as SES stores it)."""
    return re.sub(rb"(?<!\r)\n", b"\r\n", raw)


@dataclass
class Run:
    stack: Any
    results: dict[tuple[Path, str], tuple[str, bytes, dict[str, Any]]] = field(default_factory=dict)
    sent: dict[str, Any] = field(default_factory=dict)  # X-Correlation-ID -> SentMail
    failed_batches: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)
    extracted: dict[str, dict[str, Any]] = field(default_factory=dict)  # attachment key -> extractor result


@pytest.fixture(scope="module")
def run(moto_server: str, local_defaults: dict[str, str], rie_module: Callable[..., RieProcess]) -> Run:
    from tests.support.harness import Stack

    stack = Stack(moto_server, local_defaults).reset()
    inbound = rie_module("inbound-handler")
    fast = {"RETRY_DELAYS_SECONDS": "0", "MAX_SEND_RATE": "200"}
    senders = {
        "forward-sender": rie_module("forward-sender", env=fast),
        "ack-sender": rie_module("ack-sender", env=fast),
    }
    out = Run(stack)
    for n, (path, variant) in enumerate(CASES):
        raw, mid = (
            as_smtp((ADDED_FROM if variant == ADD_FROM else b"") + path.read_bytes()),
            f"corpus{n:034d}",
        )
        try:
            result = inbound.invoke(stack.receipt(raw, mid, **envelope(path, variant)))
        except InvokeError as exc:
            result = {"status": "invocation failed", "error": str(exc)}
        out.results[(path, variant)] = (mid, raw, result)
    for name, queue in (("forward-sender", stack.cfg.forward_queue), ("ack-sender", stack.cfg.ack_queue)):
        for batch in stack.run_sender(senders[name], queue, max_batches=200):
            out.failed_batches += [f"{name}: {i} {batch.error}" for i in batch.failed]
        out.failed_batches += [f"{name}: {m['Body'][:200]}" for m in stack.receive(queue + "-dlq")]
    for sent in stack.sent():
        out.sent[str(sent.message["X-Correlation-ID"])] = sent
    out.staging = stack.s3_keys("staging/")
    documents = [k for k in stack.s3_keys("attachments/") if k.lower().endswith((".pdf", ".docx"))]
    if documents:
        extractor = rie_module("attachment-extractor")
        template = load_event("s3-attachment.json")["Records"][0]
        for key in documents:
            record = json.loads(json.dumps(template))
            record["s3"]["bucket"]["name"] = stack.cfg.bucket
            record["s3"]["object"]["key"] = quote_plus(key, safe="/")
            try:
                out.extracted[key] = extractor.invoke({"Records": [record]})["results"][0]
            except InvokeError as exc:
                out.extracted[key] = {"status": "invocation failed", "error": str(exc)}
    outcomes = Counter(r["status"] for _, _, r in out.results.values())
    extracted = Counter(r["status"] for r in out.extracted.values())
    print(
        f"\n[corpus] {len(FILES)} messages from {CORPUS} and {OURS},"
        f" {len(CASES) - len(FILES)} again (a From added, another envelope): {dict(outcomes)};"
        f" {len(out.sent)} sent; "
        f"attached documents: {dict(extracted)}"
    )
    return out


def test_every_send_succeeded(run: Run) -> None:
    assert run.failed_batches == []


def test_every_attached_document_is_extracted_or_rejected_for_its_own_reason(run: Run) -> None:
    broken = {
        k: r
        for k, r in run.extracted.items()
        if r["status"] not in ("extracted", "rejected") or "extractor failed" in r.get("reason", "")
    }
    assert broken == {}


def clean(text: str | None) -> str | None:
    """The reference's reading, or None where the stdlib itself did not read it cleanly."""
    if text is None or re.search("[\ud800-\udfff\ufffd]", text):
        return None
    return re.sub(r"\s+", " ", text).strip()


# An encoded word the stdlib left as it was: a charset it could not decode (ISO-2022-JP as Windows
# writes it, with NEC's row 13), so its reading of that subject is no reading at all.
ENCODED_WORD = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=")


def reference(raw: bytes) -> tuple[str | None, str | None]:
    """Subject and body text as the stdlib's default policy reads them (None where it cannot)."""
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        subject = clean(str(msg["subject"])) if msg["subject"] is not None else ""
    except Exception:
        return None, None
    if subject and ENCODED_WORD.search(subject):
        subject = None
    if any(isinstance(d, email.errors.MissingHeaderBodySeparatorDefect) for d in msg.defects):
        # A header line without a colon ended the stdlib's header block: it read the rest of the
        # header (Subject perhaps) and the raw MIME parts as the body, which is a guess, not a reading.
        return None, None
    try:
        part = msg.get_body(("plain", "html"))
        body = part.get_content() if part is not None else ""
        if part is not None and part.get_content_subtype() == "html":
            body = html_to_text(body)
    except Exception:
        body = None
    return subject, clean(body) if isinstance(body, str) else None


def ack_forbidden(raw: bytes) -> str:
    """Why RFC 3834 section 2 (or a no-reply / role sender) forbids an automatic reply ('' if nothing
    does)."""
    msg = email.message_from_bytes(raw, policy=email.policy.compat32)

    def first(name: str) -> str:
        value = msg.get(name)
        return "" if value is None else re.sub(r"\s+", " ", str(value)).strip().lower()

    auto = first("auto-submitted").split(";")[0].split("(")[0].strip()
    if auto and auto != "no":
        return f"Auto-Submitted: {auto}"
    if first("precedence") in ("bulk", "junk", "list"):
        return f"Precedence: {first('precedence')}"
    if any(k.lower().startswith("list-") or k.lower() in ("mailing-list", "x-mailing-list") for k in msg):
        return "List-* header (or an older list's Mailing-List, X-Mailing-List)"
    if msg.get_content_type() == "multipart/report" or msg.get_content_maintype() == "message":
        return f"report ({msg.get_content_type()})"
    local = email.utils.parseaddr(first("from"))[1].rpartition("@")[0]
    if re.search(r"no[-_.]?reply|do[-_.]?not[-_.]?reply|^(mailer[-_.]?daemon|postmaster|bounces?)\b", local):
        return f"role or no-reply sender {local}"
    return ""


MIME_HEADER = re.compile(r"(?im)^content-(?:type[ \t]*:[ \t]*[\w.+-]+/|transfer-encoding[ \t]*:)")


def sent_as_text(raw: bytes) -> bool:
    """Whether the text part the stdlib shows holds MIME headers itself (a mail source the sender
    sent as text/plain), so showing them is showing the text, not a multipart left unsplit."""
    try:
        part = email.message_from_bytes(raw, policy=email.policy.default).get_body(("plain", "html"))
        data = part.get_payload(decode=True) if part is not None else b""
    except Exception:
        return False
    return isinstance(data, bytes) and MIME_HEADER.search(data.decode("latin-1")) is not None


def name_keys(name: str) -> tuple[str, str]:
    """A part name as the forward's may differ from it (NFKC, path and unsafe characters dropped, cut
    to 120 characters, "-2" for a repeat): its first and last letters and digits."""
    last = unicodedata.normalize("NFKC", name).replace("\\", "/").rsplit("/", 1)[-1]
    alnum = re.sub(r"\W", "", last.lower())
    return alnum[:12], alnum[-10:]


_BIDI_CONTROL = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def as_shown(name: str) -> str:
    """A part name as a forward may show it (docs/inbound.md, Parts): controls as spaces, bidirectional
    overrides dropped, the last path segment (RFC 2183 2.3), at most 255 characters (extension kept)."""
    name = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", _BIDI_CONTROL.sub("", name))
    name = next((s for s in reversed(re.split(r"[/\\]", name)) if s.strip(" .")), "").strip()
    if len(name) > 255:
        stem, _, ext = name.rpartition(".")
        name = stem[: 255 - len(ext) - 1].rstrip() + "." + ext if 0 < len(ext) <= 10 else name[:255]
    return name


@dataclass
class Reading:
    """The stdlib's (policy.default) reading of a mail's parts, not entering message/* parts."""

    names: list[str] = field(default_factory=list)  # named parts, where the stdlib decoded the name
    beside_body: int = 0  # non-empty leaf parts other than the body and its alternative renderings


def leaves(msg: Any) -> list[tuple[Any, list[Any]]]:
    """(part, its multipart ancestors) of every part that is not a multipart, in document order;
    message/* parts are leaves (their insides are the forwarded message's, not this mail's)."""
    out: list[tuple[Any, list[Any]]] = []
    stack: list[tuple[Any, list[Any]]] = [(msg, [])]
    while stack:
        node, above = stack.pop()
        if node.get_content_maintype() != "multipart":
            out.append((node, above))
        elif node.is_multipart():
            stack.extend((child, [*above, node]) for child in reversed(node.get_payload()))
    return out


def parts_read(raw: bytes) -> Reading | None:
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        body = msg.get_body(("plain", "html"))
        read = leaves(msg)
    except Exception:
        return None
    reading = Reading()
    bodies: dict[str, Any] = {}  # the first unnamed inline text/plain and text/html: the body either way
    for node, above in read:
        name = node.get_filename()
        if name and not re.search("[\ud800-\udfff\ufffd]|=\\?", name) and any(name_keys(name)):
            reading.names.append(name)
        if (
            node.get_content_maintype() == "text"
            and not name
            and not node.is_attachment()
            and not any(a.get_content_maintype() == "message" for a in above)
        ):
            bodies.setdefault(node.get_content_subtype(), node)
    shown = [n for n in (body, *bodies.values()) if n is not None]
    alternatives = [
        next((a for a in reversed(above) if a.get_content_subtype() == "alternative"), None)
        for node, above in read
        if any(node is n for n in shown)
    ]
    for node, above in read:
        if any(node is n for n in shown) or not str(node.get_payload()).strip():
            continue
        if (
            node.get_content_maintype() == "text"
            and not node.get_filename()
            and any(a is not None and any(a is b for b in above) for a in alternatives)
        ):
            continue  # another rendering of the body
        reading.beside_body += 1
    return reading


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


@pytest.mark.parametrize("case", CASES, ids=label)
def test_message_reaches_an_outcome(run: Run, case: tuple[Path, str]) -> None:
    mid, raw, result = run.results[case]
    assert result["status"] in ("forwarded", "quarantined", "dsn", "complaint"), result
    assert f"staging/{mid}" not in run.staging
    if result["status"] == "quarantined":
        assert result["reason"] and run.stack.s3_body(result["key"]) == raw
        return
    if result["status"] in ("dsn", "complaint"):
        assert result["key"].startswith("bounces/") and run.stack.s3_body(result["key"]) == raw
        assert f"forward-{mid}" not in run.sent and f"ack-{mid}" not in run.sent
        # an abuse complaint reaches the owner as one, labelled; nothing else is sent for a report
        assert (f"complaint-{mid}" in run.sent) == (result["status"] == "complaint")
        return
    assert run.stack.s3_body(f"conversations/{result['conversationId']}/{mid}.eml") == raw
    if result.get("ack"):
        assert not ack_forbidden(raw), f"acked although {ack_forbidden(raw)}"
    forward = run.sent.get(f"forward-{mid}")
    assert forward is not None, "the forward never reached SES"
    msg = forward.message
    subject, body = reference(raw)
    if subject is not None:
        assert re.sub(r"\s+", " ", str(msg["Subject"])).strip() == (subject or "(no subject)")
    text = msg.get_body(("plain",)).get_content()
    # Where the stdlib's reading is garbled (8-bit headers, wrong charsets), ours must not be.
    assert not re.search("[\ud800-\udfff\ufffd]", str(msg["Subject"]) + text)
    assert not MIME_HEADER.search(text) or sent_as_text(raw), "raw MIME shown as the text"
    forwarded = [p for p, _ in leaves(msg) if p.get_filename()]
    footer = text.rpartition(FOOTER_MARKER)[2]
    not_attached = footer.partition("Not attached: ")[2]
    banner = "".join(line for line in text.splitlines() if line.startswith("[!] "))
    assert ("the original is attached" in banner) == any(p.get_filename() == ORIGINAL_NAME for p in forwarded)
    assert not [p.get_filename() for p in forwarded if f"{p.get_filename()} (" in not_attached], (
        "attached and not attached"
    )
    reading = parts_read(raw)
    if reading is not None:
        carried = " ".join(
            "".join(name_keys(str(p.get_filename()))) + " " + re.sub(r"\W", "", str(p.get_filename()).lower())
            for p in forwarded
        ) + re.sub(r"\W", "", not_attached.lower())
        lost = [n for n in reading.names if not any(key and key in carried for key in name_keys(n))]
        assert lost == [], "named parts lost"
        # and each name as the sender wrote it: no "-2" for a repeat, no symbol or letter replaced, no cut
        # below 255 characters (the S3 key's safe name is storage only)
        shown = Counter(str(p.get_filename()) for p in forwarded)
        changed = [
            n
            for n, count in Counter(as_shown(n) for n in reading.names).items()
            if shown[n] < count and not_attached.count(f"{n} (") < count - shown[n]
        ]
        assert changed == [], f"attachment names changed: {sorted(shown)}"
        assert len(result["attachments"]) + len(result["skipped"]) >= reading.beside_body, "parts missing"
        assert len(forwarded) == len(result["attachments"]), "stored parts missing from the forward"
    if body:
        expected, got = words(body), words(text)
        found = sum(min(n, got[w]) for w, n in expected.items())
        assert found >= 0.9 * sum(expected.values()), (
            f"only {found} of {sum(expected.values())} words of the body"
        )


@pytest.mark.parametrize("case", [c for c in CASES if expected_report(c[0])], ids=label)
def test_reports_are_recognised_by_structure_whatever_the_envelope(run: Run, case: tuple[Path, str]) -> None:
    """A bounce or complaint is never acked nor forwarded as a contact's mail, with a normal envelope
    too; a complaint reaches the owner labelled as one; the rest is forwarded."""
    mid, raw, result = run.results[case]
    expected = expected_report(case[0])
    assert result["status"] in expected, result
    if expected != ("forwarded",):
        assert f"ack-{mid}" not in run.sent and not result.get("ack")
    if result["status"] == "complaint":
        notice = run.sent[f"complaint-{mid}"].message
        assert str(notice["Subject"]).startswith("Abuse complaint")
        assert notice["Reply-To"] is None and notice["To"] == run.stack.cfg.private_email
        assert "[!] Abuse complaint" in notice.get_body(("plain",)).get_content()
        (report,) = [p for p in notice.iter_attachments() if p.get_filename() == "abuse report.eml"]
        assert report.get_content_type() == "application/octet-stream" and report.get_content() == raw
