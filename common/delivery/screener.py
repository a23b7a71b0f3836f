"""The screener (docs/owner.md, "Screener"): on a public address with ``"screener": true``, a first-time
sender's mail waits in quarantine until the owner approves the sender.

* :func:`screen` (inbound-handler, a mail the policy would forward): a known sender goes on as today;
  anyone else's mail is held like quarantined mail (common/delivery/quarantine.py, reason
  :data:`REASON`) and added to the sender's screener item (common/store/quarantine.py). The first held
  mail of a sender sends the owner one notice with an approve and a decline address (HMAC-tagged,
  common/mail/threads.py) and, when the address acks, the contact the address's usual ack; later mails
  of that sender are held without a notice.
* :func:`decide` (reply-handler, the owner mailed one of those addresses from an owner mailbox,
  authenticated as a reply): approve puts an allow entry scoped to the address and releases every held
  mail of that sender to it, in the order they arrived, each once (common/delivery/release.py is
  idempotent); decline puts a block entry scoped to the address and tells the sender nothing. Either
  way what was not released stays in quarantine: its retention and the daily digest as any held mail.

Known: one of the owner's mailboxes; any block or allow entry for the sender on this address (an allow
entry passes; a block entry is enforced by the forward's own write, common/store/intake.py); or a
conversation with this contact (their earlier mail, a mail released to them, or one the owner started
with new@), for a mail SES authenticated as theirs (common.delivery.ack.authenticated), so a forged From
of a known contact is screened like a stranger.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict

from common.delivery import ack
from common.delivery.compose import build_ack
from common.delivery.deliver import per_mailbox
from common.delivery.quarantine import log_fields, quarantined
from common.delivery.release import HeldMailMissingError, release
from common.delivery.results import InboundResult
from common.mail.build import unbuildable
from common.mail.outbound import OutboundMessage
from common.mail.parse import ParsedMail
from common.mail.sanitize import clean_header_text
from common.mail.threads import conversation_id, screener_address, screener_id
from common.runtime.addresses import PublicAddress
from common.runtime.clock import iso_z
from common.runtime.config import Delivery
from common.runtime.events import SesReceipt
from common.runtime.log import get_logger
from common.store import ackbudget, conversations, senderlists
from common.store import quarantine as records
from common.store.sendqueue import enqueue

log = get_logger("screener")

REASON = "screener: a first-time sender, held until you approve"
APPROVED_NOTE = "Approved by the owner: held by the screener until then (a first-time sender)."
NOTICE_LINES = 6  # the first lines of the text the notice quotes
NOTICE_LINE_CHARS = 160
APPROVE_ROUNDS = 3  # re-reads of the sender's item: a mail held while the approval was being written


def known(cfg: Delivery, receipt: SesReceipt, mail: ParsedMail, public: PublicAddress) -> str:
    """Why the sender passes the screener ('' when it does not: a first-time sender)."""
    address = mail.from_address
    if cfg.is_owner(address):
        return "the owner's own mailbox"
    listing = senderlists.lookup(cfg, address, public.address)
    if listing is not None:
        return f"{listing.list} entry"  # (the entry names the sender: not in the log)
    cid = conversation_id(address, mail.display_name, cfg.opaque_relay_domains)
    record = conversations.get(cfg, cid)
    if record is not None and record.get("senderEmail") == address and ack.authenticated(receipt, address):
        return "an earlier conversation"
    return ""


def screen(
    cfg: Delivery, receipt: SesReceipt, mail: ParsedMail, raw: bytes, when: datetime, public: PublicAddress
) -> InboundResult | None:
    """Hold a first-time sender's mail to a screened address; None when the sender is known (the mail
    goes on to be forwarded). The notice and the ack are queued before the mail is held, so a retried
    delivery queues them again under the same idempotency keys and nothing is lost or sent twice."""
    why = known(cfg, receipt, mail, public)
    if why:
        log.info("screener passed the mail", extra={**log_fields(mail), "reason": why})
        return None
    mid, address = receipt.message_id, mail.from_address
    sid = screener_id(public.address, address)
    item = records.screen_hold(cfg, sid, public.address, address, records.quarantine_id(mid), mid, when)
    first = item.get("noticeMid") == mid
    acked = ""
    if first:
        notify(cfg, mid, mail, public, when)
        acked = ack_first(cfg, receipt, mail, public)
    result = quarantined(cfg, receipt, mail, raw, REASON, when)
    log.info(
        "mail held by the screener",
        extra={
            **log_fields(mail),
            "screener_id": sid,
            "notice": first,
            "ack": first and not acked,
            "ack_skipped_reason": acked or None,
            "held": len(set(item.get("heldIds") or [])),
        },
    )
    return {**result, "notice": first}


def ack_first(cfg: Delivery, receipt: SesReceipt, mail: ParsedMail, public: PublicAddress) -> str:
    """The address's ack for a held first contact, when the address acks and every check of a forward's
    ack passes (docs/owner.md, "Screener"); returns why not ('' = queued). Its release later is never
    acked (common/store/intake.py, released)."""
    address = mail.from_address
    why = (
        ("" if public.ack else f"no ack for {public.address}")
        or ack.refusal_before_budget(cfg, receipt, mail)
        or ackbudget.spend(cfg, address)
        or ack.sandbox_refusal(address)
    )
    if why:
        return why
    cid = conversation_id(address, mail.display_name, cfg.opaque_relay_domains)
    message = build_ack(cfg, public.ack_subject, public.ack_template, receipt.message_id, cid, mail)
    message.from_address = public.address
    if problem := unbuildable(message, public.address, cfg.domain_name):
        return f"ack cannot be built: {problem}"
    enqueue(cfg.ack_queue, message, cfg.bucket, cfg.claim_check_bytes)
    return ""


def first_lines(text: str) -> list[str]:
    """The first non-empty lines of the contact's text, each one printable line, cut short."""
    lines = (clean_header_text(line, NOTICE_LINE_CHARS + 1) for line in text.splitlines()[:200])
    return [
        line if len(line) <= NOTICE_LINE_CHARS else line[: NOTICE_LINE_CHARS - 1].rstrip() + "…"
        for line in lines
        if line
    ][:NOTICE_LINES]


