"""`email-handler deploy --export cloudformation DIR`: the deploy's stack as a CloudFormation template.

The template is rendered from the deploy's own declarations (deploy/resources.py, iam.py, lambdas.py,
triggers.py, receiving.py, alarms.py, dashboard.py), never from a second list of names and policies: the
configuration is loaded as the deploy loads it, but with a marker in place of each value that becomes
a template parameter (the environment, the domain, the owner's address, the secret's parameter name,
the six image URIs) or a pseudo parameter (account, Region). Every string that holds a marker becomes
an ``Fn::Sub`` of the parameter; every string that is exactly the ARN of a resource the template makes
becomes a ``Ref`` or ``Fn::GetAtt`` of it, which also gives CloudFormation the creation order.
tests/integration/test_cloudformation_export.py compares the result with what the deploy makes.

What a template cannot do (the DNS wait, SES production access, the images, the secret's value,
activating the receipt rule set, the subscription's confirmation) the README written beside it says,
each with its command.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from common.aws import sts
from common.runtime.config import dlq_name
from common.store import layout
from deploy import alarms, dashboard, dns, iam, lambdas, preflight, receiving, resources, triggers
from deploy.config import Config
from deploy.errors import DeployError
from deploy.functions import FUNCTIONS
from deploy.images import Published
from deploy.plan import Run

# Markers: values no configuration holds, valid wherever the configuration checks them.
ENV_MARK = "qzenvq"
REGION_MARK = "qz-region-1"
ACCOUNT_MARK = "998877665544"
DOMAIN_MARK = "qzdomainq.invalid"
PRIVATE_MARK = "qzprivateq@qzprivateq.invalid"
SECRET_MARK = "/qzsecretq"
ARCH_MARK = "qzarchq"
IMAGE_MARKS = {f.name: f"qzimage{i}q" for i, f in enumerate(FUNCTIONS)}
PSEUDO = {ACCOUNT_MARK: "AWS::AccountId", REGION_MARK: "AWS::Region"}
TEMPLATE_FILE = "template.json"
SUPPRESSION_CONDITION = "SuppressionOverridden"
FORMAT = "cloudformation"


def image_parameter(function: str) -> str:
    """``inbound-handler`` -> ``InboundHandlerImageUri``."""
    return "".join(part.title() for part in function.split("-")) + "ImageUri"


def _logical(kind: str, name: str) -> str:
    """A logical id from the resource's kind and its name less the deployment's prefix."""
    for prefix in (f"service-email-handler-{ENV_MARK}", f"/service-email-handler/{ENV_MARK}", ENV_MARK):
        name = name.replace(prefix, "")
    return kind + "".join(p[:1].upper() + p[1:] for p in re.split(r"[^A-Za-z0-9]+", name) if p)


class Template:
    """Resources by logical id, and what refers to each: its ARN (Ref or GetAtt Arn) and its name."""

    def __init__(self, cfg: Config, account: str) -> None:
        self.cfg, self.account = cfg, account
        self.resources: dict[str, dict[str, Any]] = {}
        self.arns: dict[str, Any] = {}

    def add(
        self,
        logical: str,
        kind: str,
        properties: dict[str, Any],
        arn: str = "",
        ref_is_arn: bool = False,
        depends: tuple[str, ...] = (),
    ) -> str:
        if logical in self.resources:
            raise DeployError(
                f"two resources of the template would have the logical id {logical}",
                "report it: the export names each resource after its kind and name",
            )
        self.resources[logical] = {"Type": kind, "Properties": properties}
        if depends:
            self.resources[logical]["DependsOn"] = sorted(depends)
        if arn:
            self.arns[arn] = {"Ref": logical} if ref_is_arn else {"Fn::GetAtt": [logical, "Arn"]}
        return logical


def _number(value: str) -> Any:
    return int(value) if value.isdigit() else value


def _queue(t: Template, name: str, attributes: Mapping[str, str]) -> str:
    properties: dict[str, Any] = {"QueueName": name}
    for key, value in attributes.items():
        if key == "RedrivePolicy":
            redrive = json.loads(value)
            properties[key] = {
                "deadLetterTargetArn": redrive["deadLetterTargetArn"],
                "maxReceiveCount": int(redrive["maxReceiveCount"]),
            }
        elif key != "Policy":
            properties[key] = _number(value)
    logical = t.add(
        _logical("Queue", name), "AWS::SQS::Queue", properties, iam.Arns(t.cfg, t.account).queue(name)
    )
    if "Policy" in attributes:
        t.add(
            logical + "Policy",
            "AWS::SQS::QueuePolicy",
            {"Queues": [{"Ref": logical}], "PolicyDocument": json.loads(attributes["Policy"])},
        )
    return logical


def _queues(t: Template) -> str:
    """Each queue and its DLQ; returns the attachment queue's policy (the bucket's notification needs it)."""
    arns = iam.Arns(t.cfg, t.account)
    policy = ""
    for spec in resources.queues_with_dlq(t.cfg):
        dlq = dlq_name(spec.name)
        _queue(t, dlq, resources.DLQ_ATTRIBUTES)
        attributes = resources.queue_attributes(
            arns.queue(dlq), spec.visibility_s, t.cfg.max_receive_count, extra=spec.extra
        )
        logical = _queue(t, spec.name, attributes)
        if "Policy" in spec.extra:
            policy = logical + "Policy"
    _queue(t, lambdas.async_dlq(t.cfg), resources.DLQ_ATTRIBUTES)
    return policy


def _bucket(t: Template, queue_policy: str) -> str:
    cfg = t.cfg
    target = iam.Arns(cfg, t.account).queue(resources.attachment_queue(cfg))
    notification = resources.attachments_notification_config("QueueArn", target)
    filter_rules = notification["Filter"]["Key"]["FilterRules"]
    return t.add(
        "Bucket",
        "AWS::S3::Bucket",
        {
            "BucketName": cfg.bucket,
            "PublicAccessBlockConfiguration": resources.PUBLIC_ACCESS_BLOCK,
            "LifecycleConfiguration": {
                "Rules": [
                    {
                        "Id": r["ID"],
                        "Prefix": r["Filter"]["Prefix"],
                        "Status": r["Status"],
                        "ExpirationInDays": r["Expiration"]["Days"],
                    }
                    for r in resources.lifecycle(cfg)
                ]
            },
            # CloudFormation's notification has no Id; S3 names it (the deploy finds it by target and prefix).
            "NotificationConfiguration": {
                "QueueConfigurations": [
                    {
                        "Event": event,
                        "Queue": notification["QueueArn"],
                        "Filter": {
                            "S3Key": {
                                "Rules": [{"Name": r["Name"], "Value": r["Value"]} for r in filter_rules]
                            }
                        },
                    }
                    for event in notification["Events"]
                ]
            },
        },
        # S3 checks that it may send to the queue when the notification is put.
        depends=(queue_policy,),
    )


def _tables(t: Template) -> None:
    arns = iam.Arns(t.cfg, t.account)
    for field_name, (key, ttl, indexes) in resources.TABLES.items():
        name = getattr(t.cfg, field_name)
        properties: dict[str, Any] = {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": a, "AttributeType": "S"}
                for a in sorted({key, *(i.key for i in indexes.values())})
            ],
            "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
        }
        if indexes:
            properties["GlobalSecondaryIndexes"] = [resources._index(i, k) for i, k in indexes.items()]
        if ttl:
            properties["TimeToLiveSpecification"] = {"AttributeName": ttl, "Enabled": True}
        t.add(_logical("Table", name), "AWS::DynamoDB::Table", properties, arns.table(name))


def _notifications(t: Template) -> str:
    """The two topics, the feedback topic's policy, the configuration set and its event destination, the
    SES identities; returns the domain identity's logical id."""
    cfg = t.cfg
    for topic in (cfg.alert_topic, cfg.feedback_topic):
        t.add(
            _logical("Topic", topic),
            "AWS::SNS::Topic",
            {"TopicName": topic},
            resources.topic_arn(cfg, topic),
            True,
        )
    feedback = resources.topic_arn(cfg, cfg.feedback_topic)
    topic_policy = t.add(
        "TopicSesFeedbackPolicy",
        "AWS::SNS::TopicPolicy",
        {"Topics": [feedback], "PolicyDocument": resources.feedback_topic_policy_document(cfg, t.account)},
    )
    config_set = t.add(
        "ConfigurationSet",
        "AWS::SES::ConfigurationSet",
        {
            "Name": cfg.ses_configuration_set,
            # The deploy goes on when the sandbox refuses these (deploy/resources.py); a stack would roll
            # back, so the README's parameter can leave them out until production access.
            "SuppressionOptions": {
                "Fn::If": [
                    SUPPRESSION_CONDITION,
                    {"SuppressedReasons": resources.SUPPRESSED_REASONS},
                    {"Ref": "AWS::NoValue"},
                ]
            },
        },
    )
    destination = resources.feedback_destination(cfg)
    t.add(
        "ConfigurationSetFeedback",
        "AWS::SES::ConfigurationSetEventDestination",
        {
            "ConfigurationSetName": {"Ref": config_set},
            "EventDestination": {
                "Name": destination["Name"],
                "Enabled": destination["Enabled"],
                "MatchingEventTypes": destination["MatchingEventTypes"],
                "SnsDestination": {"TopicARN": destination["SNSDestination"]["TopicARN"]},
            },
        },
        # SES checks that it may publish to the topic when the destination is made.
        depends=(topic_policy,),
    )
    domain = t.add(
        "DomainIdentity",
        "AWS::SES::EmailIdentity",
        {
            "EmailIdentity": cfg.domain_name,
            "DkimAttributes": {"SigningEnabled": True},
            "MailFromAttributes": {
                "MailFromDomain": f"{dns.MAIL_FROM_LABEL}.{cfg.domain_name}",
                "BehaviorOnMxFailure": re.sub(r"(?<!^)(?=[A-Z])", "_", receiving.MX_FAILURE).upper(),
            },
        },
    )
    t.add("OwnerIdentity", "AWS::SES::EmailIdentity", {"EmailIdentity": cfg.private_email})
    return domain


