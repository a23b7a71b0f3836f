"""Enforced IAM in the local emulator: what AWS checks, checked by moto.

moto's server authenticates requests when ``INITIAL_NO_AUTH_ACTION_COUNT`` is reached, but it
authorizes almost every service against the resource ``*`` (so any statement naming a table,
topic or parameter never matches) and it ignores every condition except ``StringEquals`` with
keys it knows (moto 5.2.5, moto/iam/access_control.py). A least-privilege role would be denied
everything, or a wrong ``Condition`` would pass. :func:`enforce` replaces moto's authorization
hook with one that builds the request context AWS builds -- the action, the resource ARNs and
the condition keys of each request (:func:`context`) -- and evaluates the caller's identity
policies with explicit deny, wildcards and the condition operators our policies use
(:func:`evaluate`). Two AWS behaviours come with it: a GetObject/HeadObject of a missing key is
403 unless the caller may ``s3:ListBucket`` (S3 API reference, GetObject), and AssumeRole obeys
the role's trust policy.

Credentials are derived from the identity and the stack's random secret (:func:`derived_key`,
local/secret.py), so the local admin's keys and a role session's keys are the same after
``/moto-api/reset`` or a restart: functions started before a reset keep working once the harness has
assumed their roles again; another stack's keys open nothing here.
"""

from __future__ import annotations

import base64
import datetime
import email
import fnmatch
import functools
import hashlib
import hmac
import json
import string
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlparse
from xml.etree import ElementTree

from common.errors import EmailHandlerError
from deploy.route53 import normalized_name
from local import motoadapter, secret

ACCOUNT = "123456789012"  # moto's default account
ADMIN_USER = "local-admin"
ADMIN_PROFILE = "local-admin"
ADMIN_ARN = f"arn:aws:iam::{ACCOUNT}:user/{ADMIN_USER}"
ADMIN_POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)


def _seed() -> bytes:
    """The stack's random secret (local/secret.py), never a constant: whoever reads the source must not
    hold the keys of every local stack."""

    return b"service-email-handler local emulator:" + secret.current().encode()


def derived_key(identity: str) -> tuple[str, str, str]:
    """(access key id, secret, session token) for ``identity``: stable across resets and restarts of
    one stack, different in every other."""
    seed = _seed()
    digest = hmac.new(seed, b"id:" + identity.encode(), hashlib.sha256).hexdigest().upper()
    alphabet = string.ascii_uppercase + string.digits
    key_id = "".join(alphabet[int(digest[i : i + 2], 16) % len(alphabet)] for i in range(0, 32, 2))
    secret = hmac.new(seed, b"secret:" + identity.encode(), hashlib.sha256).hexdigest()[:40]
    token = hmac.new(seed, b"token:" + identity.encode(), hashlib.sha512).hexdigest()
    return key_id, secret, token


def admin_credentials() -> dict[str, str]:
    key_id, secret, _ = derived_key("user/" + ADMIN_USER)
    return {"AWS_ACCESS_KEY_ID": "AKIA" + key_id, "AWS_SECRET_ACCESS_KEY": secret}


# --- policy evaluation -----------------------------------------------------------------------------


class UnsupportedConditionError(EmailHandlerError):
    """A condition operator this evaluator does not implement: denied, and said so, never ignored."""


@dataclass
class Request:
    action: str  # service:Action
    resources: list[str]
    conditions: dict[str, list[str]] = field(default_factory=dict)  # lower-case key -> values


def _glob(pattern: str, value: str, ignore_case: bool = False) -> bool:
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _operator_matches(operator: str, expected: list[str], actual: list[str]) -> bool:
    base = operator.removesuffix("IfExists")
    quantifier, _, base = base.rpartition(":")
    if base in ("StringEquals", "ArnEquals"):
        test = lambda a: any(a == e for e in expected)  # noqa: E731
    elif base == "StringEqualsIgnoreCase":
        test = lambda a: any(a.lower() == e.lower() for e in expected)  # noqa: E731
    elif base in ("StringLike", "ArnLike"):
        test = lambda a: any(_glob(e, a) for e in expected)  # noqa: E731
    elif base in ("StringNotEquals", "ArnNotEquals"):
        test = lambda a: all(a != e for e in expected)  # noqa: E731
    elif base in ("StringNotLike", "ArnNotLike"):
        test = lambda a: all(not _glob(e, a) for e in expected)  # noqa: E731
    elif base == "Bool":
        test = lambda a: any(a.lower() == e.lower() for e in expected)  # noqa: E731
    else:
        raise UnsupportedConditionError(operator)
    if quantifier == "ForAllValues":
        return all(test(a) for a in actual)
    if quantifier == "ForAnyValue":
        return any(test(a) for a in actual)
    return any(test(a) for a in actual)


