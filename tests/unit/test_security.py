"""Pure pieces of the security rules: the owner's From, private-address scrubbing, protected addresses."""

from __future__ import annotations

import re

import pytest

from common.errors import ConfigError
from common.reply import auth
from common.reply.scrub import hide_addresses
from common.runtime.events import SesReceipt
from common.store import sendstatus
from deploy import config
from local.events import receipt_event

ENV = {
    "DOMAIN_NAME": "example.com",
    "PUBLIC_EMAIL": "hello@example.com",
    "PRIVATE_EMAIL": "owner@example.net",
    "THREAD_SECRET": "x" * 32,
}
CFG = config.load({**ENV, "OWNER_EMAILS": "owner@example.net,me@other.example"})
PRIVATE = ("owner@example.net", "me@gmail.com")


def receipt(source: str, **verdicts: str) -> SesReceipt:
    return SesReceipt.from_event(
        receipt_event(
            b"From: x@y.z\r\n\r\n", "m1", ["t@thread.example.com"], source=source, verdicts=verdicts or None
        )
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"Owner <owner@example.net>", ""),
        (b"=?utf-8?q?J=C3=B6rg?= <owner@example.net>", ""),
        ("Jörg <owner@example.net>".encode(), ""),  # RFC 6532 UTF-8
        (b'"owner@example.net" <owner@example.net>', ""),  # the same address as the name is not another one
        (b"OWNER@Example.NET", ""),
        (b"Owner <me@other.example>", "From domain differs from the SPF-authenticated envelope domain"),
        (b"owner@example.net <attacker@evil.example>", "From header has a parse defect"),
        (b"Owner <owner@example.net>, x@evil.example", "From is not exactly one mailbox"),
        (b"g: owner@example.net;", "From is a group"),
        (b"Owner (owner%40evil.example) <owner@example.net>", "From names another address"),
        (b'"Owner &#64;evil" <owner@example.net>', "From names another address"),
        (b'"' + b"O" * 1000 + b'" <owner@example.net>', "From header too long"),
    ],
)
def test_check_from(value: bytes, reason: str) -> None:
    raw = b"From: " + value + b"\r\nSubject: x\r\n\r\nbody"
    # SPF-only authentication (no DMARC record): the From domain must be the envelope's.
    got = ""
    try:
        auth.check_from(raw, receipt("owner@example.net", dmarc="GRAY", spf="PASS"), CFG)
    except auth.NotAuthorisedError as exc:
        got = str(exc)
    assert got == reason


def test_check_from_with_dmarc_pass_accepts_any_owner_address() -> None:
    raw = b"From: Me <me@other.example>\r\n\r\nx"
    assert auth.check_from(raw, receipt("owner@example.net", dmarc="PASS"), CFG).address == "me@other.example"


def test_check_from_refuses_a_huge_header_block_before_parsing_it() -> None:
    raw = b"X-Pad: " + b"a" * (auth.HEADER_BLOCK_MAX + 10) + b"\r\nFrom: owner@example.net\r\n\r\nx"
    with pytest.raises(auth.NotAuthorisedError, match="header block too large"):
        auth.check_from(raw, receipt("owner@example.net"), CFG)


@pytest.mark.parametrize(
    ("verdicts", "ok"),
    [
        ({"dmarc": "PASS"}, True),
        ({"dmarc": "GRAY", "spf": "PASS"}, True),
        ({"dmarc": "GRAY", "spf": "FAIL", "dkim": "PASS"}, False),
        ({"dmarc": "PROCESSING_FAILED"}, False),
        ({"dmarc": "FAIL"}, False),
        ({"dmarc": "PASS", "spam": "FAIL"}, False),
    ],
)
def test_verdict_rule(verdicts: dict[str, str], ok: bool) -> None:
    try:
        auth.check_sender(receipt("owner@example.net", **verdicts), CFG)
    except auth.NotAuthorisedError:
        assert not ok
    else:
        assert ok


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail owner@example.net", "mail hello@example.com"),
        ("OWNER+jobs@EXAMPLE.net", "hello@example.com"),
        ("mailto:owner%40example.net?subject=x", "mailto:hello@example.com?subject=x"),
        ("owner&#64;example.net owner&#x40;example&#46;net", "hello@example.com hello@example.com"),
        ("%6F%77%6E%65%72%40example.net", "hello@example.com"),
        ("owner&commat;example&period;net", "hello@example.com"),
        ("owner\uff20example.net", "hello@example.com"),
        ("m.e+x@googlemail.com and ME@gmail.com", "hello@example.com and hello@example.com"),
        ("owner@example.net.", "hello@example.com."),
        ("joeowner@example.net and owner@example.network", "joeowner@example.net and owner@example.network"),
    ],
)
def test_private_addresses_are_hidden_in_every_spelling(text: str, expected: str) -> None:
    assert hide_addresses(text, PRIVATE, "hello@example.com") == expected


