"""The owner pressed "spam" on a forward: its sender is blocked for the public address the forward was
for, and the owner is told once, by mail, how to undo it (docs/owner.md, "Spam in your mailbox blocks
the sender").

A complaint is the owner's own "this is spam" and it also counts against the SES account's complaint
rate, so the contact's later mail to that address is quarantined (the same ``CONTACT to PUBLIC`` entry
``email-handler block CONTACT --to PUBLIC`` writes, common/store/senderlists.py) instead of being
forwarded to be reported again. Their mail to the owner's other public addresses is not affected.

Which forward the complaint is about, and so which contact and address, comes only from what SES says
it sent: ``mail.messageId`` (the id SES returned to the forward-sender) looked up in the send record
that sender kept (common/store/sendstatus.py ``sent_record``). Never from the complaint's text: the
report's body and headers, and the headers SES echoes, are not read here. An unknown id (not a send of
ours, or its record expired), a send that was no forward, a complainer the forward did not go to, a
conversation that is gone or an entry the sender lists refuse: nothing is blocked, the reason is
logged and feedback.py keeps its spam-candidate flag and alert.

Once per reported send: the first notification claims ``complaint#<SES id>`` (SES can report one
complaint in more than one notification, each its own SNS id), and the notice's idempotency key is
that SES id, so its sender sends it once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from common.delivery.deliver import per_mailbox
from common.mail.build import unbuildable
from common.mail.outbound import OutboundMessage
from common.mail.sanitize import clean_header_text
from common.runtime import addresses
from common.runtime.config import Delivery
from common.runtime.log import get_logger
from common.store import conversations, layout, senderlists, sendstatus
from common.store.sendqueue import enqueue

log = get_logger("feedback")
SOURCE = "complaint:"  # the entry's ``source``: complaint:<SES message id of the reported forward>


@dataclass(frozen=True, slots=True)
class Block:
    """What one owner complaint blocks: ``contact`` for mail to ``public`` (``entry``)."""

    ses_message_id: str  # of the reported forward, as SES gave it at send time
    conversation_id: str
    contact: str
    public: str  # the public address the reported mail was written to
    entry: str  # "contact to public", as the sender lists hold it
    original: str  # where the reported mail is archived (s3://…), '' if not known
    to: tuple[str, ...]  # the address's mailboxes: they get the notice
    # the address's hide_correspondent: the notice's subject (never encrypted) does not name the contact
    hidden: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Literal["blocked", "duplicate", "not-blocked"]
    reason: str = ""  # why nothing was blocked
    block: Block | None = None


def _recipients(sent: dict[str, Any]) -> list[str]:
    """The forward's recipients from the send's stored result (powertools' ``data``, JSON)."""
    try:
        data = json.loads(str(sent.get("data") or "{}"))
    except ValueError:
        return []
    found = data.get("recipients") if isinstance(data, dict) else None
    return [str(r) for r in found] if isinstance(found, list) else []


def decide(
    cfg: Delivery,
    complainer: str,
    ses_message_id: str,
    sent: dict[str, Any] | None,
    conversation: dict[str, Any] | None,
) -> Block | str:
    """The block one owner complaint makes, or why it makes none. ``sent``: the send record of
    ``ses_message_id`` (sendstatus.sent_record); ``conversation``: the record its ``conversationId``
    names. Pure: reads nothing but its arguments and the configuration."""
    if not ses_message_id:
        return "SES named no message id"
    if sent is None:
        return "SES message id unknown: not a send of this system, or its send record expired"
    kind, _, inbound_id = str(sent.get("correlationId", "")).partition("-")
    if kind != "forward":
        return f"the reported message was no forward ({kind or 'unknown kind'})"
    if complainer.lower() not in {r.lower() for r in _recipients(sent)}:
        return "the complaining mailbox is not one the forward was sent to"
    cid = str(sent.get("conversationId") or "")
    if not cid:
        return "the forward belongs to no conversation (released unparsed, or sent before this was recorded)"
    if conversation is None:
        return "the forward's conversation is gone (expired or forgotten)"
    contact = str(conversation.get("senderEmail") or "")
    if "@" not in contact:
        return "the conversation names no contact address"
    written_to = str(sent.get("fromAddress") or conversation.get("publicAddress") or cfg.public_email)
    public = addresses.served(cfg, written_to)
    if public is None:
        return "the public address the forward was for is no longer served"
    try:
        entry = senderlists.normalise(f"{contact}{senderlists.SCOPE}{public.address}")
    except senderlists.SenderListError as exc:
        return f"no sender-list entry: {exc}"
    refusal = senderlists.protected(cfg, entry)
    if refusal:
        return f"no sender-list entry: {refusal}"
    original = f"s3://{cfg.bucket}/{layout.archive(cid, inbound_id)}" if inbound_id else ""
    return Block(
        ses_message_id,
        cid,
        contact.lower(),
        public.address,
        entry,
        original,
        cfg.mailboxes(public),
        public.hide_correspondent,
    )


def unblock_command(block: Block) -> str:
    return f"email-handler unblock {block.contact} --to {block.public}"


def unblock_line(block: Block) -> str:
    return f"[unblock: {block.contact} to {block.public}]"


def notice(cfg: Delivery, block: Block, complainer: str, detail: str) -> OutboundMessage:
    """The owner's one mail about the block: who, for which address, why, and how to undo it."""
    why = clean_header_text(detail, 40) or "not given"
    lines = [
        f"You reported a forward as spam in your mailbox {complainer}, so its sender is now blocked "
        f"for {block.public}.",
        "",
        f"Blocked:      {block.contact}",
        f"For:          mail to {block.public} only (their mail to your other public addresses is "
        "still forwarded)",
        "Why:          your mail provider told Amazon SES that you marked the forward as spam "
        f"(feedback type: {why}). Every such report counts against this system's sending account, "
        "so their later mail to this address is no longer forwarded to be reported again.",
        f"Conversation: {block.conversation_id}",
        *([f"Reported:     {block.original} (the mail as received)"] if block.original else []),
        "",
        "What changes: their later mail to this address is quarantined, with no forward and no "
        "acknowledgement; it is listed in the daily quarantine digest and `email-handler quarantine "
        "list`, and can be released from there.",
        "",
        "If it was a mistake, undo it with:",
        "",
        f"    {unblock_command(block)}",
        "",
        "or reply to one of their forwards with only this line (a reply of command lines sends nothing):",
        "",
        f"    {unblock_line(block)}",
        "",
        f"(inbound-handler, SES complaint about message {block.ses_message_id})",
    ]
    return OutboundMessage(
        kind="notice",
        idempotency_key=f"notice:spam-block:{block.ses_message_id}",
        correlation_id=f"notice-spam-block-{block.ses_message_id}",
        to=list(block.to),
        subject=clean_header_text(
            f"Blocked {'a sender' if block.hidden else block.contact} for {block.public} (you reported spam)",
            200,
        ),
        text="\n".join(lines) + "\n",
        from_name=f"Blocked sender via {cfg.domain_name}",
        from_address=block.public,
        headers={"Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All"},
        conversation_id=block.conversation_id,
    )


def act(cfg: Delivery, complainer: str, detail: str, ses_message_id: str) -> Outcome:
    """Block the sender of the forward SES says ``complainer`` reported, and queue the owner's notice;
    ``not-blocked`` with the reason when the forward cannot be told from SES's own record."""
    sent = sendstatus.sent_record(cfg, ses_message_id)
    cid = str((sent or {}).get("conversationId") or "")
    found = decide(cfg, complainer, ses_message_id, sent, conversations.get(cfg, cid) if cid else None)
    if isinstance(found, str):
        return Outcome("not-blocked", found)
    message = notice(cfg, found, complainer, detail)
    if problem := unbuildable(message, found.public, cfg.domain_name):
        return Outcome("not-blocked", f"the owner's notice cannot be built: {problem}")
    if not sendstatus.claim_complaint(cfg, ses_message_id):
        log.info(
            "owner complaint already acted on",
            extra={"reason": "same SES message id", "ses_message_id": ses_message_id, "entry": found.entry},
        )
        return Outcome("duplicate", block=found)
    try:
        senderlists.put(cfg, found.entry, senderlists.BLOCK, f"{SOURCE}{ses_message_id}")
        # One per mailbox, as forwards: a held or sandboxed mailbox holds up no other's notice.
        for each in per_mailbox(message, found.to):
            enqueue(cfg.forward_queue, each, cfg.bucket, cfg.claim_check_bytes)
    except Exception:
        sendstatus.release_complaint(cfg, ses_message_id)  # the retry blocks and tells the owner
        raise
    log.warning(
        "owner complaint: sender blocked for the address",
        extra={
            "entry": found.entry,
            "public_address": found.public,
            "conversation_id": found.conversation_id,
            "ses_message_id": ses_message_id,
            "feedback_type": detail,
            "notice_to": list(found.to),
        },
    )
    return Outcome("blocked", block=found)
