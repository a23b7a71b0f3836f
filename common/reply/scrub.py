"""Hide the owner's private addresses in anything that goes out to a contact.

A plain case-insensitive replace misses what mail clients and browsers still show or resolve as the
same mailbox: sub-addresses (``owner+jobs@``), percent-encoding (``owner%40…`` in a mailto: link,
or any single character as ``%6F``), HTML character references (``owner&#64;…``, ``&#x40;``,
``&commat;``, any letter as ``&#111;``), the full-width at sign, and, for Gmail, dots in the local
part (``o.wner@gmail.com`` is the same inbox). Each private address becomes one regular expression
that accepts every such spelling of every character; matches are replaced by the public address.
"""

from __future__ import annotations

import functools
import itertools
import re

_GMAIL = {"gmail.com", "googlemail.com"}
# A sub-address tag: at most MAX_TAG_CHARS characters (a local part has at most 64, each one may be
# spelt %HH or as a character reference). Every item starts with its own character and a
# character reference is one atomic item, so a tag splits into items one way only: a failed match
# backtracks over at most MAX_TAG_CHARS item ends. (With "&#x?[0-9a-fA-F]+;?" free to split "&#aaa"
# between the reference and the next items, "owner+" + "&#aaa" * 16 + "!" took 52 s.)
MAX_TAG_CHARS = 256
_TAG = rf"(?:[A-Za-z0-9._=-]|%[0-9a-fA-F]{{2}}|(?>&#[xX]?[0-9a-fA-F]{{1,8}};?)){{0,{MAX_TAG_CHARS}}}"
_AT_EXTRA = ("&commat;", "\uff20", "\ufe6b")
_DOT_EXTRA = ("&period;",)


def _hex(code: int, width: int = 2) -> str:
    """``code`` in hex, each letter digit as a [xX] class (the pattern is case-sensitive on purpose)."""
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:0{width}x}")


def _char(c: str) -> str:
    """Every spelling of one character: itself (either case), %HH, &#DDD; and &#xHH; (leading zeros,
    ';' optional).

    Case is spelt out in the pattern instead of using re.IGNORECASE: with IGNORECASE, CPython's
    engine took milliseconds per near-miss ("owner%40example.ne"), seconds on a 1 MB reply."""
    forms = sorted({c.lower(), c.upper()})
    alternatives = [re.escape(f) for f in forms]
    for f in forms:
        code = ord(f)
        alternatives += [f"%{_hex(code)}", f"&#0*{code};?", f"&#[xX]0*{_hex(code, 1)};?"]
    if c == "@":
        alternatives += [re.escape(a) for a in _AT_EXTRA]
    if c == ".":
        alternatives += [re.escape(a) for a in _DOT_EXTRA]
    return "(?:" + "|".join(alternatives) + ")"


def _address_pattern(address: str) -> str:
    local, _, domain = address.lower().rpartition("@")
    dot = _char(".")
    if domain in _GMAIL:
        local = local.replace(".", "")
        local_re = f"(?:{dot})?".join(_char(c) for c in local)
        domain_re = "(?:" + "|".join("".join(_char(c) for c in d) for d in sorted(_GMAIL)) + ")"
    else:
        local_re = "".join(_char(c) for c in local)
        domain_re = "".join(_char(c) for c in domain)
    plus = _char("+")
    return f"{local_re}(?:{plus}{_TAG})?{_char('@')}{domain_re}"


@functools.cache
def _pattern(addresses: tuple[str, ...]) -> re.Pattern[str]:
    body = "|".join(_address_pattern(a) for a in sorted(set(addresses), key=len, reverse=True) if "@" in a)
    # Not the tail of another mailbox at the same domain ("joeowner@"): no local-part character before
    # it (a %HH escape just before, as in "%20owner%40…", still starts one), and not a longer domain
    # label after it. A following ".label" is still replaced: "owner@example.net.pdf" shows the address.
    return re.compile(rf"(?:(?<![A-Za-z0-9._+-])|(?<=%[0-9A-Fa-f]{{2}}))(?:{body})(?![A-Za-z0-9-])")


def hide_addresses(text: str, private_addresses: tuple[str, ...], public_address: str) -> str:
    """``text`` with every spelling of the private addresses replaced by ``public_address``."""
    if not text or not private_addresses:
        return text
    return _pattern(tuple(a.strip().lower() for a in private_addresses)).sub(public_address, text)


MIN_NAME_CHARS = 3  # a shorter "name" would blank ordinary words


def owner_names(configured: tuple[str, ...], display_name: str) -> tuple[str, ...]:
    """The owner's names to hide: OWNER_NAMES, and the display name of the owner's own reply when it
    is a full name (two words or more: what mail clients write into quote headers, such as
    "Para: Owner Name <…>"). A one-word display name is left to OWNER_NAMES, to not blank a word."""
    names = [n for n in configured if len(n.strip()) >= MIN_NAME_CHARS]
    shown = " ".join(display_name.split())
    if len(shown.split(" ")) >= 2 and len(shown) >= MIN_NAME_CHARS:
        names.append(shown)
    return tuple(dict.fromkeys(names))


MAX_NAME_WORDS = 4  # every order of up to four words (24); a longer name is taken in its own order only


_SEP = r"(?:\s{0,8},\s{0,8}|\s{1,8})"  # between the words: spaces (a wrap), or a comma ("Name, Owner")


def _name_forms(name: str) -> list[tuple[str, ...]]:
    """One name in every order of its words ("Owner Name", "Name Owner", "Name, Owner"), each word but
    one optionally as its initial with a dot ("O. Name", "Name, O."): a tuple of word patterns each."""
    words = name.split()
    orders = itertools.permutations(words) if len(words) <= MAX_NAME_WORDS else [tuple(words)]
    forms = []
    for order in orders:
        for initials in itertools.product((False, True), repeat=len(order)):
            if len(order) > 1 and all(initials):
                continue
            forms.append(
                tuple(
                    re.escape(w[0]) + r"\." if short else re.escape(w)
                    for w, short in zip(order, initials, strict=True)
                )
            )
    return forms


@functools.cache
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    # Any case, optionally quoted, whole words only. Grouped by first word, so that a position where no
    # name starts costs one test per distinct first word, not one per form.
    by_first: dict[str, set[str]] = {}
    for form in {f for n in names for f in _name_forms(n)}:
        by_first.setdefault(form[0].lower(), set()).add("".join(_SEP + p for p in form[1:]))
    alternatives = [
        first + "(?:" + "|".join(sorted(rests, key=len, reverse=True)) + ")"
        for first, rests in sorted(by_first.items(), key=lambda kv: len(kv[0]), reverse=True)
    ]
    return re.compile(r"(?<!\w)[\"']?(?:" + "|".join(alternatives) + r")[\"']?(?!\w)", re.I)


def hide_names(text: str, names: tuple[str, ...], replacement: str) -> str:
    """``text`` with every one of ``names`` (any case, any spacing) replaced by ``replacement``
    (PUBLIC_NAME; '' removes it). Works in any language: it does not look for quote headers."""
    if not text or not names:
        return text
    return _names_pattern(names).sub(replacement, text)
