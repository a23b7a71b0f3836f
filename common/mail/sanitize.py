"""Text from strangers made safe to use: header text, file names, message ids.

Pure functions, shared by the parser (incoming), the MIME builder (outgoing) and the extractor.
"""

from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
# Bidirectional overrides and isolates reorder what a mail client shows ("\u202egpj.exe" reads as
# "exe.jpg"): a sender's display name or subject never needs them.
_BIDI = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+")
# One msg-id (RFC 5322 3.6.4) without CFWS: printable ASCII but "<", ">" and "@" on each side, and short
# enough to be written on one header line.
MESSAGE_ID = re.compile(r"<[!-;=?A-~]{1,250}@[!-;=?A-~]{1,250}>")


def clean_header_text(value: object, limit: int = 998) -> str:
    """One line of printable text: CR, LF and other controls become spaces (no header injection)."""
    return re.sub(r"\s+", " ", _CONTROL.sub(" ", _BIDI.sub("", str(value or "")))).strip()[:limit]


def is_message_id(value: str) -> bool:
    return MESSAGE_ID.fullmatch(value or "") is not None


def safe_filename(name: str, fallback: str = "attachment") -> str:
    """A file name that is safe as the last segment of an S3 key and on any disk."""
    name = unicodedata.normalize("NFKC", name or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[^\w .()+,=@-]", "_", _CONTROL.sub("", name))  # letters of any script stay
    name = re.sub(r"\s+", " ", name).strip(" .")
    if not name or set(name) <= {"_", "."}:
        name = fallback
    return shorten_keep_extension(name, 120)


# C0 and C1 controls, DEL and the Unicode line and paragraph separators: a file name that holds one
# can break a header line or a client's file dialog.
_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# The last path segment (RFC 2183 2.3: a receiving agent never uses the path of a suggested name).
_PATH = re.compile(r"[/\\]")
FILENAME_CHARS = 255  # docs/inbound.md: long names are cut to this, keeping the extension


def display_filename(name: str, fallback: str = "attachment") -> str:
    """An attachment's name as the sender wrote it, made safe to show and to save, and nothing more:
    controls become a space, bidirectional overrides are dropped ("\u202egpj.exe" shows as
    "exe.jpg"), only the last path segment is kept, and a name over 255 characters is cut keeping
    its extension. Letters, symbols, spacing and case are kept (``nyan cat ✔.gif`` stays as it is)."""
    name = _NAME_CONTROL.sub(" ", _BIDI.sub("", name or ""))
    name = next((s for s in reversed(_PATH.split(name)) if s.strip(" .")), "")
    return shorten_keep_extension(name.strip(), FILENAME_CHARS) if name.strip() else fallback


def shorten_keep_extension(name: str, limit: int) -> str:
    """``name`` cut to ``limit`` characters, keeping a short extension (``….pdf``)."""
    if len(name) <= limit:
        return name
    stem, dot, ext = name.rpartition(".")
    if dot and stem and 0 < len(ext) <= 10:
        return stem[: limit - len(ext) - 1].rstrip() + "." + ext
    return name[:limit]


def extension(name: str) -> str:
    return name.rpartition(".")[2].lower() if "." in name else ""
