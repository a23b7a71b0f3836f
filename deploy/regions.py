"""Where SES receives mail, decided by evidence: the Region's inbound SMTP endpoint in public DNS.

A domain receives through SES when its MX names ``inbound-smtp.<region>.amazonaws.com``, "the inbound
SMTP endpoint URLs listed in this table" (SES DG, "Regions and Amazon SES",
https://docs.aws.amazon.com/ses/latest/dg/regions.html; the table: AWS General Reference, "Amazon Simple
Email Service endpoints and quotas", Email receiving endpoints,
https://docs.aws.amazon.com/general/latest/gr/ses.html#ses_inbound_endpoints). AWS adds Regions to that
table, so the deploy asks DNS: the endpoint's name resolving says SES receives there, NXDOMAIN says it does
not. :data:`RECEIVING_REGIONS` answers only when DNS cannot (offline, no resolver, an emulator), and a
Region it does not list is then a warning, never a refusal. dnspython is a host-only dependency
(pyproject's ``local`` extra): it never ships in the function images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The Email receiving endpoints table, with the Regions whose public inbound-smtp endpoints answer
# (checked 2026-11): us-west-1, ap-south-1, ap-northeast-2, sa-east-1, eu-west-3 and eu-north-1 beside
# the eleven of 2024. Used only when DNS cannot answer.
RECEIVING_REGIONS = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "ca-central-1",
        "sa-east-1",
        "eu-central-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-north-1",
        "ap-south-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
    }
)
TABLE_URL = "https://docs.aws.amazon.com/general/latest/gr/ses.html#ses_inbound_endpoints"
LOOKUP_SECONDS = 5.0

# name -> True when it has an address, False when it does not exist (NXDOMAIN); raises
# dns.exception.DNSException when DNS cannot say (a timeout, no resolver, SERVFAIL, no A record).
Lookup = Callable[[str], bool]


def endpoint(region: str) -> str:
    return f"inbound-smtp.{region}.amazonaws.com"


@dataclass(frozen=True, slots=True)
class Receiving:
    region: str
    receives: bool | None  # None: neither DNS nor the table can say
    evidence: str

    def check(self) -> str:
        """What the user can run to see for themselves."""
        return f"dig +short {endpoint(self.region)} (an address: SES receives there); the table: {TABLE_URL}"


def public_dns(resolver: Any = None, lifetime: float = LOOKUP_SECONDS) -> Lookup:
    """A lookup through ``resolver`` (a ``dns.resolver.Resolver``; default: the system's, from
    /etc/resolv.conf). Tests point a Resolver at a nameserver of their own."""

    def lookup(name: str) -> bool:
        import dns.resolver

        try:
            (resolver or dns.resolver.Resolver()).resolve(name, "A", lifetime=lifetime)
        except dns.resolver.NXDOMAIN:
            return False
        return True

    return lookup


def receiving(region: str, lookup: Lookup | None) -> Receiving:
    """Does SES receive mail in ``region``? ``lookup`` None: DNS is not asked (an emulator): the table."""
    import dns.exception

    name = endpoint(region)
    why = "DNS not asked (an emulator)"
    if lookup is not None:
        try:
            found = lookup(name)
        except dns.exception.DNSException as exc:
            why = f"DNS could not answer for {name} ({type(exc).__name__})"
        else:
            return Receiving(region, found, f"{name} {'resolves' if found else 'does not exist (NXDOMAIN)'}")
    if region in RECEIVING_REGIONS:
        return Receiving(region, True, f"{why}; listed in SES's Email receiving endpoints table")
    return Receiving(region, None, f"{why}; not listed in SES's Email receiving endpoints table")