def _parameters(t: Template) -> None:
    """The spam rules' key (the rules file itself is the README's step) and the owner's public key."""
    cfg = t.cfg
    t.add(
        "SpamRulesParameter",
        "AWS::SSM::Parameter",
        {"Name": cfg.spam_rules_parameter, "Type": "String", "Value": layout.SPAM_RULES},
    )
    if cfg.owner_key:
        t.add(
            "OwnerKeyParameter",
            "AWS::SSM::Parameter",
            {
                "Name": cfg.owner_key_parameter,
                "Type": "String",
                "Value": cfg.owner_key,
                "Tier": "Intelligent-Tiering",
            },
        )
    for n, (box, text) in enumerate(cfg.mailbox_key_texts, 1):  # deploy/resources.py mailbox_keys
        t.add(
            f"MailboxKeyParameter{n}",
            "AWS::SSM::Parameter",
            {
                "Name": cfg.mailbox_key_parameter(box),
                "Type": "String",
                "Value": text,
                "Tier": "Intelligent-Tiering",
            },
        )


def _log_groups(t: Template) -> None:
    t.add(
        "LogGroupSpam",
        "AWS::Logs::LogGroup",
        {"LogGroupName": t.cfg.spam_log_group, "RetentionInDays": resources.LOG_RETENTION_DAYS},
    )
    for spec in FUNCTIONS:
        t.add(
            _logical("LogGroup", spec.name),
            "AWS::Logs::LogGroup",
            {
                "LogGroupName": lambdas.log_group_name(t.cfg, spec.name),
                "RetentionInDays": lambdas.FUNCTION_LOG_RETENTION_DAYS,
            },
        )


