"""Turn the owner's reply into what the contact should read: metadata commands out, quoted history out.

Pure functions (no AWS), unit-tested against Gmail-, Outlook- and Apple Mail-style replies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from common.delivery.compose import FOOTER_MARKER
from common.reply.scrub import hide_addresses

# [key: value] command lines -> conversation attributes (docs/CONTRACT.md)
METADATA_KEYS = {
    "company": "companyName",
    "title": "title",
    "type": "type",
    "location": "location",
    "salary_range": "salaryRange",
    "job_id": "jobId",
    "notes": "notes",
}
_COMMAND = re.compile(r"^\s*\[\s*([A-Za-z_ -]+?)\s*:\s*(.*?)\s*\]\s*$")
# Owner controls (docs/CONTRACT.md): [block], [block: domain], [allow], [unblock], optionally naming
# an address or @domain instead of the contact; removed from the outgoing body like metadata.
_CONTROL = re.compile(r"^\s*\[\s*(block|allow|unblock)\s*(?::\s*([^\]]*?))?\s*\]\s*$", re.I)
_TO = re.compile(r"^\s*\[\s*to\s*:\s*([^\]]*?)\s*\]\s*$", re.I)
_QUOTED = re.compile(r"^\s*>")
# Gmail: "On Mon, 3 Nov 2026 at 10:00, Jane <jane@x> wrote:" (sometimes wrapped over two lines);
# Apple Mail: "On 3 Nov 2026, at 10:00, Jane <jane@x> wrote:"; and as Gmail writes it in de, fr, es,
# it, nl, pt, pl and ru. Japanese and Chinese Gmail put the date and "<address>" before a bare colon:
# _ATTRIBUTION_ANY catches any language's attribution that names an address and ends in a colon.
_ATTRIBUTION = re.compile(
    r"^\s*(On|Am|Le|El|Il giorno|Il|Op|Em|W dniu|Dnia)\s.+(wrote|schrieb|a écrit|escribió|"
    r"ha scritto|schreef|escreveu|napisał\(a\)|napisała|napisał|пишет|написал\(а\)|"
    r"написала|написал)\s*[:：]\s*$",
    re.I | re.S,
)
ATTRIBUTION_MAX_CHARS = 400  # lines tried against _ATTRIBUTION_ANY (two stars: kept off long lines)
_ATTRIBUTION_ANY = re.compile(r"^(?=[^\n]*\d)[^\n]*<[^<>\s@]+@[^<>\s]+>[^\n]*[:：]\s*$", re.S)
# Outlook: a separator line, or a header block "From: ... Sent: ..." that starts the quoted original,
# in en, es, it, nl, pt, pl, ru, fr, de, ja and zh (as Outlook writes them in those languages).
_OUTLOOK_SEPARATOR = re.compile(
    r"^\s*(-{2,}\s*(Original Message|Forwarded message|Mensaje original|Messaggio originale|"
    r"Oorspronkelijk bericht|Mensagem original|Wiadomość oryginalna|Исходное сообщение|"
    r"Message d'origine|Ursprüngliche Nachricht|Weitergeleitete Nachricht|元のメッセージ|"
    r"原始邮件|原始郵件)\s*-{2,}|_{10,}|Begin forwarded message:)\s*$",
    re.I,
)
_OUTLOOK_HEADER = re.compile(r"^\s*\*?(From|De|Da|Van|Od|От|Von|差出人|发件人|寄件者)\s*[:：]\*?(\s|$)", re.I)
_OUTLOOK_SENT = re.compile(
    r"^\s*\*?(Sent|Date|Envoyé|Gesendet|Datum|Enviado el|Enviado|Enviada em|Fecha|Inviato|"
    r"Data|Verzonden|Wysłano|Wysłane|Отправлено|Дата|送信日時|日付|发送时间|日期|寄件日期|"
    r"傳送時間)\s*[:：]\*?(\s|$)",
    re.I,
)
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


class ControlAction(StrEnum):
    """An owner control line's verb: ``[block]``, ``[allow]``, ``[unblock]`` (docs/CONTRACT.md, Data)."""

    BLOCK = "block"
    ALLOW = "allow"
    UNBLOCK = "unblock"


@dataclass(frozen=True, slots=True)
class Control:
    action: ControlAction
    target: (
        str  # "" the contact's address, "domain" the contact's domain, else an address or @domain as written
    )


def owner_controls(text: str) -> list[Control]:
    """The control lines of the owner's own text (never of the quoted history below it)."""
    found = (_CONTROL.match(line) for line in strip_history(text).splitlines())
    return [Control(ControlAction(m.group(1).lower()), (m.group(2) or "").strip()) for m in found if m]


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
        if _OUTLOOK_HEADER.match(line) and any(_OUTLOOK_SENT.match(n) for n in lines[i + 1 : i + 4]):
            break
        joined = line + (" " + lines[i + 1] if i + 1 < len(lines) else "")
        any_language = len(joined) <= ATTRIBUTION_MAX_CHARS and _ATTRIBUTION_ANY.match(joined)
        if (
            _ATTRIBUTION.match(line)
            or (any_language and _ATTRIBUTION_ANY.match(line))
            or (
                (_ATTRIBUTION.match(joined) or any_language)
                and not line.rstrip().endswith(":")
                and lines[i + 1 : i + 2]
                and lines[i + 1].rstrip().endswith((":", "："))
            )
        ):
            break
        if _QUOTED.match(line):
            continue
        out.append(line)
    return "\n".join(out).strip("\n").rstrip() + "\n"


def clean_reply(
    text: str, private_addresses: tuple[str, ...], public_address: str
) -> tuple[str, dict[str, str]]:
    body, metadata = extract_metadata(strip_history(text))
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return hide_addresses(body, private_addresses, public_address), metadata


def reply_subject(subject: str) -> str:
    """Exactly one 'Re: ' in front of the original subject (no 'Re: Fwd: Re:' chains)."""
    rest = _PREFIX.sub("", subject or "").strip()
    return f"Re: {rest}" if rest else "Re: your message"
