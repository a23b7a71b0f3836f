"""The messages delivery composes: the auto-ack, the forward to the owner (parsed or whole) and the
quarantine digest. The forward opens with FORWARD_MARKER and ends with FOOTER_MARKER; reply-handler
reads what follows the marker in a reply as the forward quoted (common/reply/text.py)."""

from __future__ import annotations

import html as htmllib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from common.delivery.ack import greeting_name
from common.mail import htmlsafe, limits, outbound, parse, trackers
from common.mail.htmldoc import HtmlDoc
from common.mail.outbound import OutboundMessage
from common.mail.parse import ORIGINAL_NAME, ParsedMail
from common.mail.sanitize import clean_header_text
from common.mail.threads import release_address
from common.runtime.config import Delivery
from common.store.attachments import Link, Stored

# reply-handler cuts the owner's reply at these lines, so they must survive plain-text quoting. Both
# hold MARKER_TEXT; the forward opens with FORWARD_MARKER (text and HTML), so whatever follows it in a
# reply is the forward quoted, whatever the owner's client wrote above it.
MARKER_TEXT = "forwarded by service-email-handler"
FOOTER_MARKER = f"-- {MARKER_TEXT} --"
FORWARD_MARKER = f"-- {MARKER_TEXT}: the original follows --"
# The class of the box the contact's HTML is drawn in (common.mail.htmlsafe: its CSS applies only there).
CONTACT_SCOPE = "seh-contact"
# MIME overhead: base64 grows data by 4/3 plus line breaks; headers and boundaries are small.
_B64 = 1.37
_OVERHEAD = 16 * 1024


def build_ack(
    cfg: Delivery, subject: str, template: str, mid: str, cid: str, mail: ParsedMail
) -> OutboundMessage:
    """The ack of ``mail``, with the subject and text of the public address it was sent to."""
    name = greeting_name(mail.display_name)
    return OutboundMessage(
        kind="ack",
        idempotency_key=f"ack:{mid}",
        correlation_id=f"ack-{mid}",
        to=[mail.from_address],
        subject=subject,
        text=template.replace("{name}", f" {name}" if name else ""),
        in_reply_to=mail.message_id,
        references=[*mail.references, mail.message_id] if mail.message_id else [],
        headers={"Auto-Submitted": "auto-replied", "X-Auto-Response-Suppress": "All"},
        conversation_id=cid,
        from_name=cfg.public_name,
    )


def header_block(mail: ParsedMail) -> list[tuple[str, str]]:
    """What a mail client shows above a message: the original From, Date, To and Cc."""
    sender = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
    rows = [("From", sender)] + [(name.title(), mail.headers.get(name, "")) for name in ("date", "to", "cc")]
    return [(name, value) for name, value in rows if value]


def _partial_note(mail: ParsedMail) -> str:
    """message/partial (RFC 2046 5.2.2): the sender's program split the mail; say which part this is."""
    ctype = mail.headers.get("content-type", "")
    if not ctype.lower().startswith("message/partial"):
        return ""
    number = re.search(r"number\s*=\s*\"?(\d+)", ctype, re.I)
    total = re.search(r"total\s*=\s*\"?(\d+)", ctype, re.I)
    which = f"part {number.group(1)}" + (f" of {total.group(1)}" if total else "") if number else "one part"
    return (
        f"This mail is {which} of a message the sender's program split (message/partial); it is forwarded "
        "as received, and a mail client can join the parts once all have arrived."
    )


def _unparsed_note(mail: ParsedMail, kept: list[outbound.Attachment], archived: str) -> str:
    """The banner of a mail read by parse.minimal(): what the owner gets, as the footer lists it (the
    original is attached only when the deny-list check and the size limit both let it through)."""
    what = (
        "the original is attached"
        if any(a.filename == ORIGINAL_NAME for a in kept)
        else "the original is not attached (the footer says why)"
    )
    return f"This message could not be parsed ({mail.parse_failed}); {what}. It is archived at {archived}."