def _functions(t: Template, source_env: dict[str, str]) -> None:
    """Role, function, a version and ``live`` on it, and where a failed asynchronous event goes."""
    cfg, account = t.cfg, t.account
    arns = iam.Arns(cfg, account)
    for spec in FUNCTIONS:
        role_arn = iam.role_arn(cfg, account, spec.name)
        t.add(
            _logical("Role", spec.name),
            "AWS::IAM::Role",
            {
                "RoleName": iam.role_name(cfg, spec.name),
                "AssumeRolePolicyDocument": json.loads(iam.TRUST),
                "Description": iam.role_description(cfg, spec.name),
                "Policies": [
                    {"PolicyName": iam.POLICY_NAME, "PolicyDocument": iam.policy(cfg, account, spec.name)}
                ],
            },
            role_arn,
        )
        image = Published(spec.name, IMAGE_MARKS[spec.name], IMAGE_MARKS[spec.name], "", ARCH_MARK)
        wanted = lambdas._wanted(cfg, spec, image, role_arn, lambdas.environment(cfg, spec, source_env))
        name = lambdas.function_name(cfg, spec.name)
        function = t.add(
            _logical("Function", spec.name),
            "AWS::Lambda::Function",
            {
                "FunctionName": name,
                "PackageType": "Image",
                "Code": {"ImageUri": IMAGE_MARKS[spec.name]},
                "Architectures": [ARCH_MARK],
                **wanted,
            },
            f"arn:aws:lambda:{cfg.region}:{account}:function:{name}",
            depends=(_logical("LogGroup", spec.name),),  # its retention, not Lambda's default group
        )
        version = t.add(
            function + "Version", "AWS::Lambda::Version", _version(function, IMAGE_MARKS[spec.name], wanted)
        )
        alias = t.add(
            function + "Live",
            "AWS::Lambda::Alias",
            {
                "FunctionName": {"Ref": function},
                "Name": lambdas.ALIAS,
                "FunctionVersion": {"Fn::GetAtt": [version, "Version"]},
            },
            lambdas.alias_arn(cfg, account, spec.name),
            ref_is_arn=True,
        )
        if spec.name in lambdas.ASYNC_FUNCTIONS:
            t.add(
                function + "OnFailure",
                "AWS::Lambda::EventInvokeConfig",
                {
                    "FunctionName": {"Ref": function},
                    "Qualifier": lambdas.ALIAS,
                    **lambdas.on_failure_settings(arns.queue(lambdas.async_dlq(cfg))),
                },
                depends=(alias,),
            )


