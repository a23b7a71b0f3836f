"""Checks that run before a deploy changes anything; each failure says what to do."""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from common.aws import control_client, error_code, or_none
from common.aws.sts import account_id
from common.errors import ConfigError
from common.mail import encrypt
from common.runtime import config
from common.runtime.config import DEV_THREAD_SECRET
from deploy import config as host_config
from deploy import regions
from deploy.config import Config, key_files
from deploy.emulator import EMULATOR_ACCOUNT_PATH, emulator_token
from deploy.errors import DeployError
from deploy.functions import FUNCTIONS
from deploy.lambdas import environment
from deploy.receiving import public_recipients
from deploy.resources import preflight_production

REQUIRED = ("domain_name", "public_email", "private_email")
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3 general purpose bucket naming rules
MIN_SECRET = 32


def resolve_region(cli_region: str | None, environ: Mapping[str, str]) -> str:
    """--region wins, but never silently over a different AWS_REGION in the environment."""
    env_region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if cli_region and env_region and cli_region != env_region:
        raise DeployError(
            f"region mismatch: --region {cli_region} but AWS_REGION={env_region}",
            f"deploy to one region: drop --region, or run with AWS_REGION={cli_region}",
        )
    region = cli_region or env_region
    if not region:
        import boto3

        region = boto3.session.Session().region_name
    if not region:
        raise DeployError(
            "no AWS region",
            "pass --region (one where SES receives mail, e.g. us-east-1: "
            "https://docs.aws.amazon.com/general/latest/gr/ses.html#ses_inbound_endpoints) or set AWS_REGION",
        )
    return region


def load_config(
    environ: Mapping[str, str], env: str, region: str, account: str, need_secret: bool = True
) -> Config:
    """The deploy's configuration. The bucket defaults to ``{project}-{env}-{account}-{region}-mail``:
    bucket names are global, so the local default would collide with every other adopter."""
    values = {**environ, "ENVIRONMENT": env, "AWS_REGION": region, "ACCOUNT_ID": account}
    project = values.get("PROJECT_NAME") or config.PROJECT
    if not values.get("EMAIL_BUCKET"):
        values["EMAIL_BUCKET"] = f"{project}-{env}-{account}-{region}-mail"
    try:
        cfg = host_config.load(values, require=REQUIRED)
    except ConfigError as exc:
        raise DeployError(
            f"configuration: {exc}", "export the variables named above (README, Configuration)"
        ) from None
    try:
        cfg = with_owner_key_file(cfg)  # a key that cannot encrypt stops the deploy before any change
    except ConfigError as exc:
        raise DeployError(
            f"the owner's key: {exc}",
            "give a current public key that can encrypt, or unset "
            "OWNER_SMIME_CERT / OWNER_PGP_KEY to forward in clear",
        ) from None
    try:
        cfg = with_mailbox_key_files(cfg)  # the same for each mailbox's own key (MAILBOX_KEYS)
    except ConfigError as exc:
        raise DeployError(
            f"a mailbox's key: {exc}",
            "give that mailbox a current public key that can encrypt, or remove it from MAILBOX_KEYS "
            "to forward to it in clear",
        ) from None
    if not BUCKET_NAME.fullmatch(cfg.bucket):
        # CreateBucket would fail with InvalidBucketName after the run has started changing things.
        digest = hashlib.sha256(f"{account}-{region}".encode()).hexdigest()[:10]
        short = f"{project}-{env}"[: 63 - len(digest) - 6].rstrip("-.") + f"-{digest}-mail"
        raise DeployError(
            f"the bucket name {cfg.bucket} ({len(cfg.bucket)} characters) is not a valid S3 bucket name: "
            "3 to 63 lowercase letters, digits, hyphens and dots",
            f"choose a shorter one, e.g. export EMAIL_BUCKET={short} (unique to this account and region)",
        )
    if cfg.thread_secret == DEV_THREAD_SECRET:
        raise DeployError(
            "THREAD_SECRET is the development secret from compose/local.env",
            "export a random secret: "
            "THREAD_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(32))')",
        )
    if cfg.thread_secret and len(cfg.thread_secret) < MIN_SECRET:
        raise DeployError(
            f"THREAD_SECRET has {len(cfg.thread_secret)} characters; a deployed secret needs {MIN_SECRET}",
            "export a longer random secret (secrets.token_hex(32) gives 64 characters)",
        )
    if need_secret and not cfg.thread_secret and not _parameter_exists(cfg.thread_secret_parameter):
        raise DeployError(
            f"no THREAD_SECRET: the first deploy stores it in SSM ({cfg.thread_secret_parameter})",
            "export THREAD_SECRET=$(python3 -c 'import secrets; print(secrets.token_hex(32))') "
            "and deploy again",
        )
    return cfg


