"""Least-privilege IAM policies, one role per function.

Each function gets exactly the S3 prefixes, tables, queues and topics its code touches (for example
forward-sender reads only ``attachments/*`` and its claim-check payloads, never the archive), and
writes only to its own log group. The table is checked by tests/integration/test_deploy_identity.py.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any
from urllib.parse import unquote

from common.aws import control_client, or_none
from common.runtime import addresses, outcomes
from common.runtime.config import dlq_name
from common.store import layout
from deploy.config import Config
from deploy.functions import BY_NAME
from deploy.plan import Run, canonical
from deploy.resources import attachment_queue
from deploy.route53 import normalized_name

TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    },
    sort_keys=True,
)
POLICY_NAME = "least-privilege"


SENDER_QUEUE_ACTIONS = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ChangeMessageVisibility",
]
S3_ACTIONS = {"read": "s3:GetObject", "write": "s3:PutObject", "delete": "s3:DeleteObject"}
IDEMPOTENCY_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]


def role_name(cfg: Config, function: str) -> str:
    return cfg.name(function)


class Arns:
    def __init__(self, cfg: Config, account: str) -> None:
        self.cfg, self.account, self.region = cfg, account, cfg.region

    def objects(self, *prefixes: str) -> list[str]:
        return [f"arn:aws:s3:::{self.cfg.bucket}/{p}*" for p in prefixes]

    def table(self, name: str) -> str:
        return f"arn:aws:dynamodb:{self.region}:{self.account}:table/{name}"

    def queue(self, name: str) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}:{name}"

    def topic(self, name: str) -> str:
        return f"arn:aws:sns:{self.region}:{self.account}:{name}"

    def parameter(self, name: str) -> str:
        path = name if name.startswith("/") else "/" + name
        return f"arn:aws:ssm:{self.region}:{self.account}:parameter{path}"

    def log_group(self, name: str) -> str:
        return f"arn:aws:logs:{self.region}:{self.account}:log-group:{name}:*"

    def event_bus(self, name: str) -> str:
        """EVENT_BUS_NAME: a bus of this account and Region by name, or any bus by its ARN."""
        return (
            name
            if name.startswith("arn:")
            else f"arn:aws:events:{self.region}:{self.account}:event-bus/{name}"
        )


def _allow(
    actions: list[str], resources: list[str], condition: dict[str, Any] | None = None
) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": sorted(actions), "Resource": sorted(resources)}
    if condition:
        statement["Condition"] = condition
    return statement


def policy(cfg: Config, account: str, function: str) -> dict[str, Any]:
    """The inline policy document of ``function``'s role."""

    a = Arns(cfg, account)
    spec = BY_NAME[function]
    statements = [
        _allow(
            ["logs:CreateLogStream", "logs:PutLogEvents"], [a.log_group(f"/aws/lambda/{cfg.name(function)}")]
        )
    ]
    statements += [
        _allow([S3_ACTIONS[access]], a.objects(*prefixes))
        for access, prefixes in layout.ACCESS[function].items()
    ]
    if reads := layout.ACCESS[function].get("read"):
        # A read of a missing key is 403 without s3:ListBucket; listing is limited to what it may read.
        statements.append(
            _allow(
                ["s3:ListBucket"],
                [f"arn:aws:s3:::{cfg.bucket}"],
                {"StringLike": {"s3:prefix": sorted(f"{p}*" for p in reads)}},
            )
        )
    if spec.reads_thread_secret:  # the HMAC secret, read at cold start (SecureString, aws/ssm key)
        statements.append(_allow(["ssm:GetParameter"], [a.parameter(cfg.thread_secret_parameter)]))
    if spec.owner_key and cfg.encrypts_to_owner:  # the owner's public key, read at cold start (String)
        statements.append(_allow(["ssm:GetParameter"], [a.parameter(cfg.owner_key_parameter)]))
    if spec.mailbox_keys and cfg.keyed_mailboxes:  # each mailbox's own public key, read at cold start
        statements.append(
            _allow(
                ["ssm:GetParameter"], [a.parameter(cfg.mailbox_key_parameter(b)) for b in cfg.keyed_mailboxes]
            )
        )
    # Every function reports the outcomes it decides (common/runtime/outcomes.py): on that bus only, and
    # only as this service's source. PutEvents takes the event-bus resource and the events:source
    # condition key (Service Authorization Reference, Amazon EventBridge; EventBridge User Guide, "Using
    # IAM policy conditions in Amazon EventBridge").
    statements.append(
        _allow(
            ["events:PutEvents"],
            [a.event_bus(cfg.event_bus_name)],
            # events:source is multivalued (ArrayOfString): a set operator, and Null so that an
            # entry without the key is not allowed by ForAllValues' empty-set truth (IAM User Guide,
            # "Single-valued vs. multivalued context keys").
            {
                "ForAllValues:StringEquals": {"events:source": [outcomes.SOURCE]},
                "Null": {"events:source": "false"},
            },
        )
    )
    if (
        not spec.queue_field
    ):  # invoked asynchronously: Lambda sends a failed event to the async DLQ as the role
        statements.append(_allow(["sqs:SendMessage"], [a.queue(cfg.name("async-dlq"))]))
    if function == "inbound-handler":
        statements += _inbound_statements(cfg, a)
    elif function == "reply-handler":
        statements += _reply_statements(cfg, a)
    elif function == "attachment-extractor":  # its SQS event source polls the attachment queue as this role
        statements.append(_allow(SENDER_QUEUE_ACTIONS, [a.queue(attachment_queue(cfg))]))
    elif spec.queue_field:  # a sender
        statements += _sender_statements(cfg, a, getattr(cfg, spec.queue_field))
    return {"Version": "2012-10-17", "Statement": statements}


