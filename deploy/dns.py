"""The DNS records a deployment needs, as SES reports them: printed, and written for the user's DNS.

``.build/deploy/<env>/dns.zone`` is BIND zone syntax (RFC 1035 section 5, absolute names), ready to
paste into a DNS provider's import or to hand to ``email-handler dns publish`` on the emulator;
``dns.json`` holds the same records with their purpose and SES's status of each check.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common.aws import control_client
from deploy.config import Config
from deploy.regions import endpoint

BUILD_DIR = Path(__file__).resolve().parents[1] / ".build" / "deploy"
TTL = 1800
MAIL_FROM_LABEL = "bounce"  # MAIL FROM domain bounce.<DOMAIN_NAME>


@dataclass(frozen=True, slots=True)
class Record:
    name: str
    type: str  # TXT | CNAME | MX
    value: str  # MX: "10 host"; TXT: the text without quotes
    purpose: str
    status: str  # SES's check of it: Success, Pending, ..., or "unchecked" (SES cannot check receiving MX)

    def zone_line(self) -> str:
        value = f'"{self.value}"' if self.type == "TXT" else f"{self.value}."
        return f"{self.name}.\t{TTL}\tIN\t{self.type}\t{value}"

    def line(self) -> str:
        shown = f'"{self.value}"' if self.type == "TXT" else self.value
        return f"{self.type:<5} {self.name}  {shown}   ({self.purpose}: {self.status})"


def records(cfg: Config) -> list[Record]:
    """Every record the domain needs, with SES's status of its check (SES DG, "Verifying a DKIM domain
    identity", "Using a custom MAIL FROM domain", "Publishing an MX record for Amazon SES email
    receiving")."""
    ses, domain = control_client("ses"), cfg.domain_name
    verify = (
        ses.get_identity_verification_attributes(Identities=[domain])
        .get("VerificationAttributes", {})
        .get(domain, {})
    )
    dkim = ses.get_identity_dkim_attributes(Identities=[domain]).get("DkimAttributes", {}).get(domain, {})
    mail_from = (
        ses.get_identity_mail_from_domain_attributes(Identities=[domain])
        .get("MailFromDomainAttributes", {})
        .get(domain, {})
    )
    return listed(cfg, verify, dkim, mail_from)


def listed(
    cfg: Config, verify: dict[str, Any], dkim: dict[str, Any], mail_from: dict[str, Any]
) -> list[Record]:
    """The records from SES's verification, DKIM and MAIL FROM attributes of the domain (each {} when
    SES has none yet: then only the MAIL FROM and receiving records, which need no token)."""
    domain = cfg.domain_name
    out = []
    if verify.get("VerificationToken"):
        out.append(
            Record(
                f"_amazonses.{domain}",
                "TXT",
                verify["VerificationToken"],
                "domain verification",
                verify.get("VerificationStatus") or "not started",
            )
        )
    for token in dkim.get("DkimTokens", []):
        out.append(
            Record(
                f"{token}._domainkey.{domain}",
                "CNAME",
                f"{token}.dkim.amazonses.com",
                "DKIM",
                dkim.get("DkimVerificationStatus") or "not started",
            )
        )
    status = mail_from.get("MailFromDomainStatus") or "not set up yet"
    bounce = f"{MAIL_FROM_LABEL}.{domain}"
    out += [
        Record(bounce, "MX", f"10 feedback-smtp.{cfg.region}.amazonses.com", "MAIL FROM", status),
        Record(bounce, "TXT", "v=spf1 include:amazonses.com ~all", "MAIL FROM SPF", status),
    ]
    # The deploy refuses a Region whose inbound-smtp endpoint does not exist (deploy/regions.py).

    inbound = f"10 {endpoint(cfg.region)}"
    out += [
        Record(
            domain,
            "MX",
            inbound,
            f"receiving: ALL mail for @{domain} goes to SES, not only "
            f"{cfg.public_email}; move the domain's other mailboxes first",
            "unchecked",
        ),
        Record(cfg.thread_domain, "MX", inbound, "receiving the owner's replies", "unchecked"),
    ]
    return out


def pending(found: list[Record]) -> list[Record]:
    return [r for r in found if r.status != "Success"]


def zone(found: list[Record], cfg: Config) -> str:
    head = [
        f"; DNS records for {cfg.domain_name} ({cfg.prefix}, SES in {cfg.region}), "
        "written by email-handler deploy.",
        "; Publish every record at your DNS provider (many import BIND zone files), "
        "then run the deploy again.",
    ]
    return "\n".join(head + [r.zone_line() for r in found]) + "\n"


def write(cfg: Config, found: list[Record], root: Path = BUILD_DIR) -> Path:
    """``<root>/<env>/dns.zone`` and ``dns.json``; returns the zone file's path."""
    folder = root / cfg.env
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dns.json").write_text(
        json.dumps(
            {"domain": cfg.domain_name, "region": cfg.region, "records": [asdict(r) for r in found]}, indent=2
        )
        + "\n"
    )
    path = folder / "dns.zone"
    path.write_text(zone(found, cfg))
    return path