def _conditions_hold(condition: dict[str, dict[str, Any]], context: dict[str, list[str]]) -> bool:
    for operator, keys in condition.items():
        for key, expected in keys.items():
            actual = context.get(key.lower())
            if operator == "Null":  # "true": the key must be absent; "false": present (IAM User Guide)
                if (actual is None) != (str(expected).lower() == "true"):
                    return False
                continue
            if actual is None:
                # IAM: a missing key satisfies ...IfExists, ForAllValues and the negated operators.
                if operator.endswith("IfExists") or operator.startswith("ForAllValues:") or "Not" in operator:
                    continue
                return False
            if not _operator_matches(operator, [str(e) for e in _listed(expected)], actual):
                return False
    return True


def _statement_applies(
    statement: dict[str, Any], action: str, resource: str | None, context: dict[str, list[str]]
) -> bool:
    if "Action" in statement:
        if not any(_glob(p, action, ignore_case=True) for p in _listed(statement["Action"])):
            return False
    elif any(_glob(p, action, ignore_case=True) for p in _listed(statement.get("NotAction", []))):
        return False
    if resource is None:
        pass
    elif "Resource" in statement:
        if not any(_glob(p, resource) for p in _listed(statement["Resource"])):
            return False
    elif "NotResource" in statement and any(_glob(p, resource) for p in _listed(statement["NotResource"])):
        return False
    return _conditions_hold(statement.get("Condition", {}), context)


# Actions that support no resource-level permissions: the Service Authorization Reference lists them
# with an empty "Resource types" column, and "If there is no value for this column, you must specify
# all resources ("*") to which the policy applies in the Resource element of your policy statement"
# (https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html).
# AWS evaluates such a request against the resource "*", which a statement naming ARNs does not
# match, so it is implicitly denied. The actions the project calls (deploy, destroy, replay, the roles,
# the local tools), by service, as listed on list_amazonses.html (SES v1 and v2 share the ses prefix),
# list_awslambda.html, list_amazonelasticcontainerregistry.html, list_amazoncloudwatchlogs.html,
# list_amazonsns.html, list_amazonsqs.html, list_amazondynamodb.html, list_amazons3.html,
# list_amazoneventbridge.html, list_awsidentityandaccessmanagementiam.html and
# list_awssecuritytokenservice.html (checked against the machine-readable copy of the reference,
# 2026-04). Every other action the project calls takes a resource type (cloudwatch:DescribeAlarms
# takes alarm, the SES configuration-set actions configuration-set, ssm and events their own).
NO_RESOURCE_ACTIONS = frozenset(
    {
        # SES receiving and identities (v1 API) and the account (v2 GetAccount)
        "ses:CreateReceiptRuleSet",
        "ses:DeleteReceiptRuleSet",
        "ses:DescribeReceiptRuleSet",
        "ses:DescribeActiveReceiptRuleSet",
        "ses:SetActiveReceiptRuleSet",
        "ses:CloneReceiptRuleSet",
        "ses:ListReceiptRuleSets",
        "ses:CreateReceiptRule",
        "ses:UpdateReceiptRule",
        "ses:DeleteReceiptRule",
        "ses:SetReceiptRulePosition",
        "ses:VerifyDomainIdentity",
        "ses:VerifyDomainDkim",
        "ses:VerifyEmailIdentity",
        "ses:DeleteIdentity",
        "ses:SetIdentityMailFromDomain",
        "ses:ListIdentities",
        "ses:GetIdentityVerificationAttributes",
        "ses:GetIdentityDkimAttributes",
        "ses:GetIdentityMailFromDomainAttributes",
        "ses:DescribeConfigurationSet",
        "ses:ListConfigurationSets",
        "ses:GetAccount",
        "ses:PutAccountDetails",
        "ses:ListEmailIdentities",
        "lambda:CreateEventSourceMapping",
        "lambda:ListEventSourceMappings",
        "lambda:ListFunctions",
        "lambda:GetAccountSettings",
        "ecr:GetAuthorizationToken",
        "logs:DescribeLogGroups",
        "sns:ListTopics",
        "sns:ListSubscriptions",
        "sns:GetSubscriptionAttributes",  # SNS's only resource type is the topic; a subscription is none
        "sqs:ListQueues",
        "dynamodb:ListTables",
        "s3:ListAllMyBuckets",
        "events:ListRules",
        "iam:ListRoles",
        "sts:GetCallerIdentity",
        # CloudWatch metrics: no resource type on list_amazoncloudwatch.html (email-handler stats --since)
        "cloudwatch:GetMetricData",
        "cloudwatch:ListMetrics",
        # Route 53 (list_amazonroute53.html): finding and creating zones takes no resource
        "route53:ListHostedZones",
        "route53:ListHostedZonesByName",
        "route53:CreateHostedZone",
    }
)
_NO_RESOURCE = frozenset(a.lower() for a in NO_RESOURCE_ACTIONS)