def _inbound_statements(cfg: Config, a: Arns) -> list[dict[str, Any]]:
    account = a.account
    return [
        _allow(
            ["ssm:GetParameter"],
            [f"arn:aws:ssm:{a.region}:{account}:parameter{cfg.spam_rules_parameter}"],
        ),
        _allow(["dynamodb:UpdateItem"], [a.table(cfg.conversations_table), a.table(cfg.suppression_table)]),
        # the owner's complaint flags the contact's conversation (common/inbound/feedback.py)
        _allow(["dynamodb:GetItem"], [a.table(cfg.conversations_table)]),
        # SES feedback: send records, duplicate SNS ids, the SES-id index
        _allow(
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            [a.table(cfg.send_status_table)],
        ),
        _allow(
            ["dynamodb:Query"], [a.table(cfg.idempotency_table) + "/index/sesMessageId"]
        ),  # feedback fallback
        # the owner's complaint: the reported send's record, read by the key the index gives
        # (common/inbound/spamblock.py)
        _allow(["dynamodb:GetItem"], [a.table(cfg.idempotency_table)]),
        _allow(["sqs:SendMessage"], [a.queue(cfg.ack_queue), a.queue(cfg.forward_queue)]),
        _allow(["logs:CreateLogStream", "logs:PutLogEvents"], [a.log_group(cfg.spam_log_group)]),
        _allow(["sns:Publish"], [a.topic(cfg.alert_topic)]),  # the owner's mailbox bounced or complained
        # no ack a first contact's address cannot receive (common/inbound/receipt.py)
        *sandbox_reads(a.region, account),
        # the owner's block/allow lists: read, and checked in the record's transaction (intake.py)
        _allow(["dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem"], [a.table(cfg.sender_lists_table)]),
        # the owner's complaint about a forward blocks its sender for that address (spamblock.py)
        _allow(["dynamodb:PutItem"], [a.table(cfg.sender_lists_table)]),
        # quarantine records: hold, digest (the pendingDigest index), release by an operator
        _allow(
            ["dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"],
            [a.table(cfg.quarantine_table)],
        ),
        _allow(["dynamodb:Query"], [a.table(cfg.quarantine_table) + "/index/pendingDigest"]),
    ]


def _reply_statements(cfg: Config, a: Arns) -> list[dict[str, Any]]:
    return [
        _allow(["dynamodb:GetItem", "dynamodb:UpdateItem"], [a.table(cfg.conversations_table)]),
        # alert throttle, replay memory; UpdateItem: who handled a mail shared with inbound-handler
        # (store/staging.py)
        _allow(["dynamodb:PutItem", "dynamodb:UpdateItem"], [a.table(cfg.send_status_table)]),
        _allow(
            ["dynamodb:GetItem"], [a.table(cfg.suppression_table)]
        ),  # a suppressed contact is told to the owner
        _allow(["sqs:SendMessage"], [a.queue(cfg.reply_queue)]),
        _allow(["sns:Publish"], [a.topic(cfg.alert_topic)]),
        # owner controls ([block] ...) and releases from a quarantine digest (a release is a forward)
        _allow(["dynamodb:PutItem", "dynamodb:DeleteItem"], [a.table(cfg.sender_lists_table)]),
        _allow(["dynamodb:GetItem", "dynamodb:UpdateItem"], [a.table(cfg.quarantine_table)]),
        _allow(["sqs:SendMessage"], [a.queue(cfg.forward_queue)]),
    ]


