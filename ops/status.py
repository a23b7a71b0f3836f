"""`email-handler status`: can mail flow through this deployment, and if not, why not and what next.

Everything is read, nothing changed. ``ready`` is true only when a mail from an arbitrary contact
would be received, forwarded to the owner, acknowledged and answerable; the report says, in this order,
which of these work and what to do next:

1. receiving: the SES domain identity, the MX records (the emulator's fresh-account model answers for
   DNS locally; on AWS they are resolved with dnspython, a host-only dependency), the active receipt
   rules and the functions' ``live`` aliases;
2. forwarding to the owner: in the SES sandbox SES sends only to verified addresses, so PRIVATE_EMAIL
   (or its domain) must be a verified identity, or the account must have production access;
3. acks and replies to anyone: production access (SESv2 GetAccount ``ProductionAccessEnabled``), with
   the review status of a request (``Details.ReviewDetails.Status``);
4. alerts reach the owner: the alert topic's e-mail subscription to PRIVATE_EMAIL is confirmed (SNS
   lists it as ``PendingConfirmation`` until the link in its mail is clicked). Not part of ``ready``
   (mail flows without it) but reported with what to do.

Besides: DKIM, MAIL FROM, the sending quota and rate, the DLQ depths, the dashboard's link and the
alarms (ALARM is a fault; INSUFFICIENT_DATA is how every alarm starts on AWS and stays until its
metric has data).
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.aws import control_client, or_none
from common.runtime import addresses
from common.runtime.config import dlq_name
from common.store import holds, sendstatus
from deploy import dashboard
from deploy.config import Config
from deploy.functions import FUNCTIONS, SENDERS
from deploy.lambdas import ALIAS, async_dlq, function_name
from deploy.preflight import allowed_send_rate
from deploy.receiving import rule_names
from deploy.resources import SUPPRESSED_REASONS, event_queues, queue_url, topic_arn
from local.fresh import DNS_PATH
from local.guard import admin_request
from local.ports import PORTS, SMTP_PORT

RECEIVING, FORWARDING, ANSWERING, ALERTS = (
    "receiving",
    "forwarding to the owner",
    "acks and replies to anyone",
    "alerts reach the owner",
)
# ``ready``: a contact's mail is received, forwarded, acked and answerable
READY_FLOWS = (RECEIVING, FORWARDING, ANSWERING)


def _check(name: str, value: Any, ok: bool, blocks: bool, detail: str = "") -> dict[str, Any]:
    """One line of the report; ``blocks``: mail cannot flow while it is not ok."""
    return {"check": name, "value": value, "ok": ok, "blocks": blocks and not ok, "detail": detail}


def _mx_model(endpoint: str, name: str) -> list[str] | None:
    """The MX hosts the emulator's fresh-account model publishes for ``name`` (None: no model to ask)."""

    try:
        with urllib.request.urlopen(
            admin_request(f"{endpoint}{DNS_PATH}?name={name}"), timeout=5
        ) as response:
            return list(json.loads(response.read())["mx"])
    except (OSError, ValueError, KeyError, urllib.error.HTTPError):
        return None


def mx_dns(name: str) -> list[str]:
    """The MX hosts public DNS answers for ``name`` ([] for no such name or no MX record); other
    failures (timeouts, no resolver) raise ``dns.exception.DNSException``. dnspython is a host-only
    dependency (pyproject's ``local`` extra), imported here only."""
    import dns.resolver

    try:
        answer = dns.resolver.resolve(name, "MX", lifetime=10)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []
    return sorted(str(r.exchange).rstrip(".").lower() for r in answer)