# "Environment variables: 4 KB, for all environment variables associated with the function, in
# aggregate" (Lambda quotas, not adjustable); Lambda measures the variables as JSON ("exceeded the 4KB
# limit. String measured: {...}").
LAMBDA_ENVIRONMENT_LIMIT = 4096


def environment_fits(cfg: Config, environ: Mapping[str, str]) -> None:
    """Each function's variables fit Lambda's 4 KB, checked before CreateFunction would refuse them
    half-way."""

    for spec in FUNCTIONS:
        variables = environment(cfg, spec, dict(environ))
        size = len(json.dumps(variables, separators=(",", ":"), ensure_ascii=False).encode())
        if size > LAMBDA_ENVIRONMENT_LIMIT:
            largest = sorted(variables, key=lambda k: len(k) + len(variables[k]), reverse=True)[:3]
            raise DeployError(
                f"{spec.name}'s environment variables take {size} bytes; Lambda allows "
                f"{LAMBDA_ENVIRONMENT_LIMIT} (4 KB) in all",
                "shorten the largest: " + ", ".join(f"{k} ({len(variables[k])} characters)" for k in largest),
            )


# Recipient conditions in one receipt rule (SES DG, "Service quotas in Amazon SES": 100 per rule).
RULE_RECIPIENTS_LIMIT = 100


def receipt_rule_fits(cfg: Config) -> None:
    """The public rule names each listed address and the thread domain (deploy.receiving.rules): more
    than SES takes would fail half-way through the deploy, so it is refused before any change."""

    count = len(public_recipients(cfg)) + 1
    if count > RULE_RECIPIENTS_LIMIT:
        raise DeployError(
            f"the public receipt rule would name {count} recipients ({count - 1} public addresses and "
            f"{cfg.thread_domain}); SES allows {RULE_RECIPIENTS_LIMIT} in one rule",
            f"add the catch-all *@{cfg.domain_name} to PUBLIC_EMAIL and manage the addresses with "
            "`email-handler address add|disable` (no redeploy)",
        )


def _parameter_exists(name: str) -> bool:
    return or_none(lambda: control_client("ssm").get_parameter(Name=name), "ParameterNotFound") is not None


def bucket_available(cfg: Config) -> None:
    """HeadBucket: 200 ours, 404 free; 403 means another account owns the name (global namespace)."""
    try:
        control_client("s3").head_bucket(Bucket=cfg.bucket)
    except Exception as exc:
        code = error_code(exc)
        if code in ("404", "NoSuchBucket", "NotFound"):
            return
        if code in ("403", "AccessDenied", "Forbidden"):
            raise DeployError(
                f"the bucket name {cfg.bucket} belongs to another AWS account (HeadBucket answers 403)",
                "choose a name of your own: export EMAIL_BUCKET=<a globally unique name>",
            ) from None
        raise


def account() -> str:
    """The caller's account, which also proves the credentials work."""
    from botocore.exceptions import BotoCoreError, NoCredentialsError

    try:
        return account_id()  # cached: the ARNs derived later reuse it
    except NoCredentialsError:
        raise DeployError(
            "no AWS credentials found",
            "configure them (aws configure, aws sso login, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / "
            "AWS_PROFILE) and try again",
        ) from None
    except BotoCoreError as exc:
        raise DeployError(
            f"the AWS credentials do not work: {exc}", "check AWS_PROFILE / the keys and try again"
        ) from None
    except Exception as exc:
        code = error_code(exc)
        if code in (
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
            "ExpiredToken",
            "ExpiredTokenException",
            "UnrecognizedClientException",
        ):
            raise DeployError(
                f"the AWS credentials were refused ({code})",
                "refresh them (aws sso login, new access keys) and try again",
            ) from None
        raise


