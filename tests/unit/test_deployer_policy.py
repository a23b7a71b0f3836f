"""The deployer policy (`email-handler deploy --print-deployer-policy`) against what AWS evaluates: an
action that takes no resource type is checked against "*" (Service Authorization Reference), so a
statement that names ARNs for it grants nothing and the deploy stops with AccessDenied."""

from __future__ import annotations

import pytest

from deploy import config
from deploy.functions import FUNCTIONS
from deploy.iam import deployer_policy, policy
from local.env import local_env
from local.iam import NO_RESOURCE_ACTIONS, Request, as_aws_evaluates, evaluate, takes_no_resource

ACCOUNT = "123456789012"
CFG = config.load({**local_env(), "ENVIRONMENT": "prd"})


def scoped_no_resource_actions(doc: dict) -> set[str]:
    return {
        a
        for s in doc["Statement"]
        if s["Effect"] == "Allow" and s["Resource"] != ["*"]
        for a in s["Action"]
        if takes_no_resource(a)
    }


def test_the_deployer_policy_never_scopes_an_action_that_takes_no_resource() -> None:
    doc = deployer_policy(CFG, ACCOUNT)
    assert scoped_no_resource_actions(doc) == set()
    granted = {a for s in doc["Statement"] for a in s["Action"]}
    # the SES receiving and identity calls of deploy and destroy are among them (SES API reference:
    # VerifyDomainIdentity, VerifyDomainDkim and the receipt-rule-set calls take no resource)
    for action in (
        "ses:VerifyDomainIdentity",
        "ses:VerifyDomainDkim",
        "ses:SetIdentityMailFromDomain",
        "ses:DescribeConfigurationSet",
        "ses:DescribeReceiptRuleSet",
        "ses:CreateReceiptRule",
        "ses:UpdateReceiptRule",
        "ses:DeleteReceiptRule",
        "ses:DeleteReceiptRuleSet",
        "ses:SetReceiptRulePosition",
    ):
        assert action in NO_RESOURCE_ACTIONS and action in granted, action
    for action in sorted(granted & NO_RESOURCE_ACTIONS):  # and each is allowed as AWS evaluates it
        assert evaluate([doc], as_aws_evaluates(Request(action, []))), action


@pytest.mark.parametrize("function", [f.name for f in FUNCTIONS])
def test_no_function_role_scopes_an_action_that_takes_no_resource(function: str) -> None:
    assert scoped_no_resource_actions(policy(CFG, ACCOUNT, function)) == set()


def test_the_check_catches_a_scoped_no_resource_action() -> None:
    doc = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["ses:CreateReceiptRule"],
                "Resource": [f"arn:aws:ses:us-east-1:{ACCOUNT}:receipt-rule-set/*"],
            }
        ]
    }
    assert scoped_no_resource_actions(doc) == {"ses:CreateReceiptRule"}
    # the emulator denies it as AWS does, and allows it on "*"
    assert not evaluate([doc], as_aws_evaluates(Request("ses:CreateReceiptRule", [])))
    assert evaluate(
        [{"Statement": [{**doc["Statement"][0], "Resource": "*"}]}],
        as_aws_evaluates(Request("ses:CreateReceiptRule", [])),
    )
    # an action that takes a resource keeps the resources the request names
    named = Request("ses:CreateConfigurationSet", [f"arn:aws:ses:us-east-1:{ACCOUNT}:configuration-set/x"])
    assert as_aws_evaluates(named) == named


def test_the_deployer_manages_address_identities_and_no_domain_identity() -> None:
    """ses verify-address (a test contact), the owner's identity and status's hint to send its link again;
    a domain identity has no @ and stays out of reach of SESv2's identity actions."""
    doc = deployer_policy(CFG, ACCOUNT)
    arn = f"arn:aws:ses:us-east-1:{ACCOUNT}:identity/"
    for action in ("ses:CreateEmailIdentity", "ses:GetEmailIdentity", "ses:DeleteEmailIdentity"):
        assert evaluate([doc], as_aws_evaluates(Request(action, [arn + "friend@mailbox.example"]))), action
        assert not evaluate([doc], as_aws_evaluates(Request(action, [arn + "example.com"]))), action


def test_the_policy_is_whole_before_private_email_is_exported() -> None:
    """--print-deployer-policy in a shell without PRIVATE_EMAIL: no ARN ends in an empty name."""
    cfg = config.load({"ENVIRONMENT": "prd", "DOMAIN_NAME": "example.org"})
    resources = [r for s in deployer_policy(cfg, ACCOUNT)["Statement"] for r in s["Resource"]]
    assert resources and not [r for r in resources if r.endswith(("/", ":"))]
    granted = {a for s in deployer_policy(cfg, ACCOUNT)["Statement"] for a in s["Action"]}
    assert {"sns:GetSubscriptionAttributes", "ses:PutAccountDetails"} <= granted & NO_RESOURCE_ACTIONS
