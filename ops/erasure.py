"""Forget a contact (`email-handler forget ADDR`): the right to erasure the owner may owe them.

What names the contact is found by content, not only by key, and matched exactly: the address as a
whole token (``jo@corp.example`` never matches ``banjo@corp.example``), case and surrounding space
ignored, or an id that belongs to the contact (a conversation id, an SES message id of their mail).

* Their conversations (by ``senderEmail``, so one with an opaque-relay id is found too): the record
  and everything stored under ``<prefix><cid>/`` (archive, the owner's replies as sent, attachments,
  withheld parts, extracted text, the owner's reply attachments).
* The mail bucket's other prefixes, read object by object: a received mail (``staging/``, ``spam/``,
  ``rejected/``) when a header field that says who wrote or received it (From, Sender, Reply-To,
  Return-Path, To, Cc) names the contact, or it is one of their mails; delivery reports
  (``bounces/``), claim-check payloads (``queue-payloads/``) and the local wiring's invocation
  records when any part of them names the contact or one of their mails.
* Every table but the owner's block and allow lists (the owner's own decisions about ADDR; `email-handler
  unblock` removes one): every item that names the contact or one of their mails.
* The raw copies kept beside conversations: a quarantined mail released unparsed
  (``attachments/quarantine/<id>/``, read as received mail) and an abuse report attached to the owner's
  notice (``attachments/complaint/<id>/``, read whole).
* The hourly ack budget's count for the contact's domain (``ack-budget#<hour>``'s ``domain:<domain>``).
* Sends already queued and out of sight (held by SES's sandbox, waiting for the daily quota or a retry):
  a forget item per address and conversation (common/store/forgotten.py) makes the senders drop them;
  the held or failed ones forget found are listed under ``cancelled``.
* Every queue of the deployment, dead-letter queues included (the async DLQ's events of mail never
  handled, the senders' failed sends, S3's notifications of their attachments): the messages that
  name them, as written or URL-decoded (S3 event keys), are deleted; the others are made visible
  again at once.
* Logs cannot be edited: the functions log no address or mail text (common.runtime.log.scrub), so
  nothing is there to find, but log groups are searched for the address and every match is reported,
  with whatever could not be searched, under "unreachable".

Returns what it removed and what it could not reach, by kind.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email.utils import getaddresses
from urllib.parse import unquote_plus

from common.aws import dynamodb, error_code, logs, s3, sqs
from common.errors import EmailHandlerError
from common.mail.threads import conversation_id, opaque_thread_address, thread_address
from common.runtime.config import Delivery
from common.store import ackbudget, forgotten, layout
from deploy.functions import FUNCTIONS

# Per conversation: everything stored under <prefix><cid>/.
CONVERSATION_PREFIXES = (
    layout.CONVERSATIONS,
    layout.SENT,
    layout.ATTACHMENTS,
    layout.WITHHELD,
    layout.EXTRACTED,
    layout.REPLY_ATTACHMENTS,
)
# Received mail, looked at by its header fields; and documents, looked at whole.
MAIL_PREFIXES = (layout.STAGING, layout.SPAM, layout.REJECTED, layout.RELEASED_ORIGINALS)
DOCUMENT_PREFIXES = (
    layout.BOUNCES,
    layout.COMPLAINT_REPORTS,
    layout.QUEUE_PAYLOADS,
    layout.LOCAL_INVOCATIONS,
)
PEOPLE_FIELDS = ("from", "sender", "reply-to", "return-path", "to", "cc", "resent-from", "resent-to")
HEADER_BYTES = 256 * 1024  # the header block is read within this (the parsing cap on headers)
MAX_OBJECT_BYTES = 64 * 1024 * 1024  # a larger object is reported, not read
# Characters that continue a token (an address's local part, a domain, an id) on either side.
# ("/" and "=" are left out: keys and URLs put them beside an id; no one's address starts with them.)
_WORD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-+%'!#$&*^`{|}~")
_SPECIALS = frozenset(' \t\r\n<>(),;:"[]\\')


class InvalidAddressError(EmailHandlerError, ValueError):
    """Not one exact address: forget refuses it rather than guess (an empty one would match everything)."""


def normalise(address: str) -> str:
    """The address as forget compares it (lower case, no surrounding space), or InvalidAddressError."""
    addr = address.strip().lower()
    local, at, domain = addr.rpartition("@")
    if (
        not at
        or not local
        or "@" in local
        or not domain
        or any(c in _SPECIALS for c in addr)
        or "." not in domain.strip(".")
        or domain.startswith((".", "-"))
        or domain.endswith((".", "-"))
        or ".." in domain
        or len(addr) > 254
    ):
        raise InvalidAddressError(
            f"{address!r} is not one e-mail address (local@domain.tld): forget matches an exact address"
        )
    return addr


def names(text: str, tokens: Iterable[str]) -> bool:
    """Whether ``text`` (any case) holds one of ``tokens`` as a whole token: not inside a longer
    address, domain or id (``jo@a.example`` is not in ``banjo@a.example`` nor ``jo@a.example.org``)."""
    lowered = text.lower()
    for token in tokens:
        dotted = "." in token  # a domain goes on after a dot (a.example.org); an id's ".eml" does not
        start = 0
        while (found := lowered.find(token, start)) >= 0:
            end = found + len(token)
            before = lowered[found - 1] if found else " "
            after = lowered[end] if end < len(lowered) else " "
            continued = after in _WORD or (
                dotted and after == "." and end + 1 < len(lowered) and lowered[end + 1] in _WORD
            )
            if before not in _WORD and before != "." and not continued:
                return True
            start = found + 1
    return False


@dataclass
class Erasure:
    cfg: Delivery
    address: str
    cids: set[str] = field(default_factory=set)
    mids: set[str] = field(default_factory=set)
    removed: dict[str, list[str]] = field(
        default_factory=lambda: {
            "conversations": [],
            "objects": [],
            "quarantined": [],
            "records": [],
            "messages": [],
            "cancelled": [],
        }
    )
    unreachable: list[str] = field(default_factory=list)

    def tokens(self) -> list[str]:
        found = [self.address, *sorted(self.cids), *sorted(self.mids)]
        if self.cfg.thread_secret:  # the conversations' thread addresses (their local part holds the id)
            for cid in self.cids:
                try:
                    found.append(thread_address(cid, self.cfg.thread_secret, self.cfg.thread_domain))
                    # and the opaque one a hide_correspondent address's forwards carry
                    found.append(opaque_thread_address(cid, self.cfg.thread_secret, self.cfg.thread_domain))
                except ValueError:  # not a safe id: no thread address was ever made for it
                    pass
        return found

    def remove_object(self, key: str) -> None:
        s3.delete(self.cfg.bucket, key)
        self.removed["objects"].append(key)


def forget(cfg: Delivery, address: str, queues: Iterable[str] = ()) -> dict[str, list[str]]:
    """Remove everything of the contact ``address``; returns what was removed and what was not
    reached (``unreachable``), by kind. Raises InvalidAddressError for anything but one address."""
    job = Erasure(cfg, normalise(address))
    _conversations(job)
    _cancel_queued(job)
    _quarantine(job)
    for prefix in MAIL_PREFIXES:
        _scan_objects(job, prefix, _mail_names)
    for prefix in DOCUMENT_PREFIXES:
        _scan_objects(job, prefix, lambda job, data: names(data.decode("utf-8", "replace"), job.tokens()))
    _tables(job)
    for queue in queues:
        _queue(job, queue)
    _logs(job)
    return {**job.removed, "unreachable": job.unreachable}


def _conversations(job: Erasure) -> None:
    cfg, addr = job.cfg, job.address
    records = [
        i for i in dynamodb.scan(cfg.conversations_table) if str(i.get("senderEmail", "")).lower() == addr
    ]
    job.cids = {str(i["conversationId"]) for i in records} | {
        conversation_id(addr, "", cfg.opaque_relay_domains)
    }
    for cid in sorted(job.cids):
        for prefix in CONVERSATION_PREFIXES:
            for key in s3.keys(cfg.bucket, f"{prefix}{cid}/"):
                # <prefix><cid>/<sesMessageId>[.eml | /<file>]: the contact's mails, found elsewhere by id
                job.mids.add(key[len(prefix) + len(cid) + 1 :].split("/")[0].removesuffix(".eml"))
                job.remove_object(key)
        if dynamodb.delete(cfg.conversations_table, {"conversationId": cid}, return_old=True):
            job.removed["conversations"].append(cid)
    job.mids.discard("")


def _cancel_queued(job: Erasure) -> None:
    """Before anything else is read: the senders drop what is queued for the contact from now on. Never
    for one of our own addresses: that would drop every forward queued for the owner."""
    values = [*job.cids] if job.cfg.is_own(job.address) else [job.address, *job.cids]
    forgotten.mark(job.cfg, values)


def _quarantine(job: Erasure) -> None:
    cfg = job.cfg
    for item in dynamodb.scan(cfg.quarantine_table):
        senders = [a.strip().lower() for _, a in getaddresses([str(item.get("sender", ""))])]
        if job.address in senders:
            job.mids.add(str(item["id"]))
            if item.get("key"):
                job.remove_object(str(item["key"]))
            dynamodb.delete(cfg.quarantine_table, {"id": item["id"]})
            job.removed["quarantined"].append(str(item["id"]))


def _mail_names(job: Erasure, data: bytes) -> bool:
    """A received mail is the contact's when a header field of who wrote or received it names them."""
    head = data[:HEADER_BYTES].split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    parsed = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(head)
    values = [str(v) for name in PEOPLE_FIELDS for v in parsed.get_all(name) or []]
    people = {a.strip().lower() for _, a in getaddresses(values) if a}
    return job.address in people or names(" ".join(values), job.tokens())