def _mx_checks(cfg: Config, endpoint: str, resolve: Callable[[str], list[str]]) -> list[dict[str, Any]]:
    """Receiving needs MX 10 inbound-smtp.<region>.amazonaws.com on the domain and the thread domain.
    Against an emulator the fresh-account model is the DNS; an emulator without it (moto's kind account,
    LocalStack) has no DNS to ask, and its local ingress receives without MX."""
    import dns.exception

    inbound = f"inbound-smtp.{cfg.region}.amazonaws.com"
    out = []
    for name in (cfg.domain_name, cfg.thread_domain):
        if endpoint:
            hosts = _mx_model(endpoint, name)
            if hosts is None:
                out.append(_check(f"MX {name}", "no DNS on this emulator", True, False))
                continue
        else:
            try:
                hosts = resolve(name)
            except dns.exception.DNSException as exc:
                out.append(
                    _check(
                        f"MX {name}",
                        f"lookup failed ({type(exc).__name__})",
                        False,
                        True,
                        f"could not check; it should be 10 {inbound}",
                    )
                )
                continue
        out.append(
            _check(
                f"MX {name}",
                ", ".join(hosts) or "none",
                inbound in hosts,
                True,
                "" if inbound in hosts else f"publish MX 10 {inbound} (see .build/deploy/<env>/dns.zone)",
            )
        )
    return out


def _identity_status(ses: Any, *identities: str) -> str:
    """The best verification status among ``identities`` (an address is verified by itself or its domain)."""
    found = ses.get_identity_verification_attributes(Identities=list(identities)).get(
        "VerificationAttributes", {}
    )
    statuses = [found.get(i, {}).get("VerificationStatus") for i in identities]
    if "Success" in statuses:
        return "Success"
    return next((s for s in statuses if s), "not an identity")


def alert_subscription(cfg: Config) -> str:
    """The state of the alert topic's e-mail subscription to PRIVATE_EMAIL: ``confirmed``,
    ``PendingConfirmation`` (SNS lists an unconfirmed subscription with that in place of its ARN,
    SNS API reference, ListSubscriptionsByTopic/Subscribe), ``none`` or ``no topic``."""

    sns = control_client("sns")
    arn = topic_arn(cfg, cfg.alert_topic)
    listed = or_none(lambda: sns.list_subscriptions_by_topic(TopicArn=arn), "NotFound", "NotFoundException")
    if listed is None:
        return "no topic"
    owner = cfg.private_email.lower()
    mine = [
        s
        for s in listed.get("Subscriptions", [])
        if s.get("Protocol") == "email" and str(s.get("Endpoint", "")).lower() == owner
    ]
    if not mine:
        return "none"
    for sub in mine:
        sub_arn = str(sub.get("SubscriptionArn", ""))
        if sub_arn.startswith("arn:"):
            attrs = or_none(
                lambda: sns.get_subscription_attributes(SubscriptionArn=sub_arn),  # noqa: B023
                "NotFound",
            )
            if attrs and str(attrs.get("Attributes", {}).get("PendingConfirmation", "false")) != "true":
                return "confirmed"
    return "PendingConfirmation"


def _alarm_check(cfg: Config) -> tuple[dict[str, Any], list[str]]:
    """Alarms by state: ALARM is a fault; INSUFFICIENT_DATA is where every alarm starts ("Unchecked:
    Initial alarm creation") and stays until its metric has a data point, so it is not one."""
    by_state: dict[str, list[str]] = {}
    for page in (
        control_client("cloudwatch").get_paginator("describe_alarms").paginate(AlarmNamePrefix=cfg.prefix)
    ):
        for alarm in page.get("MetricAlarms", []):
            by_state.setdefault(alarm["StateValue"], []).append(alarm["AlarmName"])
    firing = by_state.get("ALARM", [])
    counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_state.items())) or "no alarms"
    waiting = len(by_state.get("INSUFFICIENT_DATA", []))
    detail = (
        "in ALARM: " + ", ".join(firing)
        if firing
        else f"{waiting} without data yet (normal until their metric has a data point)"
        if waiting
        else ""
    )
    return _check("alarms", counts, not firing, False, detail), firing


def _dashboard(cfg: Config) -> dict[str, Any]:
    """The operator's dashboard (deploy/dashboard.py) and its console link; the local modes make none."""

    found = or_none(
        lambda: control_client("cloudwatch").get_dashboard(DashboardName=dashboard.name(cfg)),
        dashboard.NOT_FOUND,
    )
    return {"name": dashboard.name(cfg), "url": dashboard.console_url(cfg), "exists": found is not None}


def _dashboard_check(board: dict[str, Any]) -> dict[str, Any]:
    found = bool(board["exists"])
    return _check(
        "dashboard",
        board["url"] if found else "missing",
        found,
        False,
        "" if found else "email-handler deploy makes it",
    )