def _download(link: Link) -> str:
    """The words beside a presigned link: until when it works, honestly (common.aws.s3.presign_get)."""
    until = link.expires.strftime("%Y-%m-%d %H:%M UTC")
    return f"download until {until}{' at the latest' if link.temporary else ''}: {link.url}"


# Said once in the footer of a forward with a link signed by temporary (role) credentials.
TEMPORARY_LINKS_NOTE = (
    "Download links are signed with the forwarding function's temporary AWS credentials and stop "
    "working when those expire, which can be sooner than the time shown; the s3:// keys stay valid."
)


def build_forward(
    cfg: Delivery,
    mid: str,
    cid: str,
    mail: ParsedMail,
    stored: Stored,
    warnings: tuple[str, ...],
    archive_key: str,
    reply_to: str,
    link: Callable[[str], Link] | None = None,
) -> OutboundMessage:
    """The forward to the owner: the original's header block on top, both bodies, every stored part
    (inline images beside the HTML), the original subject untouched, and a footer naming what was
    withheld or did not fit SES's size limit. ``link`` presigns a key: a part left out for size, and
    the archived original of a shortened forward, get a download link beside their S3 key. Withheld
    parts never do (the owner should not be one click from a withheld executable), nor does the
    original of a mail that had withheld parts (they are inside it)."""
    sender = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
    text = mail.body_text
    html, warnings = _safe_html(cfg, mail.html_doc if mail.html else "", warnings)
    notes = [
        f"{w.name} ({w.reason}{f'; stored at s3://{cfg.bucket}/{w.key}' if w.key else ''})"
        for w in stored.withheld
    ]
    kept, truncated = _fit(cfg.forward_budget, text, html, stored.attachments, stored.sizes)
    links: list[Link] = []

    def linked(key: str, allowed: bool = True) -> str:
        if link is None or not allowed:
            return ""
        links.append(link(key))
        return "; " + _download(links[-1])

    if truncated:
        text, html, dropped = truncated
        notes += [
            f"{a.filename} (too large to forward; stored at s3://{cfg.bucket}/{a.key}{linked(a.key)})"
            for a in dropped
        ]
        original = linked(archive_key, allowed=not stored.withheld)
        warnings = (
            *warnings,
            "This forward was shortened to fit the mail size limit. The complete original is "
            f"archived at s3://{cfg.bucket}/{archive_key}"
            + (
                f" ({original[2:]})"
                if original
                else " (no download link: it holds the withheld parts named below)"
                if link
                else ""
            ),
        )
    if mail.parse_failed:
        warnings = (*warnings, _unparsed_note(mail, kept, f"s3://{cfg.bucket}/{archive_key}"))
    partial = _partial_note(mail)
    if partial:
        warnings = (*warnings, partial)
    footer = [FOOTER_MARKER, f"From: {sender}", f"Conversation: {cid}"]
    if notes:
        footer.append("Not attached: " + "; ".join(notes))
    if any(k.temporary for k in links):
        footer.append(TEMPORARY_LINKS_NOTE)
    banner = "".join(f"[!] {w}\n" for w in warnings)
    block = header_block(mail)
    top = banner + ("\n" if banner else "") + "".join(f"{name}: {value}\n" for name, value in block) + "\n"
    return OutboundMessage(
        kind="forward",
        idempotency_key=f"forward:{mid}",
        correlation_id=f"forward-{mid}",
        to=[cfg.private_email],
        subject=mail.subject or "(no subject)",
        text=FORWARD_MARKER + "\n" + top + text.rstrip() + "\n\n" + "\n".join(footer) + "\n",
        html=_html_with(html, warnings, block, footer, [k.url for k in links]) if html else "",
        from_name=clean_header_text(f"{mail.display_name or mail.from_address} via {cfg.domain_name}", 200),
        reply_to=reply_to,
        references=[*mail.references, mail.message_id] if mail.message_id else [],
        attachments=kept,
        conversation_id=cid,
        original_key=archive_key,
    )


