"""SES receiving: the receipt rules (thread replies first, then the public address), the bucket
policy that lets SES store mail, and the MAIL FROM domain.

An account has one active receipt rule set, and other applications may rely on it. When another set
is active the deploy adds its two rules to that set; only ``--replace-active-rule-set`` makes this
deployment's own set the active one (which switches the other set's rules off).
"""

from __future__ import annotations

import json
from typing import Any

from common.aws import control_client, or_none
from common.runtime import addresses
from common.store import layout
from deploy import propagation
from deploy.config import Config
from deploy.dns import MAIL_FROM_LABEL
from deploy.errors import DeployError
from deploy.lambdas import alias_arn
from deploy.plan import Run, canonical
from deploy.resources import bucket_exists


def own_rule_set(cfg: Config) -> str:
    return cfg.prefix


def rule_names(cfg: Config) -> tuple[str, str]:
    """The thread-replies rule and the public-address rule, named as every resource (Config.name)."""
    return cfg.name("thread"), cfg.name("public")


def active_rule_set() -> str | None:
    found = control_client("ses").describe_active_receipt_rule_set().get("Metadata") or {}
    return str(found["Name"]) if found.get("Name") else None


def target_rule_set(cfg: Config, replace_active: bool) -> str:
    """Where the rules go: the active set if another one is active (unless replacing it), else ours."""
    active = active_rule_set()
    return own_rule_set(cfg) if active is None or active == own_rule_set(cfg) or replace_active else active


def rule_arn(cfg: Config, account: str, rule_set: str, rule: str) -> str:
    return f"arn:aws:ses:{cfg.region}:{account}:receipt-rule-set/{rule_set}:receipt-rule/{rule}"