def receiving_available(
    region: str, lookup: Callable[[str], bool] | None, report: Callable[[str], None]
) -> None:
    """Refuse a Region where SES does not receive mail, before anything changes: by DNS's evidence
    (deploy/regions.py); when neither DNS nor the table can say, warn with what to check and go on."""

    found = regions.receiving(region, lookup)
    if found.receives is False:
        raise DeployError(
            f"SES email receiving is not available in {region}: {found.evidence}",
            "deploy to a Region that receives mail, e.g. --region us-east-1 (to check one: "
            + found.check()
            + ")",
        )
    if found.receives is None:
        report(
            f"[deploy] warning: cannot tell whether SES receives mail in {region} ({found.evidence}); "
            f"going on. Check: {found.check()}"
        )
    else:
        report(f"[deploy] SES receives mail in {region}: {found.evidence}")


def new_identity_verified_at_once() -> bool:
    """Whether a domain identity created now is verified at once: never on AWS ("As Amazon SES searches for
    the TXT record, the domain's verification status is Pending", SES API reference, VerifyDomainIdentity);
    on an emulator, unless it models a fresh account (local/fresh.py), which is as AWS is."""

    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    if not endpoint:
        return False

    import boto3

    credentials = boto3.Session().get_credentials()
    request = urllib.request.Request(endpoint.rstrip("/") + EMULATOR_ACCOUNT_PATH)
    if credentials is not None:  # the project's emulator asks the local admin's token of /moto-api
        request.add_header("Authorization", f"Bearer {emulator_token(credentials.secret_key)}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return bool(json.loads(answer.read()).get("account") != "fresh")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise DeployError(
                f"the emulator at {endpoint} refused to say which account it models ({exc.code})",
                "deploy to the local emulator with the local admin's credentials (AWS_PROFILE=local-admin)",
            ) from exc
        return True  # an emulator without the model (LocalStack) verifies at once
    except (OSError, ValueError):
        return True


def identity_status(cfg: Config) -> str:
    """'Success', 'Pending', 'Failed', ... or '' when the domain is not an SES identity yet."""
    attrs = control_client("ses").get_identity_verification_attributes(Identities=[cfg.domain_name])
    return str(attrs.get("VerificationAttributes", {}).get(cfg.domain_name, {}).get("VerificationStatus", ""))


def production_access() -> bool | None:
    """SES production access (False: the sandbox), or None when the endpoint cannot say."""

    return preflight_production()


def send_rate(environ: dict[str, str], report: Any) -> None:
    """MAX_SEND_RATE within the account's SES sending rate (sesv2 GetAccount ``SendQuota.MaxSendRate``:
    1 a second in the sandbox, https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas.html): the
    senders share it, and a higher one only earns Throttling. Lowered in ``environ`` when above it."""
    try:
        quota = control_client("sesv2").get_account().get("SendQuota", {})
    except Exception:
        return  # an endpoint without sesv2 GetAccount: keep what was configured
    account_rate = float(quota.get("MaxSendRate") or 0)
    configured = float(environ.get("MAX_SEND_RATE") or host_config.load({}).max_send_rate)
    if allowed_send_rate(configured, account_rate) != configured:
        environ["MAX_SEND_RATE"] = f"{account_rate:g}"
        report(
            f"[deploy] MAX_SEND_RATE {configured:g}/s is above this account's SES sending rate; "
            f"the senders use {account_rate:g}/s "
            f"(the account's SendQuota; {quota.get('Max24HourSend', 0):g} a day)"
        )


def allowed_send_rate(configured: float, account_rate: float) -> float:
    """The rate the deploy gives the senders: MAX_SEND_RATE, lowered to the account's SES MaxSendRate
    (0: unknown) when above it. `email-handler status` compares the deployed rate with it, so a rate
    lowered in the sandbox is reported once production access raises the account's."""
    return account_rate if account_rate and configured > account_rate else configured


def sandbox_note(cfg: Config, production: bool | None) -> str:
    if production is None:
        return "[deploy] SES production access: unknown (sesv2 GetAccount not available at this endpoint)"
    if production:
        return "[deploy] SES production access: yes"
    return (
        f"[deploy] SES is in the sandbox in {cfg.region}: it sends only to verified addresses. Click the "
        f"link SES mailed to {cfg.private_email} so forwards go out (they wait until then), and run "
        "`email-handler ses request-production-access` before contacts can get acks and replies (they "
        "wait too); `email-handler status` says what is left"
    )


