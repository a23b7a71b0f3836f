"""Conversation ids (docs/CONTRACT.md) and the HMAC-tagged thread addresses that carry them.

The id rule (docs/CONTRACT.md; docs/security.md). An id is always lowercase ``[a-z0-9._-]``, at most
:data:`MAX_ID` characters (so ``<id>.<16 hex tag>`` is a 64-character local part), and two
different addresses never share one:

* **readable** ``local-at-domain`` (the CONTRACT's form) when the address is plain ASCII
  (local part ``[a-z0-9._-]`` with no leading, trailing or double dot; a domain of LDH labels
  with at least one dot), ``-at-`` occurs exactly once in the result (so it splits back into one
  address: ``x@cat-at-work.example`` and ``x-at-cat@work.example`` both contain a second
  ``-at-``), and the result fits :data:`MAX_ID`; the local part starts with a letter or digit;
* **relay** ``slug(display name)-linkedin-<6 hex>`` for opaque relay senders with a display name
  (CONTRACT), the slug cut so the id fits;
* **hashed** ``slug(address)-<12 hex of SHA-256(address)>`` for every other address (non-ASCII,
  ``/``, ``+``, quotes, over-long, ambiguous ``-at-``).

The three forms cannot collide with each other: readable ids contain a dot (the domain's) and
the others none; relay ids end in 6 hex, hashed ids in 12. Within the hashed and relay forms two
addresses share an id only on a hash-prefix collision, and the conversations table refuses to
change the ``senderEmail`` of an existing id (common.store.conversations), so a collision is
quarantined, never merged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import unicodedata
from typing import Literal

from common.errors import EmailHandlerError

TAG_HEX = 16  # 64 bits of HMAC-SHA256: guessing a tag online is hopeless
MAX_LOCAL_PART = 64  # RFC 5321 4.5.3.1.1
MAX_ID = MAX_LOCAL_PART - 1 - TAG_HEX  # 47: "<id>.<tag>" is a valid local part
HASH_HEX = 12
RELAY_HEX = 6
_READABLE_LOCAL = re.compile(r"[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9_-]+)*")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
SAFE_ID = re.compile(rf"[a-z0-9](?:[a-z0-9._-]{{0,{MAX_ID - 2}}}[a-z0-9])?")


def slugify(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")
    return slug or "contact"


def _digest(address: str, hexdigits: int) -> str:
    return hashlib.sha256(address.encode("utf-8", "surrogatepass")).hexdigest()[:hexdigits]


def readable_id(address: str) -> str | None:
    """The CONTRACT's ``local-at-domain`` form if it is safe and unambiguous for ``address``, else None."""
    local, at, domain = address.rpartition("@")
    if not at or not _READABLE_LOCAL.fullmatch(local) or "." not in domain:
        return None
    if not all(_LABEL.fullmatch(label) for label in domain.split(".")):
        return None
    cid = f"{local}-at-{domain}"
    if len(re.findall(r"(?=-at-)", cid)) != 1 or len(cid) > MAX_ID:
        return None
    return cid


def conversation_id(address: str, display_name: str, opaque_relay_domains: tuple[str, ...]) -> str:
    """The conversation id of a sender (see the module docstring for the rule)."""
    address = address.strip().lower()
    domain = address.rpartition("@")[2]
    relays = {d.lower() for d in opaque_relay_domains}
    if display_name.strip() and domain in relays:
        suffix = f"-linkedin-{_digest(address, RELAY_HEX)}"
        return slugify(display_name)[: MAX_ID - len(suffix)].strip("-") + suffix
    cid = readable_id(address)
    if cid is not None:
        return cid
    suffix = f"-{_digest(address, HASH_HEX)}"
    return slugify(address.replace("@", " at "))[: MAX_ID - len(suffix)].strip("-") + suffix


def is_safe_id(cid: str) -> bool:
    """True for ids this module can produce (also guards ids read back from a thread address)."""
    return SAFE_ID.fullmatch(cid) is not None and ".." not in cid


def _tag(cid: str, secret: str) -> str:
    return hmac.new(secret.encode(), cid.encode(), hashlib.sha256).hexdigest()[:TAG_HEX]


class UnsafeIdError(EmailHandlerError, ValueError):
    """A conversation id this module could not have made: no thread address is built from it."""


def thread_address(cid: str, secret: str, thread_domain: str) -> str:
    if not is_safe_id(cid):
        raise UnsafeIdError(
            f"conversation id {cid!r} is not a safe id (lowercase [a-z0-9._-], at most {MAX_ID})"
        )
    return f"{cid}.{_tag(cid, secret)}@{thread_domain}"