def _sender_statements(cfg: Config, a: Arns, queue: str) -> list[dict[str, Any]]:
    account = a.account
    # A message that can never be sent goes to the DLQ at once; one waiting for SES's daily quota is
    # sent again as a fresh copy on its last receive; the owner's notice of a send the sandbox holds goes
    # through forward-sender, which holds the owner's key (common/senders/handler.py).
    sends = dict.fromkeys([a.queue(queue), a.queue(dlq_name(queue)), a.queue(cfg.forward_queue)])
    return [
        _allow(SENDER_QUEUE_ACTIONS, [a.queue(queue)]),
        _allow(["sqs:SendMessage"], list(sends)),
        _allow(IDEMPOTENCY_ACTIONS, [a.table(cfg.idempotency_table)]),
        _allow(["dynamodb:GetItem", "dynamodb:UpdateItem"], [a.table(cfg.send_status_table)]),
        # suppression entries, once per batch; UpdateItem: the probe of a held owner mailbox
        # (store/holds.py)
        _allow(["dynamodb:BatchGetItem", "dynamodb:UpdateItem"], [a.table(cfg.suppression_table)]),
        _allow(
            ["dynamodb:PutItem"], [a.table(cfg.send_status_table)]
        ),  # hourly alert throttle (store/alerts.py)
        _allow(["sns:Publish"], [a.topic(cfg.alert_topic)]),
        # after SES refused a send: is it the sandbox? (common/senders/handler.py)
        *sandbox_reads(a.region, account),
        # SESv2 SendEmail with raw content: AWS authorises it as ses:SendRawEmail (the error names that
        # action), the service reference lists ses:SendEmail; both. In the sandbox SES also authorises
        # against each recipient's identity, so the identities are identity/*; ses:FromAddress pins
        # the sender to the public address whatever the identity.
        _allow(
            ["ses:SendEmail", "ses:SendRawEmail"],
            [f"arn:aws:ses:{a.region}:{account}:identity/*"],
            from_addresses(cfg),
        ),
        _allow(
            ["ses:SendEmail", "ses:SendRawEmail"],
            [f"arn:aws:ses:{a.region}:{account}:configuration-set/{cfg.ses_configuration_set}"],
            from_addresses(cfg),
        ),
    ]


def from_addresses(cfg: Config) -> dict[str, Any]:
    """The senders' ses:FromAddress condition: every public address (one: that address, as before);
    with a catch-all any address at DOMAIN_NAME (never the thread domain: ``*@example.com`` does not
    match ``x@thread.example.com``), which also lets a removed or added address's conversations be
    answered. Which address a message uses is the sender's check (common/runtime/addresses.py)."""

    table = addresses.of(cfg)
    listed = [a.address for a in table.listed]
    if table.catch_all is not None:  # StringLike is case-sensitive: a listed address spelt otherwise too
        spelt = [a for a in listed if not a.endswith(f"@{table.domain}")]
        return {
            "StringLike": {"ses:FromAddress": [f"*@{table.domain}", *spelt] if spelt else f"*@{table.domain}"}
        }
    return {"StringEquals": {"ses:FromAddress": listed if len(listed) > 1 else cfg.public_email}}


def role_description(cfg: Config, function: str) -> str:
    return f"{function} of {cfg.prefix} (email-handler)"


def role_arn(cfg: Config, account: str, function: str) -> str:
    return f"arn:aws:iam::{account}:role/{role_name(cfg, function)}"


