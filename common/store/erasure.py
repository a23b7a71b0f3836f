"""Forget a contact (`email-handler forget ADDR`): the right to erasure the owner may owe them.

Removes, for every conversation whose contact is ADDR (found by ``senderEmail``, so conversations
with an opaque-relay id are found too): the conversation record, its archive, attachments, withheld
parts, extracted text and the owner's reply attachments in S3, and its replay-protection items; then
ADDR's quarantined mail (record and raw mail), send records and idempotency records naming it, and
its suppression entry. The owner's block and allow lists are the owner's own decisions about ADDR and
are kept (`email-handler unblock` removes an entry). Returns what it removed, by kind.
"""

from __future__ import annotations

import json
from email.utils import getaddresses
from typing import Any

from common.aws import dynamodb, s3
from common.mail.threads import conversation_id
from common.runtime.config import Config
from common.store import layout

# Per conversation: everything stored under <prefix><cid>/.
CONVERSATION_PREFIXES = (
    layout.CONVERSATIONS,
    layout.ATTACHMENTS,
    layout.WITHHELD,
    layout.EXTRACTED,
    layout.REPLY_ATTACHMENTS,
)


def _names(value: Any, address: str) -> bool:
    """Whether ``value`` (a field, a list or a JSON document) names ``address``."""
    text = json.dumps(value, default=str).lower() if not isinstance(value, str) else value.lower()
    return address in text


def forget(cfg: Config, address: str) -> dict[str, list[str]]:
    addr = address.strip().lower()
    removed: dict[str, list[str]] = {"conversations": [], "objects": [], "quarantined": [], "records": []}
    records = [
        i for i in dynamodb.scan(cfg.conversations_table) if str(i.get("senderEmail", "")).lower() == addr
    ]
    cids = sorted(
        {str(i["conversationId"]) for i in records} | {conversation_id(addr, "", cfg.opaque_relay_domains)}
    )
    for cid in cids:
        for prefix in CONVERSATION_PREFIXES:
            for key in s3.keys(cfg.bucket, f"{prefix}{cid}/"):
                s3.delete(cfg.bucket, key)
                removed["objects"].append(key)
        if dynamodb.delete(cfg.conversations_table, {"conversationId": cid}, return_old=True):
            removed["conversations"].append(cid)
    for item in dynamodb.scan(cfg.quarantine_table):
        senders = [a.lower() for _, a in getaddresses([str(item.get("sender", ""))])]
        if addr in senders:
            if item.get("key"):
                s3.delete(cfg.bucket, str(item["key"]))
                removed["objects"].append(str(item["key"]))
            dynamodb.delete(cfg.quarantine_table, {"id": item["id"]})
            removed["quarantined"].append(str(item["id"]))
    owner_messages = tuple(f"owner-message#{cid}#" for cid in cids)
    for item in dynamodb.scan(cfg.send_status_table):
        if str(item["id"]).startswith(owner_messages) or _names(item.get("recipient", ""), addr):
            dynamodb.delete(cfg.send_status_table, {"id": item["id"]})
            removed["records"].append(f"{cfg.send_status_table}/{item['id']}")
    for item in dynamodb.scan(cfg.idempotency_table):
        if _names(item.get("data", ""), addr):
            dynamodb.delete(cfg.idempotency_table, {"id": item["id"]})
            removed["records"].append(f"{cfg.idempotency_table}/{item['id']}")
    if dynamodb.delete(cfg.suppression_table, {"email": addr}, return_old=True):
        removed["records"].append(f"{cfg.suppression_table}/{addr}")
    return removed
