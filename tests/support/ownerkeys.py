"""The owner's keys the tests make for themselves: X.509 certificates (cryptography) and OpenPGP keys
(pysequoia), usable ones and ones that must be refused, with what decrypts mail encrypted to them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = dt.datetime.now(dt.UTC)


@dataclass
class SmimeOwner:
    pem: str
    cert: x509.Certificate
    private_key: Any

    def decrypt(self, raw: bytes) -> EmailMessage:
        """The message inside an application/pkcs7-mime enveloped-data mail (``raw``, as sent)."""
        outer = message_from_bytes(raw, policy=policy.default)
        assert outer.get_content_type() == "application/pkcs7-mime", outer.get_content_type()
        assert outer.get_param("smime-type") == "enveloped-data"
        der = outer.get_payload(decode=True)
        assert isinstance(der, bytes)
        plain = pkcs7.pkcs7_decrypt_der(der, self.cert, self.private_key, [])
        return message_from_bytes(plain, policy=policy.default)


def smime_owner(
    *,
    not_after: dt.datetime | None = None,
    key_usage: x509.KeyUsage | None = None,
    purposes: list[x509.ObjectIdentifier] | None = None,
    curve: bool = False,
    key_size: int = 2048,
) -> SmimeOwner:
    """A self-signed certificate for owner@example.net (default: RSA, valid 30 days, keyEncipherment)."""
    key: Any = (
        ec.generate_private_key(ec.SECP256R1())
        if curve
        else rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    )
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "Owner"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "owner@example.net"),
        ]
    )
    not_after = not_after or NOW + dt.timedelta(days=30)
    usage = key_usage or x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(min(NOW, not_after) - dt.timedelta(days=60))
        .not_valid_after(not_after)
        .add_extension(usage, critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(purposes or [ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False
        )
    )
    cert = builder.sign(key, hashes.SHA256())
    return SmimeOwner(cert.public_bytes(serialization.Encoding.PEM).decode(), cert, key)


def signing_only() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=True,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


@dataclass
class PgpOwner:
    armored: str  # the public key, as the owner exports it
    tsk: Any  # pysequoia.Tsk: the secret key, to decrypt

    def decrypt(self, raw: bytes) -> EmailMessage:
        """The message inside a multipart/encrypted (PGP/MIME) mail."""
        import pysequoia

        outer = message_from_bytes(raw, policy=policy.default)
        assert outer.get_content_type() == "multipart/encrypted", outer.get_content_type()
        assert outer.get_param("protocol") == "application/pgp-encrypted"
        parts = outer.get_payload()
        assert isinstance(parts, list)
        control, data = parts
        assert isinstance(control, Message) and isinstance(data, Message)
        armored = data.get_payload()
        assert isinstance(armored, str)
        assert (
            control.get_content_type() == "application/pgp-encrypted"
            and "Version: 1" in control.get_payload()
        )
        plain = pysequoia.decrypt(decryptor=self.tsk.decryptor(), bytes=armored.encode()).bytes
        return message_from_bytes(plain, policy=policy.default)


def pgp_owner(validity_seconds: int | None = None) -> PgpOwner:
    import pysequoia

    tsk = pysequoia.Tsk.generate("Owner <owner@example.net>", validity_seconds=validity_seconds)
    return PgpOwner(str(tsk.extract_certificate()), tsk)


def body_text(message: EmailMessage) -> str:
    """Every text part of ``message``, decoded, joined."""
    return "\n".join(
        str(part.get_content()) for part in message.walk() if part.get_content_maintype() == "text"
    )