def _flow(name: str, ok: bool, next_step: str) -> dict[str, Any]:
    return {"flow": name, "ok": ok, "next": "" if ok else next_step}


def collect(
    cfg: Config,
    account: str,
    environ: Mapping[str, str] | None = None,
    resolve: Callable[[str], list[str]] = mx_dns,
    local: LocalStack | None = None,
) -> dict[str, Any]:
    """The status of the deployment ``cfg`` names, as one JSON-able dict with a top-level ``ready``;
    ``resolve``: the MX lookup used on AWS (tests give their own DNS); ``local``: a local mode's
    endpoints, read in place of the functions and receipt rules a deployment has."""
    environ = os.environ if environ is None else environ
    ses, domain = control_client("ses"), cfg.domain_name
    checks = _domain_checks(ses, domain)
    checks += _mx_checks(cfg, environ.get("AWS_ENDPOINT_URL", ""), resolve)
    account_checks, sending = _account_checks(cfg, ses)
    checks += account_checks
    mailboxes = _mailboxes(cfg, ses)
    checks += _mailbox_checks(mailboxes, sending["sandbox"])
    contacts = _test_contacts(cfg, ses) if sending["sandbox"] else {}
    if sending["sandbox"]:
        checks.append(_test_contact_check(contacts))
    quota = sending["send_quota"]
    if local is None:
        deployed, versions, rate = _deployed_checks(cfg, float(quota.get("MaxSendRate", 0) or 0))
    else:
        deployed, versions, rate = _local_checks(cfg, local)
    checks += deployed
    if local is None:
        checks.append(_suppression_check(cfg, sending["production_access"]["enabled"]))
    depths = _dlq_depths(cfg)
    waiting = sum(depths.values())
    checks.append(
        _check(
            "dead-letter queues",
            f"{waiting} messages",
            waiting == 0,
            False,
            "email-handler dlq list / dlq redrive" if waiting else "",
        )
    )
    alarm_check, alarms = _alarm_check(cfg)
    checks.append(alarm_check)
    subscription_check, subscribed = _subscription_check(cfg)
    checks.append(subscription_check)
    board = _dashboard(cfg) if local is None else None
    if board is not None:
        checks.append(_dashboard_check(board))
    flows = _flows(checks)
    reasons = [
        f"{c['check']}: {c['value']} ({c['detail']})" if c["detail"] else f"{c['check']}: {c['value']}"
        for c in checks
        if c["blocks"]
    ]
    # Every blocking check belongs to a flow that ``ready`` needs, so the two agree.
    ready = all(f["ok"] for f in flows if f["flow"] in READY_FLOWS) and not reasons
    return {
        "ready": ready,
        "reasons": reasons,
        "flows": flows,
        "deployment": cfg.prefix,
        "account": account,
        "region": cfg.region,
        "domain": domain,
        "sandbox": sending["sandbox"],
        "production_access": sending["production_access"],
        "owner_address": sending["owner_address"],
        "alert_subscription": subscribed,
        "test_contacts": contacts,
        "mailboxes": mailboxes,
        "send_quota": quota,
        "daily_quota_used_percent": sending["daily_quota_used_percent"],
        "send_rate": rate,
        # what the account allows now that the deployment does not use yet (the next deploy sets it)
        "deploy_fixes": [c["check"] for c in checks if REDEPLOY in c["detail"]],
        "versions": versions,
        "dlq_depths": depths,
        "alarms": alarms,
        "dashboard": board,  # None in the local modes (email-handler stats counts there)
        "checks": checks,
    }


