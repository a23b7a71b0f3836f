"""The Region's receiving, by evidence (deploy/regions.py): the inbound-smtp endpoint's name in DNS, the
table only when DNS cannot answer, an unknown Region a warning. DNS is a nameserver on loopback
(tests/support/dnsserver.py): no test needs the network."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from common.aws import client
from deploy import regions
from deploy.errors import DeployError
from deploy.main import Options, WaitingOnDnsError, deploy
from tests.integration.test_fresh_account import account  # noqa: F401  (the fixture)
from tests.support.deploy import images
from tests.support.dnsserver import LoopbackDns

PUBLISHED = {"inbound-smtp.eu-north-1.amazonaws.com": "203.0.113.25"}


def test_a_resolving_endpoint_says_yes_nxdomain_says_no_and_the_table_answers_only_when_dns_cannot() -> None:
    with LoopbackDns(PUBLISHED) as server:
        lookup = regions.public_dns(server.resolver())
        found = regions.receiving("eu-north-1", lookup)
        assert (found.receives, found.evidence) == (True, "inbound-smtp.eu-north-1.amazonaws.com resolves")
        # listed in the table, but DNS has the last word
        absent = regions.receiving("us-east-1", lookup)
        assert absent.receives is False and "does not exist (NXDOMAIN)" in absent.evidence
        assert server.queries == [
            "inbound-smtp.eu-north-1.amazonaws.com",
            "inbound-smtp.us-east-1.amazonaws.com",
        ]

    with LoopbackDns(failing=True) as server:  # SERVFAIL: DNS cannot say
        lookup = regions.public_dns(server.resolver())
        listed = regions.receiving("us-west-1", lookup)
        assert (
            listed.receives is True
            and "DNS could not answer" in listed.evidence
            and "listed" in listed.evidence
        )
        unknown = regions.receiving("ap-east-2", lookup)
        assert unknown.receives is None and "not listed" in unknown.evidence
        assert "dig +short inbound-smtp.ap-east-2.amazonaws.com" in unknown.check()

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # a nameserver that never answers
        silent.bind(("127.0.0.1", 0))
        import dns.resolver

        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers, resolver.port = ["127.0.0.1"], silent.getsockname()[1]
        timed_out = regions.receiving("eu-west-3", regions.public_dns(resolver, lifetime=0.3))
        assert timed_out.receives is True and "LifetimeTimeout" in timed_out.evidence

    no_dns = regions.receiving("sa-east-1", None)  # an emulator: the table
    assert no_dns.receives is True and no_dns.evidence.startswith("DNS not asked")


def deploy_to(
    region: str, env: dict[str, str], tmp_path: Path, server: LoopbackDns, lines: list[str]
) -> None:
    deploy(
        Options(build_dir=tmp_path, region=region, receiving_lookup=regions.public_dns(server.resolver())),
        {**env, "AWS_REGION": region},
        report=lines.append,
        images=images(),
    )


def test_the_deploy_refuses_a_region_dns_says_does_not_receive_before_anything_changes(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "af-south-1")
    with LoopbackDns(PUBLISHED) as server, pytest.raises(DeployError) as err:
        deploy_to("af-south-1", account, tmp_path, server, [])
    assert "SES email receiving is not available in af-south-1" in str(err.value)
    assert "NXDOMAIN" in str(err.value) and "--region us-east-1" in err.value.fix
    assert "dig +short inbound-smtp.af-south-1.amazonaws.com" in err.value.fix
    assert client("sesv2", "af-south-1").list_email_identities()["EmailIdentities"] == []


def test_a_region_dns_finds_is_deployed_and_its_zone_names_its_endpoint(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    lines: list[str] = []
    with LoopbackDns(PUBLISHED) as server, pytest.raises(WaitingOnDnsError):
        deploy_to("eu-north-1", account, tmp_path, server, lines)
    assert "[deploy] SES receives mail in eu-north-1: inbound-smtp.eu-north-1.amazonaws.com resolves" in lines
    zone = (tmp_path / "prd" / "dns.zone").read_text()
    assert "example.com.\t1800\tIN\tMX\t10 inbound-smtp.eu-north-1.amazonaws.com." in zone


def test_a_region_neither_dns_nor_the_table_knows_is_a_warning_and_the_deploy_goes_on(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "ap-southeast-5")
    lines: list[str] = []
    with LoopbackDns(failing=True) as server, pytest.raises(WaitingOnDnsError):
        deploy_to("ap-southeast-5", account, tmp_path, server, lines)
    [warning] = [line for line in lines if line.startswith("[deploy] warning: cannot tell")]
    assert "whether SES receives mail in ap-southeast-5" in warning and "dig +short" in warning
    assert client("sesv2", "ap-southeast-5").list_email_identities()["EmailIdentities"]  # it went on
