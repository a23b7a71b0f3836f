"""`email-handler dns publish --route53` on the fresh-account model with IAM enforced: the deployer (exactly
the printed policy) publishes the deploy's records into the domain's hosted zone, they read back as Route
53 holds them, and SES verifies the domain from them as it does from `dns publish FILE.zone`; the policy
lets the deployer write nothing else; what the zone already holds is kept or reported, never lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from common.aws import client
from deploy.main import WaitingOnDnsError
from ops.main import main as cli
from tests.integration.test_fresh_account import account, run  # noqa: F401  (the fixture)
from tests.support.deploy import as_user, deployer_user

INBOUND = "10 inbound-smtp.us-east-1.amazonaws.com"


def zone(name: str = "example.com", private: bool = False) -> str:
    """A hosted zone the user made (the admin's credentials): its ID."""
    request: dict[str, Any] = {"Name": name, "CallerReference": f"{name}-{private}"}
    if private:
        request |= {
            "HostedZoneConfig": {"PrivateZone": True},
            "VPC": {"VPCRegion": "us-east-1", "VPCId": "vpc-1"},
        }
    return str(client("route53").create_hosted_zone(**request)["HostedZone"]["Id"])


def record_sets(zone_id: str) -> dict[tuple[str, str], list[str]]:
    found = client("route53").list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    return {
        (r["Name"].rstrip("."), r["Type"]): [v["Value"] for v in r.get("ResourceRecords", [])]
        for r in found
        if r["Type"] in ("TXT", "CNAME", "MX")
    }


def change(action: str, zone_id: str, name: str, kind: str, *values: str) -> None:
    client("route53").change_resource_record_sets(
        HostedZoneId=zone_id,
        ChangeBatch={
            "Changes": [
                {
                    "Action": action,
                    "ResourceRecordSet": {
                        "Name": name,
                        "Type": kind,
                        "TTL": 300,
                        "ResourceRecords": [{"Value": v} for v in values],
                    },
                }
            ]
        },
    )


def upsert(zone_id: str, name: str, kind: str, *values: str) -> None:
    change("UPSERT", zone_id, name, kind, *values)


def verification(domain: str = "example.com") -> str:
    attrs = client("ses").get_identity_verification_attributes(Identities=[domain])["VerificationAttributes"]
    return str(attrs[domain]["VerificationStatus"])


def test_the_deployer_publishes_the_records_into_the_zone_and_ses_verifies_the_domain_from_them(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    zone("example.com", private=True)  # a private zone of the same name is not the public DNS
    public = zone("example.com")
    deployer = deployer_user(account)
    with pytest.raises(WaitingOnDnsError):
        as_user(deployer, lambda: run(account, tmp_path, []))
    written = json.loads((tmp_path / "prd" / "dns.json").read_text())
    token = next(r["value"] for r in written["records"] if r["name"] == "_amazonses.example.com")

    capsys.readouterr()
    assert (
        as_user(deployer, lambda: cli(["dns", "publish", "--route53", str(tmp_path / "prd" / "dns.json")]))
        == 0
    )
    out = capsys.readouterr().out
    assert "create    TXT   _amazonses.example.com" in out and f"Route 53 zone example.com ({public})" in out
    held = record_sets(public)
    assert held[("_amazonses.example.com", "TXT")] == [f'"{token}"']
    assert held[("example.com", "MX")] == [INBOUND] and held[("thread.example.com", "MX")] == [INBOUND]
    assert held[("bounce.example.com", "TXT")] == ['"v=spf1 include:amazonses.com ~all"']
    dkim = [r for r in written["records"] if r["type"] == "CNAME"]
    assert len(dkim) == 3 and all(held[(r["name"], "CNAME")] == [r["value"]] for r in dkim)

    as_user(deployer, lambda: run(account, tmp_path, []))  # SES reads the zone: verified, deployed
    assert verification() == "Success"
    assert client("lambda").list_functions()["Functions"]

    capsys.readouterr()  # a second publish changes nothing
    assert (
        as_user(deployer, lambda: cli(["dns", "publish", "--route53", str(tmp_path / "prd" / "dns.json")]))
        == 0
    )
    out = capsys.readouterr().out
    assert "create" not in out and "update" not in out and "unchanged MX    example.com" in out


def test_the_deployer_policy_lets_it_upsert_only_txt_cname_and_mx_of_the_domain(
    account: dict[str, str],  # noqa: F811
) -> None:
    ours, other = zone("example.com"), zone("other.example")
    deployer = deployer_user(account)
    as_user(deployer, lambda: upsert(ours, "_amazonses.example.com", "TXT", '"t"'))  # allowed
    as_user(deployer, lambda: upsert(ours, "deep.sub.example.com", "MX", "10 mx.example.net"))
    for zone_id, name, kind, value in (
        (ours, "www.example.com", "A", "192.0.2.1"),  # a record type the deploy never publishes
        (other, "other.example", "TXT", '"t"'),  # a name outside the domain
        (ours, "notexample.com.example.com", "NS", "ns.example.net"),
    ):
        with pytest.raises(ClientError, match="AccessDenied"):
            as_user(deployer, lambda z=zone_id, n=name, k=kind, v=value: upsert(z, n, k, v))

    def delete() -> None:
        change("DELETE", ours, "_amazonses.example.com", "TXT", '"t"')

    with pytest.raises(ClientError, match="AccessDenied"):
        as_user(deployer, delete)


def test_what_the_zone_holds_is_kept_or_reported_and_replaced_only_when_asked(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    public = zone("example.com")
    upsert(public, "example.com", "MX", "10 mx.provider.example")  # the domain's mail today
    upsert(public, "_amazonses.example.com", "TXT", '"an-older-token"')
    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, [])
    dns_json = str(tmp_path / "prd" / "dns.json")

    capsys.readouterr()
    assert cli(["dns", "publish", "--route53", dns_json]) == 1
    out, err = capsys.readouterr()
    assert "conflict  MX    example.com  (holds 10 mx.provider.example)" in out
    assert "left alone: MX example.com" in err and "--replace" in err
    held = record_sets(public)
    assert held[("example.com", "MX")] == ["10 mx.provider.example"]  # untouched
    assert len(held[("_amazonses.example.com", "TXT")]) == 2  # the older token kept beside ours
    assert held[("thread.example.com", "MX")] == [INBOUND]  # the rest went in
    run(account, tmp_path, [])  # SES verifies from the TXT record beside the older one
    assert verification() == "Success"

    assert cli(["dns", "publish", "--route53", "--replace", dns_json]) == 0
    assert record_sets(public)[("example.com", "MX")] == [INBOUND]


def test_a_long_txt_value_must_be_split_and_the_model_reads_it_joined(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    from local import fresh

    public = zone("example.com")
    long_text = "v=DKIM1; k=rsa; p=" + "B" * 400
    with pytest.raises(ClientError, match="InvalidChangeBatch"):  # one string over 255: Route 53 refuses
        upsert(public, "long._domainkey.example.com", "TXT", f'"{long_text}"')
    with pytest.raises(ClientError, match="InvalidChangeBatch"):  # unquoted text with spaces
        upsert(public, "spf.example.com", "TXT", "v=spf1 -all")
    path = tmp_path / "dns.json"
    path.write_text(
        json.dumps(
            {
                "domain": "example.com",
                "region": "us-east-1",
                "records": [{"name": "long._domainkey.example.com", "type": "TXT", "value": long_text}],
            }
        )
    )
    assert cli(["dns", "publish", "--route53", str(path)]) == 0
    [value] = record_sets(public)[("long._domainkey.example.com", "TXT")]
    assert value.count('" "') == 1  # two strings
    assert ("long._domainkey.example.com", "TXT", long_text.lower()) in fresh.route53_records()


def test_no_hosted_zone_is_a_one_line_error_naming_the_zone_file(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    zone("example.org")
    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, [])
    capsys.readouterr()
    assert cli(["dns", "publish", "--route53", str(tmp_path / "prd" / "dns.json")]) == 2
    err = capsys.readouterr().err
    assert "no public Route 53 hosted zone for example.com" in err and "dns.zone" in err


def test_deploy_with_route53_and_wait_publishes_and_finishes_in_one_run(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    from deploy.main import Options, deploy
    from tests.support.deploy import images

    public = zone("example.com")
    upsert(public, "example.com", "MX", "10 mx.provider.example")  # the domain's mail today: kept
    deployer = deployer_user(account)
    lines: list[str] = []
    options = Options(build_dir=tmp_path, route53=True, wait_s=60, poll_s=0.3)
    as_user(deployer, lambda: deploy(options, account, report=lines.append, images=images()))
    assert "[deploy] SES verified example.com" in lines
    assert any(line.startswith("[dns] create    TXT   _amazonses.example.com") for line in lines)
    assert any("left alone MX example.com" in line and "--replace" in line for line in lines)
    assert verification() == "Success" and client("lambda").list_functions()["Functions"]
    assert record_sets(public)[("example.com", "MX")] == ["10 mx.provider.example"]