@pytest.mark.parametrize(
    ("address", "protected"),
    [
        ("owner@example.net", True),
        ("Owner+Tag@Example.Net", True),
        ("me@other.example", True),
        ("hello@example.com", True),
        ("jane@corp.example", False),
        ("owner@example.network", False),
    ],
)
def test_protected_addresses(address: str, protected: bool) -> None:
    assert sendstatus.protected(CFG, address) is protected


@pytest.mark.parametrize("name", ["a@b.example", "x" * 65, "Evil\r\nBcc: x", '"quoted"'])
def test_public_name_is_validated(name: str) -> None:
    with pytest.raises(ConfigError, match="PUBLIC_NAME"):
        config.load({**ENV, "PUBLIC_NAME": name})


def test_scrub_pattern_spells_case_out_instead_of_ignorecase() -> None:
    # With re.IGNORECASE, CPython's engine spent ~5 ms on each near-miss such as "owner%40example.ne"
    # (88 s on a 1 MB reply quoting a contact's crafted text); spelt-out case scans it in 0.2 s.
    from common.reply import scrub

    assert not scrub._pattern(PRIVATE).flags & re.IGNORECASE


@pytest.mark.timeout(60)  # a hang guard, not a speed target: before the fix this call ran for hours
def test_a_crafted_sub_address_tag_cannot_make_the_scrubber_backtrack_exponentially() -> None:
    # "owner+" + "&#aaa" * 16 + "!" took 52 s: the tag's hex run could be split between a character
    # reference and the next tag characters in 3^k ways, each tried when the "@" never came.
    crafted = "owner+" + "&#aaa" * 40 + "!"
    assert hide_addresses(crafted, PRIVATE, "hello@example.com") == crafted
    assert (
        hide_addresses(crafted[:-1] + "&#64;example.net", PRIVATE, "hello@example.com") == "hello@example.com"
    )


OWN = [
    ("hello+x@example.com", True),
    ("HELLO@EXAMPLE.COM.", True),
    ("<owner+jobs@example.net.>", True),
    ("anything@thread.example.com", True),
    ("ops@mail.example.com", True),
    ("me+a+b@other.example", True),
    ("jane@corp.example", False),
    ("owner@example.net.evil", False),
    ("hello@example.community", False),
    ("hello@notexample.com", False),
    ("owner@sub.example.net", False),
    ("", False),
    ("example.com", False),
]


@pytest.mark.parametrize(("address", "own"), OWN)
def test_one_reading_of_our_own_address_for_acks_loops_and_protection(address: str, own: bool) -> None:
    from common.delivery.ack import unsafe_recipient
    from common.mail.parse import parse
    from common.reply.owner import recipient_problem
    from tests.support import mailgen as g

    assert CFG.is_own(address) is own
    assert sendstatus.protected(CFG, address) is own
    if own and "<" not in address and address.count("@") == 1:
        mail = parse(g.mail(sender=f"X <{address.rstrip('.')}>"))
        assert (
            unsafe_recipient(CFG, receipt(address.rstrip(".")), mail) == "sender is one of our own addresses"
        )
        assert "own addresses" in recipient_problem(CFG, address.rstrip("."))


@pytest.mark.parametrize(
    "variant", ["Hi  there\t\nBye \n", "Hi there\nBye\n\n\n", "Hi \t there \r\nBye\r\n \r\n", "Hi there\nBye"]
)
def test_relaxed_body_ignores_what_dkim_relaxed_ignores(variant: str) -> None:
    assert auth.relaxed_body(variant) == auth.relaxed_body("Hi there\nBye\n") == "Hi there\nBye"


@pytest.mark.parametrize("variant", ["Hi there\n\nBye\n", "Hithere\nBye\n", " Hi there\nBye\n"])
def test_relaxed_body_keeps_what_dkim_relaxed_signs(variant: str) -> None:
    # RFC 6376 3.4.4: inner empty lines and the presence (not the length) of whitespace still count.
    assert auth.relaxed_body(variant) != auth.relaxed_body("Hi there\nBye\n")
