"""A forwarded mail's conversation record, the owner's block list and the ack budget in one write.

inbound-handler used to make three DynamoDB calls for a first contact: a BatchGetItem of the sender
lists, the record's UpdateItem and the ack budget's UpdateItem. Here they are the actions of one
TransactWriteItems (docs/decisions.md, "One write per forwarded mail"):

* a ConditionCheck per sender-list entry that could apply (senderlists.block_checks): none may be a
  block entry;
* the record's Update (conversations.inbound_write), conditioned on the conversation being new or
  created by this very mail, so a success means "first contact" without ReturnValues (which a
  transaction does not give);
* for a first contact the ack may go to, the hour's budget Update (ackbudget.action).

All or nothing: when DynamoDB cancels it, nothing was written and CancellationReasons says, per
action, whether its condition held (API_CancellationReason), so the cases that are not "new
contact, not blocked, budget left" fall back to the separate calls, never to a weaker check:

* a block entry covers the sender: the sender lists are read (the most specific entry decides, an
  allowed address in a blocked domain gets through); blocked, nothing is written;
* the conversation exists: another sender's is a :class:`conversations.CollisionError`; the
  sender's own is recorded alone (a second mail of a known contact: two calls, as before);
* the budget is used up: the record alone, and the counts the refused action found name the limit;
* any other reason (a conflict with a concurrent transaction on the hour's budget item, throttling):
  the three calls as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from common.aws import dynamodb
from common.mail.parse import ParsedMail
from common.runtime.config import Delivery
from common.store import ackbudget, conversations, senderlists

CHECKED = ("None", "ConditionalCheckFailed")  # codes that say whether a condition held


@dataclass(frozen=True, slots=True)
class Recorded:
    first_contact: bool
    ack_refusal: str  # why no ack ('' when one was taken from the budget)
    blocked: senderlists.Listing | None = None  # the block entry that applies: nothing was written
    # why an ack that passed every check is still not sent (SES's sandbox): the forward says it in one line
    ack_note: str = ""


Recorder = Callable[[Delivery, str, str, ParsedMail, datetime], Recorded]


def released(
    cfg: Delivery, cid: str, mid: str, mail: ParsedMail, when: datetime, public: str = ""
) -> Recorded:
    """A mail released from quarantine: the owner chose it, so no block list applies, and it gets no
    ack; its SES verdicts are not at hand, so it is recorded as not authenticated."""
    first = conversations.record_inbound(cfg, cid, mid, mail, when, authenticated=False, public=public)
    return Recorded(first, "released from quarantine")


def record(
    cfg: Delivery,
    cid: str,
    mid: str,
    mail: ParsedMail,
    when: datetime,
    authenticated: bool,
    ack_refusal: str,
    public: str = "",
) -> Recorded:
    """Record a mail inbound-handler forwards, unless the owner blocked its sender, and take an ack
    for a first contact when ``ack_refusal`` (common.delivery.ack.refusal_before_budget) is ''."""
    address = mail.from_address

    def apart() -> Recorded:
        """The same steps in separate calls: read the sender lists, record, take an ack."""
        listing = senderlists.lookup(cfg, address, public)
        if listing is not None and listing.list == senderlists.BLOCK:
            return Recorded(False, "sender blocked", listing)
        if not conversations.record_inbound(cfg, cid, mid, mail, when, authenticated, public):
            return Recorded(False, "not first contact")
        return Recorded(True, ack_refusal or ackbudget.spend(cfg, address))

    checks = senderlists.block_checks(cfg, address, public)
    write = conversations.inbound_write(cfg, cid, mid, mail, when, authenticated, public)
    write["condition"] = f"{conversations.SAME_SENDER} AND {conversations.FIRST_CONTACT}"
    actions = [*checks, dynamodb.update_action(**write)]
    if not ack_refusal:
        actions.append(ackbudget.action(cfg, address))
    try:
        dynamodb.transact_write(actions)
        return Recorded(True, ack_refusal)
    except dynamodb.TransactionCancelledError as cancelled:
        reasons = cancelled.reasons
    if len(reasons) != len(actions) or any(code not in CHECKED for code, _ in reasons):
        return apart()
    if any(code != "None" for code, _ in reasons[: len(checks)]):
        return apart()
    code, old = reasons[len(checks)]
    if code != "None" and old is not None and old.get("senderEmail", address) != address:
        raise conversations.CollisionError(cid, str(old.get("senderEmail", "")))
    first = conversations.record_inbound(cfg, cid, mid, mail, when, authenticated, public)
    if not first:
        return Recorded(False, "not first contact")
    if ack_refusal:
        return Recorded(True, ack_refusal)
    budget_code, counts = reasons[-1]
    if budget_code != "None":
        return Recorded(True, ackbudget.refused(cfg, address, counts))
    return Recorded(True, ackbudget.spend(cfg, address))