def takes_no_resource(action: str) -> bool:
    return action.lower() in _NO_RESOURCE


def as_aws_evaluates(request: Request) -> Request:
    """An action with no resource type is evaluated against "*", whatever the request names."""
    if takes_no_resource(request.action):
        return Request(request.action, ["*"], request.conditions)
    return request


def evaluate(documents: Iterable[dict[str, Any]], request: Request) -> bool:
    """Identity-policy evaluation: every resource of the request needs an Allow and no Deny."""
    statements = [s for d in documents for s in _listed(d.get("Statement", []))]
    # No resolved resource (a service the emulator does not map, e.g. Lambda, ECR, CloudWatch): the
    # action is checked against every statement whatever its Resource, so the action list is still proven.
    unresolved: list[str | None] = [None]
    for resource in request.resources or unresolved:
        allowed = False
        for s in statements:
            if _statement_applies(s, request.action, resource, request.conditions):
                if s.get("Effect") == "Deny":
                    return False
                allowed = True
        if not allowed:
            return False
    return True


def trusts(trust_policy: dict[str, Any], principal_arn: str) -> bool:
    """Does the role's trust policy let ``principal_arn`` (an IAM user or role ARN) assume it?"""
    account = principal_arn.split(":")[4]
    for s in _listed(trust_policy.get("Statement", [])):
        if s.get("Effect") != "Allow" or not any(
            _glob(a, "sts:AssumeRole", True) for a in _listed(s.get("Action", []))
        ):
            continue
        aws = (
            _listed((s.get("Principal") or {}).get("AWS", []))
            if isinstance(s.get("Principal"), dict)
            else [s.get("Principal")]
        )
        if any(p in ("*", principal_arn, account, f"arn:aws:iam::{account}:root") for p in aws):
            return True
    return False


# --- the request context AWS builds ------------------------------------------------------------------


def _params(response: Any) -> dict[str, Any]:
    body = response.body
    if isinstance(body, dict):  # DynamoDB's handler has already parsed it
        return body
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if isinstance(body, str) and body.lstrip().startswith("{"):
        try:
            return dict(json.loads(body))
        except json.JSONDecodeError:
            pass
    return {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in response.querystring.items()}


def _indexed(params: dict[str, Any], prefix: str) -> list[str]:
    """Query-protocol lists: Destinations.member.1, Destinations.member.2, ..."""
    return [str(v) for k, v in sorted(params.items()) if k.startswith(prefix + ".")]


def _address(value: str) -> str:

    return parseaddr(value)[1] or value


def _ses_identity(region: str, account: str, address: str) -> str:
    """The identity SES authorizes a send against: the address if it is verified itself, else its domain."""
    ses_backends = motoadapter.ses_models().ses_backends

    backend = ses_backends[account][region]
    name = address if address in backend.email_identities else address.rpartition("@")[2]
    return f"arn:aws:ses:{region}:{account}:identity/{name}"


SES_SANDBOX: dict[str, bool] = {
    "on": False
}  # the emulator's SES account is in the sandbox (SES checks recipients too)


