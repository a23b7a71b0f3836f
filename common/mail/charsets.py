"""Bytes from strangers to text: the declared charset when it decodes, else what does.

Mail often lies about its charset (Outlook labels cp1252 as iso-8859-1, Chinese mail labels GBK
as gb2312, 8-bit bytes arrive under "us-ascii" or no label at all). Like the WHATWG Encoding
Standard that browsers follow, a label is read as its common superset (iso-8859-1 -> cp1252,
gb2312/gbk -> gb18030, shift_jis -> cp932, euc-kr -> cp949), and when the bytes do not decode
strictly under it the fallbacks are tried in a fixed order. Nothing here raises, and nothing
returns lone surrogates.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Buffer, Callable

ISO2022_JP_MS = "seh-iso2022-jp-ms"  # registered below
# Label (as codecs normalises it) -> the codecs tried in order. WHATWG maps these labels to the
# superset because real mail under the label uses the superset's extra characters.
_SUPERSETS: dict[str, tuple[str, ...]] = {
    "ascii": ("ascii",),  # 8-bit bytes under us-ascii fall through to UTF-8, then cp1252
    "iso8859-1": ("cp1252", "latin-1"),
    "iso8859-9": ("cp1254", "iso8859-9"),
    "iso8859-11": ("cp874",),
    "tis-620": ("cp874",),
    "gb2312": ("gb18030",),
    "gbk": ("gb18030",),
    "gb18030": ("gb18030",),
    "big5": ("big5hkscs", "cp950"),
    "shift_jis": ("cp932", "shift_jis_2004"),
    "euc_jp": ("euc_jp", "euc_jis_2004", "cp932"),
    "iso2022_jp": ("iso2022_jp", "iso2022_jp_ext", ISO2022_JP_MS, "iso2022_jp_2004", "iso2022_jp_3"),
    "euc_kr": ("cp949",),
}
# Labels codecs does not know, as mail clients write them.
_EXTRA_LABELS = {
    "x-sjis": "shift_jis",
    "windows-31j": "cp932",
    "x-gbk": "gbk",
    "windows-874": "cp874",
    "x-mac-roman": "mac-roman",
    "iso-8859-8-i": "iso8859-8",
    "iso-8859-6-i": "iso8859-6",
    "x-euc-jp": "euc_jp",
    "ks_c_5601": "euc_kr",
    "ucs-2": "utf-16",
    "iso-10646-ucs-2": "utf-16",
    "x-unicode-2-0-utf-7": "utf-7",
    "cp-850": "cp850",
}
_CHINESE = frozenset({"gb18030", "big5hkscs", "cp950"})
# WHATWG's windows-1252 decoder: cp1252 for 0x80-0x9F, and the five bytes cp1252 leaves undefined
# (0x81, 0x8D, 0x8F, 0x90, 0x9D) as the C1 controls of the same number, as Latin-1 reads them. It
# decodes every byte string, so the last resort never has to turn a byte into U+FFFD.
_WINDOWS_1252 = {
    b: bytes([b]).decode("cp1252") for b in range(0x80, 0xA0) if b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def codecs_for(label: str | None) -> tuple[str, ...]:
    """The codecs to try for a declared charset label ('' or unknown: none)."""
    name = (label or "").strip().strip("\"'").lower()
    if not name:
        return ()
    name = _EXTRA_LABELS.get(name, name)
    try:
        canonical = codecs.lookup(name).name
    except LookupError:
        try:
            canonical = codecs.lookup(name.removeprefix("x-")).name
        except LookupError:
            return ()
    if canonical in ("utf-16", "utf-32") or canonical.startswith(("utf-16", "utf-32")):
        return (canonical,)
    return _SUPERSETS.get(canonical, (canonical,))


def _fallbacks(data: bytes, preferred: tuple[str, ...]) -> tuple[str, ...]:
    """UTF-8, then cp1252 or gb18030: Chinese text comes in pairs of high bytes, while Latin text
    has its accented letters (single high bytes) between ASCII letters."""
    sample = data[:4096]
    high = paired = 0
    for i, b in enumerate(sample):
        if b >= 0x80:
            high += 1
            paired += (i > 0 and sample[i - 1] >= 0x80) or (i + 1 < len(sample) and sample[i + 1] >= 0x80)
    cjk_first = any(c in _CHINESE for c in preferred) or (high >= 2 and paired * 10 >= high * 8)
    return ("utf-8", "gb18030", "cp1252") if cjk_first else ("utf-8", "cp1252", "gb18030")


def decode(
    data: bytes, declared: str | None = None, hints: tuple[str, ...] = (), partial_utf8: bool = False
) -> str:
    """``data`` as text: the declared charset, then each hint (charset labels), then the fallbacks.
    ``partial_utf8``: UTF-8 with a few broken sequences (a name cut mid-character) is read as UTF-8,
    each broken sequence one U+FFFD, rather than the whole under cp1252 (:func:`broken_utf8`)."""
    candidates = _candidates(data, (declared or "", *hints))
    for codec in candidates:
        try:
            return scrub(data.decode(codec))
        except (UnicodeDecodeError, LookupError):
            if partial_utf8 and codec == "utf-8" and _partly_utf8(data, (declared or "", *hints)):
                return scrub(data.decode("utf-8", "replace"))
            continue
    # Only reachable when every codec failed (8-bit bytes that are not UTF-8, cp1252 or gb18030: binary
    # data under a text type, or text cut mid-character): each byte stays one character, none U+FFFD.
    return windows_1252(data)


def broken_utf8(data: bytes) -> str | None:
    """``data`` read as UTF-8 with each broken sequence replaced by one U+FFFD (as the stdlib's
    "replace" does), when it is UTF-8 text with a few broken sequences: at least as many well-formed
    multi-byte characters as broken sequences. None otherwise (cp1252 or another charset's bytes
    almost never form a well-formed UTF-8 sequence)."""
    text = data.decode("utf-8", "replace")
    broken = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")  # a U+FFFD the sender wrote is no break
    well_formed = sum(1 for ch in text if ch > "\x7f") - text.count("\ufffd")
    return scrub(text) if 0 < broken <= well_formed else None


@functools.cache
def _single_byte(codec: str) -> bool:
    return len(bytes(range(256)).decode(codec, "replace")) == 256


def _partly_utf8(data: bytes, labels: tuple[str, ...]) -> bool:
    """Whether ``data`` is UTF-8 with a few broken sequences (:func:`broken_utf8`) and no multi-byte
    charset among ``labels`` reads it whole (Shift_JIS pairs can look like UTF-8 by chance; a
    single-byte label reads any bytes, so it is no evidence against UTF-8)."""
    if _decodes(data, "utf-8") or broken_utf8(data) is None:
        return False
    labelled = [c for label in labels for c in codecs_for(label) if c != "utf-8"]
    return not any(not _single_byte(c) and _decodes(data, c) for c in labelled)


def windows_1252(data: bytes) -> str:
    """``data`` under WHATWG's windows-1252, which has a character for every byte."""
    return data.decode("latin-1").translate(_WINDOWS_1252)