def converge_role(run: Run, account: str, function: str, trust: str = TRUST) -> str:
    """The function's role with its trust policy and :func:`policy` inline; returns the role ARN."""

    cfg, name = run.cfg, role_name(run.cfg, function)
    wanted = policy(cfg, account, function)
    api = control_client("iam")
    current = or_none(lambda: api.get_role(RoleName=name), "NoSuchEntity")
    differ = []
    if current is not None:
        found = or_none(lambda: api.get_role_policy(RoleName=name, PolicyName=POLICY_NAME), "NoSuchEntity")
        if found is None or canonical(_document(found["PolicyDocument"])) != canonical(wanted):
            differ.append("policy")
        if canonical(_document(current["Role"]["AssumeRolePolicyDocument"])) != canonical(json.loads(trust)):
            differ.append("trust")

    def create() -> None:
        api.create_role(
            RoleName=name,
            AssumeRolePolicyDocument=trust,
            Description=role_description(cfg, function),
        )
        api.put_role_policy(RoleName=name, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(wanted))

    def update(differ: Any) -> None:
        if "policy" in differ:
            api.put_role_policy(RoleName=name, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(wanted))
        if "trust" in differ:
            api.update_assume_role_policy(RoleName=name, PolicyDocument=trust)

    run.converge(
        "iam-role",
        name,
        current,
        differ,
        create=create,
        update=update,
        create_detail=f"{len(wanted['Statement'])} least-privilege statements",
    )
    return role_arn(cfg, account, function)


def _document(doc: Any) -> Any:
    """IAM answers policy documents URL-encoded (AWS) or as objects (boto3 decodes some)."""

    return json.loads(unquote(doc)) if isinstance(doc, str) else doc


# Whether SES's sandbox refuses a recipient (common.aws.ses.sandbox_refused).
def sandbox_reads(region: str, account: str) -> list[dict[str, Any]]:
    """GetAccount has no resource type; GetEmailIdentity takes the identity (Service Authorization
    Reference, Amazon SES)."""
    return [
        _allow(["ses:GetAccount"], ["*"]),
        _allow(["ses:GetEmailIdentity"], [f"arn:aws:ses:{region}:{account}:identity/*"]),
    ]


def deployer_policy(cfg: Config, account: str) -> dict[str, Any]:
    """The least-privilege policy of the user or role that runs ``email-handler deploy``, ``destroy``
    and ``replay``: every action those commands call, on this deployment's resources
    (``{project}-{env}-*``) wherever the service lets a policy name them. The statements are data
    (``deploy/data/deployer-policy.json``); this fills in the deployment's names."""
    names = {
        "region": cfg.region,
        "account": account,
        "prefix": cfg.prefix,
        "project": cfg.project,
        "env": cfg.env,
        "bucket": cfg.bucket,
        "config_prefix": layout.CONFIG,
        "configuration_set": cfg.ses_configuration_set,
        "domain": normalized_name(cfg.domain_name),  # as IAM's Route 53 record-name condition key holds it
    }
    statements = [
        _allow(s["Action"], [r.format_map(names) for r in s["Resource"]], _filled(s.get("Condition"), names))
        for s in _deployer_statements()
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def _filled(condition: Any, names: dict[str, str]) -> Any:
    """A statement's Condition with the placeholders of its values filled in."""
    if isinstance(condition, dict):
        return {k: _filled(v, names) for k, v in condition.items()}
    if isinstance(condition, list):
        return [_filled(v, names) for v in condition]
    return condition.format_map(names) if isinstance(condition, str) else condition


def _deployer_statements() -> list[dict[str, Any]]:
    text = files("deploy").joinpath("data/deployer-policy.json").read_text()
    statements: list[dict[str, Any]] = json.loads(text)["Statement"]
    return statements


# "Managed policy size cannot exceed 6,144 characters"; "IAM does not count white space" (IAM and
# AWS STS quotas, https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html). An inline
# user policy may hold only 2,048 characters in all, too little for the deployer: it is a managed policy.
MANAGED_POLICY_LIMIT = 6144


def policy_size(document: dict[str, Any]) -> int:
    return len(json.dumps(document, separators=(",", ":")))


def deployer_policies(cfg: Config, account: str) -> list[dict[str, Any]]:
    """The deployer policy as managed policies of at most MANAGED_POLICY_LIMIT characters each, split
    between statements (a user may have 10 managed policies attached)."""
    parts: list[dict[str, Any]] = []
    for statement in deployer_policy(cfg, account)["Statement"]:
        if (
            parts
            and policy_size({**parts[-1], "Statement": [*parts[-1]["Statement"], statement]})
            <= MANAGED_POLICY_LIMIT
        ):
            parts[-1]["Statement"].append(statement)
        else:
            parts.append({"Version": "2012-10-17", "Statement": [statement]})
    return parts


def deployer_policy_names(cfg: Config, count: int) -> list[str]:
    return [f"{cfg.prefix}-deployer" + (f"-{i + 1}" if count > 1 else "") for i in range(count)]