def _ses_request(action: str, params: dict[str, Any], region: str, account: str) -> Request:
    if action in ("CreateEmailIdentity", "GetEmailIdentity", "DeleteEmailIdentity") and params.get(
        "EmailIdentity"
    ):  # resource type identity (Service Authorization Reference, Amazon SES v2)
        identity = params["EmailIdentity"]
        return Request(f"ses:{action}", [f"arn:aws:ses:{region}:{account}:identity/{identity}"])
    if action not in (
        "SendEmail",
        "SendRawEmail",
    ):  # management calls: by action, or on "*" (NO_RESOURCE_ACTIONS)
        return Request(f"ses:{action}", [])
    if action == "SendEmail" and "Content" in params:  # SESv2; raw content is authorized as SendRawEmail
        source = str(params.get("FromEmailAddress", ""))
        destination = params.get("Destination") or {}
        recipients = [
            a for k in ("ToAddresses", "CcAddresses", "BccAddresses") for a in destination.get(k, [])
        ]
        action = "SendRawEmail" if "Raw" in params.get("Content", {}) else "SendEmail"
        config_set = str(params.get("ConfigurationSetName", ""))
        if not source and "Raw" in params.get("Content", {}):
            raw = email.message_from_bytes(base64.b64decode(params["Content"]["Raw"]["Data"]))
            source = str(raw.get("From", ""))
    else:
        source = str(params.get("Source", ""))
        recipients = _indexed(params, "Destinations.member") + [
            a
            for part in ("ToAddresses", "CcAddresses", "BccAddresses")
            for a in _indexed(params, f"Destination.{part}.member")
        ]
        config_set = str(params.get("ConfigurationSetName", ""))
    sender = _address(source)
    resources = [_ses_identity(region, account, sender)] if sender else ["*"]
    if config_set:
        resources.append(f"arn:aws:ses:{region}:{account}:configuration-set/{config_set}")
    if SES_SANDBOX["on"]:
        resources += [_ses_identity(region, account, _address(r)) for r in recipients]
    conditions = {"ses:fromaddress": [sender], "ses:recipients": [_address(r) for r in recipients]}
    return Request(f"ses:{action}", list(dict.fromkeys(resources)), conditions)


def context(response: Any, service: str, action: str) -> Request:
    """The action, resources and condition keys of a non-S3 request, as AWS would evaluate them."""
    region, account = response.region, response.current_account
    params = _params(response)
    arn = f"arn:aws:{service}:{region}:{account}"
    if service == "sqs":
        url = str(params.get("QueueUrl") or params.get("QueueName") or "")
        # "You cannot set permissions explicitly for SendMessageBatch, DeleteMessageBatch, or
        # ChangeMessageVisibilityBatch": the single action's permission covers its batch (SQS DG).
        return Request(
            f"sqs:{action.removesuffix('Batch')}",
            [f"{arn}:{url.rstrip('/').rsplit('/', 1)[-1]}" if url else "*"],
        )
    if service == "dynamodb":
        tables = [str(params["TableName"])] if "TableName" in params else list(params.get("RequestItems", {}))
        index = f"/index/{params['IndexName']}" if params.get("IndexName") else ""
        return Request(f"dynamodb:{action}", [f"{arn}:table/{t}{index}" for t in tables] or ["*"])
    if service == "sns":
        topic = params.get("TopicArn") or (f"{arn}:{params['Name']}" if action == "CreateTopic" else "")
        return Request(f"sns:{action}", [str(topic or "*")])
    if service == "ssm":
        # GetParametersByPath is authorized against the path asked for, not the parameters it returns
        # (Systems Manager User Guide, "How Parameter Store authorizes parameter retrieval").
        key = "Name" if "Name" in params else "Path" if "Path" in params else ""
        names = [str(params[key])] if key else [str(n) for n in params.get("Names", [])]
        return Request(
            f"ssm:{action}", [f"{arn}:parameter{n if n.startswith('/') else '/' + n}" for n in names] or ["*"]
        )
    if service == "logs":
        group = params.get("logGroupName")
        if not group:
            return Request(f"logs:{action}", ["*"])
        stream = params.get("logStreamName")
        return Request(
            f"logs:{action}", [f"{arn}:log-group:{group}" + (f":log-stream:{stream}" if stream else ":*")]
        )
    if service == "ses":
        return _ses_request(action, params, region, account)
    if service == "route53":
        return _route53_request(response, action)
    if service == "cloudwatch":
        return _cloudwatch_request(response, action, account)
    if service == "sts" and action == "AssumeRole":
        return Request("sts:AssumeRole", [str(params.get("RoleArn", "*"))])
    if service == "iam" and params.get("RoleName"):
        return Request(f"iam:{action}", [f"arn:aws:iam::{account}:role/{params['RoleName']}"])
    return Request(_IAM_ACTIONS.get(f"{service}:{action}", f"{service}:{action}"), [])


