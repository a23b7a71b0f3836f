"""The one place in local/ that imports moto: the emulator patches moto's internals, and this module
names what they reach and which moto they were written against.

moto is the `local` extra, heavy and optional (pyproject.toml's banned-module-level-imports), so each
accessor below imports its moto module when called, never at module level. The patches themselves live
beside the behaviour they model (local/emulator.py, local/fresh.py, local/iam.py,
local/concurrency.py); :data:`PATCHES` lists each with what it replaces and why, and
tests/unit/test_motoadapter.py fails when the installed moto is not :data:`MOTO_VERSION`, listing
them to re-check against the new version.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any

MOTO_VERSION = "5.2.5"  # the moto every patch below was written and tested against


@dataclass(frozen=True, slots=True)
class Patch:
    """One change the emulator makes to moto."""

    installed_by: str  # the local function that applies it (module.function)
    replaces: str  # what in moto it replaces or wraps
    why: str
    upstream: bool  # a moto bug or gap worth reporting to moto, not a local-only need


PATCHES: tuple[Patch, ...] = (
    # local/emulator.py: fidelity fixes and speed-ups of the embedded server
    Patch(
        "local.emulator.route_cache",
        "moto.backends.list_of_moto_modules",
        "computed once: moto lists its package directory on every request (a third of the CPU under load)",
        upstream=True,
    ),
    Patch(
        "local.emulator.sqs_retention_check",
        "SQSBackend.is_message_valid_based_on_retention_period",
        "reads the one retention attribute instead of every queue attribute per message (O(batch x depth))",
        upstream=True,
    ),
    Patch(
        "local.emulator.dynamodb_atomic",
        "DynamoHandler.call_action",
        "one lock per DynamoDB request: moto's conditional writes race across server threads",
        upstream=True,
    ),
    Patch(
        "local.emulator.dynamodb_read_key_sizes",
        "DynamoDBBackend.get_item/update_item/delete_item",
        "refuse over-long keys on reads and updates as DynamoDB does (moto checks PutItem only)",
        upstream=True,
    ),
    Patch(
        "local.emulator.sqs_message_characters",
        "SQSBackend._validate_message",
        "refuse characters outside XML 1.0 as SQS does (moto stores anything)",
        upstream=True,
    ),
    Patch(
        "local.emulator.sesv2_suppression_options",
        "SESV2Response, moto.sesv2.urls",
        "PutConfigurationSetSuppressionOptions, which moto does not implement (404)",
        upstream=True,
    ),
    Patch(
        "local.emulator.ses_event_destination_names",
        "SESBackend.create_configuration_set_event_destination",
        "event destination names unique per configuration set, not per account",
        upstream=True,
    ),
    Patch(
        "local.emulator.ses_sandbox",
        "SESBackend.send_raw_email/send_email, SESV2Response GetAccount routes",
        "SES's sandbox (only verified recipients) and GetAccount, which moto lacks",
        upstream=False,
    ),
    # local/fresh.py: the fresh-account model (inert until an account is modelled as fresh)
    Patch(
        "local.fresh._patch_route53",
        "Route53Backend.change_resource_record_sets",
        "refuse TXT values that are not quoted strings of at most 255 characters",
        upstream=True,
    ),
    Patch(
        "local.fresh._patch_ses_attributes",
        "SESBackend.get_identity_verification/dkim/mail_from_domain_attributes",
        "identities stay Pending until their DNS records (or the click) exist",
        upstream=False,
    ),
    Patch(
        "local.fresh._patch_ses_identities",
        "SESBackend.set_identity_mail_from_domain/_is_verified_address/delete_identity",
        "MAIL FROM, the verified-address rule and deletion as on a new account",
        upstream=False,
    ),
    Patch(
        "local.fresh._patch_ses_sending",
        "SESBackend.send_raw_email/send_email",
        "a new account's refusals (sandbox, quotas) and the sent counters",
        upstream=False,
    ),
    Patch(
        "local.fresh._patch_receipt_rules",
        "SESBackend.create_receipt_rule/update_receipt_rule",
        "SES checks it may use the rule's bucket and function (InvalidS3Configuration...)",
        upstream=True,
    ),
    Patch(
        "local.fresh._patch_sesv2",
        "SESV2Response.get_email_identity, send_email",
        "VerifiedForSendingStatus/VerificationStatus PENDING until the link is clicked",
        upstream=False,
    ),
    Patch(
        "local.fresh._patch_sns",
        "SNSBackend.subscribe, Subscription.subscription_arn",
        "e-mail subscriptions wait for their confirmation (PendingConfirmation)",
        upstream=False,
    ),
    Patch(
        "local.fresh._patch_cloudwatch",
        "CloudWatchBackend.put_metric_alarm",
        "a new alarm starts INSUFFICIENT_DATA, not OK",
        upstream=True,
    ),
    Patch(
        "local.fresh._patch_iam",
        "IAMBackend put_user_policy/put_role_policy/create_policy(_version)",
        "IAM's policy size quotas (inline and managed)",
        upstream=True,
    ),
    Patch(
        "local.fresh._patch_lambda_images",
        "LambdaBackend.create_function/update_function_code",
        "Lambda refuses an image index (and, on the model, an image it cannot pull)",
        upstream=False,
    ),
    Patch(
        "local.fresh._routes",
        "moto.moto_api._internal.urls",
        "the model's own /moto-api routes (DNS publishing, the account switch)",
        upstream=False,
    ),
    # local/concurrency.py
    Patch(
        "local.concurrency.install",
        "LambdaBackend.put_function_concurrency, LambdaResponse, moto.awslambda.urls",
        "GetAccountSettings (404 in moto) and the unreserved-concurrency floor",
        upstream=True,
    ),
    # local/iam.py: IAM enforcement
    Patch(
        "local.iam.install",
        "ActionAuthenticatorMixin._authenticate_and_authorize_normal/s3_action",
        "IAM evaluated as AWS does for the services the functions use (conditions, resource policies, "
        "SES identities)",
        upstream=False,
    ),
    Patch(
        "local.iam._deterministic_sessions",
        "AssumedRole.__init__",
        "keys derived from the role and session, so a restarted emulator accepts the same credentials",
        upstream=False,
    ),
    Patch(
        "local.iam.after_reset",
        "MotoAPIBackend.reset",
        "re-create the admin user and the model's state after /moto-api/reset",
        upstream=False,
    ),
    Patch(
        "local.iam.set_enforced",
        "moto.settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count",
        "turn enforcement on or off in this process",
        upstream=False,
    ),
)


def installed_version() -> str:
    return metadata.version("moto")


# The moto modules the patches and the emulator reach, each imported on first use.


def moto_backends() -> Any:
    from moto import backends

    return backends


def moto_settings() -> Any:
    from moto import settings

    return settings


def server_app() -> Any:
    """moto's werkzeug application (the server the emulator runs)."""
    from moto.moto_server import werkzeug_app

    return werkzeug_app