def _scan_objects(job: Erasure, prefix: str, match: Callable[[Erasure, bytes], bool]) -> None:
    cfg = job.cfg
    for key in s3.keys(cfg.bucket, prefix):
        if names(key, job.mids):  # a mail of theirs (staging/<id>, spam/<day>/<id>.eml, ...)
            job.remove_object(key)
            continue
        obj = s3.get(cfg.bucket, key)
        if obj is None:
            continue
        if int(obj.get("ContentLength", 0)) > MAX_OBJECT_BYTES:
            obj["Body"].close()
            job.unreachable.append(f"s3://{cfg.bucket}/{key}: over {MAX_OBJECT_BYTES} bytes, not searched")
            continue
        if match(job, obj["Body"].read()):
            job.remove_object(key)


# The other tables and their hash keys (deploy/resources.py); the conversations and quarantine tables
# are done above, the owner's block and allow lists are kept.
TABLE_KEYS = {"send_status_table": "id", "idempotency_table": "id", "suppression_table": "email"}


def _tables(job: Erasure) -> None:
    cfg = job.cfg
    owner_messages = tuple(f"owner-message#{cid}#" for cid in job.cids)
    for attribute, key in TABLE_KEYS.items():
        table, keys = getattr(cfg, attribute), [key]
        for item in dynamodb.scan(table):
            ident = str(item.get(keys[0], ""))
            if ident.startswith(owner_messages) or names(json.dumps(item, default=str), job.tokens()):
                dynamodb.delete(table, {k: item[k] for k in keys})
                job.removed["records"].append(f"{table}/{'/'.join(str(item[k]) for k in keys)}")
                if ident.startswith("corr#") and item.get("status") in UNSENT:
                    # a send the senders will now drop (common/store/forgotten.py): say which
                    job.removed["cancelled"].append(
                        f"{item.get('kind', 'send')} {ident.removeprefix('corr#')} "
                        f"({item.get('status')}: {item.get('lastError', '-')})"
                    )
    _ack_budget(job)


