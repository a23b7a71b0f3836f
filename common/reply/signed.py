"""Opaque-signed S/MIME replies (``application/pkcs7-mime; smime-type=signed-data``, RFC 8551
section 3.5.2): the signed MIME entity is inside the CMS structure, so nothing of the owner's text can
be read until it is taken out. docs/owner.md tells the owner to answer "in clear or signed"; a client
set to opaque signing sends this shape.

:func:`unwrap` takes the content out of the CMS SignedData (RFC 5652 section 5) and, when the owner's
certificate is configured (OWNER_SMIME_CERT, common.mail.encrypt), verifies a signature over it with
that certificate's key: the message digest attribute against the content, then the signature over
the signed attributes. ``cryptography`` builds and decrypts CMS but does not verify it, so the few
fields needed are read here with a small BER reader (definite and indefinite lengths, constructed
OCTET STRINGs, a nesting and size cap), no regular expression.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from email import message_from_bytes
from email import policy as email_policy

from common.errors import EmailHandlerError
from common.mail import parse
from common.mail.parse import ParsedMail
from common.reply.auth import UnreadableReplyError

MAX_DEPTH = 32  # CMS nests a handful of levels; anything deeper is not a signature
SIGNED_DATA = "1.2.840.113549.1.7.2"
MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
_DIGESTS = {
    "1.3.14.3.2.26": "sha1",
    "2.16.840.1.101.3.4.2.1": "sha256",
    "2.16.840.1.101.3.4.2.2": "sha384",
    "2.16.840.1.101.3.4.2.3": "sha512",
    "2.16.840.1.101.3.4.2.4": "sha224",
}


class SignedDataError(EmailHandlerError):
    """The structure cannot be read, or its signature does not verify; ``str(exc)`` says which."""


@dataclass(frozen=True, slots=True)
class _Node:
    tag: int  # the identifier octet (class, constructed bit, number < 31)
    head: int  # the identifier octet's position
    start: int  # first content octet
    end: int  # one past the last content octet
    after: int  # one past the element (after an end-of-contents pair for an indefinite length)
    children: tuple[_Node, ...]

    @property
    def constructed(self) -> bool:
        return bool(self.tag & 0x20)


def _read(data: bytes, pos: int, depth: int = 0) -> _Node:
    if depth > MAX_DEPTH:
        raise SignedDataError("CMS structure nested too deeply")
    if pos + 2 > len(data):
        raise SignedDataError("CMS structure truncated")
    tag, head = data[pos], pos
    if tag & 0x1F == 0x1F:
        raise SignedDataError("CMS structure uses a high tag number")
    first, pos = data[pos + 1], pos + 2
    if first == 0x80:  # indefinite length: children up to an end-of-contents pair
        if not tag & 0x20:
            raise SignedDataError("indefinite length on a primitive element")
        children: list[_Node] = []
        start = pos
        while True:
            if pos + 2 > len(data):
                raise SignedDataError("CMS structure truncated")
            if data[pos] == 0 and data[pos + 1] == 0:
                return _Node(tag, head, start, pos, pos + 2, tuple(children))
            child = _read(data, pos, depth + 1)
            children.append(child)
            pos = child.after
    if first & 0x80:
        count = first & 0x7F
        if count > 4 or pos + count > len(data):
            raise SignedDataError("CMS length out of range")
        length, pos = int.from_bytes(data[pos : pos + count], "big"), pos + count
    else:
        length = first
    end = pos + length
    if end > len(data):
        raise SignedDataError("CMS structure truncated")
    kids: list[_Node] = []
    if tag & 0x20:
        at = pos
        while at < end:
            kids.append(_read(data, at, depth + 1))
            at = kids[-1].after
        if at != end:
            raise SignedDataError("CMS element overruns its parent")
    return _Node(tag, head, pos, end, end, tuple(kids))


def _oid(data: bytes, node: _Node) -> str:
    if node.tag != 0x06 or node.end == node.start:
        raise SignedDataError("expected an object identifier")
    raw = data[node.start : node.end]
    parts = [raw[0] // 40 if raw[0] < 80 else 2, raw[0] % 40 if raw[0] < 80 else raw[0] - 80]
    value = 0
    for byte in raw[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _octets(data: bytes, node: _Node) -> bytes:
    """An OCTET STRING's value, primitive or constructed of chunks (BER, as some clients write it)."""
    if node.tag == 0x04:
        return data[node.start : node.end]
    if node.tag == 0x24:
        return b"".join(_octets(data, c) for c in node.children)
    raise SignedDataError("expected an octet string")


def _child(node: _Node, index: int) -> _Node:
    if index >= len(node.children):
        raise SignedDataError("CMS element is missing a field")
    return node.children[index]


@dataclass(frozen=True, slots=True)
class Unwrapped:
    content: bytes  # the signed MIME entity
    verified: bool  # True: a signature verified against the owner's certificate


