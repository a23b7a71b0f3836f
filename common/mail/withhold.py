"""Which attachments are withheld from a forward or a reply (pure logic; common/store/attachments.py
stores them).

A part is withheld when any reading a mail client or an unzip tool could make of it leads to a
denied file:

* its name has a denied extension (``ATTACHMENT_DENY_TYPES``) or one SES refuses to send at all
  (SES would reject the whole message);
* its bytes are a DOS/Windows executable (``MZ`` header), whatever its name or declared type:
  ``invoice.pdf`` that starts with an ``MZ`` header is withheld;
* it is a zip archive (``PK`` magic at the start, or an end-of-central-directory record near the
  end, as in a self-extracting archive or a file with junk prepended; unzip tools read both) whose
  central directory names a denied file (trailing dots and spaces dropped, as Windows does), or
  holds a ``.zip`` whose own central directory does (one level, decompressed within
  :data:`~common.mail.limits.MAX_NESTED_ARCHIVE_BYTES`), or lists more names than
  :data:`~common.mail.limits.MAX_ARCHIVE_NAMES` (nobody mails that many; not read further);
* it is a forwarded message (message/rfc822, message/global, an ``.eml``) any of whose parts would
  be withheld by these same rules (names decoded as a mail client does, RFC 2047 and 2231),
  to :data:`~common.mail.limits.MAX_MESSAGE_NESTING` levels; a deeper one, one over the parsing caps
  or one the parser gives up on cannot be checked and is withheld.

Nothing is decompressed except a nested ``.zip`` member, within the byte budget.
"""

from __future__ import annotations

import io
import zipfile
from typing import TYPE_CHECKING

from common.mail import limits
from common.mail.parse import parse
from common.mail.sanitize import extension

if TYPE_CHECKING:
    import zipfile

# SES DG, "Amazon SES unsupported attachment types": SES rejects a message carrying any of these.
SES_UNSUPPORTED = frozenset(
    (
        "ade",
        "adp",
        "app",
        "asp",
        "bas",
        "bat",
        "cer",
        "chm",
        "cmd",
        "com",
        "cpl",
        "crt",
        "csh",
        "der",
        "exe",
        "fxp",
        "gadget",
        "hlp",
        "hta",
        "inf",
        "ins",
        "isp",
        "its",
        "js",
        "jse",
        "ksh",
        "lib",
        "lnk",
        "mad",
        "maf",
        "mag",
        "mam",
        "maq",
        "mar",
        "mas",
        "mat",
        "mau",
        "mav",
        "maw",
        "mda",
        "mdb",
        "mde",
        "mdt",
        "mdw",
        "mdz",
        "msc",
        "msh",
        "msh1",
        "msh2",
        "mshxml",
        "msh1xml",
        "msh2xml",
        "msi",
        "msp",
        "mst",
        "ops",
        "pcd",
        "pif",
        "plg",
        "prf",
        "prg",
        "reg",
        "scf",
        "scr",
        "sct",
        "shb",
        "shs",
        "sys",
        "ps1",
        "ps1xml",
        "ps2",
        "ps2xml",
        "psc1",
        "psc2",
        "tmp",
        "url",
        "vb",
        "vbe",
        "vbs",
        "vps",
        "vsmacros",
        "vss",
        "vst",
        "vsw",
        "vxd",
        "ws",
        "wsc",
        "wsf",
        "wsh",
        "xnk",
    )
)
_EOCD = b"PK\x05\x06"
_CENTRAL_ENTRY = b"PK\x01\x02"
_ZIP64_LOCATOR = b"PK\x06\x07"
_EOCD_SIZE = 22
_EOCD_SEARCH = _EOCD_SIZE + 0xFFFF  # the record plus the longest archive comment
MESSAGE_TYPES = frozenset({"message/rfc822", "message/global"})


def denied_name(name: str, deny: frozenset[str]) -> str:
    """Why a file of this name is withheld ('' if it is not). Windows drops trailing dots and
    spaces, so ``setup.exe.`` runs as ``setup.exe``."""
    ext = extension(name.rstrip(". "))
    if ext in deny:
        return f"denied type .{ext}"
    if ext in SES_UNSUPPORTED:
        return f"Amazon SES does not send .{ext} files"
    return ""


def is_dos_executable(data: bytes) -> bool:
    """An ``MZ`` executable header: a PE header where ``e_lfanew`` points, or the binary DOS header
    itself (a NUL in its first 64 bytes; a text that happens to start with "MZ" has none)."""
    if data[:2] != b"MZ":
        return False
    if len(data) >= 0x40:
        offset = int.from_bytes(data[0x3C:0x40], "little")
        if data[offset : offset + 4] == b"PE\0\0":
            return True
    return b"\0" in data[2:0x40]


