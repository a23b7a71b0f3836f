"""Pure logic of the first deploy: the zone file the deploy writes, as the emulator's DNS stand-in reads
it, and the deployer policy split into managed policies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy import config, dns, iam
from local import fresh

CFG = config.load(
    {
        "DOMAIN_NAME": "example.org",
        "PUBLIC_EMAIL": "hello@example.org",
        "PRIVATE_EMAIL": "me@example.net",
        "AWS_REGION": "eu-west-1",
        "ENVIRONMENT": "prd",
    }
)


def records() -> list[dns.Record]:
    return [
        dns.Record("_amazonses.example.org", "TXT", "tOkEn+/=", "domain verification", "Pending"),
        dns.Record("abc._domainkey.example.org", "CNAME", "abc.dkim.amazonses.com", "DKIM", "Pending"),
        dns.Record(
            "bounce.example.org", "MX", "10 feedback-smtp.eu-west-1.amazonses.com", "MAIL FROM", "Pending"
        ),
        dns.Record(
            "bounce.example.org", "TXT", "v=spf1 include:amazonses.com ~all", "MAIL FROM SPF", "Pending"
        ),
    ]


def test_the_zone_file_is_bind_syntax_with_absolute_names_and_quoted_text() -> None:
    text = dns.zone(records(), CFG)
    assert text.splitlines()[0].startswith("; DNS records for example.org")
    assert '_amazonses.example.org.\t1800\tIN\tTXT\t"tOkEn+/="' in text.splitlines()
    assert "bounce.example.org.\t1800\tIN\tMX\t10 feedback-smtp.eu-west-1.amazonses.com." in text.splitlines()


def test_what_the_deploy_writes_is_what_dns_publish_reads() -> None:
    parsed = fresh.parse_zone(dns.zone(records(), CFG))
    assert parsed == [
        ("_amazonses.example.org", "TXT", "token+/="),
        ("abc._domainkey.example.org", "CNAME", "abc.dkim.amazonses.com"),
        ("bounce.example.org", "MX", "10 feedback-smtp.eu-west-1.amazonses.com"),
        ("bounce.example.org", "TXT", "v=spf1 include:amazonses.com ~all"),
    ]


def test_dns_json_holds_every_record_with_its_purpose(tmp_path: Path) -> None:
    path = dns.write(CFG, records(), tmp_path)
    assert path == tmp_path / "prd" / "dns.zone"
    written = json.loads((tmp_path / "prd" / "dns.json").read_text())
    assert written["domain"] == "example.org" and [r["purpose"] for r in written["records"]][:2] == [
        "domain verification",
        "DKIM",
    ]


def test_policy_size_does_not_count_white_space() -> None:
    doc = {"Version": "2012-10-17", "Statement": []}
    assert (
        fresh.policy_size(json.dumps(doc, indent=4))
        == fresh.policy_size(doc)
        == len('{"Version":"2012-10-17","Statement":[]}')
    )


def test_the_deployer_policy_splits_into_managed_policies_within_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = iam.deployer_policy(CFG, "123456789012")
    # Over 6,144 characters since the dashboard's statement: two managed policies, each within the quota.
    real = iam.deployer_policies(CFG, "123456789012")
    assert iam.policy_size(whole) > iam.MANAGED_POLICY_LIMIT and len(real) > 1
    assert all(iam.policy_size(p) <= iam.MANAGED_POLICY_LIMIT for p in real)
    assert [s for p in real for s in p["Statement"]] == whole["Statement"]
    monkeypatch.setattr(iam, "MANAGED_POLICY_LIMIT", 2000)
    parts = iam.deployer_policies(CFG, "123456789012")
    assert len(parts) > 1 and all(iam.policy_size(p) <= 2000 for p in parts)
    assert [s for p in parts for s in p["Statement"]] == whole["Statement"]  # nothing lost, order kept
    assert iam.deployer_policy_names(CFG, len(parts))[:2] == [
        "service-email-handler-prd-deployer-1",
        "service-email-handler-prd-deployer-2",
    ]