def _ack_budget(job: Erasure) -> None:
    """The contact's domain's count in each hour's ack budget (ackbudget.py): it names the domain."""
    domain = ackbudget.domain_of(job.address)
    for item in dynamodb.scan(job.cfg.send_status_table):
        ident = str(item.get("id", ""))
        if ident.startswith(ackbudget.PREFIX) and ackbudget.domain_field(domain) in item:
            ackbudget.forget_domain(job.cfg, ident, domain)
            job.removed["records"].append(f"{job.cfg.send_status_table}/{ident} ({domain}'s count)")


# The send-status record of a send that has not gone out (common/senders/handler.py): held by SES's
# sandbox, or failed and waiting for its next receive.
UNSENT = ("held", "failed")
PEEK_HIDE_S = 60


def _queue(job: Erasure, queue: str) -> None:
    """Delete the messages of ``queue`` that name the contact; the others are made visible again."""
    seen: set[str] = set()
    hidden: list[str] = []
    try:
        while True:
            batch = sqs.receive(queue, max_messages=10, wait_s=1, visibility_s=PEEK_HIDE_S)
            fresh = [m for m in batch if m["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                text = message["Body"] + json.dumps(message.get("MessageAttributes") or {})
                text += "\n" + unquote_plus(text)  # S3 notifications URL-encode their keys
                if names(text, job.tokens()) or names(text, job.removed["objects"]):
                    sqs.delete(queue, [message["ReceiptHandle"]])
                    job.removed["messages"].append(f"{queue}/{message['MessageId']}")
                else:
                    hidden.append(message["ReceiptHandle"])
    finally:
        sqs.show_again(queue, hidden)


def _logs(job: Erasure) -> None:
    """CloudWatch Logs cannot delete one event: say where the address is still written, and what no
    one can search from here."""

    cfg = job.cfg
    groups = [cfg.spam_log_group] + [f"/aws/lambda/{cfg.name(f.name)}" for f in FUNCTIONS]
    for group in groups:
        try:
            found = logs.count_events(group, job.address)
        except Exception as exc:
            if error_code(exc) == "ResourceNotFoundException":
                continue
            job.unreachable.append(f"log group {group}: cannot be searched ({error_code(exc) or exc})")
            continue
        if found:
            job.unreachable.append(
                f"log group {group}: {found} event(s) name the address; CloudWatch Logs cannot delete "
                "single events: they go with the group's retention (or delete the group's streams)"
            )
    job.unreachable.append(
        "logs copied out of CloudWatch (export tasks, subscriptions) and the local functions' console "
        "output are not searched; the functions log pseudonyms, never an address or mail text"
    )
