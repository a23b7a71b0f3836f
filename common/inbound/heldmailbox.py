"""A mailbox of an address with several mailboxes is held (it bounced): its fellow mailboxes are told
(docs/owner.md, "Several mailboxes", Bounces).

common/inbound/feedback.py holds mail to a bouncing mailbox (common/store/holds.py) and alerts the owner
on the alert topic. The alert reaches the owner, not the other readers of the address: a partner whose
co-reader's mailbox is gone would never learn that their co-reader no longer sees the mail. So every
other mailbox of every address the held mailbox serves gets one notice, on the forward queue as the
owner's other notices: which mailbox is held, why, that its forwards wait, and how the hold is lifted.
The held mailbox itself gets none (it bounces). An address whose only mailbox this is has no one else
to tell: the alert is all, as before.

Exactly once per hold: each notice's idempotency key names the hold (the mailbox and its
``heldSince``), never the SNS message, and the hold records that the notices were queued
(``othersTold``), so a second bounce of the same hold, a duplicate SNS delivery or a retried one sends
no second notice; a new hold after a release is told again.
"""

from __future__ import annotations

import hashlib

from common.mail.build import unbuildable
from common.mail.outbound import OutboundMessage
from common.mail.sanitize import clean_header_text
from common.runtime import addresses
from common.runtime.addresses import PublicAddress
from common.runtime.config import InboundHandlerConfig
from common.runtime.log import get_logger
from common.store import holds
from common.store.sendqueue import enqueue

log = get_logger("feedback")


def shared(cfg: InboundHandlerConfig, held: str) -> dict[str, list[PublicAddress]]:
    """For each other mailbox (lowercase key, as configured in the values' order) the addresses it reads
    together with ``held``: every address ``held`` is one of several mailboxes of."""
    table = addresses.of(cfg)
    every = (*table.listed, *((table.catch_all,) if table.catch_all else ()))
    found: dict[str, list[PublicAddress]] = {}
    names: dict[str, str] = {}
    for public in every:
        boxes = cfg.mailboxes(public)
        if held.lower() not in {b.lower() for b in boxes}:
            continue
        for box in boxes:
            if box.lower() != held.lower():
                names.setdefault(box.lower(), box)
                found.setdefault(names[box.lower()], []).append(public)
    return found


def notice(
    cfg: InboundHandlerConfig,
    held: str,
    hold: holds.Hold,
    why: str,
    to: str,
    together: list[PublicAddress],
) -> OutboundMessage:
    """The notice to ``to``, a mailbox reading ``together`` with the held one."""
    # A catch-all (*@DOMAIN) cannot send: the notice then comes from the default address.
    listed = [p.address for p in together if not p.catch_all]
    sender = listed[0] if listed else addresses.of(cfg).primary.address
    names = ", ".join(
        f"any other address at {cfg.domain_name}" if p.catch_all else p.described for p in together
    )
    lines = [
        f"The mailbox {held}, which reads mail to {names} with you, bounced a forward, so forwards to it "
        "are held from now on.",
        "",
        f"Held:   {held}",
        f"Why:    {clean_header_text(why, 200)}",
        f"Since:  {hold.since}",
        "",
        "What changes: mail to these addresses is still forwarded to you as before. Its forwards to "
        f"{held} wait (in the forward queue, then its dead-letter queue): nothing is dropped, and they "
        "go out once the hold is lifted.",
        "",
        f"A test forward goes out every {cfg.owner_hold_probe_s} s; if it is delivered, the hold is lifted "
        "by itself. Once that mailbox is fixed, the owner of this service can lift the hold at once with:",
        "",
        f"    email-handler suppression remove {held}",
        f"    email-handler dlq redrive {cfg.forward_queue}",
        "",
        f"(inbound-handler, a hold of {held} since {hold.since})",
    ]
    # The hold and the recipient name the notice; a digest keeps the addresses out of the correlation
    # id (a header and a log field).
    key = hashlib.sha256(f"{held.lower()}\n{hold.since}\n{to.lower()}".encode()).hexdigest()[:32]
    return OutboundMessage(
        kind="notice",
        idempotency_key=f"notice:mailbox-held:{key}",
        correlation_id=f"notice-mailbox-held-{key}",
        to=[to],
        subject=clean_header_text(f"Forwards to {held} are held (it bounced)", 200),
        text="\n".join(lines) + "\n",
        from_name=f"Mailbox hold via {cfg.domain_name}",
        from_address=sender,
        headers={"Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All"},
    )


def tell_others(cfg: InboundHandlerConfig, held: str, hold: holds.Hold, why: str) -> list[str]:
    """Queue the notices about ``held``'s hold to the other mailboxes it shares an address with, once per
    hold; the mailboxes told now ([] when already told, or when it shares no address)."""
    if hold.told:
        return []
    others = shared(cfg, held)
    if not others:
        return []
    told: list[str] = []
    for box, together in others.items():
        message = notice(cfg, held, hold, why, box, together)
        if problem := unbuildable(message, message.from_address, cfg.domain_name):
            # the owner's alert (feedback.py) still says the mailbox is held
            log.error("held-mailbox notice cannot be built", extra={"recipient": box, "reason": problem})
            continue
        enqueue(cfg.forward_queue, message, cfg.bucket, cfg.claim_check_bytes)
        told.append(box)
    # After every enqueue: a failure before this point is retried (SNS) and queues the same keys again.
    holds.mark_told(cfg, held, hold.since)
    log.warning(
        "held mailbox: other mailboxes told",
        extra={"recipient": held, "notice_to": told, "held_since": hold.since},
    )
    return told
