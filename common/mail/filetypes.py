"""An attachment's content type from its file name and its first bytes, never from the sender's claim.

``mismatch.pdf`` declared ``text/html`` is stored and forwarded as ``application/pdf`` when it
starts with ``%PDF-``, and as ``application/octet-stream`` when it does not; ``svg.png`` (SVG
text under a PNG name) becomes ``application/octet-stream``, never ``image/svg+xml``. Active
content (HTML, SVG, scripts, executables) is never given a type a client would render or run.
The structural MIME types of forwarded messages and signatures (message/*, S/MIME, PGP) are
protocol markers rather than claims about a file, so they keep their declared type.
"""

from __future__ import annotations

import re

from common.mail.sanitize import extension

OCTET = "application/octet-stream"
_OOXML = "application/vnd.openxmlformats-officedocument"
# extension -> (type, family of magic bytes it must have; "" = textual, no magic)
BY_EXTENSION: dict[str, tuple[str, str]] = {
    "pdf": ("application/pdf", "pdf"),
    "png": ("image/png", "png"),
    "jpg": ("image/jpeg", "jpeg"),
    "jpeg": ("image/jpeg", "jpeg"),
    "gif": ("image/gif", "gif"),
    "webp": ("image/webp", "webp"),
    "bmp": ("image/bmp", "bmp"),
    "tif": ("image/tiff", "tiff"),
    "tiff": ("image/tiff", "tiff"),
    "heic": ("image/heic", "heic"),
    "docx": (f"{_OOXML}.wordprocessingml.document", "zip"),
    "xlsx": (f"{_OOXML}.spreadsheetml.sheet", "zip"),
    "pptx": (f"{_OOXML}.presentationml.presentation", "zip"),
    "odt": ("application/vnd.oasis.opendocument.text", "zip"),
    "ods": ("application/vnd.oasis.opendocument.spreadsheet", "zip"),
    "zip": ("application/zip", "zip"),
    "doc": ("application/msword", "ole"),
    "xls": ("application/vnd.ms-excel", "ole"),
    "ppt": ("application/vnd.ms-powerpoint", "ole"),
    "msg": ("application/vnd.ms-outlook", "ole"),
    "gz": ("application/gzip", "gzip"),
    "7z": ("application/x-7z-compressed", "7z"),
    "rtf": ("application/rtf", "rtf"),
    "mp3": ("audio/mpeg", "mp3"),
    "mp4": ("video/mp4", "mp4"),
    "txt": ("text/plain", ""),
    "csv": ("text/csv", ""),
    "ics": ("text/calendar", ""),
    "vcf": ("text/vcard", ""),
    "eml": ("message/rfc822", ""),
    "json": ("application/json", ""),
    "md": ("text/markdown", ""),
    "xml": ("application/xml", ""),
}
# family -> the type a file of that family gets when its name says nothing (or lies)
FAMILY_TYPES = {
    "pdf": "application/pdf",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "tiff": "image/tiff",
    "heic": "image/heic",
    "zip": "application/zip",
    "ole": "application/x-ole-storage",
    "gzip": "application/gzip",
    "7z": "application/x-7z-compressed",
    "rtf": "application/rtf",
    "mp3": "audio/mpeg",
    "mp4": "video/mp4",
}
ACTIVE = frozenset({"html", "svg", "executable", "script"})
# Signed and encrypted parts: kept byte for byte, never converted (their bytes are what is signed).
CRYPTO = frozenset(
    {
        "application/pkcs7-mime",
        "application/x-pkcs7-mime",
        "application/pkcs7-signature",
        "application/x-pkcs7-signature",
        "application/pgp-encrypted",
        "application/pgp-signature",
        "application/pgp-keys",
    }
)
STRUCTURAL = (
    frozenset(
        {
            "message/rfc822",
            "message/partial",
            "message/external-body",
            "message/delivery-status",
            "message/disposition-notification",
            "message/global",
            "message/global-headers",
            "text/rfc822-headers",
        }
    )
    | CRYPTO
)
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"\xd0\xcf\x11\xe0", "ole"),
    (b"\x1f\x8b", "gzip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"{\\rtf", "rtf"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"MZ", "executable"),
    (b"\x7fELF", "executable"),
    (b"\xcf\xfa\xed\xfe", "executable"),
    (b"#!", "script"),
    (b"ID3", "mp3"),
    (b"BM", "bmp"),
)


def sniff(data: bytes) -> str:
    """The family the first bytes show ('' when they show none): pdf, png, zip, html, svg …"""
    head = data[:512]
    for magic, family in _MAGIC:
        if head.startswith(magic):
            return family
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[4:8] == b"ftyp":
        return "heic" if head[8:12] in (b"heic", b"heix", b"mif1", b"msf1") else "mp4"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<script", b"<iframe")):
        return "html"
    if b"<svg" in head.lower() and text.startswith((b"<svg", b"<?xml", b"<!doctype svg", b"<!--")):
        return "svg"
    return ""


def _textual(data: bytes) -> bool:
    return b"\x00" not in data[:4096]


def content_type(filename: str, data: bytes, declared: str = "") -> str:
    """The type to store and forward ``data`` under (see the module docstring)."""
    declared = declared.lower()
    if declared in STRUCTURAL or declared.startswith("message/"):
        return declared
    family = sniff(data)
    by_name = BY_EXTENSION.get(extension(filename))
    if by_name:
        ctype, wanted = by_name
        if family == wanted or (wanted == "" and not family and _textual(data)):
            return ctype
    if family in ACTIVE or not family:
        return OCTET
    return FAMILY_TYPES.get(family, OCTET)


def default_extension(ctype: str) -> str:
    """A file extension for a part that has no name (by its derived type)."""
    for ext, (by_name, _) in BY_EXTENSION.items():
        if by_name == ctype:
            return ext
    if ctype.startswith("message/"):
        return "eml" if ctype in ("message/rfc822", "message/global") else "txt"
    known = {
        "text/html": "html",
        "text/enriched": "txt",
        "text/rfc822-headers": "txt",
        "application/x-ole-storage": "ole",
    }
    subtype = re.sub(r"[^a-z0-9.+-]", "", ctype.rpartition("/")[2].lower())[:20]
    return known.get(ctype) or subtype or "bin"
