"""The public addresses a deployment serves: which are there, and what each does (docs/owner.md,
"Several public addresses").

``PUBLIC_EMAIL`` lists them, comma-separated, the first the default (``new@thread.<domain>`` writes from
it unless the owner says ``[from: ADDR]``); ``*@DOMAIN`` in the list is a catch-all for every other
address at the domain. ``PUBLIC_ADDRESSES`` (inline JSON, or the path of a JSON file the host tools
read and inline) gives an address its own settings, and may list addresses by itself::

    {"jobs@example.com": {"label": "Jobs", "ack_subject": "Thanks for your application"},
     "*@example.com": {"ack": false}}

Settings: ``label`` (what the owner sees: the forward's banner, `conversations`, `quarantine`, the
digest), ``ack`` (on/off), ``ack_subject`` and ``ack_template`` (default ACK_SUBJECT, ACK_TEMPLATE),
``keywords`` (the owner's keyword lists on/off), ``forward_to`` (the mailboxes the address's mail
goes to, default PRIVATE_EMAIL), ``screener`` (a first-time sender's mail waits for the owner's
approval) and ``hide_correspondent`` (an encrypted forward shows the mailbox provider nothing of the
contact: docs/owner.md). A catch-all defaults to no ack and the label
"to: unknown address". One address and no PUBLIC_ADDRESSES is the configuration of before, unchanged.

Which address a mail was written to comes only from SES's receipt ``recipients`` (the envelope SES
matched to a receipt rule), never from a To header a sender wrote: a contact cannot choose the address
the system answers from (common/inbound/receipt.py records it on the conversation, reply-handler
writes from it).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import ConfigError, EventError

if TYPE_CHECKING:  # pragma: no cover
    from common.runtime.config import PublicAddresses

CATCH_ALL_LABEL = "to: unknown address"
SETTINGS = frozenset(
    {"label", "ack", "ack_subject", "ack_template", "keywords"}
    | {"forward_to", "screener", "hide_correspondent"}
)
# 7-bit ASCII only: "Amazon SES does not support the SMTPUTF8 extension ... the email address string must be
# 7-bit ASCII" (SES API, Destination), domains in punycode.
EMAIL = re.compile(r"^[!-;=?A-~]+@[A-Za-z0-9.-]+\.[A-Za-z0-9-]+$")
# An address this system may write from: SES needs 7-bit ASCII (no SMTPUTF8) and a dot-atom local part
# keeps the From header unquoted; a catch-all recipient outside this is forwarded but never written from.
_LOCAL = re.compile(r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
MAX_INLINE_CHARS = 2048  # Lambda's environment holds 4 KB in all: the rest is the other variables


@dataclass(frozen=True, slots=True)
class PublicAddress:
    # the address written to: a listed one as configured (IAM's ses:FromAddress compares it exactly),
    # a catch-all's recipient lowercased
    address: str
    label: str
    ack: bool
    ack_subject: str
    ack_template: str
    keywords: bool
    catch_all: bool = False  # reached through ``*@DOMAIN``, not listed itself
    forward_to: tuple[str, ...] = ()  # the address's own mailboxes; () = the owner's (PRIVATE_EMAIL)
    screener: bool = False
    hide_correspondent: bool = False

    @property
    def described(self) -> str:
        """The address with its label, for the owner (the forward's banner)."""
        return self.address if self.label in ("", self.address) else f"{self.address} ({self.label})"


@dataclass(frozen=True, slots=True)
class Addresses:
    listed: tuple[PublicAddress, ...]  # in PUBLIC_EMAIL's order: the first is the default
    catch_all: PublicAddress | None
    domain: str

    @property
    def primary(self) -> PublicAddress:
        return self.listed[0]

    @property
    def several(self) -> bool:
        """More than one address (a catch-all counts): forwards and lists then name the address."""
        return len(self.listed) > 1 or self.catch_all is not None

    def resolve(self, recipient: str) -> PublicAddress | None:
        """The public address ``recipient`` is, or None: a listed one, else one the catch-all covers."""
        address = recipient.strip().strip("<>").strip().lower()
        found = next((a for a in self.listed if a.address.lower() == address), None)
        if found is not None or self.catch_all is None:
            return found
        local, _, domain = address.rpartition("@")
        if domain != self.domain or not _LOCAL.fullmatch(local) or len(local) > 64:
            return None
        return replace(self.catch_all, address=address)

    def written_to(self, recipients: Iterable[str]) -> PublicAddress | None:
        """The public address a received mail was written to: the first of SES's receipt
        ``recipients`` this deployment serves (never a header)."""
        return next((a for r in recipients if (a := self.resolve(r)) is not None), None)

    def sending_from(self, address: str) -> str:
        """The address an answer in a conversation written to ``address`` goes out from: that address
        while it is served; the default once it is not (removed from PUBLIC_EMAIL: the conversation
        stays answerable, and the contact's answer arrives)."""
        found = self.resolve(address) if address else None
        return found.address if found is not None else self.primary.address


def split(public_email: str, public_addresses: str) -> tuple[tuple[str, ...], str]:
    """PUBLIC_EMAIL's list and PUBLIC_ADDRESSES's addresses, in order (PUBLIC_EMAIL first), and
    PUBLIC_ADDRESSES as inline JSON (a path is read here: the deploy hands the functions the text)."""
    text = public_addresses.strip()
    if text and not text.startswith("{"):
        try:
            text = Path(text).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"PUBLIC_ADDRESSES={public_addresses!r}: {exc.strerror or exc}") from None
    listed = [a.strip() for a in public_email.split(",") if a.strip()]
    listed += list(_settings(text))
    if text:
        text = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=True)
    # once each in any case, as first spelt (the default keeps its spelling: one address is as before)
    first: dict[str, str] = {}
    for address in listed:
        first.setdefault(address.lower(), address)
    return tuple(first.values()), text


