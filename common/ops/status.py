"""`email-handler status`: can mail flow through this deployment, and if not, why not.

Everything is read, nothing changed: the SES domain identity, DKIM, the MAIL FROM domain, the MX
records (on the emulator's fresh-account model only: the standard library cannot resolve MX), the
sandbox and the sending quota, the send rate the senders are configured with, the receipt rules, the
version each function's ``live`` alias points at, the DLQ depths and the alarms in ALARM.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from common.aws import control_client, or_none
from common.runtime.config import Config
from common.runtime.functions import FUNCTIONS, SENDERS, dlq_name


def _check(name: str, value: Any, ok: bool, blocks: bool, detail: str = "") -> dict[str, Any]:
    """One line of the report; ``blocks``: mail cannot flow while it is not ok."""
    return {"check": name, "value": value, "ok": ok, "blocks": blocks and not ok, "detail": detail}


def _mx_model(endpoint: str, name: str) -> list[str] | None:
    """The MX hosts the emulator's fresh-account model publishes for ``name`` (None: no model to ask)."""
    from common.local.fresh import DNS_PATH
    from common.local.guard import admin_request

    try:
        with urllib.request.urlopen(
            admin_request(f"{endpoint}{DNS_PATH}?name={name}"), timeout=5
        ) as response:
            return list(json.loads(response.read())["mx"])
    except (OSError, ValueError, KeyError, urllib.error.HTTPError):
        return None


def collect(cfg: Config, account: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The status of the deployment ``cfg`` names, as one JSON-able dict with a top-level ``ready``."""
    from deploy.lambdas import ALIAS, async_dlq, function_name
    from deploy.receiving import rule_names
    from deploy.resources import event_queues, queue_url

    environ = os.environ if environ is None else environ
    ses, domain = control_client("ses"), cfg.domain_name
    checks: list[dict[str, Any]] = []
    verify = (
        ses.get_identity_verification_attributes(Identities=[domain])
        .get("VerificationAttributes", {})
        .get(domain, {})
    )
    status = verify.get("VerificationStatus") or "not an identity"
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
    endpoint = environ.get("AWS_ENDPOINT_URL", "")
    inbound = f"inbound-smtp.{cfg.region}.amazonaws.com"
    for name in (domain, cfg.thread_domain):
        hosts = _mx_model(endpoint, name) if endpoint else None
        if hosts is None:
            checks.append(_check(f"MX {name}", "not checked", True, False, f"should be 10 {inbound}"))
        else:
            checks.append(
                _check(
                    f"MX {name}",
                    ", ".join(hosts) or "none",
                    inbound in hosts,
                    True,
                    "" if inbound in hosts else f"publish MX 10 {inbound}",
                )
            )
    account_info = or_none(lambda: control_client("sesv2").get_account(), "NotFoundException") or {}
    quota = account_info.get("SendQuota", {})
    sandbox = not account_info.get("ProductionAccessEnabled", False)
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
    max_rate = float(quota.get("MaxSendRate", 0) or 0)
    rate_ok = rate is not None and (not max_rate or float(rate) <= max_rate)
    checks.append(
        _check(
            "send rate",
            f"{rate or '-'}/s configured",
            rate_ok,
            False,
            "" if rate_ok else f"above the account's {max_rate:g}/s: SES throttles the excess",
        )
    )
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
    depths = {}
    for queue in [dlq_name(q) for q in event_queues(cfg)] + [async_dlq(cfg)]:
        url = queue_url(queue)
        if url:
            attrs = control_client("sqs").get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            depths[queue] = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
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
    alarms = [
        a["AlarmName"]
        for a in control_client("cloudwatch")
        .describe_alarms(AlarmNamePrefix=cfg.prefix, StateValue="ALARM")
        .get("MetricAlarms", [])
    ]
    checks.append(_check("alarms in ALARM", ", ".join(alarms) or "none", not alarms, False))
    reasons = [
        f"{c['check']}: {c['value']} ({c['detail']})" if c["detail"] else f"{c['check']}: {c['value']}"
        for c in checks
        if c["blocks"]
    ]
    return {
        "ready": not reasons,
        "reasons": reasons,
        "deployment": cfg.prefix,
        "account": account,
        "region": cfg.region,
        "domain": domain,
        "sandbox": sandbox,
        "send_quota": quota,
        "daily_quota_used_percent": used,
        "send_rate": rate,
        "versions": versions,
        "dlq_depths": depths,
        "alarms": alarms,
        "checks": checks,
    }


def table(report: dict[str, Any]) -> str:
    width = max(len(c["check"]) for c in report["checks"])
    lines = [f"{report['deployment']} in {report['account']}, {report['region']}"]
    for c in report["checks"]:
        mark = "ok " if c["ok"] else ("NO " if c["blocks"] else "-- ")
        lines.append(
            f"  {mark} {c['check']:<{width}}  {c['value']}" + (f"   ({c['detail']})" if c["detail"] else "")
        )
    lines.append("ready: mail can flow" if report["ready"] else "NOT READY: " + "; ".join(report["reasons"]))
    return "\n".join(lines)
