"""Pure pieces of the inbound pipeline: parsing, file names, spam rules and policy, RFC 3834."""

from collections.abc import Iterator
from typing import Any

import pytest

from common.delivery import ack
from common.inbound import policy
from common.mail.parse import parse
from common.mail.sanitize import safe_filename
from common.runtime.events import SesReceipt
from deploy import config
from deploy.config import Config
from local.events import receipt_event
from tests.support.mailgen import mail

CFG = config.load(
    {
        "DOMAIN_NAME": "example.com",
        "PUBLIC_EMAIL": "hello@example.com",
        "PRIVATE_EMAIL": "owner@example.net",
        "THREAD_SECRET": "x" * 32,
    }
)


def receipt(raw: bytes, **kw: Any) -> SesReceipt:
    return SesReceipt.from_event(receipt_event(raw, "m1", kw.pop("to", ["hello@example.com"]), **kw))


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("CV (2026).PDF", "CV (2026).PDF"),
        ("a\r\nb.pdf", "ab.pdf"),
        ("...", "attachment"),
        ("", "attachment"),
        ("r\u202eevil.pdf", "r_evil.pdf"),
        ("x" * 300 + ".pdf", "x" * 116 + ".pdf"),
        ("Résumé.docx", "Résumé.docx"),
        ("a/b:c*?.pdf", "b_c__.pdf"),
    ],
)
def test_safe_filename(name: str, safe: str) -> None:
    assert safe_filename(name) == safe


def test_rules_file_sections_comments_and_bad_patterns() -> None:
    rules, errors = policy.parse_rules(
        "# c\n[blocked_sender_domains]\n@Spam.Example\n[subject_patterns]\n(\nwin\n"
        "[bogus]\nx\n[body_patterns]\nfoo\n"
    )
    assert rules.blocked_domains == ("spam.example",)
    assert [p.pattern for p in rules.subject_patterns] == ["win"] and [
        p.pattern for p in rules.body_patterns
    ] == ["foo"]
    assert any("'('" in e for e in errors) and any("unknown section [bogus]" in e for e in errors)


def _assess(receipt: SesReceipt, raw: bytes, rules: policy.Rules) -> policy.Decision:
    return policy.assess(receipt, raw, CFG, lambda: rules, lambda address: None).decision


def test_policy_order_first_hit_wins() -> None:
    rules = policy.Rules(blocked_domains=("corp.example",))
    raw = mail()
    assert _assess(receipt(raw, verdicts={"virus": "FAIL", "spam": "FAIL"}), raw, rules).action == "drop"
    assert _assess(receipt(raw, source=""), raw, rules).action == "dsn"
    assert _assess(receipt(raw, verdicts={"spam": "FAIL"}), raw, rules).reason == "spam verdict FAIL"
    assert (
        _assess(receipt(raw, to=["Hello@Example.com"]), raw, rules).reason
        == "blocked sender domain corp.example"
    )  # recipient compared case-insensitively
    assert _assess(receipt(raw), mail(sender="a@sub.corp.example"), rules).action == "quarantine"
    assert _assess(receipt(raw), mail(sender="a@notcorp.example"), rules).action == "forward"


def test_rules_cache_ttl_and_last_good_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = policy.RulesCache()
    loads: Iterator[policy.Rules | Exception] = iter(
        [policy.Rules(blocked_domains=("a.example",)), RuntimeError("S3 down")]
    )

    def fake_load(cfg: Config) -> policy.Rules:
        item = next(loads)
        if isinstance(item, Exception):
            raise item
        return item

    monkeypatch.setattr(cache, "_load", fake_load)
    clock = [1000.0]
    monkeypatch.setattr(policy.time, "monotonic", lambda: clock[0])
    first = cache.get(CFG)
    clock[0] += 299
    assert cache.get(CFG) is first  # cached for 300 s: no second load
    clock[0] += 2
    assert cache.get(CFG) is first  # reload failed: the last good lists stay in force