def verify_thread_address(address: str, secret: str, thread_domain: str) -> str | None:
    """The conversation id if ``address`` is a genuine thread address, readable or opaque
    (:func:`opaque_thread_address`), else None (constant-time tag check)."""
    local, _, domain = address.strip().lower().rpartition("@")
    if domain != thread_domain.lower():
        return None
    if "." not in local:  # a readable address always has its ".<tag>"; an opaque one never has a dot
        return _open_opaque(local, secret)
    cid, _, tag = local.rpartition(".")
    if not cid or not hmac.compare_digest(tag.encode(), _tag(cid, secret).encode()):
        return None
    return cid


# --- opaque thread addresses (PUBLIC_ADDRESSES "hide_correspondent": docs/owner.md) -----------------
# The conversation id itself, encrypted and authenticated, so that the address shows nothing of the
# contact and needs no lookup: deterministic authenticated encryption in the SIV form (RFC 5297
# section 2: the tag over the plaintext is the IV of the encryption), built from HMAC-SHA256 under keys
# derived from THREAD_SECRET. A conversation always gets the same address (its replies thread), two
# conversations never share one (the id is recovered whole), nothing is stored (nothing grows, nothing
# to enumerate), and forging one needs the secret: a changed character fails the 64-bit tag, as a
# readable address's does. AES-SIV's 128-bit tag would not fit: 32 bytes of id + 8 of tag are exactly
# the 64 base32 characters of a local part (RFC 5321 4.5.3.1.1).
ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz._-"  # every character an id may hold (SAFE_ID)
_ID_BASE = len(ID_ALPHABET) + 1  # digit 0 ends the id: 40**47 < 2**256, so every id packs into 32 bytes
_PACKED = 32
_OPAQUE_TAG = TAG_HEX // 2  # bytes: the same 64 bits as a readable address's tag
OPAQUE_CHARS = (_PACKED + _OPAQUE_TAG) * 8 // 5  # 64: base32 without padding
_BASE32 = re.compile(rf"[a-z2-7]{{{OPAQUE_CHARS}}}")


def _opaque_keys(secret: str) -> tuple[bytes, bytes]:
    """The tag's key and the encryption's, each its own (never THREAD_SECRET itself, which tags the
    readable addresses)."""
    key = secret.encode()
    return (
        hmac.new(key, b"opaque-thread-address:tag", hashlib.sha256).digest(),
        hmac.new(key, b"opaque-thread-address:encrypt", hashlib.sha256).digest(),
    )


def _xor(data: bytes, key: bytes, tag: bytes) -> bytes:
    stream = hmac.new(key, tag, hashlib.sha256).digest()  # 32 bytes: one block covers the packed id
    return bytes(a ^ b for a, b in zip(data, stream, strict=True))


def opaque_thread_address(cid: str, secret: str, thread_domain: str) -> str:
    """The thread address of ``cid`` that shows nothing of it: 64 base32 characters, no dot (so it is
    never read as a readable one), verified and opened by :func:`verify_thread_address`."""
    if not is_safe_id(cid):
        raise UnsafeIdError(
            f"conversation id {cid!r} is not a safe id (lowercase [a-z0-9._-], at most {MAX_ID})"
        )
    number = 0
    for char in reversed(cid):
        number = number * _ID_BASE + ID_ALPHABET.index(char) + 1
    packed = number.to_bytes(_PACKED, "big")
    tag_key, encrypt_key = _opaque_keys(secret)
    tag = hmac.new(tag_key, packed, hashlib.sha256).digest()[:_OPAQUE_TAG]
    local = base64.b32encode(tag + _xor(packed, encrypt_key, tag)).decode("ascii").lower()
    return f"{local}@{thread_domain}"


def _open_opaque(local: str, secret: str) -> str | None:
    """The conversation id inside an opaque local part, or None (constant-time tag check)."""
    if not _BASE32.fullmatch(local):
        return None
    try:
        data = base64.b32decode(local.upper())
    except binascii.Error:
        return None
    tag, sealed = data[:_OPAQUE_TAG], data[_OPAQUE_TAG:]
    tag_key, encrypt_key = _opaque_keys(secret)
    packed = _xor(sealed, encrypt_key, tag)
    if not hmac.compare_digest(tag, hmac.new(tag_key, packed, hashlib.sha256).digest()[:_OPAQUE_TAG]):
        return None
    number, chars = int.from_bytes(packed, "big"), []
    while number:
        number, digit = divmod(number, _ID_BASE)
        if digit == 0:  # a 0 inside the id: not one this module packed (unreachable past the tag)
            return None
        chars.append(ID_ALPHABET[digit - 1])
    cid = "".join(chars)
    return cid if is_safe_id(cid) else None