def _safe_html(cfg: Delivery, html: str | HtmlDoc, warnings: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The contact's HTML (or the mail's parsed body, which this rewrites) as a closed fragment (the
    banner around it cannot be hidden), trackers out if on; with the banner's notes on what was
    removed or left unread."""
    if not html:
        return "", warnings
    safe = htmlsafe.sanitize(html, remove_trackers=cfg.remove_trackers == "on", scope=CONTACT_SCOPE)
    if safe.removed:
        warnings = (*warnings, trackers.banner(safe.removed))
    if safe.left_unread:
        warnings = (*warnings, htmlsafe.cut_note(safe))
    return safe.html, warnings


def build_unparsed_forward(
    cfg: Delivery, mid: str, item: dict[str, Any], why: str, original: outbound.Attachment | None, size: int
) -> OutboundMessage:
    """The forward of a quarantined mail released without parsing it (it is over a parsing cap, and
    parsing it is what the cap prevents): a note saying so, the raw original attached (``original``)
    or, when it would not fit SES's size limit, the S3 key of the quarantined copy. Sender and subject
    are SES's reading of the header (the quarantine record)."""
    sender = clean_header_text(item.get("sender"), 300) or "(unknown sender)"
    subject = clean_header_text(item.get("subject"), 300)
    stored = f"s3://{cfg.bucket}/{item.get('key')}"
    note = [
        "Released from quarantine by the owner (it was held because: "
        f"{clean_header_text(item.get('reason'), 500)}).",
        f"It was not parsed ({why}): reading a mail over a parsing limit is what the limit prevents, "
        "so it is "
        + (
            "attached whole as original.eml, exactly as received, as a plain file (not shown as a message). "
            "Its attachments were not checked against the deny-list: open it with care."
            if original
            else f"not attached either: at {size:,} bytes it would not fit SES's size limit. "
            f"It is stored at {stored}."
        ),
        "It starts no conversation: to answer the sender, mail "
        f"new@{cfg.thread_domain} with [to: ADDRESS] on the first line.",
    ]
    text = (
        "".join(f"[!] {line}\n" for line in note)
        + f"\nFrom: {sender}\nSubject: {subject or '(no subject)'}\n"
        + f"Received: {clean_header_text(item.get('receivedAt'), 40)}\nStored at: {stored}\n"
    )
    return OutboundMessage(
        kind="forward",
        idempotency_key=f"forward:{mid}",
        correlation_id=f"forward-{mid}",
        to=[cfg.private_email],
        subject=subject or "(no subject)",
        text=text,
        from_name=f"Quarantine {cfg.domain_name}",
        attachments=[original] if original else [],
        original_key=str(item.get("key", "")),
    )


def fits_attached(cfg: Delivery, size: int) -> bool:
    """Whether ``size`` bytes fit a forward once base64-encoded, beside a short note."""
    return int(size * _B64) + _OVERHEAD <= cfg.forward_budget


def _utf8_len(text: str) -> int:
    """UTF-8 length without a copy for ASCII text (str.isascii reads a flag): a 38 MB HTML body must
    not be encoded just to be measured."""
    return len(text) if text.isascii() else len(text.encode())


