"""The owner's sender lists (table ``sender-lists``): who is blocked and who is allowed.

One item per entry, keyed ``entry``: an address (``jane@corp.example``) or a domain
(``@corp.example``, which covers its subdomains too). ``list`` is ``block`` (later mail is
quarantined without forward or ack) or ``allow`` (exempt from the owner's keyword lists; SES's
spam, virus and DMARC verdicts still apply). The most specific entry decides: an allowed address
inside a blocked domain gets through. Written by owner commands in replies (``[block]`` …), by
the CLI and by the owner's spam complaint about a forward (common/inbound/spamblock.py).
inbound-handler checks them in the write that records a mail it forwards (no block entry may apply:
ConditionChecks, common/store/intake.py) and reads them (one BatchGetItem) only for a mail its
keyword lists would quarantine, which an allow entry releases, or when that check failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from common.aws import dynamodb
from common.errors import EmailHandlerError
from common.runtime import addresses
from common.runtime.clock import iso_z
from common.runtime.config import Delivery

BLOCK: Literal["block"] = "block"
ALLOW: Literal["allow"] = "allow"
LISTS = (BLOCK, ALLOW)
_DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}")
_LOCAL = re.compile(r"[^\s@<>\"(),;:\[\]\\]{1,64}")
MAX_PARENTS = 8  # a.b.c.d.example: the address, then at most this many domain levels
# "ENTRY to PUBLIC": an entry for mail to one public address only (docs/owner.md, "Several public
# addresses"); it comes before the global entry of the same sender (no address holds a space).
SCOPE = " to "


@dataclass(frozen=True, slots=True)
class Listing:
    entry: str  # "jane@corp.example" | "@corp.example"
    list: str  # block | allow
    source: str = ""  # "reply:<cid>" | "cli:<who>" | "complaint:<SES message id>" | "screener:mail:<id>"
    created_at: str = ""


class SenderListError(EmailHandlerError, ValueError):
    """An entry the block and allow lists cannot hold (not an address or @domain, the owner's own
    mail, an unknown list); the message says which, for the owner."""


def normalise(value: str) -> str:
    """``ADDR`` or ``@DOMAIN`` (a bare domain is read as ``@DOMAIN``), lowercased, optionally
    ``… to PUBLIC`` (only for mail to that public address); ValueError otherwise."""
    scope = ""
    if SCOPE in value.lower():
        value, public = value[: value.lower().index(SCOPE)], value[value.lower().index(SCOPE) + len(SCOPE) :]
        scope = normalise(public)
        if scope.startswith("@") or SCOPE in scope:
            raise SenderListError(f"{public!r} is not a public address")
        scope = SCOPE + scope
    text = value.strip().strip("<>").strip().lower().rstrip(".")
    local, at, domain = text.rpartition("@")
    if not at:
        local, domain = "", text
    if not _DOMAIN.fullmatch(domain) or (local and not _LOCAL.fullmatch(local)):
        raise SenderListError(f"{value!r} is neither an address nor @domain")
    return f"{local}@{domain}{scope}"


def domain_of(entry: str) -> str:
    return entry.rpartition("@")[2]


def covers(entry: str, address: str) -> bool:
    """Whether ``entry`` applies to mail from ``address``."""
    if not entry.startswith("@"):
        return entry == address.lower()
    domain, wanted = domain_of(address.lower()), entry[1:]
    return domain == wanted or domain.endswith("." + wanted)


def candidates(address: str, public: str = "") -> list[str]:
    """The entries that could apply to ``address``, most specific first; for mail written to
    ``public``, each entry scoped to it before the same global entry."""
    address = address.strip().lower()
    labels = domain_of(address).split(".")
    domains = [".".join(labels[i:]) for i in range(len(labels) - 1)][:MAX_PARENTS]
    found = [address, *(f"@{d}" for d in domains)]
    return [k for e in found for k in (f"{e}{SCOPE}{public.lower()}", e)] if public else found


def protected(cfg: Delivery, entry: str) -> str:
    """Why ``entry`` may not be listed ('' if it may): it would catch the owner's own mail."""
    entry, _, public = entry.partition(SCOPE)
    if public and addresses.served(cfg, public) is None:
        return f"{public} is not one of this system's public addresses"
    hit = next((a for a in sorted(cfg.own_addresses) if covers(entry, a)), "")
    if hit:
        return f"{entry} covers the owner's address {hit}"
    for domain in (cfg.domain_name, cfg.thread_domain):
        if domain and entry.startswith("@") and (domain == entry[1:] or domain.endswith("." + entry[1:])):
            return f"{entry} covers this system's domain {domain}"
    return ""


def _listing(item: dict[str, Any]) -> Listing:
    return Listing(
        str(item["entry"]),
        str(item.get("list", "")),
        str(item.get("source", "")),
        str(item.get("createdAt", "")),
    )


def lookup(cfg: Delivery, address: str, public: str = "") -> Listing | None:
    """The most specific entry for mail from ``address`` to ``public`` (one BatchGetItem), or None."""
    if "@" not in address:
        return None
    keys = candidates(address, public)
    found = {
        str(i["entry"]): i for i in dynamodb.batch_get(cfg.sender_lists_table, [{"entry": k} for k in keys])
    }
    return next((_listing(found[k]) for k in keys if k in found and found[k].get("list") in LISTS), None)


def block_checks(cfg: Delivery, address: str, public: str = "") -> list[dict[str, Any]]:
    """ConditionCheck actions (common/store/intake.py) that hold while no entry that could apply to
    mail from ``address`` is on the block list. One that fails says only that some block entry
    covers the sender: :func:`lookup` then finds whether a more specific allow entry overrides it."""
    if "@" not in address:
        return []
    return [
        dynamodb.condition_check(
            cfg.sender_lists_table,
            {"entry": entry},
            "attribute_not_exists(#entry) OR #list <> :block",
            names={"#entry": "entry", "#list": "list"},
            values={":block": BLOCK},
        )
        for entry in candidates(address, public)
    ]


def put(cfg: Delivery, entry: str, list_name: str, source: str) -> Listing:
    """Put ``entry`` on ``list_name`` (replacing whatever list it was on); ValueError for the owner's
    own mail."""
    if list_name not in LISTS:
        raise SenderListError(f"unknown list {list_name!r}")
    entry = normalise(entry)
    refusal = protected(cfg, entry)
    if refusal:
        raise SenderListError(refusal)
    item = {"entry": entry, "list": list_name, "source": source, "createdAt": iso_z()}
    dynamodb.put(cfg.sender_lists_table, item)
    return _listing(item)


def remove(cfg: Delivery, entry: str) -> Listing | None:
    """Take ``entry`` off whichever list it is on; the removed entry, or None if there was none."""
    old = dynamodb.delete(cfg.sender_lists_table, {"entry": normalise(entry)}, return_old=True)
    return _listing(old) if old else None


def entries(cfg: Delivery) -> list[Listing]:
    return sorted(
        (_listing(i) for i in dynamodb.scan(cfg.sender_lists_table)),
        key=lambda entry: (entry.list, entry.entry),
    )