def _version(function: str, image: str, wanted: dict[str, Any]) -> dict[str, Any]:
    """A version is published once; CloudFormation publishes another only when the resource is replaced,
    which a new Description does. It names the image, the platform and a digest of the exported
    settings, so a new image, platform or export moves ``live`` as the deploy does (deploy/lambdas.py).
    Not DomainName or PrivateEmail: with an image URI they could pass Lambda's 256 characters (the
    README says to give a new image URI with them)."""
    digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "FunctionName": {"Ref": function},
        "Description": f"settings {digest} {ENV_MARK} {ARCH_MARK} {image}",
    }


def _invocations(t: Template, rule_set: str) -> list[str]:
    """Event sources, permissions, subscriptions and the digest schedule; returns the receipt rules'
    permissions (SES checks them when a rule is made)."""
    cfg, account = t.cfg, t.account
    arns = iam.Arns(cfg, account)
    for spec in FUNCTIONS:
        if spec.batch_concurrency:
            t.add(
                _logical("Function", spec.name) + "EventSource",
                "AWS::Lambda::EventSourceMapping",
                {
                    "EventSourceArn": arns.queue(triggers.source_queue(cfg, spec)),
                    "FunctionName": lambdas.alias_arn(cfg, account, spec.name),
                    "Enabled": True,
                    **triggers.event_source_settings(spec),
                },
            )
    rule = triggers.digest_rule_name(cfg)
    target = triggers.digest_target(cfg, account)
    t.add(
        "DigestSchedule",
        "AWS::Events::Rule",
        {"Name": rule, **triggers.DIGEST_RULE, "Targets": [target]},
        triggers.digest_rule_arn(cfg, account),
    )
    receipt = []
    for grant in [
        *triggers.receiving_permissions(cfg, account, rule_set),
        triggers.digest_permission(cfg, account),
    ]:
        logical = t.add(_logical("Permission", grant.sid), "AWS::Lambda::Permission", _permission(t, grant))
        if grant.principal == "ses.amazonaws.com":
            receipt.append(logical)
    t.add(
        "SubscriptionSesFeedback",
        "AWS::SNS::Subscription",
        {
            "TopicArn": resources.topic_arn(cfg, cfg.feedback_topic),
            "Protocol": "lambda",
            "Endpoint": lambdas.alias_arn(cfg, account, "inbound-handler"),
        },
    )
    t.add(
        "SubscriptionAlerts",
        "AWS::SNS::Subscription",
        {
            "TopicArn": resources.topic_arn(cfg, cfg.alert_topic),
            "Protocol": "email",
            "Endpoint": cfg.private_email,
        },
    )
    return receipt


