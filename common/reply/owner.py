"""The owner's side of reply-handler beyond replying: where an owner mail goes, the block/allow
controls, and starting a conversation.

Addresses on the thread domain (docs/CONTRACT.md), all owner-only and authorised like replies:

* ``<cid>.<tag>@thread.<domain>``: a reply in a conversation;
* ``new@thread.<domain>`` with ``[to: ADDRESS]`` on the first line: a new conversation with ADDRESS,
  sent from ``PUBLIC_EMAIL`` through reply-sender; the contact's answers thread as usual;
* ``release.<id>.<tag>@thread.<domain>``: release a quarantined mail (the digest lists these);
* ``approve.<sid>.<tag>@thread.<domain>`` / ``decline.<sid>.<tag>@thread.<domain>``: the screener's
  notice about a new sender (common/delivery/screener.py).

Controls in the owner's text (removed before it goes out): ``[block]`` / ``[allow]`` / ``[unblock]``
act on the contact's address, ``[block: domain]`` … on the contact's domain, ``[block: ADDR]`` or
``[block: @DOMAIN]`` on what they name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from common.delivery.ack import address_problem
from common.errors import EmailHandlerError
from common.mail.threads import (
    is_new_conversation_address,
    verify_release_address,
    verify_screener_address,
    verify_thread_address,
)
from common.reply.auth import NotAuthorisedError
from common.reply.text import Control, ControlAction
from common.runtime.config import ReplyHandlerConfig
from common.runtime.events import SesReceipt
from common.runtime.log import get_logger
from common.store import senderlists

log = get_logger("reply-handler")


class TargetKind(StrEnum):
    """What an owner's mail to the thread domain is for, by the address it was sent to."""

    REPLY = "reply"  # a conversation's thread address
    NEW = "new"  # new@thread.<domain>: start a conversation
    RELEASE = "release"  # a release address from the quarantine digest
    APPROVE = "approve"  # the screener's approve address: a new sender's held mail goes through
    DECLINE = "decline"  # the screener's decline address: the new sender is blocked for that address


@dataclass(frozen=True, slots=True)
class Target:
    kind: TargetKind
    value: str = ""  # the conversation id (reply), the quarantine id (release) or the screener id
    address: str = ""  # the recipient SES delivered it to that says so


def target(receipt: SesReceipt, cfg: ReplyHandlerConfig) -> Target:
    """What the owner's mail is for, from the recipients SES matched (never the headers)."""
    for recipient in receipt.recipients:
        cid = verify_thread_address(recipient, cfg.thread_secret, cfg.thread_domain)
        if cid:
            return Target(TargetKind.REPLY, cid, recipient)
        qid = verify_release_address(recipient, cfg.thread_secret, cfg.thread_domain)
        if qid:
            return Target(TargetKind.RELEASE, qid)
        screened = verify_screener_address(recipient, cfg.thread_secret, cfg.thread_domain)
        if screened:
            return Target(TargetKind(screened[0]), screened[1])
        if is_new_conversation_address(recipient, cfg.thread_domain):
            return Target(TargetKind.NEW)
    raise NotAuthorisedError("no thread address with a valid tag")


def recipient_problem(cfg: ReplyHandlerConfig, address: str) -> str:
    """Why a new conversation may not be started with ``address`` ('' if it may)."""
    if not address:
        return "new conversation without a [to: ADDRESS] first line"
    problem = address_problem(address)
    if problem:
        return f"[to: {address[:100]}]: {problem.replace('sender ', '')}"
    if cfg.is_own(address):
        return f"[to: {address[:100]}] is one of this system's own addresses"
    return ""


def entry_for(cfg: ReplyHandlerConfig, control: Control, contact: str) -> str:
    """The list entry a control line means for this contact."""
    if not control.target:
        return contact.lower()
    if control.target.lower() == "domain":
        domain = contact.rpartition("@")[2].lower()
        if domain in {d.lower() for d in cfg.opaque_relay_domains}:
            # a relay domain carries every sender of that service: the owner means this one contact
            return contact.lower()
        return "@" + domain
    return senderlists.normalise(control.target)


class UnknownControlError(EmailHandlerError, ValueError):
    """A control verb CONTROLS has no handler for: refused and reported, never taken for a list write."""


def _put(cfg: ReplyHandlerConfig, action: ControlAction, entry: str, cid: str) -> str:
    senderlists.put(cfg, entry, action.value, f"reply:{cid}")
    return f"{action} {entry}"


def _unblock(cfg: ReplyHandlerConfig, action: ControlAction, entry: str, cid: str) -> str:
    removed = senderlists.remove(cfg, entry)
    return f"unblock {entry}" if removed else f"unblock {entry} (was not listed)"


# Each verb of ControlAction and what it does (what was done, for the owner's report). A verb missing
# here is refused like a bad target; tests/unit/test_owner_logic.py checks that every verb has one.
CONTROLS: dict[ControlAction, Callable[[ReplyHandlerConfig, ControlAction, str, str], str]] = {
    ControlAction.BLOCK: _put,
    ControlAction.ALLOW: _put,
    ControlAction.UNBLOCK: _unblock,
}


def scoped(entry: str, scope: str) -> str:
    """``entry`` for mail to public address ``scope`` only (an address's own mailbox commands for its
    address alone: docs/owner.md, "Several mailboxes"); '' scope: as it is. An entry already scoped to
    another address is refused."""
    if not scope:
        return entry
    base, at, public = entry.partition(senderlists.SCOPE)
    if at and public != scope.lower():
        raise senderlists.SenderListError(f"a mailbox of {scope} may only list senders for {scope}")
    return base + senderlists.SCOPE + scope.lower()


def apply_controls(
    cfg: ReplyHandlerConfig, controls: list[Control], contact: str, cid: str, scope: str = ""
) -> list[str]:
    """Apply the owner's controls; returns what was done, e.g. ``["block @corp.example"]``, and what
    was refused and why. ``scope``: a public address the controls act for alone (sent by that
    address's own mailbox), '' for the owner's (every address)."""
    done = []
    for control in controls:
        try:
            handler = CONTROLS.get(control.action)
            if handler is None:
                raise UnknownControlError(f"[{control.action}] has no handler")
            entry = scoped(entry_for(cfg, control, contact), scope)
            done.append(handler(cfg, control.action, entry, cid))
        except ValueError as exc:
            log.warning(
                "owner control refused",
                extra={"control": control.action, "target": control.target, "reason": str(exc)},
            )
            done.append(f"{control.action} refused: {exc}")
    if done:
        log.info("owner controls applied", extra={"conversation_id": cid, "controls": done})
    return done