def production_request(cfg: Config, website: str = "", use_case: str = "") -> dict[str, Any]:
    """The PutAccountDetails request for production access, filled from the configuration (SES API v2
    reference, PutAccountDetails: MailType and WebsiteURL required; UseCaseDescription, ContactLanguage,
    AdditionalContactEmailAddresses, ProductionAccessEnabled optional)."""
    return {
        "MailType": "TRANSACTIONAL",
        "WebsiteURL": website or f"https://{cfg.domain_name}",
        "ContactLanguage": "EN",
        "UseCaseDescription": use_case
        or (
            f"Personal mail handling for {cfg.domain_name}. Mail to {cfg.public_email} is received by SES "
            f"and forwarded to its owner ({cfg.private_email}); a person who writes for the first time gets "
            "one automatic acknowledgement; the owner's replies go to the person who wrote. No lists, no "
            "marketing: every recipient wrote to us first. Bounces and complaints arrive through a "
            "configuration set's SNS destination; bounced and complaining addresses are suppressed."
        ),
        "AdditionalContactEmailAddresses": [cfg.private_email],
        "ProductionAccessEnabled": True,
    }


def request_production(request: dict[str, Any]) -> dict[str, Any]:
    """Submit ``request`` (SESv2 PutAccountDetails) and return the account as SES then reports it."""
    sesv2 = control_client("sesv2")
    sesv2.put_account_details(**request)
    return dict(sesv2.get_account())


def with_owner_key_file(cfg: Config) -> Config:
    """Host tools (the deploy, `email-handler dev`): the owner's key read from the file OWNER_SMIME_CERT or
    OWNER_PGP_KEY names and checked, so a key that cannot encrypt stops the start, not a send."""

    variable = "OWNER_SMIME_CERT" if cfg.owner_smime_cert else "OWNER_PGP_KEY" if cfg.owner_pgp_key else ""
    if not variable:
        return cfg
    text = encrypt.read_key_file(cfg.owner_smime_cert or cfg.owner_pgp_key, variable)
    key = encrypt.parse(text)
    if key.kind != ("smime" if cfg.owner_smime_cert else "pgp"):
        raise ConfigError(
            f"{variable} names a file holding an "
            f"{'OpenPGP key' if key.kind == 'pgp' else 'X.509 certificate'}"
        )
    return replace(cfg, owner_key=text)


def with_mailbox_key_files(cfg: Config) -> Config:
    """Host tools: each mailbox's key read from the file MAILBOX_KEYS names and checked like the owner's,
    so a key that cannot encrypt stops the deploy (or `email-handler dev`) with the mailbox named."""

    files = key_files(cfg.mailbox_key_files)
    if not files:
        return cfg
    texts = dict(cfg.mailbox_key_texts)
    for box, path in files.items():
        text = encrypt.read_key_file(path, f"MAILBOX_KEYS ({box})")
        encrypt.parse(text, whose=box)
        texts[box] = text
    return replace(cfg, mailbox_key_texts=tuple(sorted(texts.items())))


def with_key_files(cfg: Config) -> Config:
    """The owner's key and every mailbox's, read from their files and checked."""
    return with_mailbox_key_files(with_owner_key_file(cfg))


def verify_address(cfg: Config, address: str) -> str:
    """SESv2 CreateEmailIdentity for one address, so that SES mails it a verification link; in the sandbox
    SES sends only to verified addresses, so this is how a test contact (a second mailbox of the owner's)
    can get replies before production access. Returns ``verified`` (already: nothing done), ``sent`` (a
    new identity: SES mailed the link) or ``sent again`` (a pending or failed identity deleted and
    created again: SES mails a new link only for a new identity, and a link expires after 24 hours, SES
    DG "Verifying an email address identity")."""
    from botocore.exceptions import ClientError

    address = address.strip()
    if not config.EMAIL_ADDRESS.match(address):
        raise DeployError(
            f"{address!r} is not an ASCII email address",
            "give one mailbox, e.g. email-handler ses verify-address me@mailbox.example",
        )
    if cfg.is_own(address) and address.lower() not in cfg.senders:
        raise DeployError(
            f"{address} is one of this system's own addresses: mail to it comes back here",
            "verify a mailbox outside the domain, e.g. a second mailbox of yours",
        )
    sesv2 = control_client("sesv2")
    try:
        identity = sesv2.get_email_identity(EmailIdentity=address)
    except ClientError as exc:
        if error_code(exc) not in ("NotFoundException", "NotFound"):
            raise
        identity = None
    if identity is not None and identity.get("VerifiedForSendingStatus"):
        return "verified"
    if identity is not None:
        sesv2.delete_email_identity(EmailIdentity=address)
    sesv2.create_email_identity(EmailIdentity=address)
    return "sent" if identity is None else "sent again"