def _settings(text: str) -> dict[str, dict[str, Any]]:
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"PUBLIC_ADDRESSES is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ConfigError("PUBLIC_ADDRESSES must be a JSON object: address -> its settings")
    out: dict[str, dict[str, Any]] = {}
    for address, settings in doc.items():
        unknown = set(settings) - SETTINGS
        if unknown:
            raise ConfigError(
                f"PUBLIC_ADDRESSES: {address}: unknown setting(s) {sorted(unknown)} "
                f"(known: {sorted(SETTINGS)})"
            )
        for name, kind in (
            ("ack", bool),
            ("keywords", bool),
            ("label", str),
            ("screener", bool),
            ("hide_correspondent", bool),
        ):
            if name in settings and not isinstance(settings[name], kind):
                raise ConfigError(f"PUBLIC_ADDRESSES: {address}: {name} must be {kind.__name__}")
        for name in ("ack_subject", "ack_template"):
            if name in settings and not (isinstance(settings[name], str) and settings[name].strip()):
                raise ConfigError(f"PUBLIC_ADDRESSES: {address}: {name} must be a non-empty string")
        if "forward_to" in settings:
            boxes = settings["forward_to"]
            if not (
                isinstance(boxes, list)
                and boxes
                and all(isinstance(b, str) and EMAIL.match(b.strip()) for b in boxes)
            ):
                raise ConfigError(
                    f"PUBLIC_ADDRESSES: {address}: forward_to must be a non-empty list of ASCII email "
                    "addresses"
                )
        out[address.strip()] = settings
    return out


def problem(addresses: tuple[str, ...], domain: str, inline: str) -> str:
    """Why these addresses cannot be served ('' when they can): each at DOMAIN_NAME, a catch-all only
    as ``*@DOMAIN_NAME``, at least one real address (the default), settings that fit Lambda."""
    domain = domain.lower()
    for address in addresses:
        local, _, at = address.lower().rpartition("@")
        if domain and at != domain:
            return f"PUBLIC_EMAIL: {address} is not an address at DOMAIN_NAME ({domain})"
        if "*" in local and local != "*":
            return f"PUBLIC_EMAIL: {address}: the only wildcard is the catch-all *@{domain or 'DOMAIN'}"
        if local != "*" and not _LOCAL.fullmatch(local):
            return f"PUBLIC_EMAIL: {address} is not an address this system can write from (ASCII dot-atom)"
    if addresses and all(a.startswith("*@") for a in addresses):
        return "PUBLIC_EMAIL needs one address besides the catch-all: the default the owner writes from"
    if len(inline) > MAX_INLINE_CHARS:
        return (
            f"PUBLIC_ADDRESSES is {len(inline)} characters as JSON; at most {MAX_INLINE_CHARS} fit "
            "a Lambda function's environment beside the other variables (shorten the ack templates)"
        )
    return ""