@pytest.mark.parametrize(
    ("headers", "sender", "why"),
    [
        ({"Auto-Submitted": "auto-generated"}, None, "Auto-Submitted: auto-generated"),
        ({"Auto-Submitted": "no"}, None, ""),
        ({"Precedence": "junk"}, None, "Precedence: junk"),
        ({"List-Id": "<x.corp.example>"}, None, "mailing list headers"),
        # Lists older than RFC 2369 (mail-mime-parser's m0024, an ezmlm list message, was acked).
        ({"Mailing-List": "contact list-help@list.example; run by ezmlm"}, None, "mailing list headers"),
        ({"X-Mailing-List": "<list@corp.example>"}, None, "mailing list headers"),
        ({}, "do-not-reply@corp.example", "no-reply sender"),
        ({}, "postmaster@corp.example", "no-reply sender"),
        ({}, "gmail-noreply@google.com", "no-reply sender"),  # anywhere in the local part
        ({}, "alerts.donotreply@corp.example", "no-reply sender"),
        ({}, "jobs_no-reply+x@corp.example", "no-reply sender"),
        ({}, "noreplyguy@corp.example", "no-reply sender"),  # a no-reply marker is a no-reply marker
        ({}, "bounces+123@corp.example", "no-reply sender"),
        ({}, "replyguy@corp.example", ""),
        (
            {"Content-Type": "multipart/report; report-type=disposition-notification; boundary=x"},
            None,
            "report or notification (multipart/report)",
        ),
    ],
)
def test_rfc3834(headers: dict[str, Any], sender: str | None, why: str) -> None:
    raw = mail(
        headers=headers,
        sender=sender or "Jane <jane@corp.example>",
        text=None if headers.get("Content-Type") else "Hi",
    )
    assert ack.rfc3834(parse(raw)) == why


@pytest.mark.parametrize(
    ("sender", "source", "verdicts", "why"),
    [
        ("Jane <jane@corp.example>", "jane@corp.example", {"dmarc": "PASS"}, ""),
        (
            "Jane <jane@corp.example>",
            "bounce@corp.example",
            {"dmarc": "GRAY", "spf": "PASS"},
            "",
        ),  # same domain
        # SPF PASS for someone else's envelope domain proves nothing about From
        (
            "Jane <jane@corp.example>",
            "x@evil.example",
            {"dmarc": "GRAY", "spf": "PASS"},
            "sender not authenticated (DMARC GRAY, SPF PASS for another domain)",
        ),
        (
            "Jane <jane@corp.example>",
            "jane@corp.example",
            {"dmarc": "PROCESSING_FAILED", "spf": "GRAY"},
            "sender not authenticated (DMARC PROCESSING_FAILED, SPF GRAY)",
        ),
        (
            "Jane <jane@corp.example>",
            "jane@corp.example",
            {"dmarc": "PASS", "spf": "FAIL"},
            "failed verdicts: spf",
        ),
        ("J <j\u00f6@corp.example>", "x@corp.example", {}, "sender address unusable for a reply"),
        ("J <j@[192.0.2.1]>", "j@corp.example", {}, "sender domain unusable for a reply"),
        ("Me <hello@example.com>", "hello@example.com", {}, "sender is one of our own addresses"),
        ("Me <owner@example.net>", "owner@example.net", {}, "sender is one of our own addresses"),
    ],
)
def test_ack_only_to_an_authenticated_usable_sender(
    sender: str, source: str, verdicts: dict[str, Any], why: str
) -> None:
    raw = mail(sender=sender)
    assert ack.unsafe_recipient(CFG, receipt(raw, source=source, verdicts=verdicts), parse(raw)) == why


@pytest.mark.parametrize(
    ("display", "name"),
    [
        ("Jane Smith", "Jane"),
        ("José", "José"),
        ("Smith, Jane", "Smith"),
        ("", ""),
        ("https://evil.example/" + "x" * 180, ""),
        ("jane@corp.example", ""),
        ("R2D2", ""),
        ("x" * 31, ""),
        ("Ω" * 30, "Ω" * 30),
        ("\u202eevil", ""),
    ],
)
def test_greeting_is_one_short_word_of_letters_or_nothing(display: str, name: str) -> None:
    assert ack.greeting_name(display) == name
