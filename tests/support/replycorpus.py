"""The reply corpus (tests/fixtures/replies/): public reply fixtures with the visible reply each states,
and the four counts (exact, leaked, partly lost, lost).

Each fixture becomes the owner's answer to a real thread (tests/integration/test_reply_corpus.py, and
``bench.replies`` for ``make bench``): its text or HTML is the owner's reply body, whatever the
fixture's own headers said. What reaches the contact is compared line by line with the expectation:

- exact: the expected lines and nothing else (the owner's signature, when the fixture names one, may
  be there too: "acceptable", which the contact reads as the exact reply, counted apart);
  a source whose tests state only pieces (mail-parser-reply's ``assertIn``) gives ``contains`` (in
  the visible reply) and ``absent`` (in the quote): exact when every piece is there and none of the
  quote's;
- leaked: a line that is neither expected nor the signature reached the contact (quote leaked);
- partly lost: an expected line is missing;
- lost: nothing reached the contact.
"""

from __future__ import annotations

import email
import email.utils
import json
import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "replies"
SOURCES = ("talon", "email_reply_parser", "crisp", "willdurand", "mail_parser_reply")
OUTCOMES = ("exact", "acceptable", "leaked", "partly lost", "lost")


@dataclass(frozen=True, slots=True)
class Fixture:
    name: str  # source/name
    text: str  # the reply's text body ('' for an HTML-only reply)
    html: str  # the reply's HTML body ('' for a text-only reply)
    expected: str  # the visible reply the source's test suite states
    signature: str  # lines the owner's signature adds, allowed beside the expectation
    contains: tuple[str, ...] = ()  # pieces of the visible reply, where the test states only pieces
    absent: tuple[str, ...] = ()  # pieces of the quote the test states (never in the visible reply)


def _bodies(msg: Message) -> tuple[str, str]:
    text = html = ""
    for part in msg.walk():
        if part.is_multipart() or part.get_content_disposition() == "attachment":
            continue
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        decoded = payload.decode(part.get_content_charset() or "utf-8", "replace")
        if part.get_content_type() == "text/plain" and not text:
            text = decoded
        elif part.get_content_type() == "text/html" and not html:
            html = decoded
    return text, html


def load() -> list[Fixture]:
    out = []
    for source in SOURCES:
        index = json.loads((ROOT / source / "cases.json").read_text(encoding="utf-8"))
        for case in index["cases"]:
            name, file = f"{source}/{case['name']}", case.get("file", "")
            text = html = ""
            if not file:
                text = case["body"]
            elif file.endswith(".eml"):
                text, html = _bodies(email.message_from_bytes((ROOT / source / file).read_bytes()))
                html = "" if text else html
            elif file.endswith(".html"):
                html = (ROOT / source / file).read_text(encoding="utf-8")
            else:
                text = (ROOT / source / file).read_text(encoding="utf-8")
            out.append(
                Fixture(
                    name,
                    text,
                    html,
                    case.get("expected", ""),
                    case.get("signature", ""),
                    tuple(case.get("contains", ())),
                    tuple(case.get("absent", ())),
                )
            )
    return out


def reply_mail(fx: Fixture, sender: str, to: str, subject: str, message_id: str) -> bytes:
    """The fixture as the owner's reply to ``to`` (a thread address)."""
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = message_id
    msg["Date"] = email.utils.formatdate(localtime=False)
    if fx.text:
        msg.set_content(fx.text, cte="quoted-printable")
    else:
        msg.set_content(fx.html, subtype="html", cte="quoted-printable")
    return msg.as_bytes()


_SPACE = re.compile(r"\s+")


def _lines(text: str) -> list[str]:
    return [_SPACE.sub(" ", line).strip() for line in text.splitlines() if line.strip()]


def classify(fx: Fixture, sent: str | None) -> str:
    """One of OUTCOMES for what the contact received (``None``: nothing was sent)."""
    got = _lines(sent or "")
    if not got:
        return "lost"
    if fx.contains or fx.absent:
        flat = _SPACE.sub(" ", " ".join(got))
        if any(_SPACE.sub(" ", piece).strip() in flat for piece in fx.absent):
            return "leaked"
        return "partly lost" if any(_SPACE.sub(" ", p).strip() not in flat for p in fx.contains) else "exact"
    expected, signature = _lines(fx.expected), _lines(fx.signature)
    if any(line not in expected and line not in signature for line in got):
        return "leaked"
    if any(line not in got for line in expected):
        return "partly lost"
    return "acceptable" if any(line in signature and line not in expected for line in got) else "exact"


def tally(outcomes: dict[str, str]) -> dict[str, int]:
    return {o: sum(1 for v in outcomes.values() if v == o) for o in OUTCOMES}


def report(outcomes: dict[str, str]) -> str:
    counts = tally(outcomes)
    lines = [f"reply corpus: {len(outcomes)} fixtures"]
    lines += [f"  {o:<12} {counts[o]}" for o in OUTCOMES]
    lines += [f"  {v}: {k}" for k, v in sorted(outcomes.items()) if v not in ("exact", "acceptable")]
    return "\n".join(lines)


OWNER = "Owner Name <owner@example.net>"
CONTACT_TEXT = "Hello, I am writing about the role you posted.\nCould we talk this week?\n"


def subject_of(n: int) -> str:
    """Each fixture's reply carries its number in the subject, to find what the contact received."""
    return f"Re: Role #{n:03d}"


def number_in(subject: str) -> int | None:
    match = re.search(r"#(\d{3})\b", subject)
    return int(match.group(1)) if match else None


def sent_text(raw: bytes) -> tuple[int | None, str]:
    """(fixture number, the text body) of a mail the contact received."""
    msg = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    body = msg.get_body(("plain",))
    text = body.get_content() if body is not None else ""
    return number_in(str(msg["Subject"] or "")), str(text)


def outcomes(fixtures: list[Fixture], received: dict[int, str]) -> dict[str, str]:
    """Each fixture's outcome from the texts the contact received, by fixture number."""
    return {fx.name: classify(fx, received.get(n)) for n, fx in enumerate(fixtures)}
