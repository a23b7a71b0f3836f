"""reply-handler logic: the owner's reply to a thread address goes to the conversation's contact.

Order matters: authorise before reading the message (common/reply/auth.py: owner envelope, DMARC or
aligned SPF, a thread address whose HMAC tag verifies), then the From field alone (one owner
mailbox, nothing else), and only then parse. Anything else is archived under ``rejected/`` with the
reason, never answered (no backscatter to a forged sender), and the owner is alerted at most once
per hour per reason. A replayed owner message (same Message-ID in the same conversation, or a Date
older than ``REPLY_MAX_AGE_SECONDS``) is rejected the same way, and so is automatic mail from the
owner's mailbox (an out-of-office reply or a read receipt to a thread address:
common/mail/autoreply.py). The recipient comes only from the conversation record; To/Cc of the reply
are never used; every spelling of a private address is
replaced by the public one, and the contact sees ``PUBLIC_NAME``, never the owner's display name.
Only the owner's own text goes out, told from quote by evidence (the forward's marker, the lines the
contact wrote: :func:`evidence`) before shape (common/reply/text.py); commands come only from that
text. A reply the owner wrote that is not sent (nothing of the owner's in it, only commands, an
encrypted body, an opaque signature that does not verify) gets a notice (common/reply/notice.py).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from common.delivery import release, screener
from common.delivery.compose import FORWARD_MARKER
from common.delivery.deliver import MAILBOX_MARK
from common.mail import limits, parse
from common.mail.autoreply import automatic
from common.mail.encrypt import encrypted_kind
from common.mail.htmltext import html_to_text
from common.mail.outbound import OutboundMessage
from common.mail.parse import ParsedMail
from common.mail.sanitize import clean_header_text, safe_filename
from common.mail.threads import conversation_id, opaque_message_id, opaque_thread_address, thread_address
from common.reply import auth, notice, owner, signed
from common.reply.auth import NotAuthorisedError, NoticedRefusalError, OwnMailboxError, UnreadableReplyError
from common.reply.owner import TargetKind
from common.reply.scrub import hide_addresses, hide_names, owner_names
from common.reply.text import (
    Evidence,
    command_lines,
    extract_metadata,
    known_lines,
    new_conversation_recipient,
    owner_controls_in,
    read_reply,
    reply_subject,
    reply_text,
    unread_html_lines,
)
from common.runtime import addresses, events
from common.runtime.addresses import from_command
from common.runtime.clock import parse_iso_or_now
from common.runtime.config import ReplyHandlerConfig
from common.runtime.log import bind, get_logger
from common.store import (
    alerts,
    attachments,
    conversations,
    layout,
    quarantine,
    rawmail,
    replies,
    sendstatus,
    staging,
)
from common.store.sendqueue import enqueue

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

log = get_logger("reply-handler")


class ReplyResult(TypedDict):
    status: Literal[
        "queued",
        "started",
        "commands-applied",
        "not-sent",
        "released",
        "already-released",
        "approved",
        "declined",
        "rejected",
        "already-processed",
    ]
    messageId: NotRequired[str]
    reason: NotRequired[str]
    key: NotRequired[str]
    alerted: NotRequired[bool]
    conversationId: NotRequired[str]
    metadata: NotRequired[dict[str, str]]
    attachments: NotRequired[list[str]]
    controls: NotRequired[list[str]]
    released: NotRequired[list[str]]  # the screener's approval: the quarantine ids forwarded, in order


def handle(cfg: ReplyHandlerConfig, event: Any, context: LambdaContext | None = None) -> ReplyResult:
    receipt = events.SesReceipt.from_event(event)
    mid = receipt.message_id
    bind(ses_message_id=mid)
    raw = staging.fetch(cfg, mid)
    if raw is None:
        log.warning("reply not processed", extra={"reason": "staging object missing (already processed)"})
        return {"status": "already-processed", "messageId": mid}
    sender = ""  # the authenticated From: the owner, or an address's own mailbox
    try:
        auth.check_sender(receipt, cfg)
        goal = owner.target(receipt, cfg)
        bind(
            **(
                {"conversation_id": goal.value}
                if goal.kind == TargetKind.REPLY
                else {"owner_target": goal.kind}
            )
        )
        if goal.kind in DECISIONS:
            return owner_decision(cfg, receipt, raw, goal, mid)
        mail, received, sender = _owner_mail(cfg, receipt, raw, relayed=True)
        if goal.kind == TargetKind.NEW:
            # Every command, [to:] and [from:] too, from the owner's own lines only (command_lines):
            # never from a mail the owner forwards here.
            first = read_reply(
                reply_text(mail.text, mail.html_doc if mail.html else ""), evidence(cfg, "", {}, new=True)
            )
            ours = command_lines(first)
            to = new_conversation_recipient(ours)
            problem = owner.recipient_problem(cfg, to)
            if problem:
                raise NotAuthorisedError(problem)
            public = chosen_address(cfg, ours, sender)  # [from: ADDR], else the default
            auth.check_mailbox(cfg, receipt, sender, public, f"write from {public}")
            cid = conversation_id(to, "", cfg.opaque_relay_domains)
            bind(conversation_id=cid)
            check_contact(cfg, to)
            record = None
        else:
            cid = goal.value
            record = conversations.get(cfg, cid)
            if not record or not record.get("senderEmail"):
                raise NotAuthorisedError("unknown conversation")
            # before anything of the conversation is said: a mailbox of another address learns nothing
            auth.check_mailbox(
                cfg, receipt, sender, str(record.get("publicAddress") or ""), "answer this conversation"
            )
            check_contact(cfg, str(record["senderEmail"]))
        if (
            goal.kind == TargetKind.REPLY
            and goal.address.lower()
            not in " ".join((mail.headers.get("to", ""), mail.headers.get("cc", ""))).lower()
        ):
            # The owner's client addresses a reply to the thread address, and DKIM signs To and Cc
            # (RFC 6376 section 5.4.1): a signed message delivered to another thread is a replay.
            raise NotAuthorisedError(
                "the thread address it was delivered to is not in its To or Cc (replayed to "
                "another conversation?)"
            )
        claims = auth.replay_claims(mail, cid)
        if not all([replies.claim(cfg, scope, i, mid) for scope, i in claims]):  # every claim is written
            raise NotAuthorisedError("owner message already sent (replay)")
        identity = auth.message_identities(mail)[0]
        if goal.kind == TargetKind.NEW:
            record = conversations.start_outbound(cfg, cid, to, mail.subject, mid, received, public)
    except NoticedRefusalError as exc:
        # The owner's own reply, authenticated, that is not sent: refused, and the mailbox that wrote it
        # told why and what to do instead.
        return _refused(cfg, receipt, raw, exc, sender)
    except NotAuthorisedError as exc:
        return reject(cfg, receipt, raw, str(exc))
    assert record is not None
    result = send_reply(cfg, mid, cid, identity, record, mail, new=goal.kind == TargetKind.NEW, sender=sender)
    staging.done(cfg, receipt)
    return result


def _refused(
    cfg: ReplyHandlerConfig, receipt: events.SesReceipt, raw: bytes, exc: NoticedRefusalError, sender: str
) -> ReplyResult:
    result = reject(cfg, receipt, raw, str(exc))
    notice.send(
        cfg,
        receipt.message_id,
        exc.kind,
        _subject(raw),
        f"it was not sent: {exc}.",
        exc.how,
        to=cfg.notice_to(getattr(exc, "sender", "") or sender),
    )
    return result


def _owner_mail(
    cfg: ReplyHandlerConfig, receipt: events.SesReceipt, raw: bytes, relayed: bool
) -> tuple[ParsedMail, datetime, str]:
    """The owner's mail, read once its From and fields pass and it is within the caps, the time SES
    received it and the mailbox its From names. ``relayed``: its text goes to a contact, so an
    opaque-signed reply is opened and an encrypted one refused. Raises NotAuthorisedError or
    UnreadableReplyError."""
    sender = auth.check_from(raw, receipt, cfg).address
    auth.check_single_fields(raw)
    if over := limits.screen(raw):  # even the owner's mail is parsed only within the caps (docs/security.md)
        raise NotAuthorisedError(f"not parsed: {over}")
    mail = parse.parse(raw)
    received = parse_iso_or_now(receipt.timestamp)
    auth.check_age(mail, received, cfg.reply_max_age_s)
    if why := automatic(mail):  # the owner's out-of-office or read receipt: never relayed (docs/reply.md)
        raise NotAuthorisedError(f"automatic mail from the owner's mailbox ({why}); not relayed")
    if relayed and signed.is_pkcs7(mail.headers.get("content-type", "")):
        mail = signed.open_reply(raw, cfg.owner_key)  # opaque-signed: the signed entity, verified
    if relayed and (encrypted := encrypted_kind(mail.headers.get("content-type", ""))):
        # The owner's client encrypted the reply to the owner's own key: nothing in it can be read to
        # relay, and the contact could not read it either. Refused with a notice, never dropped.
        raise UnreadableReplyError(
            f"the reply is encrypted ({encrypted}) and cannot be relayed: send it again unencrypted "
            "(signing is fine)",
            "Send it again unencrypted (signing is fine).",
        )
    return mail, received, sender


ARCHIVE_READ_MAILS = 20  # a conversation's archived mails read as quote evidence, the latest first
ARCHIVE_READ_BYTES = 2 * 1024 * 1024  # a larger archived mail is left to the record's lastMessageBody
# The evidence read's budget: the text read (all archived mails together) and the time it may take.
# Past either, the rest is left unread and the reply goes out read from what was read, the owner told
# (a reply reaches an outcome within one invocation whatever the conversation holds).
EVIDENCE_MAX_CHARS = 8 * 1024 * 1024
EVIDENCE_MAX_SECONDS = 15.0


def evidence(
    cfg: ReplyHandlerConfig,
    cid: str,
    record: dict[str, Any],
    new: bool,
    budget_s: float = EVIDENCE_MAX_SECONDS,
) -> Evidence:
    """What proves a line of the reply is quote: every line the contact wrote in this conversation
    (its archived mails, text and HTML, and the record's lastMessageBody, each without what it quotes:
    a contact quoting the owner's earlier reply must not turn the owner's own phrases into quote),
    this system's own addresses and the contact's (a quote header names them). Read within a budget
    of characters and seconds; ``complete`` says whether all of it was read."""
    ours = (cfg.public_email.lower(), f"@{cfg.domain_name.lower()}", f"@{cfg.thread_domain.lower()}")
    if new:
        return Evidence(frozenset(), ours)
    parties = tuple(
        a.lower()
        for a in (
            str(record.get("senderEmail") or ""),
            str(record.get("publicAddress") or ""),
            *cfg.public_emails,
            cfg.public_email,
            f"@{cfg.thread_domain}",
        )
        if a
    )
    deadline = time.monotonic() + budget_s
    texts = [str(record.get("lastMessageBody") or "")]
    first = str(record.get("lastSesMessageId") or "")
    complete, size = True, len(texts[0])
    for raw in rawmail.archived(cfg, cid, first, ARCHIVE_READ_MAILS, ARCHIVE_READ_BYTES):
        if time.monotonic() > deadline or size + len(raw) > EVIDENCE_MAX_CHARS:
            complete = False
            break
        if limits.screen(raw):
            continue
        sent = parse.parse(raw)
        more = [sent.body_text, sent.text, html_to_text(sent.html_doc) if sent.html and sent.text else ""]
        texts += more
        size += sum(len(t) for t in more)
    lines: set[str] = set()
    for t in texts:
        if time.monotonic() > deadline:
            complete = False
            break
        if t:
            lines |= known_lines(read_reply(t).own)
    return Evidence(frozenset(lines), ours, parties, complete)


def _subject(raw: bytes) -> str:
    """The Subject of a reply that could not be parsed further (for the owner's notice)."""
    try:
        fields = auth.header_fields(raw)
    except NotAuthorisedError:
        return ""
    return next((v for n, v in fields if n.lower() == "subject"), "")


def chosen_address(cfg: ReplyHandlerConfig, text: str, sender: str = "") -> str:
    """The public address a conversation the owner starts is written from: ``[from: ADDR]`` on a line of
    the owner's own text (one this deployment serves), else the default: for an address's own mailbox,
    the first address (in PUBLIC_EMAIL's order) it is a mailbox of. Only the owner and the addresses'
    mailboxes, authorised above, get here (the caller checks the sender may write from it: a contact's
    mail never chooses an address)."""
    wanted = from_command(text)
    if not wanted:
        if not sender or cfg.may_act_for(sender, cfg.public_email):
            return cfg.public_email
        return next(
            (a.address for a in addresses.of(cfg).listed if cfg.may_act_for(sender, a.address)),
            cfg.public_email,
        )
    found = addresses.served(cfg, wanted)
    if found is None:
        raise NotAuthorisedError(f"[from: {wanted[:100]}] is not one of this system's public addresses")
    return found.address


def check_contact(cfg: ReplyHandlerConfig, contact: str) -> None:
    """The owner hears about a reply that cannot reach its contact, instead of the sender skipping it in
    silence."""
    if cfg.is_owner(contact):
        raise OwnMailboxError(
            f"the conversation's contact is your own mailbox {contact} (a mail loop): to test a reply, "
            "write from a second mailbox of yours, verified with `email-handler ses verify-address`",
            f"To test a reply, write to {cfg.public_email} from a second mailbox of yours (not one of "
            "PRIVATE_EMAIL or OWNER_EMAILS) and reply to that forward. While SES is in the sandbox, verify "
            "that mailbox first: email-handler ses verify-address SECOND@MAILBOX (click the link SES mails "
            'it); the reply then reaches it (docs/deploy.md, "Test a reply").',
        )
    if cfg.is_own(contact):
        raise NotAuthorisedError("the conversation's contact is one of our own addresses (mail loop)")
    entry = sendstatus.suppression(cfg, contact)
    if entry:
        raise NotAuthorisedError(
            f"contact {contact} is on the suppression list ({entry.get('reason')}); "
            f"email-handler suppression remove {contact} to mail them again"
        )


def release_held(
    cfg: ReplyHandlerConfig, qid: str, mid: str, receipt: events.SesReceipt, sender: str
) -> ReplyResult:
    """The owner, or a mailbox of the address the mail was written to, mailed a release address from
    a quarantine digest (a mailbox of another address releases nothing)."""
    held = quarantine.get(cfg, qid)
    auth.check_mailbox(
        cfg, receipt, sender, str(held.get("address") or "") if held else "", "release mail held for it"
    )
    released = release.release(cfg, qid, f"mail:{mid}")
    if released["status"] == "unknown":
        raise NotAuthorisedError("release address names no quarantined mail")
    if released["status"] == "undeliverable":
        raise NotAuthorisedError(f"released mail cannot be forwarded: {released.get('reason', '')}")
    return {
        "status": released["status"],
        "messageId": mid,
        "conversationId": released.get("conversationId", ""),
    }


SCREENER_KINDS = (TargetKind.APPROVE, TargetKind.DECLINE)
# The owner's mails that decide about held mail: the sender's authentication only, nothing of the text
DECISIONS = (TargetKind.RELEASE, *SCREENER_KINDS)


def owner_decision(
    cfg: ReplyHandlerConfig, receipt: events.SesReceipt, raw: bytes, goal: owner.Target, mid: str
) -> ReplyResult:
    """A release, approve or decline address: its From and fields checked like a reply's, its text
    never relayed; raises NotAuthorisedError."""
    sender = _owner_mail(cfg, receipt, raw, relayed=False)[2]
    if goal.kind == TargetKind.RELEASE:
        result = release_held(cfg, goal.value, mid, receipt, sender)
    else:
        # a mailbox decides only about senders screened on its own address
        screened = quarantine.screened(cfg, goal.value)
        public = str(screened.get("publicAddress") or "") if screened else ""
        auth.check_mailbox(cfg, receipt, sender, public, "decide about senders screened for it")
        result = screener_decision(cfg, goal.kind, goal.value, mid)
    staging.done(cfg, receipt)
    return result


def screener_decision(cfg: ReplyHandlerConfig, kind: TargetKind, sid: str, mid: str) -> ReplyResult:
    """The owner mailed an approve or decline address from a screener notice (authenticated as a reply:
    the owner's envelope, DMARC, one owner mailbox in From; the address's tag verified)."""
    decided = screener.decide(cfg, sid, kind.value, f"mail:{mid}")
    if decided["status"] == "unknown":
        raise NotAuthorisedError("screener address names no screened sender")
    return {"status": decided["status"], "messageId": mid, "released": decided.get("released", [])}


def reject(cfg: ReplyHandlerConfig, receipt: events.SesReceipt, raw: bytes, reason: str) -> ReplyResult:
    key = rawmail.reject(cfg, datetime.now(UTC), receipt.message_id, raw, reason)
    try:
        sender = clean_header_text(" | ".join(auth.from_fields(raw)), 200)
    except NotAuthorisedError:
        sender = ""
    log.warning(
        "reply rejected",
        extra={
            "reason": reason,
            "sender": sender,
            "envelope_sender": receipt.source,
            "recipients": list(receipt.recipients),
            "key": key,
            "verdicts": receipt.verdicts,
        },
    )
    alerted = alerts.publish_throttled(
        cfg,
        reason,
        "Reply rejected",
        {
            "alert": "reply-rejected",
            "reason": reason,
            "key": key,
            "envelopeSender": receipt.source,
            "from": sender,
        },
    )
    staging.done(cfg, receipt)
    return {"status": "rejected", "reason": reason, "key": key, "alerted": alerted}


def send_reply(
    cfg: ReplyHandlerConfig,
    mid: str,
    cid: str,
    identity: str,
    record: dict[str, Any],
    mail: ParsedMail,
    new: bool = False,
    sender: str = "",
) -> ReplyResult:
    """Queue the owner's text to the conversation's contact (``new``: the first mail of a conversation
    the owner starts: its own subject, no threading headers); apply the owner's controls first.
    ``sender``: the mailbox that wrote it (the owner's, or the address's own); the address's other
    mailboxes get a copy."""
    owners = tuple(cfg.senders)  # every mailbox's address is hidden from the contact, not only the owner's
    contact = str(record["senderEmail"])
    # From the address the contact wrote to (SES's recipients, kept on the record), never another.
    public = addresses.of(cfg).sending_from(str(record.get("publicAddress") or ""))
    names = owner_names(cfg.owner_names, mail.display_name)

    def hide(text: str) -> str:  # the owner's addresses and names, in whatever language surrounds them
        return hide_names(hide_addresses(text, owners, public), names, cfg.public_name)

    ev = evidence(cfg, cid, record, new)
    reading = read_reply(reply_text(mail.text, mail.html_doc if mail.html else ""), ev)
    body = re.sub(r"\n{3,}", "\n\n", extract_metadata(reading.own)[0]).strip()
    body = hide(body) + "\n" if body else ""
    ours = command_lines(reading)  # the one answer to "which lines are the owner's", for every command
    metadata = extract_metadata(ours)[1]
    wanted = owner_controls_in(ours)
    # the owner's controls act on every address; an address's own mailbox's on that address only
    scope = "" if not sender or sender.lower() in cfg.owner_addresses else public
    controls = owner.apply_controls(cfg, wanted, contact, cid, scope)
    told = cfg.notice_to(sender)
    conversations.set_attributes(cfg, cid, metadata)
    if reading.commands_withheld:
        _withheld_notice(cfg, mid, cid, mail.subject, told)
    # What the owner attached: files and messages, not the inline text fragments or S/MIME/PGP parts
    # of the owner's own client (a signature over the reply would not verify after cleaning anyway).
    files = [a for a in mail.attachments if a.role in ("file", "message")]
    if not body.strip() and not files:
        return _nothing_sent(cfg, mid, cid, mail, metadata, controls, told)
    removed = reading.removed + unread_html_lines(mail.text, mail.html_doc if mail.html else "", reading, ev)
    if removed or not ev.complete:
        _removed_notice(cfg, mid, cid, mail.subject, removed, ev, body, told)
    for att in files:  # a file name is shown to the contact too
        att.filename = hide(att.filename)
        att.safe_name = safe_filename(hide(att.safe_name))
    kept = attachments.store(
        cfg,
        files,
        lambda name: layout.reply_attachment(cid, mid, name),
        lambda name: layout.withheld(cid, mid, name),
    )
    for skipped in kept.skipped:
        log.warning("reply attachment skipped", extra={"attachment": skipped})
    last = "" if new else str(record.get("lastMessageId") or "")
    ses_form = (
        f"<{record.get('lastSesMessageId')}@email.amazonses.com>"
        if record.get("lastSesMessageId") and not new
        else ""
    )
    subject = (clean_header_text(mail.subject) or "(no subject)") if new else reply_subject(mail.subject)
    message = OutboundMessage(
        kind="new" if new else "reply",
        idempotency_key=f"reply:{cid}:{identity}",
        correlation_id=f"reply-{mid}",
        to=[contact],
        subject=hide(subject),
        text=body,
        from_name=cfg.public_name,
        from_address=public,
        in_reply_to=last or ses_form,
        references=[r for r in dict.fromkeys((last, ses_form)) if r],
        attachments=kept.attachments,
        conversation_id=cid,
    )
    enqueue(cfg.reply_queue, message, cfg.bucket, cfg.claim_check_bytes)
    copy_to_mailboxes(cfg, message, mid, identity, sender, [a.filename for a in kept.attachments])
    return _queued(message, cid, new, metadata, controls, kept)


def copy_to_mailboxes(
    cfg: ReplyHandlerConfig,
    message: OutboundMessage,
    mid: str,
    identity: str,
    sender: str,
    files: list[str],
) -> None:
    """What one mailbox of an address wrote to a contact, copied to the address's other mailboxes
    (``forward_to``), marked as sent by whom, with the thread address to answer on (docs/owner.md,
    "Several mailboxes"). An address without its own mailboxes has only the owner's: nothing to copy.
    Through forward-sender (the owner's key, when a copy goes to the owner); its idempotency key is the
    reply's, so a retry copies once."""
    public = message.from_address
    found = addresses.served(cfg, public)
    if found is None or not found.forward_to:
        return
    others = [box for box in found.forward_to if box.lower() != sender.lower()]
    # An address that hides its correspondents: the copy as its forwards are (the opaque thread address,
    # keyed Message-IDs, encrypted with generic outer fields or not sent: common/delivery/deliver.py)
    hidden = found.hide_correspondent
    made = opaque_thread_address if hidden else thread_address
    thread = made(message.conversation_id, cfg.thread_secret, cfg.thread_domain)
    refs = (
        [opaque_message_id(r, cfg.thread_secret, cfg.thread_domain) for r in message.references]
        if hidden
        else message.references
    )
    note = (
        f"[!] Sent by {sender or 'the owner'} from {public} to {message.to[0]}: a copy for the other "
        f"mailboxes of {public}. Reply to it to write to {message.to[0]} in this conversation.\n"
        + (f"[!] Attached for the contact (not in this copy): {', '.join(files)}\n" if files else "")
    )
    for n, box in enumerate(others, 1):
        copy = OutboundMessage(
            kind="copy",
            idempotency_key=f"copy:{message.conversation_id}:{identity}:{box.lower()}",
            correlation_id=f"copy-{mid}{MAILBOX_MARK}{n}",
            to=[box],
            subject=message.subject,
            text=f"{FORWARD_MARKER}\n{note}\n{message.text}",
            from_name=clean_header_text(f"{sender or 'owner'} (sent) via {cfg.domain_name}", 200),
            from_address=public,
            reply_to=thread,
            in_reply_to=refs[0] if hidden and message.in_reply_to else message.in_reply_to,
            references=refs,
            headers={"Auto-Submitted": "auto-generated"},
            conversation_id=message.conversation_id,
            hide_correspondent=hidden,
        )
        enqueue(cfg.forward_queue, copy, cfg.bucket, cfg.claim_check_bytes)
    if others:
        log.info(
            "reply copied to the address's other mailboxes",
            extra={"conversation_id": message.conversation_id, "copies": len(others)},
        )


def _queued(
    message: OutboundMessage,
    cid: str,
    new: bool,
    metadata: dict[str, str],
    controls: list[str],
    kept: attachments.Stored,
) -> ReplyResult:
    log.info(
        "reply queued",
        extra={
            "conversation_id": cid,
            "metadata": sorted(metadata),
            "attachments": len(kept.attachments),
            "recipient": message.to[0],
            "subject": message.subject,
            "new_conversation": new,
            "controls": controls,
        },
    )
    return {
        "status": "started" if new else "queued",
        "conversationId": cid,
        "metadata": metadata,
        "attachments": [a.key for a in kept.attachments],
        "controls": controls,
    }


NOTICE_SHOWN_CHARS = 6000  # of what went out and what was removed, in the owner's notice


def _removed_notice(
    cfg: ReplyHandlerConfig,
    mid: str,
    cid: str,
    subject: str,
    lines: tuple[str, ...],
    ev: Evidence,
    body: str,
    to: str = "",
) -> None:
    """No silent loss (docs/reply.md): unquoted lines of the reply were removed that nothing proves
    to be quote, or the conversation's mail could not all be read as evidence. The owner sees what
    went out and what was left out."""
    log.info(
        "reply text removed",
        extra={
            "conversation_id": cid,
            "removed_lines": len(lines),
            "evidence_complete": ev.complete,
        },
    )
    removed = "\n".join(lines)
    what = (
        "it was sent, but some unquoted lines of it were left out as quote."
        if lines
        else "it was sent, read without all of the conversation's earlier mail (too large to read in time)."
    )
    notice.send(
        cfg,
        mid,
        "text-removed",
        subject,
        what,
        "What went out:\n\n"
        + _shown(body)
        + ("\n\nLeft out:\n\n" + _shown(removed) if removed else "")
        + "\n\nIf something of yours is missing, reply again with it above the quoted mail.",
        cid,
        to=to,
    )


def _shown(text: str) -> str:
    text = text.strip("\n")
    return text if len(text) <= NOTICE_SHOWN_CHARS else text[:NOTICE_SHOWN_CHARS] + "\n[…]"


def _withheld_notice(cfg: ReplyHandlerConfig, mid: str, cid: str, subject: str, to: str = "") -> None:
    log.warning("reply commands withheld", extra={"reason": "quote without evidence", "conversation_id": cid})
    notice.send(
        cfg,
        mid,
        "commands-withheld",
        subject,
        "its command lines were not applied.",
        "It quotes a mail, and nothing in it shows where the quote starts (this system's forward "
        "marker or the contact's own text), so a command line could have been the contact's. "
        "Send the commands again in a reply with the quoted text deleted.",
        cid,
        to=to,
    )


def _nothing_sent(
    cfg: ReplyHandlerConfig,
    mid: str,
    cid: str,
    mail: ParsedMail,
    metadata: dict[str, str],
    controls: list[str],
    to: str = "",
) -> ReplyResult:
    """A reply with no text and no file for the contact: the owner is told why, and what was applied."""
    applied = sorted(metadata) + controls
    log.info(
        "reply not sent",
        extra={
            "reason": "only command lines" if applied else "no text of the owner's in it",
            "conversation_id": cid,
            "metadata": sorted(metadata),
            "controls": controls,
        },
    )
    notice.send(
        cfg,
        mid,
        "nothing-sent",
        mail.subject,
        "nothing was sent to the contact: "
        + (
            f"it held only command lines (applied: {', '.join(applied)})."
            if applied
            else f"its structure could not be read ({mail.parse_failed})."
            if mail.parse_failed
            else "no text of yours was found in it (it was empty, or only quoted text)."
        ),
        "Nothing else to do; reply again with text to write to the contact."
        if applied
        else "Send it again as plain text or ordinary HTML."
        if mail.parse_failed
        else "To write to the contact, reply again with your text above the quoted mail.",
        cid,
        to=to,
    )
    return {
        "status": "commands-applied" if applied else "not-sent",
        "conversationId": cid,
        "metadata": metadata,
        "controls": controls,
    }
