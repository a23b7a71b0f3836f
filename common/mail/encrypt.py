"""Mail to the owner encrypted to the owner's public key: S/MIME or PGP/MIME.

S/MIME: enveloped data (RFC 8551 section 3.3), ``application/pkcs7-mime; smime-type=enveloped-data``,
built with cryptography's PKCS7EnvelopeBuilder, which envelopes to RSA recipients only (key transport).
OpenPGP: PGP/MIME (RFC 3156 section 4), ``multipart/encrypted`` with the control part and the armored
message, built with pysequoia (docs/decisions.md), imported only when an OpenPGP key is configured.

The encrypted part is the whole message the sender built, its header fields included, marked
``hp="cipher"`` (RFC 9788, Header Protection for Cryptographically Protected Email, section 2.1.1) and
``protected-headers="v1"`` (the older form Thunderbird reads): a client that decrypts shows the original
Subject, From, To and Cc from inside. Outside stay the fields delivery and threading need, and a neutral
Subject ("[...]", RFC 9788's obscured value) unless the owner chose to keep the original. The payload
names each outer field in an ``HP-Outer`` field (RFC 9788 section 2.2), so a client that reads them knows
which values outside were replaced.

A forward of a public address with ``hide_correspondent`` (docs/owner.md) shows the provider no more
than that: outside, From is the public address alone (no display name: the forward's names the contact)
and the Subject is always the neutral one; its Reply-To is already an opaque thread address and its
References keyed digests (common/delivery/deliver.py).
"""

from __future__ import annotations

import email.policy
import hashlib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any

from common.aws import error_code, ssm
from common.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from common.runtime.config import OwnerAddresses

# The obscured Subject of RFC 9788 section 2.1.1 (hcp_baseline); ENCRYPTED_SUBJECT changes it.
NEUTRAL_SUBJECT = "[...]"
KEEP_SUBJECT = "original"  # ENCRYPTED_SUBJECT=original keeps the original subject outside
# Header fields the outer message keeps: delivery, threading, and what the senders add for
# RFC 3834; everything else (Content-*, MIME-Version) is the encrypted payload's own.
_OUTER = (
    "From",
    "To",
    "Cc",
    "Reply-To",
    "Date",
    "Message-ID",
    "In-Reply-To",
    "References",
    "X-Correlation-ID",
    "Auto-Submitted",
    "X-Auto-Response-Suppress",
    "Precedence",
)
# What an encrypted message's top-level Content-Type is (RFC 3156 section 4; RFC 8551 section 3.3).
ENCRYPTED_TYPES = frozenset({"multipart/encrypted", "application/pkcs7-mime", "application/x-pkcs7-mime"})
_PROBE = b"probe"
# The smallest RSA modulus accepted: NIST SP 800-131A Rev. 2 disallows RSA key transport under 2048
# bits (and SP 800-57 Part 1 gives 1024-bit RSA 80 bits of security, long broken by that measure).
MIN_RSA_BITS = 2048


def encrypted_kind(content_type: str) -> str:
    """The encryption a message's top-level Content-Type says it carries ('' for none): PGP/MIME
    (RFC 3156 section 4) or S/MIME enveloped data (RFC 8551 section 3.3; ``signed-data`` and
    ``certs-only`` are not encrypted, and a missing smime-type is read as enveloped, the common case)."""
    ctype, _, params = content_type.partition(";")
    ctype = ctype.strip().lower()
    if ctype == "multipart/encrypted":
        return "PGP/MIME (multipart/encrypted)"
    if ctype in ("application/pkcs7-mime", "application/x-pkcs7-mime"):
        smime_type = next(
            (
                p.split("=", 1)[1].strip().strip('"').lower()
                for p in params.split(";")
                if p.strip().lower().startswith("smime-type=")
            ),
            "enveloped-data",
        )
        return (
            ""
            if smime_type in ("signed-data", "certs-only")
            else f"S/MIME ({ctype}; smime-type={smime_type})"
        )
    return ""


class OwnerKeyError(ConfigError):
    """The owner's key cannot be used to encrypt: it is stopped at deploy and at start, never at send."""