def _permission(t: Template, grant: triggers.Grant) -> dict[str, Any]:
    properties = {
        "FunctionName": lambdas.alias_arn(t.cfg, t.account, grant.function),
        "Action": "lambda:InvokeFunction",
        "Principal": grant.principal,
        "SourceArn": grant.source_arn,
    }
    if grant.principal in triggers.SOURCE_ACCOUNT_PRINCIPALS:
        properties["SourceAccount"] = t.account
    return properties


def _receiving(t: Template, rule_set: str, permissions: list[str]) -> None:
    """The bucket policy, this deployment's rule set and its two rules, in the deploy's order."""
    cfg = t.cfg
    policy = t.add(
        "BucketPolicy",
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": "Bucket"},
            "PolicyDocument": receiving.bucket_policy_document(cfg, t.account, rule_set),
        },
    )
    rule_set_id = t.add("ReceiptRuleSet", "AWS::SES::ReceiptRuleSet", {"RuleSetName": rule_set})
    after: str | None = None
    for rule in receiving.rule_list(cfg, t.account):
        properties: dict[str, Any] = {"RuleSetName": {"Ref": rule_set_id}, "Rule": rule}
        depends = [policy, *permissions]  # SES test-writes to the bucket and checks the permission
        if after:
            properties["After"] = {"Ref": after}
        after = t.add(
            _logical("ReceiptRule", rule["Name"]), "AWS::SES::ReceiptRule", properties, depends=tuple(depends)
        )


def _alarms(t: Template) -> None:
    for alarm in alarms.wanted(Run(t.cfg, apply=False, report=None)):
        properties = {k: v for k, v in alarm.items() if v != []}  # CloudFormation refuses an empty list
        t.add(_logical("Alarm", alarm["AlarmName"]), "AWS::CloudWatch::Alarm", properties)


def _dashboard(t: Template) -> None:
    wanted = dashboard.wanted(t.cfg)
    t.add(_logical("Dashboard", wanted["DashboardName"]), "AWS::CloudWatch::Dashboard", dict(wanted))


# --- the document: references, then markers -------------------------------------------------------


def _references(value: Any, arns: dict[str, Any], own: str) -> Any:
    """Strings that are exactly the ARN of another resource of the template become a reference to it."""
    if isinstance(value, dict):
        return {k: _references(v, arns, own) for k, v in value.items()}
    if isinstance(value, list):
        return [_references(v, arns, own) for v in value]
    if isinstance(value, str) and value in arns:
        ref = arns[value]
        target = ref.get("Ref") or ref["Fn::GetAtt"][0]
        return value if target == own else ref
    return value


def _substitutions(image_parameters: dict[str, str]) -> dict[str, str]:
    return {
        ENV_MARK: "Env",
        DOMAIN_MARK: "DomainName",
        PRIVATE_MARK: "PrivateEmail",
        SECRET_MARK: "ThreadSecretParameter",
        ARCH_MARK: "Architecture",
        **image_parameters,
        **PSEUDO,
    }


def _marked(value: Any, names: dict[str, str]) -> Any:
    """Strings holding markers become ``Fn::Sub`` of the parameters (``${`` in the text is escaped)."""
    if isinstance(value, dict):
        return {k: _marked(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v, names) for v in value]
    if isinstance(value, str) and (value.startswith("arn:aws:") or any(m in value for m in names)):
        text = value.replace("${", "${!").replace("arn:aws:", "arn:${AWS::Partition}:")
        for mark in sorted(names, key=len, reverse=True):
            text = text.replace(mark, "${" + names[mark] + "}")
        return {"Ref": text[2:-1]} if re.fullmatch(r"\$\{[A-Za-z0-9:]+\}", text) else {"Fn::Sub": text}
    return value


