"""`email-handler status` on the fresh-account model: each check failing, then passing, read the way the
command reads AWS (ops/status.py). ``ready`` is true only when a contact's mail would be received,
forwarded, acked and answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from common.aws import client
from deploy.main import WaitingOnDnsError
from deploy.preflight import load_config
from ops.main import main as cli
from ops.status import ALERTS, ANSWERING, FORWARDING, RECEIVING, collect
from tests.integration.test_fresh_account import account, run  # noqa: F401  (the fixture)
from tests.support.deploy import ACCOUNT, PREFIX

OWNER = "owner@example.net"
INBOUND = "inbound-smtp.us-east-1.amazonaws.com"


def report(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = cli(["status", "--env", "prd", "--json"])
    return code, json.loads(capsys.readouterr().out)


def check(report: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [c for c in report["checks"] if c["check"] == name]
    return found


def flows(report: dict[str, Any]) -> dict[str, bool]:
    return {f["flow"]: f["ok"] for f in report["flows"]}


def test_each_check_fails_then_passes_on_the_model(
    account: dict[str, str],  # noqa: F811
    moto_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, [])
    code, before = report(capsys)
    assert code == 1 and before["ready"] is False
    for name in ("domain identity", "MX example.com", "MX thread.example.com", "receipt rules", "functions"):
        assert check(before, name)["ok"] is False, name
    assert not any(flows(before).values())
    [receiving] = [f for f in before["flows"] if f["flow"] == RECEIVING]
    assert receiving["next"].startswith("domain identity: publish the records")
    # the first deploy created PRIVATE_EMAIL's identity: SES mailed the link, the address waits for it
    assert check(before, "owner's address")["value"] == f"{OWNER} Pending"

    assert cli(["dns", "publish", str(tmp_path / "prd" / "dns.zone"), "--endpoint", moto_server]) == 0
    run(account, tmp_path, [])
    code, deployed = report(capsys)
    for name in ("domain identity", "MX example.com", "MX thread.example.com", "receipt rules", "functions"):
        assert check(deployed, name)["ok"] is True, name
    assert flows(deployed) == {RECEIVING: True, FORWARDING: False, ANSWERING: False, ALERTS: False}
    assert code == 1 and deployed["ready"] is False
    assert any(r.startswith(f"owner's address: {OWNER} Pending (click the link") for r in deployed["reasons"])
    assert check(deployed, "production access")["value"] == "sandbox (review: not requested)"
    assert "request-production-access" in check(deployed, "production access")["detail"]
    assert check(deployed, "alert subscription")["value"] == f"{OWNER} PendingConfirmation"
    # every alarm starts INSUFFICIENT_DATA, which is not a fault
    alarms = check(deployed, "alarms")
    assert alarms["ok"] is True and "INSUFFICIENT_DATA" in alarms["value"]
    assert "without data yet" in alarms["detail"]

    assert cli(["model", "verify-address", OWNER, "--endpoint", moto_server]) == 0
    code, verified = report(capsys)
    assert check(verified, "owner's address")["ok"] is True
    assert flows(verified) == {RECEIVING: True, FORWARDING: True, ANSWERING: False, ALERTS: False}
    [answering] = [f for f in verified["flows"] if f["flow"] == ANSWERING]
    assert "only to verified addresses" in answering["next"]

    assert cli(["ses", "request-production-access", "--env", "prd", "--yes"]) == 0
    assert "review PENDING" in capsys.readouterr().out
    code, pending = report(capsys)
    assert pending["production_access"]["review_status"] == "PENDING" and not pending["ready"]
    assert check(pending, "production access")["detail"].startswith("AWS is reviewing the request")

    assert cli(["model", "grant-production", "--endpoint", moto_server]) == 0
    code, granted = report(capsys)
    assert (code, granted["ready"], granted["reasons"]) == (0, True, [])
    assert granted["production_access"]["review_status"] == "GRANTED"
    assert flows(granted)[ALERTS] is False  # ready (mail flows), and still says the alerts reach no one

    assert cli(["model", "confirm-subscriptions", "--endpoint", moto_server]) == 0
    code, confirmed = report(capsys)
    assert all(flows(confirmed).values()) and check(confirmed, "alert subscription")["ok"] is True

    client("cloudwatch").set_alarm_state(
        AlarmName=f"{PREFIX}-forward-sender-errors", StateValue="ALARM", StateReason="test"
    )
    code, firing = report(capsys)
    assert check(firing, "alarms")["ok"] is False and firing["alarms"] == [f"{PREFIX}-forward-sender-errors"]
    assert firing["ready"] is True  # an alarm is reported, it does not stop mail


def test_on_aws_mx_is_resolved_and_a_failed_lookup_is_not_ready(
    account: dict[str, str],  # noqa: F811
    moto_server: str,
    tmp_path: Path,
) -> None:
    """With no emulator endpoint, status resolves MX through DNS (dnspython; here a stand-in resolver)."""
    import dns.resolver

    with pytest.raises(WaitingOnDnsError):
        run(account, tmp_path, [])
    cfg = load_config(account, "prd", "us-east-1", ACCOUNT)
    published = {"example.com": [INBOUND], "thread.example.com": ["mx.elsewhere.example"]}
    aws = collect(cfg, ACCOUNT, environ={}, resolve=lambda name: published.get(name, []))
    assert check(aws, "MX example.com")["ok"] is True
    thread = check(aws, "MX thread.example.com")
    assert thread["ok"] is False and thread["blocks"] and thread["value"] == "mx.elsewhere.example"

    def timeout(name: str) -> list[str]:
        raise dns.resolver.LifetimeTimeout(timeout=10.0, errors=[])

    failed = collect(cfg, ACCOUNT, environ={}, resolve=timeout)
    assert check(failed, "MX example.com")["value"] == "lookup failed (LifetimeTimeout)"
    assert any(r.startswith("MX example.com: lookup failed") for r in failed["reasons"])