def build_notice(
    cfg: Delivery, mid: str, mail: ParsedMail, public: PublicAddress, when: datetime
) -> OutboundMessage:
    """The owner's one notice about a new sender: who, the subject, the first lines, and the two
    addresses. The subject names no contact (an encrypted notice shows the mailbox provider only it)."""
    shown = f"{mail.display_name} <{mail.from_address}>" if mail.display_name else mail.from_address
    approve = screener_address(
        "approve", public.address, mail.from_address, cfg.thread_secret, cfg.thread_domain
    )
    decline = screener_address(
        "decline", public.address, mail.from_address, cfg.thread_secret, cfg.thread_domain
    )
    keep = (
        f"for {cfg.retention_quarantine_days} days"
        if cfg.retention_quarantine_days > 0
        else "until you release or delete it"
    )
    text = [
        f"A first-time sender wrote to {public.described}. The screener holds their mail until you decide.",
        "",
        f"From:     {clean_header_text(shown, 300)}",
        f"Subject:  {clean_header_text(mail.subject, 300) or '(no subject)'}",
        f"Received: {iso_z(when)}",
        "",
        *(f"  | {line}" for line in first_lines(mail.body_text)),
        "",
        "Approve: send any mail to",
        f"  {approve}",
        f"  Their held mail is forwarded to you, in the order it arrived, and their later mail to "
        f"{public.address} goes through.",
        "",
        "Decline: send any mail to",
        f"  {decline}",
        f"  Their later mail to {public.address} is quarantined as blocked. They are not told.",
        "",
        f"Neither: their mail stays in quarantine {keep} and is listed in the daily digest. Further mail "
        "from them is held too, without another notice.",
    ]
    return OutboundMessage(
        kind="notice",
        idempotency_key=f"screener:{mid}",
        correlation_id=f"screener-{mid}",
        to=list(cfg.mailboxes(public)),  # the address's mailboxes (its forward_to, else PRIVATE_EMAIL)
        subject=f"Screener: a new sender wrote to {public.address}",
        text="\n".join(text) + "\n",
        from_name=f"Screener {cfg.domain_name}",
        from_address=public.address,
        headers={"Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All"},
    )


