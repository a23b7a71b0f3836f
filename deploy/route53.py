"""Route 53, the one module that talks to it: the deploy's DNS records (``.build/deploy/<env>/dns.json``)
written into the domain's public hosted zone (`email-handler dns publish --route53`).

The zone is the most specific public hosted zone whose name is the domain or one of its parents
(ListHostedZonesByName). Every record set goes in one ChangeResourceRecordSets batch of UPSERTs (all or
nothing, Route 53 API reference, ChangeResourceRecordSets), after reading what the zone holds
(ListResourceRecordSets), so nothing of the user's is lost: an existing TXT record set keeps its other
strings and gains ours; an MX or CNAME record set that holds other values (the domain's current mail
servers, most often) is a conflict, reported and left alone unless ``replace`` says otherwise.

Values as Route 53 takes them ("Supported DNS record types", Route 53 DG,
https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/ResourceRecordTypes.html): a TXT value is one or
more strings in double quotes, each at most 255 characters, a quotation mark or backslash escaped with a
backslash and any other character outside printable ASCII as a three-digit octal escape; MX is
"priority host"; CNAME the host.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.aws import control_client
from deploy.errors import DeployError

TTL = 1800  # as in the zone file (deploy.dns.TTL)
TXT_STRING_MAX = 255
TYPES = ("TXT", "CNAME", "MX")  # what the deploy publishes; the deployer policy allows only these


def txt_value(text: str) -> str:
    """``text`` as one Route 53 TXT value: quoted strings of at most 255 bytes (UTF-8), escaped."""
    data = text.encode()
    chunks = [data[i : i + TXT_STRING_MAX] for i in range(0, len(data), TXT_STRING_MAX)] or [b""]
    return " ".join('"' + "".join(map(_escape, chunk)) + '"' for chunk in chunks)


def _escape(byte: int) -> str:
    if byte in b'"\\':
        return "\\" + chr(byte)
    return chr(byte) if 0x20 <= byte < 0x7F else f"\\{byte:03o}"


_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(rb"\\(\d{3}|.)", re.S)


def txt_strings(value: str) -> list[bytes] | None:
    """The strings of a TXT value, escapes undone, or None when it is not only quoted strings apart
    from white space (what Route 53 refuses)."""
    strings, at = [], 0
    for match in _STRING.finditer(value):
        if value[at : match.start()].strip():
            return None
        strings.append(_ESCAPE.sub(_undo, match.group(1).encode("latin-1", "backslashreplace")))
        at = match.end()
    return strings if strings and not value[at:].strip() else None


def _undo(match: re.Match[bytes]) -> bytes:
    found = match.group(1)
    return bytes([int(found, 8)]) if found.isdigit() else found


def txt_text(value: str) -> str:
    """The text of a TXT value as Route 53 answers it (its strings joined, escapes undone); a value that
    is not quoted strings is its own text."""
    strings = txt_strings(value)
    return value if strings is None else b"".join(strings).decode(errors="replace")


def normalized_name(name: str) -> str:
    """A record name as IAM's ``route53:ChangeResourceRecordSetsNormalizedRecordNames`` holds it: lower
    case, no final dot, any character but a-z, 0-9, hyphen, underscore and dot as a three-digit octal
    escape (Route 53 DG, "Using IAM policy conditions for fine-grained access control")."""
    out = []
    for char in name.lower().rstrip("."):
        if char.isascii() and (char.isalnum() or char in "-_."):
            out.append(char)
        else:
            out.extend(f"\\{b:03o}" for b in char.encode())
    return "".join(out)


def _host(value: str) -> str:
    return value.strip().rstrip(".").lower()


def _same(kind: str, a: str, b: str) -> bool:
    if kind == "TXT":
        return txt_text(a) == txt_text(b)
    if kind == "MX":
        pa, pb = a.split(), b.split()
        return len(pa) == len(pb) == 2 and pa[0] == pb[0] and _host(pa[1]) == _host(pb[1])
    return _host(a) == _host(b)


@dataclass(frozen=True, slots=True)
class Zone:
    id: str  # "/hostedzone/Z..." as Route 53 answers it
    name: str  # without the final dot


@dataclass(frozen=True, slots=True)
class Change:
    name: str
    type: str
    action: str  # create | update | unchanged | conflict
    values: tuple[str, ...]  # what the record set holds after the change (Route 53's format)
    detail: str = ""

    def line(self) -> str:
        return f"{self.action:<9} {self.type:<5} {self.name}" + (f"  ({self.detail})" if self.detail else "")


def hosted_zone(domain: str) -> Zone | None:
    """The most specific public hosted zone for ``domain`` (its own, or a parent's), or None."""
    route53 = control_client("route53")
    labels = domain.lower().rstrip(".").split(".")
    for i in range(len(labels) - 1):
        candidate = ".".join(labels[i:])
        # Zones come back in order from DNSName on: those named exactly ``candidate`` first.
        found = route53.list_hosted_zones_by_name(DNSName=candidate, MaxItems="100").get("HostedZones", [])
        public = [
            z
            for z in found
            if z["Name"].rstrip(".").lower() == candidate and not (z.get("Config") or {}).get("PrivateZone")
        ]
        if len(public) > 1:
            raise DeployError(
                f"{len(public)} public hosted zones are named {candidate} "
                f"({', '.join(z['Id'] for z in public)}); only the one your registrar delegates to answers",
                "delete the others, or publish the records of .build/deploy/<env>/dns.zone by hand",
            )
        if public:
            return Zone(public[0]["Id"], candidate)
    return None


def wanted(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """dns.json's records as record sets: (name, type) -> values in Route 53's format."""
    sets: dict[tuple[str, str], list[str]] = {}
    for record in records:
        kind = record["type"].upper()
        if kind not in TYPES:
            continue
        value = txt_value(record["value"]) if kind == "TXT" else record["value"]
        sets.setdefault((_host(record["name"]), kind), []).append(value)
    return sets


def _existing(zone: Zone, name: str, kind: str) -> list[str] | None:
    answer = control_client("route53").list_resource_record_sets(
        HostedZoneId=zone.id, StartRecordName=name, StartRecordType=kind, MaxItems="1"
    )
    for found in answer.get("ResourceRecordSets", []):
        if _host(found["Name"]) == name and found["Type"] == kind:
            return [r["Value"] for r in found.get("ResourceRecords", [])]
    return None


def plan(zone: Zone, records: list[dict[str, Any]], replace: bool = False) -> list[Change]:
    """What publishing ``records`` (dns.json's) into ``zone`` changes, record set by record set."""
    changes = []
    for (name, kind), values in wanted(records).items():
        have = _existing(zone, name, kind)
        if have is None:
            changes.append(Change(name, kind, "create", tuple(values)))
            continue
        missing = [v for v in values if not any(_same(kind, v, h) for h in have)]
        others = [h for h in have if not any(_same(kind, v, h) for v in values)]
        if not missing:
            changes.append(Change(name, kind, "unchanged", tuple(have)))
        elif kind == "TXT" and not _spf_clash(others, values):
            changes.append(Change(name, kind, "update", (*have, *missing), "keeps its other strings"))
        elif replace:
            changes.append(Change(name, kind, "update", tuple(values), "replaces " + ", ".join(others)))
        else:
            changes.append(Change(name, kind, "conflict", tuple(have), "holds " + ", ".join(others)))
    return changes


def _spf_clash(others: list[str], values: list[str]) -> bool:
    """Two SPF records at one name make SPF fail (RFC 7208 section 4.5: permerror)."""

    def spf(v: str) -> bool:
        return txt_text(v).lower().startswith("v=spf1")

    return any(map(spf, others)) and any(map(spf, values))


def apply(zone: Zone, changes: list[Change]) -> str:
    """One ChangeResourceRecordSets batch of UPSERTs for every create and update; returns its change id
    ('' when there was nothing to change)."""
    batch = [
        {
            "Action": "UPSERT",
            "ResourceRecordSet": {
                "Name": c.name,
                "Type": c.type,
                "TTL": TTL,
                "ResourceRecords": [{"Value": v} for v in c.values],
            },
        }
        for c in changes
        if c.action in ("create", "update")
    ]
    if not batch:
        return ""
    answer = control_client("route53").change_resource_record_sets(
        HostedZoneId=zone.id,
        ChangeBatch={"Comment": "email-handler dns publish --route53", "Changes": batch},
    )
    return str(answer["ChangeInfo"]["Id"])


def publish(
    dns_json: Path, replace: bool, dry_run: bool, report: Callable[[str], None]
) -> tuple[Zone, list[Change]]:
    """Publish the records of ``dns_json`` (what the deploy wrote) into the domain's hosted zone."""
    try:
        written = json.loads(dns_json.read_text())
    except (OSError, ValueError) as exc:
        raise DeployError(
            f"cannot read {dns_json}: {exc}", "run email-handler deploy first (it writes the records there)"
        ) from None
    domain = written["domain"]
    zone = hosted_zone(domain)
    if zone is None:
        raise DeployError(
            f"no public Route 53 hosted zone for {domain} or a parent domain in this account",
            f"publish the records of {dns_json.with_name('dns.zone')} at your DNS provider",
        )
    changes = plan(zone, written["records"], replace)
    for change in changes:
        report(f"[dns] {'would ' if dry_run else ''}{change.line()}")
    if not dry_run:
        change_id = apply(zone, changes)
        if change_id:
            report(
                f"[dns] Route 53 zone {zone.name} ({zone.id}): change {change_id} submitted; SES checks the "
                "records on its next poll (email-handler status says when)"
            )
    return zone, changes
