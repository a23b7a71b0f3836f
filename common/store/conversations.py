"""The conversations table (docs/CONTRACT.md, Data): one item per contact, keyed by conversation id.

The one owner of its update expressions: inbound-handler records each received mail, reply-handler
reads the contact and stores the owner's metadata commands.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from common.aws import dynamodb
from common.errors import EmailHandlerError
from common.mail.parse import ParsedMail
from common.runtime.clock import iso_z
from common.runtime.config import Delivery

BODY_RECORD_CHARS = 1000


def get(cfg: Delivery, cid: str) -> dict[str, Any] | None:
    return dynamodb.get(cfg.conversations_table, {"conversationId": cid})


class CollisionError(EmailHandlerError):
    """The conversation id already belongs to another sender: never merged."""

    def __init__(self, cid: str, owner: str) -> None:
        super().__init__(f"conversation id {cid} already belongs to another sender")
        self.cid, self.owner = cid, owner


def record_inbound(
    cfg: Delivery,
    cid: str,
    mid: str,
    mail: ParsedMail,
    when: datetime,
    authenticated: bool = True,
    public: str = "",
) -> bool:
    """Upsert the conversation for a received mail; True on first contact (also when a first
    delivery is retried: the record remembers which SES message created it). Raises
    :class:`CollisionError` instead of changing the ``senderEmail`` of an existing conversation.
    Not ``authenticated`` (SES's verdicts do not tie it to its From: common.delivery.ack.authenticated,
    e.g. a DMARC FAIL): the mail creates the conversation if there is none, but changes nothing of an
    existing one (subject, last message, display name, the message the owner's reply threads under,
    its time and expiry), so a spoof of an existing contact can neither rewrite what the owner sees
    nor keep the record alive; it is forwarded with its warning and archived all the same."""
    write = inbound_write(cfg, cid, mid, mail, when, authenticated, public)
    try:
        new = dynamodb.update(**write, return_values="ALL_NEW", raise_on_condition=True)
    except dynamodb.ConditionFailedError as exc:
        raise CollisionError(cid, str((exc.item or {}).get("senderEmail", ""))) from None
    return new is not None and new.get("firstMessageId") == mid


SAME_SENDER = "(attribute_not_exists(senderEmail) OR senderEmail = :e)"
# With SAME_SENDER: the write creates the conversation, or repeats the write of the mail that did.
FIRST_CONTACT = "(attribute_not_exists(firstMessageId) OR firstMessageId = :m)"


def inbound_write(
    cfg: Delivery, cid: str, mid: str, mail: ParsedMail, when: datetime, authenticated: bool, public: str = ""
) -> dict[str, Any]:
    """The conditional update :func:`record_inbound` makes (``table``, ``key``, ``expression``,
    ``values``, ``names``, ``condition``), also the record's action in common/store/intake.py.
    ``public``: the public address the mail was written to (SES's receipt recipients), kept as
    ``publicAddress``: the owner's replies go out from it (common/runtime/addresses.py)."""
    values: dict[str, Any] = {
        ":e": mail.from_address,
        ":d": mail.from_address.rpartition("@")[2],
        ":s": mail.subject,
        ":b": mail.body_text.strip()[:BODY_RECORD_CHARS],
        ":t": iso_z(when),
        ":m": mid,
        ":h": mail.message_id or f"<{mid}@email.amazonses.com>",
    }

    def fact(name: str, value: str) -> str:
        return f"{name} = {value}" if authenticated else f"{name} = if_not_exists({name}, {value})"

    expression = "SET " + ", ".join(
        [
            "senderEmail = :e",  # equal to the stored one (SAME_SENDER) or new
            fact("emailDomain", ":d"),
            fact("subject", ":s"),
            fact("lastMessageBody", ":b"),
            fact("#ts", ":t"),
            fact("lastSesMessageId", ":m"),
            fact("lastMessageId", ":h"),
            "firstContactDate = if_not_exists(firstContactDate, :t)",
            "firstMessageId = if_not_exists(firstMessageId, :m)",
        ]
    )
    if mail.display_name:
        expression += ", " + fact("displayName", ":n")
        values[":n"] = mail.display_name
    if public:  # optional attribute: a record without it (older, or one address) answers from the default
        expression += ", " + fact("publicAddress", ":p")
        values[":p"] = public
    return {
        "table": cfg.conversations_table,
        "key": {"conversationId": cid},
        "expression": _expiry(cfg, expression, values, when, extend=authenticated),
        "values": values,
        "names": {"#ts": "timestamp"},
        "condition": SAME_SENDER,
    }


def _expiry(
    cfg: Delivery, expression: str, values: dict[str, Any], when: datetime, extend: bool = True
) -> str:
    """The record expires (DynamoDB TTL ``expiresAt``) RETENTION_ARCHIVE_DAYS after its last message, with
    its archive; 0 keeps it for ever (and removes an expiry set before). Not ``extend``: an expiry
    already set stays (a mail that may be a spoof does not keep the record alive)."""
    if cfg.retention_archive_days <= 0:
        return expression + (" REMOVE expiresAt" if extend else "")
    values[":x"] = int(when.timestamp()) + cfg.retention_archive_days * 86400
    return expression + (", expiresAt = :x" if extend else ", expiresAt = if_not_exists(expiresAt, :x)")


def set_attributes(cfg: Delivery, cid: str, attributes: dict[str, str]) -> None:
    """Store the owner's metadata (``companyName``, ``title`` …) on an existing conversation."""
    if not attributes:
        return
    names = {f"#m{i}": k for i, k in enumerate(attributes)}
    dynamodb.update(
        cfg.conversations_table,
        {"conversationId": cid},
        "SET " + ", ".join(f"#m{i} = :m{i}" for i in range(len(attributes))),
        {f":m{i}": v for i, v in enumerate(attributes.values())},
        names=names,
    )


def mark_spam_candidate(cfg: Delivery, cid: str, detail: str) -> bool:
    """The owner reported a forward from this contact as spam: remember it on the conversation
    (``spamCandidate``, ``spamReports``, ``spamReportedAt``) for the owner's review; False if unknown."""
    return (
        dynamodb.update(
            cfg.conversations_table,
            {"conversationId": cid},
            "SET spamCandidate = :t, spamReportedAt = :w, spamReportDetail = :d ADD spamReports :one",
            {":t": True, ":w": iso_z(), ":d": detail or "complaint", ":one": 1},
            condition="attribute_exists(conversationId)",
        )
        is not None
    )


def start_outbound(
    cfg: Delivery, cid: str, address: str, subject: str, mid: str, when: datetime, public: str = ""
) -> dict[str, Any]:
    """The owner starts a conversation with ``address``: create the record (or keep the existing one's
    history). ``firstMessageId`` is the owner's message, so the contact's answer is not a first
    contact and gets no automatic acknowledgement."""
    values: dict[str, Any] = {
        ":e": address.lower(),
        ":d": address.rpartition("@")[2].lower(),
        ":s": subject,
        ":t": iso_z(when),
        ":m": mid,
        ":o": "owner",
        ":p": public or cfg.public_email,
    }
    expression = _expiry(
        cfg,
        "SET senderEmail = :e, emailDomain = :d, subject = :s, #ts = :t, "
        "firstContactDate = if_not_exists(firstContactDate, :t), "
        "firstMessageId = if_not_exists(firstMessageId, :m), startedBy = if_not_exists(startedBy, :o), "
        "publicAddress = :p",
        values,
        when,
    )
    return (
        dynamodb.update(
            cfg.conversations_table,
            {"conversationId": cid},
            expression,
            values,
            names={"#ts": "timestamp"},
            return_values="ALL_NEW",
        )
        or {}
    )