def _zip_entries(data: bytes) -> int | None:
    """How many entries the archive's central directory can hold, or None when there is no
    end-of-central-directory record: a zip is read from its end, so a file with anything prepended is
    still a zip to unzip tools. The count is the larger of the record's stated count and the
    ``PK\\x01\\x02`` signatures in the directory it points at (zipfile builds an entry for every one of
    those whatever the record states, so a lying count must not decide); a C-speed scan, nothing opened."""
    at = data.rfind(_EOCD, max(0, len(data) - _EOCD_SEARCH))
    if at < 0 or len(data) - at < _EOCD_SIZE:
        return None
    stated = int.from_bytes(data[at + 10 : at + 12], "little")
    size = int.from_bytes(data[at + 12 : at + 16], "little")
    # zipfile reads the directory that ends where the end record (or a zip64 end record) starts; with a
    # zip64 locator the directory's size comes from the zip64 record instead, so count everything before
    start = 0 if at >= 20 and data[at - 20 : at - 16] == _ZIP64_LOCATOR else max(0, at - size)
    return max(stated, data.count(_CENTRAL_ENTRY, start, at))


def archive_reason(data: bytes, deny: frozenset[str], nested: bool = True) -> str:
    """Why a zip archive is withheld ('' if it is not, or if ``data`` is no readable zip)."""
    entries = _zip_entries(data)
    if entries is None:
        return ""
    if entries > limits.MAX_ARCHIVE_NAMES:  # 0xFFFF: a zip64 count, also far more than anyone mails; unread
        return f"archive lists more than {limits.MAX_ARCHIVE_NAMES} files"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > limits.MAX_ARCHIVE_NAMES:
                return f"archive lists more than {limits.MAX_ARCHIVE_NAMES} files"
            for info in infos:
                member = info.filename.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
                if why := denied_name(member, deny):
                    return f"archive contains {member[:100]} ({why})"
            if nested:
                return _nested_archives(archive, infos, deny)
    # unreadable, encrypted or an unknown compression method (zipfile raises a RuntimeError subclass
    # for that): nothing cheap to see; unzip tools cannot open it either
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, RuntimeError):
        return ""
    return ""


def _nested_archives(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo], deny: frozenset[str]) -> str:
    """One level down: the central directories of the ``.zip`` members, within the byte budget."""

    budget = limits.MAX_NESTED_ARCHIVE_BYTES
    for info in infos:
        member = info.filename.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        if extension(member.rstrip(". ")) != "zip" or info.is_dir():
            continue
        if info.flag_bits & 0x1:  # encrypted: its names cannot be read without the password
            continue
        if info.file_size > budget:
            return f"archive contains {member[:100]} (an archive too large to check)"
        try:
            with archive.open(info) as stream:
                inner = stream.read(budget + 1)  # the declared size may lie: read no more than the budget
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, RuntimeError):
            continue
        if len(inner) > budget:
            return f"archive contains {member[:100]} (an archive too large to check)"
        budget -= len(inner)
        if why := archive_reason(inner, deny, nested=False):
            return f"archive contains {member[:100]} ({why})"
    return ""


def message_reason(data: bytes, deny: frozenset[str], depth: int) -> str:
    """Why a forwarded message is withheld: the first of its parts that would be ('' if none)."""
    if depth >= limits.MAX_MESSAGE_NESTING:
        return f"forwarded messages nested more than {limits.MAX_MESSAGE_NESTING} deep cannot be checked"
    if over := limits.screen(data):
        return f"forwarded message cannot be checked ({over})"
    inner = parse(data)
    if inner.parse_failed:
        return "forwarded message cannot be checked (it could not be parsed)"
    for part in inner.attachments:
        if why := withhold_reason(part.safe_name, part.content_type, part.data, deny, depth + 1):
            return f"forwarded message contains {part.safe_name[:100]} ({why})"
    return ""


def withhold_reason(name: str, content_type: str, data: bytes, deny: frozenset[str], depth: int = 0) -> str:
    """Why this part must not be forwarded ('' when it may be); ``depth``: forwarded messages around it."""
    if why := denied_name(name, deny):
        return why
    if is_dos_executable(data):
        return "Windows executable"
    if content_type.lower() in MESSAGE_TYPES:
        return message_reason(data, deny, depth)
    return archive_reason(data, deny)