@dataclass(frozen=True, slots=True)
class OwnerKey:
    kind: str  # "smime" | "pgp"
    text: str  # the PEM certificate or the armored OpenPGP public key
    fingerprint: str  # SHA-256 of the DER certificate (hex) | the OpenPGP fingerprint
    identity: str  # the certificate's subject | the key's first user id
    expires: datetime | None  # None: an OpenPGP key without expiry
    whose: str = ""  # '': the owner's; a mailbox (MAILBOX_KEYS) for an address's own mailbox's key

    def summary(self) -> dict[str, Any]:
        """What `email-handler status` shows: kind, fingerprint, identity, expiry (ISO 8601 UTC)."""
        return {
            "kind": self.kind,
            "fingerprint": self.fingerprint,
            "identity": self.identity,
            "expires": self.expires.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if self.expires else None,
        }

    def check(self, now: datetime | None = None) -> None:
        """Raise OwnerKeyError when the key has expired by ``now``."""
        now = now or datetime.now(UTC)
        if self.expires is not None and self.expires <= now:
            raise OwnerKeyError(
                f"{_whose(self.whose)} {_label(self.kind, self.whose)} key {self.fingerprint} expired on "
                f"{self.summary()['expires']}: give a current one"
            )


_LABEL = {"smime": "S/MIME (OWNER_SMIME_CERT)", "pgp": "OpenPGP (OWNER_PGP_KEY)"}


def _label(kind: str, whose: str = "") -> str:
    """How a message names the key: its variable, and the mailbox it is for."""
    if not whose:
        return _LABEL[kind]
    return f"{'S/MIME' if kind == 'smime' else 'OpenPGP'} (MAILBOX_KEYS, {whose})"


def _whose(whose: str) -> str:
    return f"mailbox {whose}'s" if whose else "the owner's"


def parse(text: str, now: datetime | None = None, whose: str = "") -> OwnerKey:
    """The owner's key (``whose``: a mailbox's own key, named in every message) from its PEM or armored
    text, checked for encryption; OwnerKeyError says why not."""
    stripped = text.strip()
    if "-----BEGIN CERTIFICATE-----" in stripped:
        key = _parse_smime(stripped, now or datetime.now(UTC), whose)
    elif "-----BEGIN PGP" in stripped:
        key = _parse_pgp(stripped, whose)
    else:
        raise OwnerKeyError(
            f"{_whose(whose)} key is neither a PEM X.509 certificate (-----BEGIN CERTIFICATE-----) "
            "nor an ASCII-armored OpenPGP public key (-----BEGIN PGP PUBLIC KEY BLOCK-----)"
        )
    key.check(now)
    return key


def _parse_smime(text: str, now: datetime, whose: str = "") -> OwnerKey:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID

    label = _label("smime", whose)
    try:
        cert = x509.load_pem_x509_certificate(text.encode())
    except ValueError as exc:
        raise OwnerKeyError(f"{label}: not a readable PEM certificate ({exc})") from None
    fingerprint = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    if cert.not_valid_before_utc > now:
        raise OwnerKeyError(
            f"{label}: certificate {fingerprint} is not valid before {cert.not_valid_before_utc:%Y-%m-%d}"
        )
    public_key = cert.public_key()
    if not isinstance(public_key, rsa.RSAPublicKey):
        # cryptography's PKCS7EnvelopeBuilder.add_recipient accepts RSA certificates only (key transport,
        # RFC 8551 section 2.3); an EC certificate would need key agreement, which it does not build.
        raise OwnerKeyError(
            f"{label}: certificate {fingerprint} has a {type(cert.public_key()).__name__.lstrip('_')} "
            "key; S/MIME encryption here needs an RSA certificate"
        )
    bits = public_key.key_size
    if bits < MIN_RSA_BITS:
        raise OwnerKeyError(
            f"{label}: certificate {fingerprint} has a {bits}-bit RSA key, too weak to protect mail "
            f"(NIST SP 800-131A disallows RSA under {MIN_RSA_BITS} bits): give a certificate with an RSA "
            f"key of {MIN_RSA_BITS} bits or more"
        )

    def extension(kind: Any) -> Any:
        try:
            return cert.extensions.get_extension_for_class(kind).value
        except x509.ExtensionNotFound:
            return None

    usage = extension(x509.KeyUsage)
    # RFC 8550 section 4.4.2: with keyUsage present, RSA key transport needs keyEncipherment.
    if usage is not None and not usage.key_encipherment:
        raise OwnerKeyError(
            f"{label}: certificate {fingerprint} cannot encrypt: its keyUsage lacks keyEncipherment "
            "(a signing-only certificate); give the owner's encryption certificate"
        )
    purposes = extension(x509.ExtendedKeyUsage)
    # RFC 8550 section 4.4.4: with extendedKeyUsage present, S/MIME needs emailProtection (or any).
    if purposes is not None and not (
        {ExtendedKeyUsageOID.EMAIL_PROTECTION, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE} & set(purposes)
    ):
        raise OwnerKeyError(
            f"{label}: certificate {fingerprint} is not for email: its extendedKeyUsage lacks emailProtection"
        )
    key = OwnerKey("smime", text, fingerprint, cert.subject.rfc4514_string(), cert.not_valid_after_utc, whose)
    try:
        _smime_envelope(key, _PROBE)
    except (ValueError, TypeError) as exc:
        raise OwnerKeyError(f"{label}: certificate {fingerprint} cannot encrypt ({exc})") from None
    return key


