"""Record values as Route 53 takes them (deploy/route53.py): TXT quoted, split at 255, escaped; record
names as IAM's condition key normalizes them."""

from __future__ import annotations

import re

from deploy.route53 import TXT_STRING_MAX, normalized_name, txt_strings, txt_text, txt_value, wanted


def test_a_txt_value_is_quoted_and_escaped_and_reads_back_as_its_text() -> None:
    assert txt_value("v=spf1 include:amazonses.com ~all") == '"v=spf1 include:amazonses.com ~all"'
    assert txt_value('say "hi" \\ bye') == '"say \\"hi\\" \\\\ bye"'
    assert txt_value("café") == '"caf\\303\\251"'  # UTF-8 bytes outside printable ASCII, in octal
    for text in ("v=spf1 include:amazonses.com ~all", 'say "hi" \\ bye', "café", ""):
        assert txt_text(txt_value(text)) == text


def test_a_long_txt_value_is_split_into_strings_of_at_most_255_characters() -> None:
    text = "k=rsa; p=" + "A" * 600
    value = txt_value(text)
    strings = re.findall(r'"([^"]*)"', value)
    assert value == " ".join(f'"{s}"' for s in strings)
    assert [len(s) for s in strings] == [TXT_STRING_MAX, TXT_STRING_MAX, len(text) - 2 * TXT_STRING_MAX]
    assert txt_text(value) == text


def test_record_names_are_normalized_as_the_iam_condition_key_holds_them() -> None:
    assert normalized_name("_AmazonSES.Example.COM.") == "_amazonses.example.com"
    assert normalized_name("*.example.com") == "\\052.example.com"


def test_dns_json_records_become_record_sets_one_per_name_and_type() -> None:
    records = [
        {"name": "example.com", "type": "MX", "value": "10 inbound-smtp.us-east-1.amazonaws.com"},
        {"name": "bounce.example.com", "type": "MX", "value": "10 feedback-smtp.us-east-1.amazonses.com"},
        {"name": "bounce.example.com", "type": "TXT", "value": "v=spf1 include:amazonses.com ~all"},
        {"name": "_amazonses.example.com", "type": "TXT", "value": "token"},
    ]
    assert wanted(records) == {
        ("example.com", "MX"): ["10 inbound-smtp.us-east-1.amazonaws.com"],
        ("bounce.example.com", "MX"): ["10 feedback-smtp.us-east-1.amazonses.com"],
        ("bounce.example.com", "TXT"): ['"v=spf1 include:amazonses.com ~all"'],
        ("_amazonses.example.com", "TXT"): ['"token"'],
    }


def test_only_quoted_strings_are_a_txt_value_route53_takes() -> None:
    assert txt_strings('"a" "b\\"c"') == [b"a", b'b"c']
    assert txt_strings("v=spf1 -all") is None  # unquoted text with spaces
    assert txt_strings('"a" x') is None and txt_strings("") is None
