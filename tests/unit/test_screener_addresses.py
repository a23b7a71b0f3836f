"""The screener's approve and decline addresses (common/mail/threads.py) and the notice's quoted lines
(common/delivery/screener.py): pure functions, no AWS."""

from __future__ import annotations

from common.delivery.screener import NOTICE_LINE_CHARS, NOTICE_LINES, first_lines
from common.mail.threads import (
    screener_address,
    screener_id,
    verify_release_address,
    verify_screener_address,
    verify_thread_address,
)

SECRET, DOMAIN = "s" * 32, "thread.example.com"


def test_an_address_names_its_action_and_pair_and_verifies_only_as_itself() -> None:
    sid = screener_id("jobs@example.com", "Jane@Corp.example")
    assert sid == screener_id("JOBS@example.com", "jane@corp.example")  # case does not make another pair
    assert sid != screener_id("hello@example.com", "jane@corp.example")
    for action in ("approve", "decline"):
        address = screener_address(action, "jobs@example.com", "jane@corp.example", SECRET, DOMAIN)
        assert len(address.split("@")[0]) <= 64
        assert verify_screener_address(address, SECRET, DOMAIN) == (action, sid)
        assert verify_screener_address(address.upper(), SECRET, DOMAIN) == (action, sid)
        # never a thread or release address
        assert verify_thread_address(address, SECRET, DOMAIN) is None
        assert verify_release_address(address, SECRET, DOMAIN) is None


def test_forged_and_edited_addresses_do_not_verify() -> None:
    approve = screener_address("approve", "jobs@example.com", "jane@corp.example", SECRET, DOMAIN)
    decline = screener_address("decline", "jobs@example.com", "jane@corp.example", SECRET, DOMAIN)
    local, _, _ = approve.partition("@")
    other = screener_id("jobs@example.com", "mallory@evil.example")
    refused = [
        screener_address("approve", "jobs@example.com", "jane@corp.example", "x" * 32, DOMAIN),
        "approve." + decline.split(".", 1)[1],  # the action swapped, the tag kept
        local.replace(local.split(".")[1], other) + "@" + DOMAIN,  # another pair, the tag kept
        approve.replace(DOMAIN, "thread.other.example"),
        f"approve.{local.split('.')[1]}@{DOMAIN}",  # no tag
        "release." + approve.split(".", 1)[1],
    ]
    assert [verify_screener_address(a, SECRET, DOMAIN) for a in refused] == [None] * len(refused)


def test_the_notice_quotes_a_few_short_printable_lines() -> None:
    text = "\n\n  Hello\x07 there \u202e!\n" + "\n".join(f"line {n} " + "x" * 300 for n in range(20))
    lines = first_lines(text)
    assert len(lines) == NOTICE_LINES and lines[0] == "Hello there !"
    assert all(len(line) <= NOTICE_LINE_CHARS and "\n" not in line for line in lines)
    assert lines[1].endswith("…")