# API operations whose IAM action has another name ("API operations defined by AWS Lambda" table of the
# Service Authorization Reference, list_awslambda.html: Invoke authorizes lambda:InvokeFunction).
_IAM_ACTIONS = {"lambda:Invoke": "lambda:InvokeFunction"}


def _cloudwatch_request(response: Any, action: str, account: str) -> Request:
    """A dashboard's actions take the dashboard, whose ARN has no Region: dashboards are global
    (list_amazoncloudwatch.html, resource type dashboard: ``arn:aws:cloudwatch::ACCOUNT:dashboard/NAME``).
    The alarm actions are still checked against every statement's action only (:func:`evaluate`)."""
    if action in ("GetDashboard", "PutDashboard"):
        names = [str(response._get_param("DashboardName") or "")]
    elif action == "DeleteDashboards":
        names = [str(n) for n in response._get_param("DashboardNames") or []]
    else:
        return Request(f"cloudwatch:{action}", [])
    return Request(
        f"cloudwatch:{action}", [f"arn:aws:cloudwatch::{account}:dashboard/{n}" for n in names] or ["*"]
    )


def _route53_request(response: Any, action: str) -> Request:
    """A hosted zone's actions take the zone (``arn:aws:route53:::hostedzone/ID``); ChangeResourceRecordSets
    also carries the condition keys of its changes, each holding every change's value: the record
    names normalized, the record types, the actions (Route 53 DG, "Using IAM policy conditions for
    fine-grained access control")."""

    zone = str(response._get_param("HostedZoneId") or response._get_param("Id") or "")
    resources = [f"arn:aws:route53:::hostedzone/{zone.rsplit('/', 1)[-1]}"] if zone else []
    conditions: dict[str, list[str]] = {}
    if action == "ChangeResourceRecordSets":
        changes = response._get_param("ChangeBatch.Changes") or []
        sets = [c.get("ResourceRecordSet") or {} for c in changes]
        conditions = {
            "route53:changeresourcerecordsetsnormalizedrecordnames": [
                normalized_name(str(r.get("Name", ""))) for r in sets
            ],
            "route53:changeresourcerecordsetsrecordtypes": [str(r.get("Type", "")) for r in sets],
            "route53:changeresourcerecordsetsactions": [str(c.get("Action", "")) for c in changes],
        }
    return Request(f"route53:{action}", resources, conditions)


# A transaction's actions -> the operation whose permission governs each ("Using IAM with DynamoDB
# transactions", DynamoDB DG: there is no permission for the transaction itself).
_TRANSACTION_ACTIONS = {
    "ConditionCheck": "ConditionCheckItem",
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "Get": "GetItem",
}


def contexts(response: Any, service: str, action: str) -> list[Request]:
    """What AWS authorizes for a request: :func:`context`, one request per action of a DynamoDB
    transaction, or one per entry of an EventBridge PutEvents."""
    if service == "events" and action == "PutEvents":
        return _put_events(response)
    if service != "dynamodb" or action not in ("TransactWriteItems", "TransactGetItems"):
        return [context(response, service, action)]
    arn = f"arn:aws:dynamodb:{response.region}:{response.current_account}:table"
    checked = [
        Request(f"dynamodb:{_TRANSACTION_ACTIONS.get(kind, kind)}", [f"{arn}/{body.get('TableName', '')}"])
        for item in _params(response).get("TransactItems", [])
        for kind, body in item.items()
    ]
    return checked or [Request(f"dynamodb:{action}", ["*"])]


def _put_events(response: Any) -> list[Request]:
    """PutEvents takes the event bus each entry names (the default bus when it names none) and the
    condition keys of that entry: events:source and events:detail-type (Service Authorization
    Reference, Amazon EventBridge, PutEvents; EventBridge User Guide, "Using IAM policy conditions in
    Amazon EventBridge"). Every entry must be allowed."""
    arn = f"arn:aws:events:{response.region}:{response.current_account}:event-bus"
    requests = []
    for entry in _params(response).get("Entries", []) or [{}]:
        bus = str(entry.get("EventBusName") or "default")
        conditions = {
            "events:source": [str(entry.get("Source", ""))],
            "events:detail-type": [str(entry.get("DetailType", ""))],
        }
        requests.append(
            Request("events:PutEvents", [bus if bus.startswith("arn:") else f"{arn}/{bus}"], conditions)
        )
    return requests