def unwrap(der: bytes, certificate_pem: str = "") -> Unwrapped:
    """The MIME entity inside an opaque-signed S/MIME body. With ``certificate_pem`` (the owner's
    certificate) a signer must verify against it, else :class:`SignedDataError`."""
    root = _read(der, 0)
    if root.tag != 0x30 or _oid(der, _child(root, 0)) != SIGNED_DATA:
        raise SignedDataError("not a CMS SignedData structure")
    signed = _child(_child(root, 1), 0)
    if signed.tag != 0x30:
        raise SignedDataError("not a CMS SignedData structure")
    encap = _child(signed, 2)
    if encap.tag != 0x30 or len(encap.children) < 2:
        raise SignedDataError("the signature carries no content (a detached signature)")
    content = _octets(der, _child(_child(encap, 1), 0))
    if not certificate_pem:
        return Unwrapped(content, False)
    signer_infos = signed.children[-1]
    if signer_infos.tag != 0x31:
        raise SignedDataError("no signer information")
    for info in signer_infos.children:
        if _verifies(der, info, content, certificate_pem):
            return Unwrapped(content, True)
    raise SignedDataError("the signature does not verify against the owner's certificate (OWNER_SMIME_CERT)")


def _verifies(der: bytes, info: _Node, content: bytes, certificate_pem: str) -> bool:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

    fields = list(info.children)
    if len(fields) < 5:
        return False
    digest_name = _DIGESTS.get(_oid(der, _child(fields[2], 0)))
    if digest_name is None:
        return False
    attrs = fields[3] if fields[3].tag == 0xA0 else None
    signature = _octets(der, fields[5] if attrs is not None else fields[4])
    if attrs is not None:
        digest = next(
            (
                _octets(der, _child(_child(a, 1), 0))
                for a in attrs.children
                if a.tag == 0x30 and _oid(der, _child(a, 0)) == MESSAGE_DIGEST
            ),
            None,
        )
        if digest != hashlib.new(digest_name, content).digest():
            return False
        # The signature covers the DER of the attributes as a SET OF (RFC 5652 section 5.4).
        data = b"\x31" + der[attrs.head + 1 : attrs.end]
    else:
        data = content
    algorithm = {
        "sha1": hashes.SHA1(),
        "sha224": hashes.SHA224(),
        "sha256": hashes.SHA256(),
        "sha384": hashes.SHA384(),
        "sha512": hashes.SHA512(),
    }[digest_name]
    key = x509.load_pem_x509_certificate(certificate_pem.encode()).public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, data, padding.PKCS1v15(), algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, data, ec.ECDSA(algorithm))
        else:
            return False
    except InvalidSignature:
        return False
    return True


def is_pkcs7(content_type: str) -> bool:
    """An S/MIME body whose structure is CMS: opaque-signed or encrypted (RFC 8551 section 3.2)."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    return ctype in ("application/pkcs7-mime", "application/x-pkcs7-mime")


_ENTITY_FIELDS = (b"content-type", b"content-transfer-encoding", b"content-disposition", b"mime-version")


def open_reply(raw: bytes, owner_key: str) -> ParsedMail:
    """The reply with its opaque-signed body replaced by the entity it signs (headers kept: the
    authenticated From, Subject, Message-ID and Date stay what SES and DKIM saw). An encrypted body is
    returned as it is (the caller refuses it); a signature that cannot be read or does not verify
    against the owner's certificate raises UnreadableReplyError."""

    message = message_from_bytes(raw, policy=email_policy.compat32)
    der = message.get_payload(decode=True)
    if not isinstance(der, bytes) or not _is_signed_data(der):
        return parse.parse(raw)  # enveloped-data (or unreadable): refused by the caller as encrypted
    certificate = owner_key if "BEGIN CERTIFICATE" in owner_key else ""
    try:
        inner = unwrap(der, certificate)
    except SignedDataError as exc:
        raise UnreadableReplyError(
            f"the reply is S/MIME opaque-signed and {exc}",
            "Send it again signed as usual (a detached signature, multipart/signed) or unsigned.",
        ) from None
    return parse.parse(_headers_without_entity(raw) + inner.content)


def _is_signed_data(der: bytes) -> bool:
    try:
        root = _read(der, 0)
        return root.tag == 0x30 and _oid(der, _child(root, 0)) == SIGNED_DATA
    except SignedDataError:
        return False


def _headers_without_entity(raw: bytes) -> bytes:
    """The reply's header block (unfolded fields kept whole) without the fields describing its body."""
    end = min((i for i in (raw.find(b"\r\n\r\n"), raw.find(b"\n\n")) if i >= 0), default=len(raw))
    kept: list[bytes] = []
    keep = True
    for line in raw[:end].splitlines():
        if line[:1] in (b" ", b"\t"):
            if keep:
                kept.append(line)
            continue
        keep = line.split(b":", 1)[0].strip().lower() not in _ENTITY_FIELDS
        if keep:
            kept.append(line)
    return b"\r\n".join([*kept, b"MIME-Version: 1.0", b""])