def _parse_pgp(text: str, whose: str = "") -> OwnerKey:
    import pysequoia

    label = _label("pgp", whose)
    if "PRIVATE KEY BLOCK" in text:
        raise OwnerKeyError(
            f"{label}: this is a secret key; give the public key only (gpg --armor --export ADDRESS)"
        )
    try:
        cert = pysequoia.Cert.from_bytes(text.encode())
    except Exception as exc:  # pysequoia raises plain Exception for a malformed key
        raise OwnerKeyError(f"{label}: not a readable OpenPGP public key ({exc})") from None
    fingerprint = str(cert.fingerprint).upper()
    try:
        # Sequoia's standard policy applies here: a key it deems too weak (RSA under 2048 bits, DSA,
        # ElGamal-1024; RSA1024 is "not considered secure since 2014") is refused on first use.
        revoked, ids, expires = cert.is_revoked, [str(u) for u in cert.user_ids], cert.expiration
    except Exception as exc:
        raise OwnerKeyError(f"{label}: key {fingerprint} is refused: {_sequoia_reason(exc)}") from None
    if revoked:
        raise OwnerKeyError(f"{label}: key {fingerprint} is revoked")
    key = OwnerKey("pgp", text, fingerprint, ids[0] if ids else "", expires, whose)
    try:
        _pgp_encrypt(key, _PROBE)
    except Exception as exc:  # no encryption-capable subkey, or one sequoia's policy refuses
        raise OwnerKeyError(f"{label}: key {fingerprint} cannot encrypt ({_sequoia_reason(exc)})") from None
    return key


def _sequoia_reason(exc: Exception) -> str:
    """Sequoia's message and its causes on one line, without the Rust backtrace it appends."""
    text = str(exc).split("Stack backtrace:")[0]
    lines = (line.strip() for line in text.splitlines())
    return "; ".join(line for line in lines if line and line != "Caused by:")


def _smime_envelope(key: OwnerKey, data: bytes) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.ciphers import algorithms
    from cryptography.hazmat.primitives.serialization import pkcs7

    cert = x509.load_pem_x509_certificate(key.text.encode())
    # AES-256-CBC: RFC 8551 section 2.7 lists AES-128 CBC as MUST and AES-256 as SHOULD+; the data is
    # already canonical MIME with CRLF (Binary keeps it byte for byte).
    return (
        pkcs7.PKCS7EnvelopeBuilder()
        .set_data(data)
        .add_recipient(cert)
        .set_content_encryption_algorithm(algorithms.AES256)
        .encrypt(serialization.Encoding.DER, [pkcs7.PKCS7Options.Binary])
    )


def _pgp_encrypt(key: OwnerKey, data: bytes) -> bytes:
    import pysequoia

    return bytes(
        pysequoia.encrypt(recipients=[pysequoia.Cert.from_bytes(key.text.encode())], bytes=data, armor=True)
    )


def encrypt(
    message: EmailMessage,
    key: OwnerKey,
    outer_subject: str = NEUTRAL_SUBJECT,
    hide_correspondent: bool = False,
) -> EmailMessage:
    """``message`` (as the sender built it) encrypted to ``key``: a new message whose only body is the
    encrypted original, header fields included. ``hide_correspondent``: the outer From is the bare
    address and the outer Subject neutral whatever ENCRYPTED_SUBJECT says (docs/owner.md)."""
    inner = message
    inner.set_param("hp", "cipher")
    inner.set_param("protected-headers", "v1")
    outer = EmailMessage(policy=message.policy)
    for name in _OUTER:
        for value in message.get_all(name) or []:
            # hidden: the public address SES sends from, without the display name naming the contact
            outer[name] = value.addresses[0].addr_spec if hide_correspondent and name == "From" else value
    if outer_subject == KEEP_SUBJECT and not hide_correspondent:
        outer["Subject"] = str(message.get("Subject", ""))
    else:  # the owner's ENCRYPTED_SUBJECT is a fixed text, never the mail's
        outer["Subject"] = (outer_subject if outer_subject != KEEP_SUBJECT else "") or NEUTRAL_SUBJECT
    for name, value in outer.items():  # RFC 9788 section 2.2: what the outer section shows
        inner["HP-Outer"] = f"{name}: {value}"
    # Canonical form (CRLF) is what RFC 8551 section 3.1.1 and RFC 3156 section 3 encrypt.
    payload = inner.as_bytes(policy=inner.policy.clone(linesep="\r\n"))
    if key.kind == "smime":
        outer.set_content(
            _smime_envelope(key, payload),
            maintype="application",
            subtype="pkcs7-mime",
            params={"smime-type": "enveloped-data", "name": "smime.p7m"},
            disposition="attachment",
            filename="smime.p7m",
        )
        return outer
    control = EmailMessage(policy=email.policy.default)
    control["Content-Type"] = "application/pgp-encrypted"
    control["Content-Description"] = "PGP/MIME version identification"
    control.set_payload("Version: 1\r\n")
    armored = EmailMessage(policy=email.policy.default)
    armored["Content-Type"] = "application/octet-stream"
    armored.set_param("name", "encrypted.asc")
    armored["Content-Description"] = "OpenPGP encrypted message"
    armored["Content-Disposition"] = "inline"
    armored.set_param("filename", "encrypted.asc", header="Content-Disposition")
    armored.set_payload(_pgp_encrypt(key, payload).decode("ascii"))
    outer["MIME-Version"] = "1.0"
    outer["Content-Type"] = "multipart/encrypted"
    outer.set_param("protocol", "application/pgp-encrypted")
    outer.set_payload([control, armored])
    return outer