def notify(cfg: Delivery, mid: str, mail: ParsedMail, public: PublicAddress, when: datetime) -> None:
    notice = build_notice(cfg, mid, mail, public, when)
    if problem := unbuildable(notice, public.address, cfg.domain_name):
        # The mail is held all the same: the digest lists it, with its release address.
        log.error("screener notice cannot be built", extra={**log_fields(mail), "reason": problem})
        return
    # One per mailbox, as forwards: a held or sandboxed mailbox holds up no other's notice.
    for each in per_mailbox(notice, tuple(notice.to)):
        enqueue(cfg.forward_queue, each, cfg.bucket, cfg.claim_check_bytes)


class Decision(TypedDict):
    status: Literal["approved", "declined", "unknown"]
    released: NotRequired[list[str]]
    listed: NotRequired[str]


def held_in_order(cfg: Delivery, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The held mails of a screener item still held, in arrival order (SES's receipt time; the order
    they were held breaks a tie within a second)."""
    ids = list(dict.fromkeys(str(q) for q in item.get("heldIds") or []))
    found = [r for q in ids if (r := records.get(cfg, q)) is not None and r.get("status") == records.HELD]
    return sorted(found, key=lambda r: str(r.get("receivedAt", "")))


def decide(cfg: Delivery, sid: str, action: str, by: str) -> Decision:
    """The owner's answer to a notice: ``approve`` or ``decline`` the screened sender ``sid``."""
    item = records.screened(cfg, sid)
    if item is None or screener_id(str(item.get("publicAddress", "")), str(item.get("sender", ""))) != sid:
        log.warning("screener decision refused", extra={"reason": "no screened sender", "screener_id": sid})
        return {"status": "unknown"}
    public, sender = str(item["publicAddress"]), str(item["sender"])
    entry = f"{sender}{senderlists.SCOPE}{public}"
    try:
        listed = senderlists.put(
            cfg, entry, senderlists.ALLOW if action == "approve" else senderlists.BLOCK, f"screener:{by}"
        ).entry
    except senderlists.SenderListError as exc:  # e.g. the sender is one of this system's own addresses
        log.warning("screener list entry refused", extra={"screener_id": sid, "reason": str(exc)})
        listed = ""
    released: list[str] = []
    tried: set[str] = set()
    if action == "approve":
        # The allow entry is in first: a mail arriving now passes. One held before it was read is in the
        # item by the next round; each round releases what is still held, oldest first.
        for _ in range(APPROVE_ROUNDS):
            pending = [
                h for h in held_in_order(cfg, records.screened(cfg, sid) or {}) if h["id"] not in tried
            ]
            if not pending:
                break
            for held in pending:
                qid = str(held["id"])
                tried.add(qid)
                try:
                    done = release(cfg, qid, by, APPROVED_NOTE)
                except HeldMailMissingError:  # its retention removed it: nothing left to forward
                    log.warning("screened mail gone", extra={"screener_id": sid, "quarantine_id": qid})
                    continue
                if done["status"] == "released":
                    released.append(qid)
    records.screen_decided(cfg, sid, f"{action}d", by)
    log.info(
        "screener decision applied",
        extra={"screener_id": sid, "decision": action, "released": released, "entry_listed": bool(listed)},
    )
    return {
        "status": "approved" if action == "approve" else "declined",
        "released": released,
        "listed": listed,
    }
