"""The owner's spam patterns (common/inbound/policy.py) run on RE2: linear whatever the owner writes,
the same answers as Python's engine where both accept a pattern, and a pattern RE2 refuses is
skipped with the reason."""

from __future__ import annotations

import re
import time
from importlib import resources

import pytest

from common.inbound import policy
from common.inbound.policy import BODY_SCAN_CHARS, parse_rules
from common.mail.parse import parse
from common.runtime.events import SesReceipt
from local.events import receipt_event

# Patterns that make a backtracking engine exponential or quadratic on the input beside them.
CATASTROPHIC = [
    ("(a+)+$", "a" * (BODY_SCAN_CHARS - 1) + "b"),
    ("(a|aa)+$", "a" * (BODY_SCAN_CHARS - 1) + "b"),
    ("(.*a){12}$", "a" * (BODY_SCAN_CHARS - 1) + "b"),
    (r"\bwire\b.*\burgent\b", "wire " * (BODY_SCAN_CHARS // 5)),
    (r"(\w+\s?)*$", "word " * (BODY_SCAN_CHARS // 5 - 1) + "!"),
]


def _cpu(pattern: policy.Pattern, text: str) -> float:
    start = time.process_time()
    pattern.search(text)
    return time.process_time() - start


@pytest.mark.parametrize(("source", "text"), CATASTROPHIC, ids=[s for s, _ in CATASTROPHIC])
def test_a_catastrophic_pattern_is_kept_and_costs_one_scan(source: str, text: str) -> None:
    rules, errors = parse_rules(f"[body_patterns]\n{source}\n")
    assert not errors and [p.pattern for p in rules.body_patterns] == [source]
    # Python's re takes minutes to years on these; RE2 scans 100,000 characters in about a millisecond.
    spent = min(_cpu(rules.body_patterns[0], text) for _ in range(3))
    assert spent < 0.25, f"{source!r}: {spent:.3f} s CPU on {len(text):,} characters"


def test_a_catastrophic_pattern_in_a_mail_is_decided_in_one_scan() -> None:
    rules, _ = parse_rules("[body_patterns]\n(a+)+$\n(x+x+)+y\n\\bneedle\\b\n")
    body = "a" * (BODY_SCAN_CHARS - 1) + "b" + " needle"  # past BODY_SCAN_CHARS: never read
    raw = b"From: s@sender.example\r\nTo: hello@example.com\r\nSubject: hi\r\n\r\n" + body.encode()
    receipt = SesReceipt.from_event(receipt_event(raw, "m1", ["hello@example.com"]))
    start = time.process_time()
    decision = policy.assess_mail(receipt, parse(raw), rules)
    assert time.process_time() - start < 0.5
    assert decision.action == policy.Action.FORWARD
    # The same rules still hit where they should, first hit wins, subject before body.
    rules, _ = parse_rules("[subject_patterns]\nURGENT\n[body_patterns]\n(a+)+$\n")
    raw = b"From: s@sender.example\r\nSubject: urgent\r\n\r\naaaa"
    hit = policy.assess_mail(receipt, parse(raw), rules)
    assert hit.action == policy.Action.QUARANTINE and hit.reason == "subject matches 'URGENT'"
    raw = b"From: s@sender.example\r\nSubject: hi\r\n\r\naaaa"
    assert policy.assess_mail(receipt, parse(raw), rules).reason == "body matches '(a+)+$'"


SMALL_INPUTS = [
    "",
    "a",
    "aaa",
    "aaab",
    "b",
    "ab",
    "AAA",
    "aAaB",
    "wire it, urgent",
    "WIRE x URGENT",
    "wired urgently",
]
AGREEING = ["(a+)+$", "(a|aa)+b", "^a{2,3}", "a+?b", r"\bwire\b.{0,200}\burgent\b", "[^b]+$", "A", "(?:ab)*b"]


@pytest.mark.parametrize("source", AGREEING)
def test_re2_answers_as_pythons_re_does_on_small_inputs(source: str) -> None:
    ours = policy.compile_rule(source)
    theirs = re.compile(source, re.IGNORECASE)
    for text in SMALL_INPUTS:
        assert (ours.search(text) is None) == (theirs.search(text) is None), (source, text)


def test_case_insensitive_beyond_ascii() -> None:
    assert policy.compile_rule("résumé").search("RÉSUMÉ ATTACHED") is not None


@pytest.mark.parametrize(
    ("source", "feature"),
    [
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "named backreference"),
        ("wire(?= transfer)", "lookahead"),
        ("(?<!not )urgent", "lookbehind"),
    ],
)
def test_a_pattern_re2_refuses_is_skipped_and_the_owner_is_told_why(source: str, feature: str) -> None:
    re.compile(source)  # Python's engine takes it: only RE2's refusal is under test
    rules, errors = parse_rules(f"[subject_patterns]\n{source}\nkept\n")
    assert [p.pattern for p in rules.subject_patterns] == ["kept"], feature
    assert len(errors) == 1 and errors[0].startswith(f"[subject_patterns] pattern {source!r} skipped: ")
    assert "not supported" in errors[0] and "linear-time engine" in errors[0], errors[0]


def test_a_pattern_that_does_not_compile_says_what_is_wrong_without_blaming_the_engine() -> None:
    _, errors = parse_rules("[body_patterns]\n(unclosed\n")
    assert len(errors) == 1 and "missing )" in errors[0] and "linear-time" not in errors[0], errors


def test_the_shipped_default_rules_all_compile() -> None:
    text = resources.files("common").joinpath("data/spam-rules.txt").read_text()
    rules, errors = parse_rules(text)
    assert not errors and rules.subject_patterns and rules.body_patterns
