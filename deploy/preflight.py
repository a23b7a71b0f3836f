"""Checks that run before a deploy changes anything; each failure says what to do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.aws import client, error_code
from common.runtime import config
from common.runtime.config import DEV_THREAD_SECRET, Config
from common.runtime.errors import ConfigError
from deploy.errors import DeployError

REQUIRED = ("domain_name", "public_email", "private_email", "thread_secret")
MIN_SECRET = 32


def resolve_region(cli_region: str | None, environ: Mapping[str, str]) -> str:
    """--region wins, but never silently over a different AWS_REGION in the environment."""
    env_region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if cli_region and env_region and cli_region != env_region:
        raise DeployError(f"region mismatch: --region {cli_region} but AWS_REGION={env_region}",
                          f"deploy to one region: drop --region, or run with AWS_REGION={cli_region}")
    region = cli_region or env_region
    if not region:
        import boto3

        region = boto3.session.Session().region_name
    if not region:
        raise DeployError("no AWS region", "pass --region (SES receiving runs in us-east-1, us-west-2, eu-west-1 and a few "
                                           "others) or set AWS_REGION")
    return region


def load_config(environ: Mapping[str, str], env: str, region: str) -> Config:
    values = {**environ, "ENVIRONMENT": env, "AWS_REGION": region}
    try:
        cfg = config.load(values, require=REQUIRED)
    except ConfigError as exc:
        raise DeployError(f"configuration: {exc}", "export the variables named above (README, Configuration)") from None
    if cfg.thread_secret == DEV_THREAD_SECRET:
        raise DeployError("THREAD_SECRET is the development secret from compose/local.env",
                          "export a random secret: THREAD_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(32))')")
    if len(cfg.thread_secret) < MIN_SECRET:
        raise DeployError(f"THREAD_SECRET has {len(cfg.thread_secret)} characters; a deployed secret needs {MIN_SECRET}",
                          "export a longer random secret (secrets.token_hex(32) gives 64 characters)")
    return cfg


def account() -> str:
    """The caller's account, which also proves the credentials work."""
    from botocore.exceptions import BotoCoreError, NoCredentialsError

    from common.aws.sts import account_id

    try:
        return account_id()  # cached: the ARNs derived later reuse it
    except NoCredentialsError:
        raise DeployError("no AWS credentials found",
                          "configure them (aws configure, aws sso login, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / "
                          "AWS_PROFILE) and try again") from None
    except BotoCoreError as exc:
        raise DeployError(f"the AWS credentials do not work: {exc}", "check AWS_PROFILE / the keys and try again") from None
    except Exception as exc:
        code = error_code(exc)
        if code in ("InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
                    "UnrecognizedClientException"):
            raise DeployError(f"the AWS credentials were refused ({code})",
                              "refresh them (aws sso login, new access keys) and try again") from None
        raise


def receiving_available() -> None:
    """SES email receiving exists only in some regions; its rule-set API says so."""
    try:
        client("ses").describe_active_receipt_rule_set()
    except Exception as exc:
        code = error_code(exc)
        if code and code not in ("AccessDenied", "AccessDeniedException", "Throttling"):
            raise DeployError(f"SES email receiving is not available here ({code}: {exc})",
                              "deploy to a region with SES receiving, e.g. --region us-east-1 (or us-west-2, eu-west-1)") from None
        raise


def identity_status(cfg: Config) -> str:
    """'Success', 'Pending', 'Failed', ... or '' when the domain is not an SES identity yet."""
    attrs = client("ses").get_identity_verification_attributes(Identities=[cfg.domain_name])
    return str(attrs.get("VerificationAttributes", {}).get(cfg.domain_name, {}).get("VerificationStatus", ""))


def dns_records(cfg: Config) -> list[str]:
    """The records the owner publishes so SES can verify, sign, receive and handle bounces."""
    ses = client("ses")
    records = []
    attrs: dict[str, Any] = ses.get_identity_verification_attributes(Identities=[cfg.domain_name]).get(
        "VerificationAttributes", {}).get(cfg.domain_name, {})
    if attrs.get("VerificationToken"):
        records.append(f"TXT   _amazonses.{cfg.domain_name}  \"{attrs['VerificationToken']}\"")
    dkim = ses.get_identity_dkim_attributes(Identities=[cfg.domain_name]).get("DkimAttributes", {}).get(cfg.domain_name, {})
    for token in dkim.get("DkimTokens", []):
        records.append(f"CNAME {token}._domainkey.{cfg.domain_name}  {token}.dkim.amazonses.com")
    inbound = f"inbound-smtp.{cfg.region}.amazonaws.com"
    records += [f"MX    {cfg.domain_name}  10 {inbound}", f"MX    {cfg.thread_domain}  10 {inbound}",
                f"MX    bounce.{cfg.domain_name}  10 feedback-smtp.{cfg.region}.amazonses.com",
                f"TXT   bounce.{cfg.domain_name}  \"v=spf1 include:amazonses.com ~all\""]
    return records