def _domain_checks(ses: Any, domain: str) -> list[dict[str, Any]]:
    """The domain's SES identity, its DKIM and its MAIL FROM domain."""
    checks: list[dict[str, Any]] = []
    status = _identity_status(ses, domain)
    checks.append(
        _check(
            "domain identity",
            status,
            status == "Success",
            True,
            "" if status == "Success" else "publish the records of .build/deploy/<env>/dns.zone",
        )
    )
    dkim = ses.get_identity_dkim_attributes(Identities=[domain]).get("DkimAttributes", {}).get(domain, {})
    dkim_status = dkim.get("DkimVerificationStatus") or "not started"
    checks.append(
        _check(
            "DKIM",
            dkim_status,
            dkim_status == "Success",
            False,
            "" if dkim_status == "Success" else "unsigned mail fails DMARC at many receivers",
        )
    )
    mail_from = (
        ses.get_identity_mail_from_domain_attributes(Identities=[domain])
        .get("MailFromDomainAttributes", {})
        .get(domain, {})
    )
    mf_status = mail_from.get("MailFromDomainStatus") or "not set"
    behaviour = mail_from.get("BehaviorOnMXFailure", "")
    # RejectMessage refuses every send until MAIL FROM is Success (SES API reference,
    # SetIdentityMailFromDomain).
    checks.append(
        _check(
            "MAIL FROM",
            f"{mail_from.get('MailFromDomain') or '-'} {mf_status} ({behaviour or '-'})",
            mf_status == "Success",
            behaviour == "RejectMessage",
            ""
            if mf_status == "Success"
            else "SES sends with amazonses.com as MAIL FROM meanwhile"
            if behaviour != "RejectMessage"
            else "SES refuses every send until it is Success",
        )
    )
    return checks