def _fit(
    limit: int, text: str, html: str, attachments: list[outbound.Attachment], sizes: dict[str, int]
) -> tuple[list[outbound.Attachment], tuple[str, str, list[outbound.Attachment]] | None]:
    """Keep what fits SES's size limit: bodies first, then attachments smallest first."""
    budget = limit - _OVERHEAD
    body = int((_utf8_len(text) + _utf8_len(html)) * _B64)
    att_sizes = {a.key: int(sizes[a.key] * _B64) for a in attachments}
    if body + sum(att_sizes.values()) <= budget:
        return attachments, None
    if body > budget // 2:  # bodies alone are huge: keep the text, shortened; drop the HTML
        text = text.encode()[: int(budget / 2 / _B64)].decode("utf-8", "ignore") + "\n[... truncated ...]"
        html = ""
        body = int(len(text.encode()) * _B64)
    kept: list[outbound.Attachment] = []
    room = budget - body
    for a in sorted(attachments, key=lambda a: att_sizes[a.key]):
        if att_sizes[a.key] <= room:
            kept.append(a)
            room -= att_sizes[a.key]
    dropped = [a for a in attachments if a not in kept]
    return [a for a in attachments if a in kept], (text, html, dropped)


def _linked(text: str, urls: list[str]) -> str:
    """``text`` escaped for HTML with the download links this system made clickable, and only those (a
    URL in a sender's display name stays text; an escaped URL is a valid href: &amp; reads as &)."""
    text = htmllib.escape(text)
    for url in dict.fromkeys(htmllib.escape(u) for u in urls):
        text = text.replace(url, f'<a href="{url}">{url}</a>')
    return text


# Every element the system writes into a forward's HTML carries these, inline and !important: an
# inline !important declaration wins over any stylesheet rule, !important or not (CSS Cascade 4,
# section 6.4). The contact's CSS is confined to its own box (common.mail.cssscope), so none of its
# selectors reaches the system's elements at all; this is the second wall. ``all: revert`` first
# takes every property (transforms, scale, zoom, masks, text fill, animations: whatever a future
# property is) back to the browser's own default, then the ones that decide whether the block is
# seen are pinned by name (docs/security.md, "The system's block").
_PINNED = (
    "all:revert",
    "visibility:visible",
    "opacity:1",
    "position:static",
    "transform:none",
    "scale:none",
    "translate:none",
    "rotate:none",
    "zoom:1",
    "filter:none",
    "backdrop-filter:none",
    "clip-path:none",
    "clip:auto",
    "mask:none",
    "-webkit-mask:none",
    "mix-blend-mode:normal",
    "content-visibility:visible",
    "height:auto",
    "min-height:0",
    "max-height:none",
    "width:auto",
    "max-width:none",
    "overflow:visible",
    "font:13px/1.4 sans-serif",
    "color:#222",
    "-webkit-text-fill-color:currentcolor",
    "-webkit-text-stroke-width:0",
    "text-shadow:none",
    "text-indent:0",
    "letter-spacing:normal",
    "word-spacing:normal",
    "text-transform:none",
    "animation:none",
    "transition:none",
)


def _important(*declarations: str) -> str:
    return "".join(f"{d}!important;" for d in declarations)


_SHOWN = _important(*_PINNED)
_BLOCK = _SHOWN + _important("display:block")
_INLINE = _SHOWN + _important("display:inline", "font-weight:bold")
# The system's block is drawn above anything that could overlap it (it comes first, the contact's box
# is clipped to its own area below it; this keeps it on top if either ever failed).
_SYSTEM_BOX = _important("background:#fff", "position:relative", "z-index:2147483647", "isolation:isolate")
# The contact's HTML: its own stacking context and containing block, clipped to its box, so that its
# positioned elements (absolute or fixed) cannot be painted over the system's block above it.
# Pinned like the system's block: were a rule of the contact's ever to reach it, the box still could not
# be lifted, moved or unclipped over the system's block.
_CONTACT_BOX = _important(
    "display:block",
    "position:relative",
    "inset:auto",
    "margin:0",
    "z-index:0",
    "isolation:isolate",
    "transform:translateZ(0)",
    "scale:none",
    "translate:none",
    "rotate:none",
    "zoom:1",
    "overflow:hidden",
    "contain:paint",
)
# Generated content is the one thing inline styles cannot reach: none on the system's block, on body or
# on html (a contact's ::before could be laid over the banner). Specific enough to beat ordinary rules.
_NO_OVERLAY = (
    "<style>#ehs-body #ehs-system::before,#ehs-body #ehs-system::after,#ehs-body #ehs-system *::before,"
    "#ehs-body #ehs-system *::after,html#ehs-html#ehs-html::before,html#ehs-html#ehs-html::after,"
    "#ehs-html #ehs-body#ehs-body::before,#ehs-html #ehs-body#ehs-body::after"
    "{content:none!important;display:none!important}</style>"
)