def read_key_file(path: str, variable: str) -> str:
    """The key text at ``path`` (host side: `email-handler dev` and the deploy read it; the functions
    read the copy in SSM)."""
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read(64 * 1024)
    except (OSError, UnicodeDecodeError) as exc:
        raise OwnerKeyError(f"{variable}={path!r} cannot be read: {exc}") from None


def status(cfg: Any) -> dict[str, Any] | None:
    """The owner's key as the deployment holds it, for `email-handler status` (None: mail to the owner
    goes in clear): kind, fingerprint, identity and expiry, or ``problem`` when the stored key is
    missing, unreadable or expired (forward-sender then does not start, and forwards wait)."""
    if not cfg.encrypts_to_owner:
        return None
    text = cfg.owner_key
    if not text:
        try:
            text = ssm.get_parameter(cfg.owner_key_parameter)
        except Exception as exc:
            if error_code(exc) != "ParameterNotFound":
                raise
            return {
                "parameter": cfg.owner_key_parameter,
                "problem": "no key stored: deploy with OWNER_SMIME_CERT or OWNER_PGP_KEY",
            }
    try:
        return {"parameter": cfg.owner_key_parameter, **parse(text).summary()}
    except OwnerKeyError as exc:
        return {"parameter": cfg.owner_key_parameter, "problem": str(exc)}


def with_owner_key[O: OwnerAddresses](cfg: O) -> O:
    """The functions that use the owner's key (forward-sender encrypts, reply-handler verifies the
    owner's opaque-signed replies): the key from SSM at cold start, checked.
    Fails closed: with encryption configured and no usable key the function does not start, and the
    forwards wait in their queue instead of going out in clear."""

    if cfg.owner_key_parameter and not cfg.owner_key:
        try:
            cfg = replace(cfg, owner_key=ssm.get_parameter(cfg.owner_key_parameter, decrypt=False))
        except Exception as exc:
            if error_code(exc) != "ParameterNotFound":
                raise
            raise ConfigError(
                f"OWNER_KEY_PARAMETER names {cfg.owner_key_parameter}, which does not exist: "
                "deploy again with OWNER_SMIME_CERT or OWNER_PGP_KEY"
            ) from None
    if cfg.owner_key:
        parse(cfg.owner_key)
    return cfg


def with_mailbox_keys[O: OwnerAddresses](cfg: O) -> O:
    """forward-sender: each keyed mailbox's own key (KEYED_MAILBOXES) from its SSM parameter at cold start,
    checked. Fails closed as the owner's does: a keyed mailbox whose key is missing or unusable stops the
    start, and its forwards wait in their queue instead of going out in clear."""
    loaded = dict(cfg.mailbox_key_texts)
    for box in cfg.keyed_mailboxes:
        text = cfg.mailbox_key(box)
        if not text:
            name = cfg.mailbox_key_parameter(box)
            try:
                text = ssm.get_parameter(name, decrypt=False)
            except Exception as exc:
                if error_code(exc) != "ParameterNotFound":
                    raise
                raise ConfigError(
                    f"KEYED_MAILBOXES names {box}, whose key parameter {name} does not exist: deploy again "
                    "with its key in MAILBOX_KEYS"
                ) from None
        parse(text, whose=box)
        loaded[box.lower()] = text
    return replace(cfg, mailbox_key_texts=tuple(sorted(loaded.items()))) if loaded else cfg