def _account_checks(cfg: Config, ses: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The SES account: the owner's address, production access and the sending quota; with the
    report's fields about them (sandbox, production access, owner's address, quota)."""
    account_info = or_none(lambda: control_client("sesv2").get_account(), "NotFoundException") or {}
    quota = account_info.get("SendQuota", {})
    production = bool(account_info.get("ProductionAccessEnabled", False))
    sandbox = not production
    review = (account_info.get("Details") or {}).get("ReviewDetails") or {}
    review_status = str(review.get("Status") or "not requested")
    owner = cfg.private_email
    owner_status = _identity_status(ses, owner, owner.split("@")[-1]) if owner else "not configured"
    owner_ok = owner_status == "Success"
    checks: list[dict[str, Any]] = []
    checks.append(
        _check(
            "owner's address",
            f"{owner or '-'} {owner_status}",
            owner_ok or production,
            True,
            ""
            if owner_ok or production
            else f"click the link SES mailed to {owner} (to send it again: "
            f"email-handler ses verify-address {owner})",
        )
    )
    checks.append(
        _check(
            "production access",
            ("granted" if production else "sandbox")
            + f" (review: {review_status}{', case ' + review['CaseId'] if review.get('CaseId') else ''})",
            production,
            True,
            ""
            if production
            else "AWS is reviewing the request; SES answers by mail"
            if review_status == "PENDING"
            else "email-handler ses request-production-access",
        )
    )
    sent, most = float(quota.get("SentLast24Hours", 0)), float(quota.get("Max24HourSend", 0))
    used = round(100 * sent / most, 1) if most > 0 else 0.0
    hint = "only verified recipients until production access" if sandbox else ""
    if most > 0 and sent >= most:  # the senders keep messages waiting (QUOTA_WAIT_SECONDS), never in a DLQ
        hint = "; ".join(
            filter(None, ["daily quota used up: sends wait until the 24-hour window has room", hint])
        )
    checks.append(
        _check(
            "sending",
            f"{'sandbox' if sandbox else 'production'}: {sent:g} of {most:g} in 24 h "
            f"({used:g}% of the day's quota used), {quota.get('MaxSendRate', 0):g}/s",
            not sandbox and sent < most,
            False,
            hint,
        )
    )
    return checks, {
        "sandbox": sandbox,
        "production_access": {"enabled": production, "review_status": review_status, **review},
        "owner_address": {"address": owner, "status": owner_status},
        "send_quota": quota,
        "daily_quota_used_percent": used,
    }


def _mailboxes(cfg: Config, ses: Any) -> dict[str, dict[str, Any]]:
    """Every address's own mailboxes (``forward_to``; docs/owner.md, "Several mailboxes"): the addresses
    each reads, its SES verification (the sandbox sends only to verified mailboxes) and its hold, if
    a bounce holds forwards to it (common/store/holds.py)."""
    table = addresses.of(cfg)
    every = (*table.listed, *((table.catch_all,) if table.catch_all else ()))
    found: dict[str, dict[str, Any]] = {}
    for public in every:
        for box in public.forward_to:
            found.setdefault(box.lower(), {"addresses": []})["addresses"].append(public.address)
    for box, row in found.items():
        row["status"] = _identity_status(ses, box, box.split("@")[-1])
        entry = sendstatus.recipient_entry(cfg, box)
        row["held"] = str(entry.get("heldReason") or "held") if holds.is_held(entry) else ""
    return found


def _mailbox_checks(mailboxes: dict[str, dict[str, Any]], sandbox: bool) -> list[dict[str, Any]]:
    """One check per mailbox, not part of ``ready`` (the owner's mail flows without it): verified while
    in the sandbox, and not held."""
    return [
        _check(
            f"mailbox {box}",
            f"{', '.join(m['addresses'])}: {m['status']}{'; held: ' + m['held'] if m['held'] else ''}",
            (m["status"] == "Success" or not sandbox) and not m["held"],
            False,
            f"in the sandbox it needs verifying: email-handler ses verify-address {box}"
            if sandbox and m["status"] != "Success"
            else "forwards to it wait: fix the mailbox, then email-handler suppression remove " + box
            if m["held"]
            else "",
        )
        for box, m in mailboxes.items()
    ]


def _test_contacts(cfg: Config, ses: Any) -> dict[str, str]:
    """The address identities other than the owner's mailboxes (`email-handler ses verify-address`), each
    with SES's verification status: in the sandbox, the contacts acks and replies can reach."""
    listed = ses.list_identities(IdentityType="EmailAddress", MaxItems=1000).get("Identities", [])
    others = sorted(a for a in listed if a.lower() not in cfg.senders)  # the mailboxes are listed above
    if not others:
        return {}
    found = ses.get_identity_verification_attributes(Identities=others).get("VerificationAttributes", {})
    return {a: str(found.get(a, {}).get("VerificationStatus") or "not an identity") for a in others}


def _test_contact_check(contacts: dict[str, str]) -> dict[str, Any]:
    """Not part of ``ready``: how the owner tests a reply before production access (docs/deploy.md, "Test
    a reply")."""
    pending = [a for a, status in contacts.items() if status != "Success"]
    return _check(
        "test contacts",
        ", ".join(f"{a} {status}" for a, status in contacts.items()) or "none",
        not pending,
        False,
        f"click the link SES mailed to {pending[0]} (to send it again: email-handler ses verify-address "
        f"{pending[0]})"
        if pending
        else "replies reach these addresses in the sandbox"
        if contacts
        else "to test a reply now, from a second mailbox of yours: email-handler ses verify-address "
        "SECOND@MAILBOX (docs/deploy.md, Test a reply)",
    )


def _dlq_depths(cfg: Config) -> dict[str, int]:
    """Messages waiting in each dead-letter queue that exists: the event queues' and the async one."""

    depths = {}
    for queue in [dlq_name(q) for q in event_queues(cfg)] + [async_dlq(cfg)]:
        url = queue_url(queue)
        if url:
            attrs = control_client("sqs").get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            depths[queue] = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
    return depths


def _subscription_check(cfg: Config) -> tuple[dict[str, Any], str]:
    subscribed = alert_subscription(cfg)
    check = _check(
        "alert subscription",
        f"{cfg.private_email or '-'} {subscribed}",
        subscribed == "confirmed",
        False,
        ""
        if subscribed == "confirmed"
        else f"click the link in the mail 'AWS Notification - Subscription Confirmation' sent to "
        f"{cfg.private_email}; until then alarms and alerts reach no one"
        if subscribed == "PendingConfirmation"
        else "deploy again (it subscribes PRIVATE_EMAIL to the alert topic)",
    )
    return check, subscribed


def _deployed_checks(cfg: Config, max_rate: float) -> tuple[list[dict[str, Any]], dict[str, str | None], Any]:
    """On a deployment: the functions' ``live`` aliases, the senders' configured rate, the receipt rules."""

    ses = control_client("ses")
    checks: list[dict[str, Any]] = []
    lam = control_client("lambda")
    versions: dict[str, str | None] = {}
    for spec in FUNCTIONS:
        name = function_name(cfg, spec.name)
        alias = or_none(lambda: lam.get_alias(FunctionName=name, Name=ALIAS), "ResourceNotFoundException")  # noqa: B023
        versions[spec.name] = alias["FunctionVersion"] if alias else None
    missing = [name for name, version in versions.items() if version is None]
    checks.append(
        _check(
            "functions",
            ", ".join(f"{n}:{v or '-'}" for n, v in versions.items()),
            not missing,
            True,
            f"not deployed: {', '.join(missing)}" if missing else "",
        )
    )
    sender = or_none(
        lambda: lam.get_function_configuration(FunctionName=function_name(cfg, SENDERS[0].name)),
        "ResourceNotFoundException",
    )
    rate = (sender or {}).get("Environment", {}).get("Variables", {}).get("MAX_SEND_RATE")
    checks.append(_send_rate_check(cfg, rate, max_rate))
    active = (ses.describe_active_receipt_rule_set().get("Metadata") or {}).get("Name")
    rules = (
        [r["Name"] for r in ses.describe_receipt_rule_set(RuleSetName=active).get("Rules", [])]
        if active
        else []
    )
    ours = list(rule_names(cfg))
    checks.append(
        _check(
            "receipt rules",
            f"{active or 'no active set'}: {', '.join(r for r in rules if r in ours) or '-'}",
            all(r in rules for r in ours),
            True,
            "" if all(r in rules for r in ours) else "deploy again",
        )
    )
    return checks, versions, rate


# What a deploy fixes when the account has moved on since it ran: after production access, the rate the
# sandbox made it lower and the suppression options the sandbox refused (deploy.resources).
REDEPLOY = "run email-handler deploy"


def _send_rate_check(cfg: Config, rate: str | None, max_rate: float) -> dict[str, Any]:
    """The senders' MAX_SEND_RATE against what a deploy would give them now (deploy.preflight
    .allowed_send_rate: MAX_SEND_RATE within the account's MaxSendRate): above the account's rate SES
    throttles; below it, the deploy ran when the account's rate was lower (the sandbox's 1/s)."""

    if rate is None:
        return _check("send rate", "-/s configured", False, False, "")
    wanted = allowed_send_rate(cfg.max_send_rate, max_rate)
    if max_rate and float(rate) > max_rate:
        detail = f"above the account's {max_rate:g}/s: SES throttles the excess; {REDEPLOY}"
    elif float(rate) < wanted:
        detail = (
            f"the account's SES rate is {max_rate:g}/s now and MAX_SEND_RATE asks {cfg.max_send_rate:g}/s; "
            f"the senders still send {float(rate):g}/s: {REDEPLOY}"
        )
    else:
        detail = ""
    return _check("send rate", f"{rate}/s configured", not detail, False, detail)


def _suppression_check(cfg: Config, production: bool) -> dict[str, Any]:
    """The configuration set's suppression options as the deploy sets them (deploy.resources
    .suppression_options). SES refuses them in the sandbox (the fresh-account model does); until they are
    set, SES's account-level list also suppresses sends, the owner's forwards included."""

    found = or_none(
        lambda: control_client("sesv2").get_configuration_set(ConfigurationSetName=cfg.ses_configuration_set),
        "NotFoundException",
    )
    if found is None:
        return _check("suppression options", "no configuration set", False, False, "deploy again")
    reasons = (found.get("SuppressionOptions") or {}).get("SuppressedReasons")
    wanted = sorted(SUPPRESSED_REASONS)
    if reasons is not None and sorted(reasons) == wanted:
        return _check(
            "suppression options", f"suppressed reasons: {', '.join(wanted) or 'none'}", True, False
        )
    value = "not set: SES's account-level list applies" if reasons is None else f"{', '.join(reasons)}"
    detail = (
        f"the deploy sets them (suppressed reasons: {', '.join(wanted) or 'none'}): {REDEPLOY}"
        if production
        else "SES refuses them in the sandbox; the deploy sets them after production access"
    )
    return _check("suppression options", value, False, False, detail)


@dataclass(frozen=True, slots=True)
class LocalStack:
    """Where a local mode (``email-handler dev``, ``make up``) serves what AWS would: the functions'
    RIE endpoints and the SMTP ingress that stands in for SES receiving (there are no Lambda functions
    or receipt rules on the emulator)."""

    host: str = "127.0.0.1"
    ports: Mapping[str, int] = field(default_factory=lambda: dict(PORTS))
    smtp_port: int = SMTP_PORT

    @classmethod
    def at(cls, first_function_port: int | None, smtp_port: int | None) -> LocalStack:
        """The ports `email-handler dev --function-port/--smtp-port` chose (the functions are consecutive)."""
        ports = {
            f.name: (first_function_port + i if first_function_port else PORTS[f.name])
            for i, f in enumerate(FUNCTIONS)
        }
        return cls(ports=ports, smtp_port=smtp_port or SMTP_PORT)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _local_checks(cfg: Config, local: LocalStack) -> tuple[list[dict[str, Any]], dict[str, str | None], Any]:
    """The local modes' counterparts of the functions and receipt rules: the RIE endpoints answer, and
    the SMTP ingress answers (mail also enters by ``email-handler inject``)."""
    versions = {name: ("local" if _answers(local.host, port) else None) for name, port in local.ports.items()}
    down = [f"{name} ({local.host}:{local.ports[name]})" for name, v in versions.items() if v is None]
    ingress = _answers(local.host, local.smtp_port)
    checks = [
        _check(
            "functions",
            ", ".join(f"{n}:{'up' if v else 'down'}" for n, v in versions.items()),
            not down,
            True,
            f"not answering: {', '.join(down)} (is `email-handler dev` or `make up` running?)"
            if down
            else "",
        ),
        _check("send rate", f"{cfg.max_send_rate:g}/s configured", True, False),
        _check(
            "receipt rules",
            f"local SMTP ingress {local.host}:{local.smtp_port} {'answers' if ingress else 'down'}",
            ingress,
            True,
            "" if ingress else "start the local stack; `email-handler inject FILE.eml` also delivers",
        ),
    ]
    return checks, versions, cfg.max_send_rate


def _flows(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The four things the owner needs, in order; each works only if the one before it does (the alerts
    aside), and says the first thing to do when it does not."""
    by_name = {c["check"]: c for c in checks}

    def first_fault(names: list[str]) -> str:
        for name in names:
            c = by_name[name]
            if not c["ok"]:
                return f"{name}: {c['detail'] or c['value']}"
        return ""

    receive = ["domain identity", *[n for n in by_name if n.startswith("MX ")], "receipt rules", "functions"]
    receive_fault = first_fault(receive)
    forward_fault = (
        receive_fault
        or first_fault(["MAIL FROM"] if by_name["MAIL FROM"]["blocks"] else [])
        or first_fault(["owner's address"])
    )
    answer_fault = forward_fault or first_fault(["production access"])
    alert_fault = first_fault(["alert subscription"])
    return [
        _flow(RECEIVING, not receive_fault, receive_fault),
        _flow(FORWARDING, not forward_fault, forward_fault),
        _flow(
            ANSWERING,
            not answer_fault,
            answer_fault
            + ("; until then acks and replies go only to verified addresses" if not forward_fault else ""),
        ),
        _flow(ALERTS, not alert_fault, alert_fault),
    ]


def table(report: dict[str, Any]) -> str:
    width = max(len(c["check"]) for c in report["checks"])
    lines = [f"{report['deployment']} in {report['account']}, {report['region']}"]
    for c in report["checks"]:
        mark = "ok " if c["ok"] else ("NO " if c["blocks"] else "-- ")
        lines.append(
            f"  {mark} {c['check']:<{width}}  {c['value']}" + (f"   ({c['detail']})" if c["detail"] else "")
        )
    for f in report["flows"]:
        lines.append(f"  {'yes' if f['ok'] else 'NO '} {f['flow']}" + (f": {f['next']}" if f["next"] else ""))
    if report.get("deploy_fixes"):
        lines.append(f"behind the account: {', '.join(report['deploy_fixes'])} ({REDEPLOY})")
    lines.append("ready: mail can flow" if report["ready"] else "NOT READY: " + "; ".join(report["reasons"]))
    return "\n".join(lines)