def _html_with(
    html: str, warnings: tuple[str, ...], block: list[tuple[str, str]], footer: list[str], urls: list[str]
) -> str:
    """The forward's HTML: the system's block (marker, banner, header block, what the footer says) and
    then the contact's HTML, untouched and never searched. The system's parts come first and close
    every element they open, so nothing the contact wrote can contain them (an unclosed comment, a
    <plaintext>, a <body> inside a comment), reorder them or, through CSS, hide them."""

    def el(tag: str, inner: str, style: str = _BLOCK) -> str:
        return f'<{tag} style="{style}">{inner}</{tag}>'

    def warn(w: str) -> str:
        return el(
            "div",
            f"&#9888; {_linked(w, urls)}",
            _BLOCK
            + _important("background:#fff3cd", "border:1px solid #e0a800", "padding:6px", "margin:0 0 6px"),
        )

    rows = "".join(
        el("div", el("b", f"{htmllib.escape(name)}:", _INLINE) + f" {htmllib.escape(value)}")
        for name, value in block
    )
    notes = "".join(el("div", _linked(line, urls)) for line in footer[1:])
    system = (
        el("div", htmllib.escape(FORWARD_MARKER), _BLOCK + _important("color:#888"))
        + "".join(warn(w) for w in warnings)
        + el(
            "div",
            rows,
            _BLOCK + _important("border-bottom:1px solid #ccc", "padding:0 0 6px", "margin:0 0 6px"),
        )
        + el("div", notes, _BLOCK + _important("color:#666", "margin:0 0 12px"))
    )
    return (
        f'<!DOCTYPE html><html id="ehs-html" style="{_BLOCK}">'
        f'<head><meta charset="utf-8">{_NO_OVERLAY}</head>'
        f'<body id="ehs-body" style="{_BLOCK}">'
        f'<div id="ehs-system" style="{_BLOCK}{_SYSTEM_BOX}">{system}</div>'
        # The sanitiser (common.mail.htmlsafe) made the contact's HTML a closed fragment, so the box
        # and the document close after it and nothing of the contact's can reach outside them.
        f'<div style="{_CONTACT_BOX}">{html}</div></body></html>'
    )