def _parameters_section(real: Config, images: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Env": {
            "Type": "String",
            "Default": real.env,
            "AllowedPattern": "^[a-z0-9-]+$",
            "Description": "environment name in every resource name (email-handler deploy --env)",
        },
        "DomainName": {"Type": "String", "Default": real.domain_name, "Description": "DOMAIN_NAME"},
        "PrivateEmail": {"Type": "String", "Default": real.private_email, "Description": "PRIVATE_EMAIL"},
        "ThreadSecretParameter": {
            "Type": "String",
            "Default": real.thread_secret_parameter,
            "AllowedPattern": "^/.+$",
            "Description": "the SSM SecureString you create holding THREAD_SECRET (README)",
        },
        "OverrideSuppressionList": {
            "Type": "String",
            "Default": "true",
            "AllowedValues": ["true", "false"],
            "Description": "the configuration set overrides SES's account-level suppression list (README)",
        },
        "Architecture": {
            "Type": "String",
            "Default": "x86_64",
            "AllowedValues": ["x86_64", "arm64"],
            "Description": "the platform the six images were built for",
        },
    }
    for function, parameter in images.items():
        out[parameter] = {
            "Type": "String",
            "Description": f"ECR image URI of {function} (repository@sha256:digest or repository:tag)",
        }
    return out


def _outputs(domain: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in (1, 2, 3):
        out[f"DkimRecord{i}"] = {
            "Description": "DKIM: publish this CNAME record",
            "Value": {
                "Fn::Join": [
                    " ",
                    [
                        "CNAME",
                        {"Fn::GetAtt": [domain, f"DkimDNSTokenName{i}"]},
                        {"Fn::GetAtt": [domain, f"DkimDNSTokenValue{i}"]},
                    ],
                ]
            },
        }
    out["Bucket"] = {"Description": "the mail bucket", "Value": {"Ref": "Bucket"}}
    out["ReceiptRuleSet"] = {"Description": "activate it (README)", "Value": {"Ref": "ReceiptRuleSet"}}
    return out


# --- the export ------------------------------------------------------------------------------------


def marked_environment(environ: Mapping[str, str], real: Config) -> dict[str, str]:
    """The deploy's environment with a marker for each parameter; the secret's value never enters."""
    values = {k: v for k, v in environ.items() if k != "THREAD_SECRET"}
    private = re.compile(re.escape(real.private_email), re.IGNORECASE)
    at_domain = re.compile("@" + re.escape(real.domain_name) + r"(?![A-Za-z0-9.-])", re.IGNORECASE)
    for key in ("PUBLIC_EMAIL", "PUBLIC_ADDRESSES", "OWNER_EMAILS"):
        if values.get(key):
            values[key] = at_domain.sub("@" + DOMAIN_MARK, private.sub(PRIVATE_MARK, values[key]))
    values.update(DOMAIN_NAME=DOMAIN_MARK, PRIVATE_EMAIL=PRIVATE_MARK, THREAD_SECRET_PARAMETER=SECRET_MARK)
    return values


def render(real: Config, environ: Mapping[str, str]) -> dict[str, Any]:
    """The template for the configuration ``real`` (loaded by the deploy's own preflight) and the
    environment the deploy would pass through to the functions."""
    values = marked_environment(environ, real)
    cfg = preflight.load_config(values, ENV_MARK, REGION_MARK, ACCOUNT_MARK, need_secret=False)
    # The declarations build topic ARNs from the process's account: the marker's, never STS's.
    sts.use_account(ACCOUNT_MARK)
    try:
        return _document(real, cfg, values)
    finally:
        sts.use_account("")


def _policies(t: Template) -> None:
    """What ``email-handler destroy`` keeps without --delete-data (deploy/destroy.py: the bucket, the
    tables, the spam log; the domain identity, whose DKIM records are in the owner's DNS) a deleted
    stack keeps too; the other stateful resources say explicitly that they go."""
    cfg = t.cfg
    kept = {cfg.bucket, cfg.spam_log_group, cfg.domain_name, *(getattr(cfg, f) for f in resources.TABLES)}
    for resource in t.resources.values():
        if resource["Type"] not in STATEFUL:
            continue
        name = resource["Properties"].get(STATEFUL[resource["Type"]])
        policy = "Retain" if name in kept else "Delete"
        resource["DeletionPolicy"] = resource["UpdateReplacePolicy"] = policy


# Stateful types (cfn-lint I3011) -> the property holding the resource's name.
STATEFUL = {
    "AWS::S3::Bucket": "BucketName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SES::EmailIdentity": "EmailIdentity",
}


def _document(real: Config, cfg: Config, values: dict[str, str]) -> dict[str, Any]:
    t = Template(cfg, ACCOUNT_MARK)
    rule_set = receiving.own_rule_set(cfg)
    _bucket(t, _queues(t))
    _tables(t)
    domain = _notifications(t)
    _parameters(t)
    _log_groups(t)
    _functions(t, values)
    _receiving(t, rule_set, _invocations(t, rule_set))
    _alarms(t)
    _dashboard(t)
    _policies(t)
    images = {f.name: image_parameter(f.name) for f in FUNCTIONS}
    names = _substitutions({IMAGE_MARKS[f]: p for f, p in images.items()})
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"{real.project}: the stack `email-handler deploy` makes "
        f"(email-handler deploy --export {FORMAT}); see README.md beside this file",
        "Parameters": _parameters_section(real, images),
        "Conditions": {SUPPRESSION_CONDITION: {"Fn::Equals": [{"Ref": "OverrideSuppressionList"}, "true"]}},
        "Resources": {
            logical: _marked(_references(resource, t.arns, logical), names)
            for logical, resource in t.resources.items()
        },
        "Outputs": _outputs(domain),
    }