def moto_api_urls() -> Any:
    from moto.moto_api._internal import urls

    return urls


def moto_api_models() -> Any:
    from moto.moto_api._internal import models

    return models


def core_authorization() -> Any:
    """The hook moto calls to authorize every request (IAM enforcement, local.iam)."""
    from moto.core import authorization

    return authorization


def core_exceptions() -> Any:
    from moto.core import exceptions

    return exceptions


def iam_access_control() -> Any:
    """moto's IAM policy evaluation pieces (the request classes, the access-key lookup)."""
    from moto.iam import access_control

    return access_control


def iam_models() -> Any:
    from moto.iam import models

    return models


def iam_exceptions() -> Any:
    from moto.iam import exceptions

    return exceptions


def sts_models() -> Any:
    from moto.sts import models

    return models


def s3_models() -> Any:
    from moto.s3 import models

    return models


def s3_exceptions() -> Any:
    from moto.s3 import exceptions

    return exceptions


def ses_models() -> Any:
    from moto.ses import models

    return models


def ses_exceptions() -> Any:
    from moto.ses import exceptions

    return exceptions


def sesv2_responses() -> Any:
    from moto.sesv2 import responses

    return responses


def sesv2_urls() -> Any:
    from moto.sesv2 import urls

    return urls


def sns_models() -> Any:
    from moto.sns import models

    return models


def sqs_models() -> Any:
    from moto.sqs import models

    return models


def sqs_exceptions() -> Any:
    from moto.sqs import exceptions

    return exceptions


def dynamodb_models() -> Any:
    from moto.dynamodb import models

    return models


def dynamodb_responses() -> Any:
    from moto.dynamodb import responses

    return responses


def cloudwatch_models() -> Any:
    from moto.cloudwatch import models

    return models


def route53_models() -> Any:
    from moto.route53 import models

    return models


def route53_exceptions() -> Any:
    from moto.route53 import exceptions

    return exceptions


def awslambda_models() -> Any:
    from moto.awslambda import models

    return models


def awslambda_exceptions() -> Any:
    from moto.awslambda import exceptions

    return exceptions


def awslambda_responses() -> Any:
    from moto.awslambda import responses

    return responses


def awslambda_urls() -> Any:
    from moto.awslambda import urls

    return urls