def opaque_message_id(message_id: str, secret: str, thread_domain: str) -> str:
    """A contact's Message-ID as a forward that hides the correspondent carries it (References): keyed,
    so the provider cannot match it to the contact's own copy, and the same for the same id, so the
    owner's client still threads the forwards of a conversation."""
    key = hmac.new(secret.encode(), b"opaque-message-id", hashlib.sha256).digest()
    digest = hmac.new(key, message_id.strip().encode("utf-8", "surrogatepass"), hashlib.sha256)
    return f"<{digest.hexdigest()[:32]}@{thread_domain}>"


# Owner-only addresses on the thread domain besides thread addresses (docs/CONTRACT.md):
# new@thread.<domain> starts a conversation; release.<id>.<tag>@thread.<domain> releases quarantined mail.
NEW_CONVERSATION_LOCAL = "new"
RELEASE_PREFIX = "release."


def _release_tag(qid: str, secret: str) -> str:
    # "release:" cannot occur in a conversation id (no ':' in one), so no release tag is a thread tag
    return _tag(f"release:{qid}", secret)


def release_address(qid: str, secret: str, thread_domain: str) -> str:
    return f"{RELEASE_PREFIX}{qid}.{_release_tag(qid, secret)}@{thread_domain}"


def verify_release_address(address: str, secret: str, thread_domain: str) -> str | None:
    """The quarantine id if ``address`` is a genuine release address, else None (constant-time tag check)."""
    local, _, domain = address.strip().lower().rpartition("@")
    if domain != thread_domain.lower() or not local.startswith(RELEASE_PREFIX):
        return None
    qid, _, tag = local.removeprefix(RELEASE_PREFIX).rpartition(".")
    if not qid or not hmac.compare_digest(tag.encode(), _release_tag(qid, secret).encode()):
        return None
    return qid


def is_new_conversation_address(address: str, thread_domain: str) -> bool:
    return address.strip().lower() == f"{NEW_CONVERSATION_LOCAL}@{thread_domain.lower()}"


# The screener's addresses (docs/owner.md, "Screener"): approve.<sid>.<tag>@thread.<domain> and
# decline.<sid>.<tag>@thread.<domain>, where <sid> names one (public address, sender) pair.
SCREENER_ACTIONS = ("approve", "decline")
SCREENER_ID_CHARS = 16  # 80 bits of SHA-256, as a quarantine id: "decline.<16>.<16 hex>" is 41 characters


def screener_id(public: str, sender: str) -> str:
    """The id of a sender screened on a public address: SHA-256 of the pair, so the HMAC tag over the
    id binds the address to that pair (another pair with the same id would be an 80-bit collision)."""
    pair = f"screener\n{public.strip().lower()}\n{sender.strip().lower()}"
    digest = hashlib.sha256(pair.encode("utf-8", "surrogatepass")).digest()
    return base64.b32encode(digest).decode("ascii").lower()[:SCREENER_ID_CHARS]


def _screener_tag(action: str, sid: str, secret: str) -> str:
    # "screener:" cannot occur in a conversation id (no ':'), and the action is inside the tag: an
    # approve address edited into a decline address (or back) does not verify.
    return _tag(f"screener:{action}:{sid}", secret)


def screener_address(
    action: Literal["approve", "decline"], public: str, sender: str, secret: str, thread_domain: str
) -> str:
    sid = screener_id(public, sender)
    return f"{action}.{sid}.{_screener_tag(action, sid, secret)}@{thread_domain}"


def verify_screener_address(address: str, secret: str, thread_domain: str) -> tuple[str, str] | None:
    """(action, screener id) if ``address`` is a genuine approve or decline address, else None
    (constant-time tag check). The caller checks the stored pair hashes to that id."""
    local, _, domain = address.strip().lower().rpartition("@")
    if domain != thread_domain.lower():
        return None
    action, _, rest = local.partition(".")
    sid, _, tag = rest.rpartition(".")
    if action not in SCREENER_ACTIONS or len(sid) != SCREENER_ID_CHARS:
        return None
    if not hmac.compare_digest(tag.encode(), _screener_tag(action, sid, secret).encode()):
        return None
    return action, sid