# S3's API names as moto reports them -> the IAM action AWS checks.
_S3_ACTIONS = {
    "ListObjects": "ListBucket",
    "ListObjectsV2": "ListBucket",
    "HeadBucket": "ListBucket",
    "ListAllMyBuckets": "ListAllMyBuckets",
    "ListBuckets": "ListAllMyBuckets",
    "GetPublicAccessBlock": "GetBucketPublicAccessBlock",
    "PutPublicAccessBlock": "PutBucketPublicAccessBlock",
    "DeletePublicAccessBlock": "PutBucketPublicAccessBlock",
    "GetBucketCORS": "GetBucketCORS",
    "DeleteObjects": "DeleteObject",
}


# --- moto hooks ------------------------------------------------------------------------------------


def _caller(response: Any, iam_request_cls: type) -> Any:

    parsed = urlparse(response.uri)
    path = response.raw_path + ("?" + parsed.query if parsed.query else "")
    # moto signs ``body or data``; some handlers (Lambda's) keep headers or query parameters in
    # ``data``, but a GET, HEAD or DELETE without a body was signed over an empty payload.
    bodiless = not response.raw_body and response.method in ("GET", "HEAD", "DELETE")
    request = iam_request_cls(
        account_id=response.current_account,
        method=response.method,
        path=path,
        data={} if bodiless else response.data,
        body=response.raw_body,
        headers=response.headers,
        action=response._get_action(),
    )
    request.check_signature()
    return request


@dataclass(frozen=True, slots=True)
class _Presigned:
    _access_key: Any  # what moto's IAMRequest holds: the caller's key, its policies and ARN


MAX_PRESIGNED_SECONDS = (
    7 * 24 * 3600
)  # X-Amz-Expires: "Minimum value of 1. Maximum value of 604800 (seven days)"