# ISO-2022-JP as Windows writes it (CP50220/50221, and WHATWG's decoder): the JIS X 0208 sections
# may hold NEC's row 13 (①, №, ㈱) and the IBM extensions, which Python's iso2022_jp codecs refuse,
# so Japanese mail from Outlook fell through to UTF-8 and reached the owner as "$B$3$s(B".
# The stdlib's iso2022_jp_ext codec still does the decoding at C speed (escapes, JIS X 0201 katakana,
# line breaks, its JIS state across all of them); an error handler reads only each pair it refuses,
# as the Shift_JIS pair it maps to, under cp932, which has those characters. Any other refusal goes
# to the ``errors`` the caller asked for.
_JIS_CP932 = (
    "seh-jis-cp932"  # the handlers registered below: this name under "strict", else "<name>-<errors>"
)
_JIS_PAIRS: dict[bytes, str] = {}  # refused pairs met so far -> their cp932 character (a few hundred at most)


def _jis_pair_as_cp932(e: UnicodeError) -> tuple[str, int] | None:
    if not isinstance(e, UnicodeDecodeError) or e.end - e.start != 2:
        return None
    pair = bytes(e.object[e.start : e.end])
    text = _JIS_PAIRS.get(pair)
    if text is None:
        j1, j2 = pair
        if not (0x21 <= j1 <= 0x7E and 0x21 <= j2 <= 0x7E):
            return None
        sjis = bytes(
            (((j1 + 1) >> 1) + (0x70 if j1 < 0x5F else 0xB0), j2 + (0x1F + (j2 >= 0x60) if j1 & 1 else 0x7E))
        )
        try:
            text = sjis.decode("cp932")
        except UnicodeDecodeError:
            return None
        _JIS_PAIRS[pair] = text
    return text, e.end


