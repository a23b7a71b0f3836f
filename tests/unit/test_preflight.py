"""Preflight checks that need no AWS: the configuration a deploy starts from."""

from __future__ import annotations

import secrets

import pytest

from deploy.errors import DeployError
from deploy.preflight import BUCKET_NAME, RULE_RECIPIENTS_LIMIT, load_config, receipt_rule_fits
from local.env import local_env

ACCOUNT = "123456789012"


def environ(**extra: str) -> dict[str, str]:
    values = {k: v for k, v in local_env().items() if k not in ("ENVIRONMENT", "EMAIL_BUCKET")}
    return {**values, "THREAD_SECRET": secrets.token_hex(32), **extra}


def test_a_default_bucket_name_over_63_characters_is_refused_with_a_shorter_one_to_use() -> None:
    # {project}-{env}-{account}-{region}-mail: env "production" in ap-southeast-2 gives 65 characters
    with pytest.raises(DeployError) as err:
        load_config(environ(), "production", "ap-southeast-2", ACCOUNT)
    message = str(err.value)
    assert "service-email-handler-production-123456789012-ap-southeast-2-mail (65 characters)" in message
    suggested = message.split("EMAIL_BUCKET=")[1].split()[0]
    assert BUCKET_NAME.fullmatch(suggested) and suggested.startswith("service-email-handler-production-")
    # the suggestion works, and it is the same for the same account and region
    assert (
        load_config(environ(EMAIL_BUCKET=suggested), "production", "ap-southeast-2", ACCOUNT).bucket
        == suggested
    )
    with pytest.raises(DeployError, match=f"EMAIL_BUCKET={suggested}"):
        load_config(environ(), "production", "ap-southeast-2", ACCOUNT)
    # a default that fits is kept as the contract names it
    assert (
        load_config(environ(), "prd", "us-east-1", ACCOUNT).bucket
        == f"service-email-handler-prd-{ACCOUNT}-us-east-1-mail"
    )
    with pytest.raises(DeployError, match="not a valid S3 bucket name"):
        load_config(environ(EMAIL_BUCKET="My_Bucket"), "prd", "us-east-1", ACCOUNT)


def test_a_public_rule_over_ses_recipient_quota_is_refused_before_any_change() -> None:
    """The public rule names each listed address and the thread domain: 99 addresses fit, 100 do not."""

    def addresses(n: int) -> dict[str, str]:
        listed = ",".join(f"a{i}@example.com" for i in range(n))
        return environ(PUBLIC_EMAIL=listed, PUBLIC_ADDRESSES="{}")

    receipt_rule_fits(load_config(addresses(RULE_RECIPIENTS_LIMIT - 1), "prd", "us-east-1", ACCOUNT))
    with pytest.raises(DeployError) as err:
        receipt_rule_fits(load_config(addresses(RULE_RECIPIENTS_LIMIT), "prd", "us-east-1", ACCOUNT))
    assert "101 recipients" in str(err.value) and "*@example.com" in err.value.fix
    # a catch-all is one recipient, whatever the number of addresses
    receipt_rule_fits(load_config(environ(), "prd", "us-east-1", ACCOUNT))