def export(
    directory: Path, env: str, region: str, environ: Mapping[str, str], report: Callable[[str], None] = print
) -> Path:
    """``DIR/template.json``, ``DIR/README.md`` and ``DIR/spam-rules.txt``; needs no AWS credentials."""
    environ = {k: v for k, v in environ.items() if k != "THREAD_SECRET"}
    real = preflight.load_config(environ, env, region, ACCOUNT_MARK, need_secret=False)
    template = render(real, environ)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TEMPLATE_FILE
    path.write_text(json.dumps(template, indent=2) + "\n")
    (directory / "spam-rules.txt").write_text(resources.default_spam_rules())
    (directory / "README.md").write_text(readme(real, template))
    report(
        f"[deploy] wrote {path} ({len(template['Resources'])} resources, {len(template['Parameters'])} "
        f"parameters), README.md and spam-rules.txt to {directory}: nothing was deployed"
    )
    return path


def readme(real: Config, template: dict[str, Any]) -> str:
    """How to use the template from CloudFormation, Terraform and CDK, and the steps it cannot take."""
    env, region = real.env, real.region
    images = [p for p in template["Parameters"] if p.endswith("ImageUri")]
    overrides = " \\\n        ".join(
        f"{p}=ACCOUNT.dkr.ecr.{region}.amazonaws.com/{real.name(f.name)}@sha256:DIGEST"
        for p, f in zip(images, FUNCTIONS, strict=True)
    )
    records = "\n".join(
        f"    {r.type:<5} {r.name}  {r.value}   ({r.purpose})" for r in dns.listed(real, {}, {}, {})
    )
    text = README.format(
        project=real.project,
        env=env,
        region=region,
        prefix=real.prefix,
        domain=real.domain_name,
        secret=real.thread_secret_parameter,
        rules_key=layout.SPAM_RULES,
        overrides=overrides,
        records=records,
        count=len(template["Resources"]),
        image_list=", ".join(f"`{p}`" for p in images),
        stack=f"{real.prefix}",
    )
    return text