def _jis_handler(errors: str) -> str:
    """The name of the registered handler that maps refused pairs and does what ``errors`` does otherwise."""
    name = _JIS_CP932 if errors == "strict" else f"{_JIS_CP932}-{errors}"
    try:
        codecs.lookup_error(name)
    except LookupError:
        otherwise = codecs.lookup_error(errors)  # an unknown ``errors`` raises LookupError, as with any codec

        def handle(e: UnicodeError) -> tuple[str | bytes, int]:
            return _jis_pair_as_cp932(e) or otherwise(e)

        codecs.register_error(name, handle)
    return name


def _decode_iso2022_jp_ms(buffer: Buffer, errors: str = "strict", /) -> tuple[str, int]:
    # Looked up here, not at import: the codec loads three extension modules (the CJK codecs), a few ms
    # of every cold start, for the rare mail in this charset (codecs.lookup caches it after the first).
    return codecs.lookup("iso2022_jp_ext").decode(buffer, _jis_handler(errors))


def _search(name: str) -> codecs.CodecInfo | None:
    if name.replace("_", "-") != ISO2022_JP_MS:
        return None

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        raise UnicodeError(f"{ISO2022_JP_MS} only decodes")

    return codecs.CodecInfo(encode, _decode_iso2022_jp_ms, name=ISO2022_JP_MS)


codecs.register(_search)


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def repair(text: str, hints: tuple[str, ...] = ()) -> str:
    """Text whose undecodable bytes the stdlib kept as lone surrogates (``surrogateescape``): the
    bytes decoded as UTF-8, else under the hints (the body's charset), else cp1252."""
    if not has_surrogates(text):
        return text
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that did not come from surrogateescape
        return scrub(text)
    return decode(data, "utf-8", hints)


def repairer(context: str, hints: tuple[str, ...] = (), partial_utf8: bool = False) -> Callable[[str], str]:
    """A :func:`repair` for the pieces of ``context`` (a header value being tokenised): the codec
    is chosen once from all of the value's 8-bit bytes, so short pieces are not guessed alone.
    ``partial_utf8``: UTF-8 with a few broken sequences stays UTF-8 (:func:`broken_utf8`)."""
    if not has_surrogates(context):
        return scrub
    data = context.encode("utf-8", "surrogateescape")
    if partial_utf8 and _partly_utf8(data, hints):
        return lambda piece: scrub(piece.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    codec = next((c for c in _candidates(data, ("utf-8", *hints)) if _decodes(data, c)), "cp1252")

    def fix(piece: str) -> str:
        if not has_surrogates(piece):
            return piece
        raw = piece.encode("utf-8", "surrogateescape")
        return scrub(raw.decode(codec)) if _decodes(raw, codec) else decode(raw, "utf-8", hints)

    return fix


def _candidates(data: bytes, labels: tuple[str, ...]) -> list[str]:
    tried: list[str] = []
    for label in labels:
        tried += [c for c in codecs_for(label) if c not in tried]
    return tried + [c for c in _fallbacks(data, tuple(tried)) if c not in tried]


def _decodes(data: bytes, codec: str) -> bool:
    try:
        data.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def scrub(text: str) -> str:
    """No lone surrogates leave this module (DynamoDB, JSON and S3 metadata refuse them)."""
    return _SURROGATE.sub("\ufffd", text) if has_surrogates(text) else text


def well_formed(text: str) -> str:
    """``text`` as UTF-8 can store it: a surrogate pair becomes the character it encodes, a lone
    surrogate U+FFFD. A PDF's ToUnicode map may send a glyph to any UTF-16 value, U+D800 included,
    and pypdf returns what the map says; S3, JSON and the log need well-formed Unicode."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
