"""What the account gains after a deploy, caught up by the next one, on the fresh-account model with IAM
enforced (the deploys run as a user holding exactly the printed deployer policy):

* production access raises the account's SES rate above the 1/s the sandbox made the deploy give the
  senders, and lets SES take the configuration set's suppression options it refused: `status` says both
  lag the account (``deploy_fixes``, "run email-handler deploy"), the next deploy sets them, `status` is
  clean again;
* an alert subscription still PendingConfirmation is subscribed again by the next deploy (SNS mails a new
  link), and no longer once it is confirmed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from common.aws import client
from local import fresh
from ops.main import main as cli
from tests.integration.test_first_hour_deploy import deployed
from tests.integration.test_fresh_account import account, run  # noqa: F401  (the fixture)
from tests.integration.test_status import check
from tests.support.deploy import PREFIX, as_user, deployer_user

OWNER = "owner@example.net"


def status(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    cli(["status", "--env", "prd", "--json"])
    return dict(json.loads(capsys.readouterr().out))


def sender_rate() -> str:
    config = client("lambda").get_function_configuration(FunctionName=f"{PREFIX}-forward-sender")
    return str(config["Environment"]["Variables"]["MAX_SEND_RATE"])


def test_after_production_access_status_says_the_rate_and_suppression_lag_and_the_next_deploy_fixes_them(
    account: dict[str, str],  # noqa: F811
    moto_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    deployer = deployer_user(account)
    as_user(deployer, lambda: deployed(account, tmp_path))  # in the sandbox: 1/s, suppression refused
    assert sender_rate() == "1"
    sandbox = status(capsys)
    assert sandbox["deploy_fixes"] == []  # nothing a deploy could fix yet
    assert check(sandbox, "send rate")["ok"] is True
    refused = check(sandbox, "suppression options")
    assert refused["ok"] is False and "after production access" in refused["detail"]

    assert cli(["model", "grant-production", "--endpoint", moto_server]) == 0
    lagging = status(capsys)
    assert lagging["deploy_fixes"] == ["send rate", "suppression options"]
    rate = check(lagging, "send rate")
    assert rate["ok"] is False and not rate["blocks"]
    assert "account's SES rate is 14/s now" in rate["detail"] and "still send 1/s" in rate["detail"]
    assert rate["detail"].endswith("run email-handler deploy")
    suppression = check(lagging, "suppression options")
    assert suppression["value"].startswith("not set") and "run email-handler deploy" in suppression["detail"]
    assert lagging["ready"] is True  # mail flows meanwhile: the lag is reported, it does not block
    capsys.readouterr()
    cli(["status", "--env", "prd"])
    assert "behind the account: send rate, suppression options (run email-handler deploy)" in (
        capsys.readouterr().out
    )

    lines: list[str] = []
    as_user(deployer, lambda: run(account, tmp_path, lines))
    assert sender_rate() == "14"
    assert not any("above this account's SES sending rate" in line for line in lines)
    caught_up = status(capsys)
    assert caught_up["deploy_fixes"] == [] and caught_up["send_rate"] == "14"
    assert check(caught_up, "send rate")["ok"] and check(caught_up, "suppression options")["ok"]


def test_a_pending_alert_subscription_is_requested_again_by_the_next_deploy_and_not_once_confirmed(
    account: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    deployer = deployer_user(account)
    as_user(deployer, lambda: deployed(account, tmp_path))
    assert fresh.confirmation_mails(OWNER) == 1  # the mail that got lost

    lines: list[str] = []
    as_user(deployer, lambda: run(account, tmp_path, lines))
    assert fresh.confirmation_mails(OWNER) == 2  # SNS mailed the link again
    [again] = [line for line in lines if "sns-subscription" in line]
    assert again.split()[1] == "update" and "still PendingConfirmation" in again
    assert any(
        line.startswith(f"[deploy] SNS was asked to mail {OWNER} a new confirmation link") for line in lines
    )

    assert fresh.confirm_subscriptions() == 1
    lines.clear()
    as_user(deployer, lambda: run(account, tmp_path, lines))
    assert fresh.confirmation_mails(OWNER) == 2  # confirmed: nothing is sent again
    assert not any("sns-subscription" in line for line in lines)