README = """# {project} as a CloudFormation template

`template.json` creates the {count} resources `email-handler deploy --env {env}` creates (the same
names, IAM policies, environment per function and wiring), written by `email-handler deploy --export
cloudformation` from the deploy's own declarations. Its parameters: `Env` ({env}), `DomainName`,
`PrivateEmail`, `ThreadSecretParameter`, `Architecture`, `OverrideSuppressionList` and one image
URI per function:
{image_list}.

The public addresses, their settings and every other setting are those of the
configuration it was exported with (the addresses follow `DomainName`): export again after changing
them. Nothing secret is in it.

## Before the stack: the secret and the images

1. The HMAC secret, as an SSM SecureString (CloudFormation cannot create one; the functions read it
   at cold start and never see it in their configuration):

       aws ssm put-parameter --region {region} --type SecureString --name {secret} \\
         --value "$(python3 -c 'import secrets; print(secrets.token_hex(32))')"

2. The six images in ECR. `make images` builds them (`service-email-handler/<function>:latest`);
   create one repository per function and push (`email-handler deploy` does both itself):

       aws ecr create-repository --region {region} --repository-name {prefix}-inbound-handler \\
         --image-tag-mutability IMMUTABLE --image-scanning-configuration scanOnPush=true
       REPO=ACCOUNT.dkr.ecr.{region}.amazonaws.com/{prefix}-inbound-handler
       docker tag service-email-handler/inbound-handler:latest $REPO:v1 && docker push $REPO:v1

   and the same for the five others. Give Lambda a single-platform image: a Docker engine on the
   containerd image store may push an image index, which Lambda refuses; pass the platform's
   manifest digest (`docker buildx imagetools inspect IMAGE`) as `repository@sha256:...`.

## Deploying it

AWS CLI:

    aws cloudformation deploy --region {region} --stack-name {stack} --template-file template.json \\
      --capabilities CAPABILITY_NAMED_IAM --parameter-overrides \\
        {overrides}

Terraform (`aws_cloudformation_stack`):

    resource "aws_cloudformation_stack" "email_handler" {{
      name          = "{stack}"
      template_body = file("${{path.module}}/template.json")
      capabilities  = ["CAPABILITY_NAMED_IAM"]
      parameters = {{
        # one per function: InboundHandlerImageUri, ReplyHandlerImageUri, ...
        InboundHandlerImageUri = "ACCOUNT.dkr.ecr.{region}.amazonaws.com/{prefix}-inbound-handler:v1"
      }}
    }}

CDK (`aws_cdk.cloudformation_include.CfnInclude`), Python:

    from aws_cdk import cloudformation_include as cfn_inc

    template = cfn_inc.CfnInclude(self, "EmailHandler", template_file="template.json",
        parameters={{"InboundHandlerImageUri": "...", ...}})
    bucket = template.get_resource("Bucket")  # any resource by its logical id, to extend or reference

With either, the stack owns the resources: do not also run `email-handler deploy` (or `destroy`)
against the same environment. The commands that only read or use a deployment (`email-handler
status --env {env}`, `ses`, `replay`, `dlq`, `quarantine` ...) work on it as on a deployed one,
since every name is the same.

## What the template cannot do, and the command for each

- **The SES identity's DNS records and the wait for them.** The stack creates the domain identity
  with Easy DKIM; its outputs `DkimRecord1`..`DkimRecord3` are the three DKIM CNAME records. The
  other records the domain needs ({domain}, {region}):

{records}

  Publish them at your DNS provider (`email-handler dns publish` stands in for DNS only on the
  local emulator), then `email-handler status --env {env}` says when SES has verified the domain;
  `email-handler deploy --wait` would have polled for it. Until then SES sends nothing.
- **Activating the receipt rule set.** CloudFormation creates the rule set `{prefix}` but cannot make
  it the account's active one. With no other set active:

      aws ses set-active-receipt-rule-set --region {region} --rule-set-name {prefix}

  If another application's set is active, that switches its rules off: the deploy instead adds its
  two rules to the active set (and `email-handler deploy --replace-active-rule-set` switches).
- **SES production access.** In the sandbox SES sends only to verified addresses:
  `email-handler ses request-production-access --env {env}` asks AWS for it. If SES refuses the
  configuration set's suppression options in the sandbox, deploy with
  `OverrideSuppressionList=false` until access is granted, then `true`.
- **Confirmations.** SES mails a verification link to `PrivateEmail` (the owner identity) and SNS
  a subscription confirmation for the alerts topic: click both.
- **The default spam rules file** (an S3 object, which CloudFormation does not create):

      aws s3 cp spam-rules.txt s3://BUCKET/{rules_key}

  with BUCKET the stack's output `Bucket`; without it the keyword lists are empty.
- **Moving `live` on an unchanged template.** Each function's version is published when its image
  URI, `Architecture`, `Env` or the exported settings change (its description names them). Pushing
  a new image under the same tag does not, nor does a new `DomainName` or `PrivateEmail` alone (the
  functions get it, `live` stays on the old version): pass a new image URI (a new tag or digest)
  with them.
"""