def _cut(value: object, limit: int, empty: str) -> str:
    text = clean_header_text(value, limit + 1) or empty
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def build_digest(
    cfg: Delivery, held: list[dict[str, Any]], idempotency_key: str, to: str = ""
) -> OutboundMessage:
    """The owner's quarantine digest: the oldest ``DIGEST_MAX_ENTRIES`` held mails with their release
    addresses, each field cut short, and how many more there are (``held`` may be thousands after a
    flood; the digest stays a few hundred KB at most; the rest lead the next digests)."""
    count = len(held)
    shown = held[: limits.DIGEST_MAX_ENTRIES]
    rows = []
    for n, item in enumerate(shown, 1):
        address = release_address(str(item["id"]), cfg.thread_secret, cfg.thread_domain)
        rows.append(
            (
                n,
                str(item["id"]),
                _cut(item.get("sender"), limits.DIGEST_SENDER_CHARS, "(no sender)"),
                _cut(item.get("subject"), limits.DIGEST_SUBJECT_CHARS, "(no subject)"),
                _cut(item.get("reason"), limits.DIGEST_REASON_CHARS, "(no reason)"),
                _cut(item.get("receivedAt"), 40, ""),
                address,
                _cut(item.get("address"), limits.DIGEST_SENDER_CHARS, ""),  # the public address written to
            )
        )
    more = (
        f"… and {count - len(shown)} more, listed in the next digests — run `email-handler quarantine list` "
        "to see them all now"
        if count > len(shown)
        else ""
    )
    text = [
        f"{count} message{'s' if count != 1 else ''} to {', '.join(cfg.public_emails or [cfg.public_email])} "
        "were quarantined "
        "and not forwarded.",
        "To release one, send any mail to its release address; it is then forwarded like any other.",
        "",
    ]
    for n, _, sender, subject, reason, received, address, written in rows:
        text += [
            f"{n}. {sender}",
            *([f"   To:       {written}"] if written else []),
            f"   Subject:  {subject}",
            f"   Reason:   {reason}",
            f"   Received: {received}",
            f"   Release:  {address}",
            "",
        ]
    if more:
        text.append(more)
    esc = htmllib.escape
    cells = "".join(
        f"<tr><td>{esc(sender)}{f'<br>to {esc(written)}' if written else ''}</td>"
        f"<td>{esc(subject)}</td><td>{esc(reason)}</td><td>{esc(received)}</td>"
        f'<td><a href="mailto:{address}?subject={quote("Release " + qid)}">release</a></td></tr>'
        for _, qid, sender, subject, reason, received, address, written in rows
    )
    html = (
        f"<html><body><p>{esc(text[0])}<br>{esc(text[1])}</p>"
        '<table border="1" cellpadding="4" style="border-collapse:collapse">'
        "<tr><th>Sender</th><th>Subject</th><th>Reason</th><th>Received</th><th></th></tr>"
        f"{cells}</table>{f'<p>{esc(more)}</p>' if more else ''}</body></html>"
    )
    return OutboundMessage(
        kind="digest",
        idempotency_key=idempotency_key,
        correlation_id=idempotency_key.replace(":", "-"),
        to=[to or cfg.private_email],  # a mailbox of the addresses it lists (several mailboxes)
        subject=f"Quarantine: {count} message{'s' if count != 1 else ''} held",
        text="\n".join(text),
        html=html,
        from_name=f"Quarantine {cfg.domain_name}",
        headers={"Auto-Submitted": "auto-generated"},
    )


HTML_ORIGINAL_NAME = "message.html"


def unconverted_html(
    cfg: Delivery, mail: ParsedMail, archive_key: str
) -> tuple[parse.Attachment | None, str] | None:
    """For an HTML-only mail longer than the text conversion reads (common.mail.htmldoc's caps):
    the whole HTML as a file for the forward and the note saying so, or, when it could never fit a
    forward (SES's size limit), only a note naming the archived original that holds it (no second
    copy of up to 40 MB is made). None for every other mail."""
    derived = mail.html_text
    if derived is None or derived.complete:
        return None
    note = (
        f"This mail's HTML body is {derived.total:,} characters; the text below was converted from its first "
        f"{derived.read:,} only. "
    )
    if not fits_attached(cfg, len(mail.html) * 4 // 3):  # a character is 1-4 UTF-8 bytes; most HTML is ASCII
        return None, note + (
            f"The whole HTML is too large to forward; it is in the original archived at "
            f"s3://{cfg.bucket}/{archive_key}."
        )
    data = mail.html.encode("utf-8", "replace")
    part = parse.Attachment(
        HTML_ORIGINAL_NAME,
        HTML_ORIGINAL_NAME,
        "text/html",
        data,
        declared_type="text/html",
        mime_header="text/html; charset=utf-8",
        charset="utf-8",
    )
    return part, note + (
        f"The HTML is attached as {HTML_ORIGINAL_NAME} (or, when the forward has no room for it, stored "
        f"where the footer says), made safe and without trackers up to its first {derived.read:,} characters "
        f"(common.mail.htmlsafe); the original archived at s3://{cfg.bucket}/{archive_key} has all of it."
    )