def presigned_problem(
    method: str, path: str, query: str, headers: dict[str, str], secret: str, now: datetime.datetime
) -> str:
    """Why a query-string SigV4 request (a presigned URL) is refused ('' when it is valid): its
    signature, recomputed over the request as sent, and its expiry. "Authenticating Requests: Using
    Query Parameters (AWS Signature Version 4)",
    https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html: the canonical
    request holds every query parameter but X-Amz-Signature, the signed headers, and UNSIGNED-PAYLOAD."""
    params = parse_qsl(query, keep_blank_values=True)
    q = dict(params)
    try:
        signed_at = datetime.datetime.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        expires = int(q["X-Amz-Expires"])
        key_id, day, region, service, terminal = q["X-Amz-Credential"].split("/")
        signed_headers = q["X-Amz-SignedHeaders"].split(";")
        signature = q["X-Amz-Signature"]
    except (KeyError, ValueError):
        return "AuthorizationQueryParametersError"
    if (
        q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256"
        or not 1 <= expires <= MAX_PRESIGNED_SECONDS
        or terminal != "aws4_request"
        or day != q["X-Amz-Date"][:8]
    ):
        return "AuthorizationQueryParametersError"
    if now > signed_at + datetime.timedelta(seconds=expires):
        return "Request has expired"
    lowered = {k.lower(): v for k, v in headers.items()}
    encode = functools.partial(quote, safe="-_.~")
    canonical = "\n".join(
        [
            method,
            path,
            "&".join(f"{encode(k)}={encode(v)}" for k, v in sorted(params) if k != "X-Amz-Signature"),
            "".join(f"{h}:{' '.join(str(lowered.get(h, '')).split())}\n" for h in signed_headers),
            ";".join(signed_headers),
            "UNSIGNED-PAYLOAD",
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", q["X-Amz-Date"], scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret}".encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return "" if hmac.compare_digest(expected, signature) and key_id else "SignatureDoesNotMatch"


def _presigned_caller(response: Any) -> _Presigned:
    """The caller of a presigned S3 request, once its signature and expiry hold (else S3's 403)."""
    iam_access_control = motoadapter.iam_access_control()
    create_access_key = iam_access_control.create_access_key
    s3_exceptions = motoadapter.s3_exceptions()

    query = urlparse(response.uri).query
    q = dict(parse_qsl(query, keep_blank_values=True))
    if "X-Amz-Algorithm" not in q:
        # Anonymous, or Signature Version 2 (AWSAccessKeyId=…&Signature=…), which S3 no longer accepts
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/Appendix-Sigv2.html): 403, as for a private bucket.
        raise s3_exceptions.S3AccessDeniedError()
    token = {"X-Amz-Security-Token": q["X-Amz-Security-Token"]} if "X-Amz-Security-Token" in q else {}
    try:
        key = create_access_key(
            response.current_account, "aws", q.get("X-Amz-Credential", "").split("/")[0], token
        )
    except iam_access_control.CreateAccessKeyFailure:
        raise s3_exceptions.S3AccessDeniedError() from None
    now = datetime.datetime.now(datetime.UTC)
    problem = presigned_problem(
        response.method,
        response.raw_path,
        query,
        dict(response.headers),
        key.create_credentials().secret_key,
        now,
    )
    if problem == "SignatureDoesNotMatch":
        raise s3_exceptions.S3SignatureDoesNotMatchError()
    if problem:
        # S3 answers an expired or malformed presigned URL with 403 AccessDenied
        raise s3_exceptions.S3AccessDeniedError()
    return _Presigned(key)


def _documents(request: Any) -> list[dict[str, Any]]:
    iam_models = motoadapter.iam_models()

    out = []
    for policy in request._access_key.collect_policies():
        if isinstance(policy, iam_models.Policy):
            document = next(v.document for v in policy.versions if v.is_default)
        elif isinstance(policy, str):
            document = policy
        else:
            document = policy["policy_document"]
        out.append(_parsed(document) if isinstance(document, str) else document)
    return out


@functools.lru_cache(maxsize=256)
def _parsed(document: str) -> dict[str, Any]:
    return dict(json.loads(unquote(document)))


def _enforcing() -> bool:
    settings = motoadapter.moto_settings()
    core_authorization = motoadapter.core_authorization()

    if core_authorization.ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT:
        return True
    core_authorization.ActionAuthenticatorMixin.request_count += 1
    return False


def _deny(response: Any, request: Any, checked: Request, s3: bool = False) -> None:
    core_exceptions = motoadapter.core_exceptions()
    s3_exceptions = motoadapter.s3_exceptions()

    if s3:
        raise s3_exceptions.S3AccessDeniedError()
    message = (
        f"User: {request._access_key.arn} is not authorized to perform: {checked.action} "
        f"on resource: {', '.join(checked.resources)} because no identity-based policy allows the "
        f"{checked.action} action"
    )
    if "json" in str(
        response.headers.get("Content-Type", "")
    ):  # JSON protocols: AccessDeniedException, as AWS
        error = core_exceptions.JsonRESTError("AccessDeniedException", message)
        error.code = 400
        raise error
    denied = core_exceptions.AccessDeniedError(
        user_arn=request._access_key.arn,
        action=f"{checked.action} on resource: {', '.join(checked.resources)}",
    )
    if checked.action.startswith("route53:"):  # REST-XML: the error element directly in ErrorResponse
        root = ElementTree.Element("ErrorResponse")
        inner = ElementTree.SubElement(root, "Error")
        for tag, text in (("Type", "Sender"), ("Code", "AccessDenied"), ("Message", denied.message)):
            ElementTree.SubElement(inner, tag).text = text
        denied.description = ElementTree.tostring(root, encoding="unicode")
    raise denied


def _authorize_normal(self: Any, resource: str = "*") -> None:
    iam_access_control = motoadapter.iam_access_control()

    if getattr(self, "authorized", False):  # checked already, outside the DynamoDB lock (emulator.py)
        return
    if not _enforcing():
        return
    request = _caller(self, iam_access_control.IAMRequest)
    service = request._service
    action = self._get_action()
    if f"{service}:{action}" == "sts:GetCallerIdentity":  # needs no permission (STS API reference)
        return
    # The signing name is not always the IAM prefix (CloudWatch signs as "monitoring").
    iam_prefix = {"monitoring": "cloudwatch", "email": "ses"}.get(service, service)
    for checked in map(
        as_aws_evaluates, contexts(self, "ses" if self.service_name == "sesv2" else iam_prefix, action)
    ):
        try:
            allowed = evaluate(_documents(request), checked)
        except UnsupportedConditionError:
            allowed = False
        if allowed and checked.action == "sts:AssumeRole":
            allowed = _role_trusts(self, checked.resources[0], request._access_key.arn)
        if not allowed:
            _deny(self, request, checked)


def _role_trusts(response: Any, role_arn: str, principal: str) -> bool:
    iam_backends = motoadapter.iam_models().iam_backends

    try:
        role = iam_backends[response.current_account]["aws"].get_role_by_arn(role_arn)
    except Exception:
        return False  # AWS: a role that does not exist cannot be assumed
    return trusts(json.loads(unquote(role.assume_role_policy_document)), principal)


def _authorize_s3(self: Any, bucket_name: str | None = None, key_name: str | None = None) -> None:
    iam_access_control = motoadapter.iam_access_control()

    if not _enforcing():
        return
    request = (
        _caller(self, iam_access_control.S3IAMRequest)
        if "Authorization" in self.headers
        else _presigned_caller(self)
    )
    api = str(self.data.get("Action", ""))
    action = "s3:" + _S3_ACTIONS.get(api, api)
    bucket = bucket_name or "*"
    resource = f"arn:aws:s3:::{bucket}/{key_name}" if key_name else f"arn:aws:s3:::{bucket}"
    if (
        action == "s3:DeleteObject" and not key_name
    ):  # DeleteObjects: checked per key on AWS, the keys are in the body
        resource = f"arn:aws:s3:::{bucket}/*"
    conditions: dict[str, list[str]] = {}
    if action == "s3:ListBucket":
        conditions["s3:prefix"] = [str((self.querystring.get("prefix") or [""])[0])]
    documents = _documents(request)
    checked = as_aws_evaluates(Request(action, [resource], conditions))
    try:
        allowed = evaluate(documents, checked)
    except UnsupportedConditionError:
        allowed = False
    if not allowed:
        _deny(self, request, checked, s3=True)
    if action == "s3:GetObject" and key_name and bucket_name and not _key_exists(self, bucket_name, key_name):
        # "If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP status code 403"
        listing = Request("s3:ListBucket", [f"arn:aws:s3:::{bucket_name}"], {})
        try:
            may_list = evaluate(documents, listing)
        except UnsupportedConditionError:
            may_list = False
        if not may_list:
            _deny(self, request, listing, s3=True)


def _key_exists(response: Any, bucket: str, key: str) -> bool:
    try:
        return response.backend.get_object(bucket, key) is not None
    except Exception:
        return False


def _deterministic_sessions() -> None:
    sts_models = motoadapter.sts_models()

    original = sts_models.AssumedRole.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        key_id, secret, token = derived_key(f"{self.role_arn}/{self.session_name}")
        self.access_key.access_key_id = self.access_key_id = "ASIA" + key_id
        self.access_key.secret_access_key = self.secret_access_key = secret
        self.session_token = token

    sts_models.AssumedRole.__init__ = init


def bootstrap_admin() -> None:
    """The local admin user (all actions) with its derived keys, in every region's IAM (IAM is global)."""
    iam_backends = motoadapter.iam_models().iam_backends

    backend = iam_backends[ACCOUNT]["aws"]
    if ADMIN_USER in backend.users:
        return
    user = backend.create_user("us-east-1", ADMIN_USER)
    backend.put_user_policy(ADMIN_USER, "local-admin", ADMIN_POLICY)
    key = user.create_access_key(prefix="AKIA")
    creds = admin_credentials()
    key.access_key_id, key.secret_access_key = creds["AWS_ACCESS_KEY_ID"], creds["AWS_SECRET_ACCESS_KEY"]
    backend.access_keys[key.access_key_id] = key


def after_reset(hook: Any) -> None:
    """Run ``hook()`` after every ``/moto-api/reset`` (state the emulator keeps outside moto's backends)."""
    moto_api_models = motoadapter.moto_api_models()

    original = moto_api_models.MotoAPIBackend.reset

    def reset(self: Any) -> None:
        original(self)
        hook()

    moto_api_models.MotoAPIBackend.reset = reset


@functools.cache  # once per process: the hooks wrap what they replace
def install() -> None:
    """Replace moto's authorization hooks; enforcement itself follows INITIAL_NO_AUTH_ACTION_COUNT."""
    core_authorization = motoadapter.core_authorization()

    core_authorization.ActionAuthenticatorMixin._authenticate_and_authorize_normal_action = _authorize_normal
    core_authorization.ActionAuthenticatorMixin._authenticate_and_authorize_s3_action = _authorize_s3
    _deterministic_sessions()
    after_reset(bootstrap_admin)
    bootstrap_admin()


def set_enforced(on: bool) -> None:
    """In this process: enforce IAM from the next request on (or stop enforcing)."""
    settings = motoadapter.moto_settings()
    core_authorization = motoadapter.core_authorization()

    install()
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0 if on else float("inf")
    core_authorization.ActionAuthenticatorMixin.request_count = 0
