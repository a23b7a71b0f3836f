"""Turn the owner's reply into what the contact should read: metadata commands out, quoted history out.

Pure functions (no AWS), unit-tested against Gmail-, Outlook- and Apple Mail-style replies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common.inbound.messages import FOOTER_MARKER
from common.reply.scrub import hide_addresses

# [key: value] command lines -> conversation attributes (docs/CONTRACT.md)
METADATA_KEYS = {"company": "companyName", "title": "title", "type": "type", "location": "location",
                 "salary_range": "salaryRange", "job_id": "jobId", "notes": "notes"}
_COMMAND = re.compile(r"^\s*\[\s*([A-Za-z_ -]+?)\s*:\s*(.*?)\s*\]\s*$")
# Owner controls (docs/CONTRACT.md): [block], [block: domain], [allow], [unblock], optionally naming
# an address or @domain instead of the contact; removed from the outgoing body like metadata.
_CONTROL = re.compile(r"^\s*\[\s*(block|allow|unblock)\s*(?::\s*([^\]]*?))?\s*\]\s*$", re.I)
_TO = re.compile(r"^\s*\[\s*to\s*:\s*([^\]]*?)\s*\]\s*$", re.I)
_QUOTED = re.compile(r"^\s*>")
# Gmail: "On Mon, 3 Nov 2026 at 10:00, Jane <jane@x> wrote:" (sometimes wrapped over two lines);
# Apple Mail: "On 3 Nov 2026, at 10:00, Jane <jane@x> wrote:"; also localized "Am ... schrieb ...:"
_ATTRIBUTION = re.compile(r"^\s*(On|Am|Le|El)\s.+(wrote|schrieb|a écrit|escribió)\s*:\s*$", re.I | re.S)
# Outlook: a separator line, or a header block "From: ... Sent: ..." that starts the quoted original.
_OUTLOOK_SEPARATOR = re.compile(r"^\s*(-{2,}\s*Original Message\s*-{2,}|_{10,})\s*$", re.I)
_OUTLOOK_HEADER = re.compile(r"^\s*\*?(From|De|Von)\s*:\*?\s", re.I)
_OUTLOOK_SENT = re.compile(r"^\s*\*?(Sent|Date|Envoyé|Gesendet)\s*:\*?\s", re.I)
_PREFIX = re.compile(r"^\s*((re|fwd?|aw|wg|sv|vs|antw)\s*(\[\d+\])?\s*:\s*)+", re.I)


def extract_metadata(text: str) -> tuple[str, dict[str, str]]:
    """Remove every ``[key: value]`` line; return the text and the known keys as attributes."""
    found: dict[str, str] = {}
    kept = []
    for line in text.splitlines():
        if _CONTROL.match(line):
            continue
        match = _COMMAND.match(line)
        if match:
            key = match.group(1).strip().lower().replace(" ", "_").replace("-", "_")
            if key in METADATA_KEYS and match.group(2):
                found[METADATA_KEYS[key]] = match.group(2)
            continue  # unknown keys are ignored, but the command line never goes out
        kept.append(line)
    return "\n".join(kept), found


@dataclass(frozen=True, slots=True)
class Control:
    action: str  # block | allow | unblock
    target: str  # "" the contact's address, "domain" the contact's domain, else an address or @domain as written


def owner_controls(text: str) -> list[Control]:
    """The control lines of the owner's own text (never of the quoted history below it)."""
    found = (_CONTROL.match(line) for line in strip_history(text).splitlines())
    return [Control(m.group(1).lower(), (m.group(2) or "").strip()) for m in found if m]


def new_conversation_recipient(text: str) -> str:
    """ADDRESS from a first non-blank line ``[to: ADDRESS]`` ('' when the first line is anything else)."""
    first = next((line for line in text.replace("\r\n", "\n").split("\n") if line.strip()), "")
    match = _TO.match(first)
    return match.group(1).strip().strip("<>").strip() if match else ""


def strip_history(text: str) -> str:
    """Cut at the forward footer, the Outlook header block or an attribution line; drop quoted lines."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        if FOOTER_MARKER in line or _OUTLOOK_SEPARATOR.match(line):
            break
        if _OUTLOOK_HEADER.match(line) and any(_OUTLOOK_SENT.match(n) for n in lines[i + 1:i + 4]):
            break
        joined = line + (" " + lines[i + 1] if i + 1 < len(lines) else "")
        if _ATTRIBUTION.match(line) or (_ATTRIBUTION.match(joined) and not line.rstrip().endswith(":")
                                         and lines[i + 1:i + 2] and lines[i + 1].rstrip().endswith(":")):
            break
        if _QUOTED.match(line):
            continue
        out.append(line)
    return "\n".join(out).strip("\n").rstrip() + "\n"


def clean_reply(text: str, private_addresses: tuple[str, ...], public_address: str) -> tuple[str, dict[str, str]]:
    body, metadata = extract_metadata(strip_history(text))
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return hide_addresses(body, private_addresses, public_address), metadata


def reply_subject(subject: str) -> str:
    """Exactly one 'Re: ' in front of the original subject (no 'Re: Fwd: Re:' chains)."""
    rest = _PREFIX.sub("", subject or "").strip()
    return f"Re: {rest}" if rest else "Re: your message"