def bucket_policy_document(cfg: Config, account: str, rule_set: str) -> dict[str, Any]:
    """SES may put objects under staging/, for ``rule_set`` of ``account`` alone."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SesReceiptRulesStoreMail",
                "Effect": "Allow",
                "Principal": {"Service": "ses.amazonaws.com"},
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{cfg.bucket}/{layout.STAGING}*",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:aws:ses:{cfg.region}:{account}:receipt-rule-set/{rule_set}:*"
                    },
                },
            }
        ],
    }


def bucket_policy(run: Run, account: str, rule_set: str) -> None:
    """SES's receipt rules may write raw mail to staging/ of this bucket, for this account's rule set only."""
    cfg = run.cfg
    wanted = bucket_policy_document(cfg, account, rule_set)
    s3 = control_client("s3")
    current = None
    if bucket_exists(cfg.bucket):
        found = or_none(lambda: s3.get_bucket_policy(Bucket=cfg.bucket), "NoSuchBucketPolicy")
        current = json.loads(found["Policy"]) if found else None
    run.converge(
        "s3-bucket-policy",
        cfg.bucket,
        current,
        [] if canonical(current) == canonical(wanted) else ["policy"],
        create=lambda: s3.put_bucket_policy(Bucket=cfg.bucket, Policy=json.dumps(wanted)),
        update=lambda _: s3.put_bucket_policy(Bucket=cfg.bucket, Policy=json.dumps(wanted)),
        create_detail="SES may write staging/",
    )


def _rule_view(rule: dict[str, Any]) -> dict[str, Any]:
    keys = ("Name", "Enabled", "TlsPolicy", "ScanEnabled", "Recipients", "Actions")
    return {k: rule.get(k) for k in keys}


def public_recipients(cfg: Config) -> list[str]:
    """The public rule's recipient conditions: every listed address, or with a catch-all the domain
    itself (SES: a domain matches every address at it, not its subdomains, so thread.DOMAIN is named
    beside them: :func:`_rules`). One rule holds up to 100 recipients (SES quotas; checked before any
    change by :func:`deploy.preflight.receipt_rule_fits`)."""

    table = addresses.of(cfg)
    if table.catch_all is not None:
        return [table.domain]
    return [a.address for a in table.listed] if len(table.listed) > 1 else [cfg.public_email]


def receipt_rules(run: Run, account: str, rule_set: str) -> None:
    """Thread replies first (and stop), then the public address: both store to staging/ and invoke
    ``live``."""
    cfg, ses = run.cfg, control_client("ses")
    rules = rule_list(cfg, account)
    ours = rule_set == own_rule_set(cfg)
    described = or_none(lambda: ses.describe_receipt_rule_set(RuleSetName=rule_set), "RuleSetDoesNotExist")
    if ours:
        run.converge(
            "ses-rule-set",
            rule_set,
            described,
            create=lambda: ses.create_receipt_rule_set(RuleSetName=rule_set),
        )
    elif described is None:
        raise DeployError(f"the active receipt rule set {rule_set} disappeared", "deploy again")
    existing = [r["Name"] for r in (described or {}).get("Rules", [])]
    by_name = {r["Name"]: r for r in (described or {}).get("Rules", [])}
    after: str | None = None
    for rule in rules:
        current = by_name.get(rule["Name"])
        where = rule_set if ours else f"{rule_set} (the active set of this account, kept active)"
        differ = (
            []
            if current is None or canonical(_rule_view(current)) == canonical(_rule_view(rule))
            else ["rule"]
        )
        name = rule["Name"]
        if current is not None and _position(existing, name, after):
            differ.append("order")

        # SES test-writes to the bucket and checks the Lambda permission when a rule is created or changed.
        def create(rule: dict[str, Any] = rule, after: str | None = after) -> None:
            propagation.retry(
                run,
                f"CreateReceiptRule {rule['Name']}",
                lambda: ses.create_receipt_rule(
                    RuleSetName=rule_set, Rule=rule, **({"After": after} if after else {})
                ),
                propagation.SES_RULE_UNVALIDATED,
            )

        def update(differ: Any, rule: dict[str, Any] = rule, after: str | None = after) -> None:
            if "rule" in differ:
                propagation.retry(
                    run,
                    f"UpdateReceiptRule {rule['Name']}",
                    lambda: ses.update_receipt_rule(RuleSetName=rule_set, Rule=rule),
                    propagation.SES_RULE_UNVALIDATED,
                )
            if "order" in differ:
                ses.set_receipt_rule_position(
                    RuleSetName=rule_set, RuleName=rule["Name"], **({"After": after} if after else {})
                )

        run.converge(
            "ses-receipt-rule",
            name,
            current,
            differ,
            create=create,
            update=update,
            create_detail=f"{', '.join(rule['Recipients'])} in {where}",
        )
        after = name
    if ours:
        active = active_rule_set()
        run.converge(
            "ses-active-rule-set",
            rule_set,
            active,
            [] if active == rule_set else [f"replaces {active}"],
            create=lambda: ses.set_active_receipt_rule_set(RuleSetName=rule_set),
            update=lambda _: ses.set_active_receipt_rule_set(RuleSetName=rule_set),
            create_detail="no rule set was active",
        )


def rule_list(cfg: Config, account: str) -> list[dict[str, Any]]:
    """The two receipt rules, in their order: thread replies to reply-handler, then the public
    address to inbound-handler."""
    thread_rule, public_rule = rule_names(cfg)
    s3_action = {"S3Action": {"BucketName": cfg.bucket, "ObjectKeyPrefix": layout.STAGING}}

    def lambda_action(function: str) -> dict[str, Any]:
        return {"LambdaAction": {"FunctionArn": alias_arn(cfg, account, function), "InvocationType": "Event"}}

    return [
        {
            "Name": thread_rule,
            "Enabled": True,
            "TlsPolicy": "Optional",
            "ScanEnabled": True,
            "Recipients": [cfg.thread_domain],
            # No StopAction: it "terminates the evaluation of the receipt rule set"
            # (https://docs.aws.amazon.com/ses/latest/APIReference/API_StopAction.html), so a mail to a
            # thread address and the public address would never reach the public rule; the rules'
            # recipient conditions already keep each handler to its own addresses (common/store/staging.py
            # lets the last of the two delete the shared staging object).
            "Actions": [s3_action, lambda_action("reply-handler")],
        },
        {
            "Name": public_rule,
            "Enabled": True,
            "TlsPolicy": "Optional",
            "ScanEnabled": True,
            # The thread domain too: inbound-handler then gets every envelope recipient of every mail
            # either rule takes (SES's receipt.recipients lists those the rule matched), which says
            # whether reply-handler shares the staged mail; a mail to thread addresses alone it leaves
            # to reply-handler (common/inbound/receipt.py). The To and Cc fields cannot say it: the
            # sender writes them, and a Bcc is in neither.
            "Recipients": [*public_recipients(cfg), cfg.thread_domain],
            "Actions": [s3_action, lambda_action("inbound-handler")],
        },
    ]


def _position(existing: list[str], name: str, after: str | None) -> bool:
    """Is ``name`` out of place? It belongs first (after None) or right after ``after``."""
    index = existing.index(name)
    return index != 0 if after is None else (after not in existing or index != existing.index(after) + 1)


def mail_from(run: Run, verified: bool = True) -> None:
    """Bounces come back to bounce.<domain>, set only on a verified identity (SetIdentityMailFromDomain
    "Enables or disables the custom MAIL FROM domain setup for a verified identity", SES API reference).

    BehaviorOnMXFailure=UseDefaultValue: while the MAIL FROM status is Pending, Failed or
    TemporaryFailure SES sends with amazonses.com as the MAIL FROM domain instead of refusing with
    MailFromDomainNotVerified, as RejectMessage would (SES API reference, SetIdentityMailFromDomain,
    https://docs.aws.amazon.com/ses/latest/APIReference/API_SetIdentityMailFromDomain.html), so no send
    waits in a DLQ for DNS. DMARC still aligns through the DKIM signature of the domain."""
    cfg, ses = run.cfg, control_client("ses")
    wanted = f"{MAIL_FROM_LABEL}.{cfg.domain_name}"
    if not verified:
        run.say(
            f"MAIL FROM {wanted}: not set yet, SES sets it only on a verified identity "
            "(deploy again once verified)"
        )
        return
    attrs = ses.get_identity_mail_from_domain_attributes(Identities=[cfg.domain_name]).get(
        "MailFromDomainAttributes", {}
    )
    current = attrs.get(cfg.domain_name, {})
    differ = (
        []
        if current.get("MailFromDomain") == wanted and current.get("BehaviorOnMXFailure") == MX_FAILURE
        else ["MAIL FROM"]
    )

    def apply(*_: Any) -> None:
        ses.set_identity_mail_from_domain(
            Identity=cfg.domain_name, MailFromDomain=wanted, BehaviorOnMXFailure=MX_FAILURE
        )

    run.converge(
        "ses-mail-from",
        wanted,
        current if current.get("MailFromDomain") else None,
        differ,
        create=apply,
        update=apply,
        create_detail=f"BehaviorOnMXFailure={MX_FAILURE}",
    )


MX_FAILURE = "UseDefaultValue"