@functools.lru_cache(maxsize=16)
def _table(
    listed: tuple[str, ...], inline: str, domain: str, ack_subject: str, ack_template: str
) -> Addresses:
    settings = {a.lower(): s for a, s in _settings(inline).items()}

    def one(address: str) -> PublicAddress:
        s = settings.get(address.lower(), {})
        catch = address.startswith("*@")
        return PublicAddress(
            address,
            str(s.get("label", CATCH_ALL_LABEL if catch else address)),
            bool(s.get("ack", not catch)),
            str(s.get("ack_subject", ack_subject)),
            str(s.get("ack_template", ack_template)),
            bool(s.get("keywords", True)),
            catch,
            tuple(dict.fromkeys(b.strip() for b in s.get("forward_to", ()))),
            bool(s.get("screener", False)),
            bool(s.get("hide_correspondent", False)),
        )

    every = [one(a) for a in listed]
    return Addresses(
        tuple(a for a in every if not a.catch_all),
        next((a for a in every if a.catch_all), None),
        domain.lower(),
    )


def of(cfg: PublicAddresses) -> Addresses:
    """The deployment's public addresses (cached per configuration)."""
    listed = cfg.public_emails or ((cfg.public_email,) if cfg.public_email else ())
    return _table(listed, cfg.public_addresses, cfg.domain_name, cfg.ack_subject, cfg.ack_template)


def served(cfg: PublicAddresses, recipient: str) -> PublicAddress | None:
    return of(cfg).resolve(recipient) if (cfg.public_email or cfg.public_emails) else None


def sending(cfg: PublicAddresses, from_address: str) -> str:
    """The address a queued message goes out from (common/senders/handler.py): the default for ''
    (schema 1), else ``from_address`` only if this deployment serves it. A message naming any other
    address is refused (EventError: dead-lettered, never sent), whoever queued it."""

    if not from_address:
        return cfg.public_email
    found = served(cfg, from_address)
    if found is None:
        raise EventError(f"queue message asks to send from {from_address[:100]!r}, not a public address")
    return found.address


def receiving_function(cfg: PublicAddresses, address: str) -> str | None:
    """The function SES's receipt rules hand mail for ``address`` to (deploy/receiving.py), or None:
    the thread domain goes to reply-handler, every public address (the catch-all's too) to
    inbound-handler."""
    if address.strip().strip("<>").lower().rpartition("@")[2] == cfg.thread_domain.lower():
        return "reply-handler"
    return "inbound-handler" if served(cfg, address) is not None else None


# One line, bounded: `\s` would run across lines from every line start (quadratic on blank lines).
_FROM = re.compile(r"^[ \t]*\[[ \t]*from[ \t]*:[ \t]*([^\]\n]{0,320}?)[ \t]*\][ \t]*$", re.I | re.M)


def from_command(text: str) -> str:
    """ADDR of the first ``[from: ADDR]`` line ('' when there is none); the reply's cleaning removes
    the line as it removes every ``[key: value]`` command (common/reply/text.py)."""
    match = _FROM.search(text.replace("\r\n", "\n"))
    return match.group(1).strip().strip("<>").strip() if match else ""


def environment(cfg: PublicAddresses) -> dict[str, str]:
    """The variables that carry the addresses to a function (deploy/lambdas.py)."""
    listed = cfg.public_emails or (cfg.public_email,)
    return {"PUBLIC_EMAIL": ",".join(listed), "PUBLIC_ADDRESSES": cfg.public_addresses}
