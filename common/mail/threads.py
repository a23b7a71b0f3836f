"""Conversation ids (docs/CONTRACT.md) and the HMAC-tagged thread addresses that carry them."""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata

TAG_HEX = 16  # 64 bits of HMAC-SHA256: guessing a tag online is hopeless


def slugify(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")
    return slug or "contact"


def conversation_id(address: str, display_name: str, opaque_relay_domains: tuple[str, ...]) -> str:
    """``user-at-domain``; ``slug-linkedin-<sha6>`` for opaque relay senders with a display name."""
    address = address.strip().lower()
    domain = address.rpartition("@")[2]
    relays = {d.lower() for d in opaque_relay_domains}
    if display_name.strip() and domain in relays:
        digest = hashlib.sha256(address.encode()).hexdigest()[:6]
        return f"{slugify(display_name)}-linkedin-{digest}"
    return address.replace("@", "-at-")


def _tag(cid: str, secret: str) -> str:
    return hmac.new(secret.encode(), cid.encode(), hashlib.sha256).hexdigest()[:TAG_HEX]


def thread_address(cid: str, secret: str, thread_domain: str) -> str:
    return f"{cid}.{_tag(cid, secret)}@{thread_domain}"


def verify_thread_address(address: str, secret: str, thread_domain: str) -> str | None:
    """The conversation id if ``address`` is a genuine thread address, else None (constant-time tag check)."""
    local, _, domain = address.strip().lower().rpartition("@")
    if domain != thread_domain.lower() or "." not in local:
        return None
    cid, _, tag = local.rpartition(".")
    if not cid or not hmac.compare_digest(tag.encode(), _tag(cid, secret).encode()):
        return None
    return cid
