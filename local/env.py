"""Local-mode defaults, read from compose/local.env so both local modes share them."""

from __future__ import annotations

import argparse
import configparser
import contextlib
import json
import os
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from common.aws import client, reset_clients
from common.aws.sts import account_id
from common.runtime.config import DEV_THREAD_SECRET, secret_parameters
from deploy import config
from deploy.config import Config, env_name
from deploy.functions import FUNCTIONS, narrowed
from deploy.iam import role_arn
from local import provision, secret
from local.iam import ACCOUNT, ADMIN_PROFILE, derived_key
from local.iam import admin_credentials as derived

ENV_FILE = Path(__file__).resolve().parents[1] / "compose" / "local.env"
# scripts/compose.sh writes one file per running `make up` stack: its endpoint and, when DynamoDB
# is routed to moto beside LocalStack, where DynamoDB answers.
STACKS_DIR = ENV_FILE.parents[1] / ".build" / "local" / "stacks"
# The tools' admin credentials in both local modes (shared-credentials format, profile local-admin).
CREDENTIALS_FILE = Path(__file__).resolve().parents[1] / ".build" / "local" / "credentials"

# Fallback when the package is installed without the repository (the file is the source of truth).
_BUILTIN = {
    "DOMAIN_NAME": "example.com",
    "PUBLIC_EMAIL": "hello@example.com,jobs@example.com,*@example.com",
    "PUBLIC_ADDRESSES": '{"jobs@example.com":{"label":"jobs","ack_subject":"Thanks for your application"}}',
    "PRIVATE_EMAIL": "owner@example.net",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "ENVIRONMENT": "local",
    "THREAD_SECRET": DEV_THREAD_SECRET,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "LOG_LEVEL": "INFO",
}


def local_env() -> dict[str, str]:
    """The local defaults, with the local admin's credentials (which work whether IAM is enforced or not)."""
    out: dict[str, str] = dict(_BUILTIN)
    if ENV_FILE.exists():
        out = {}
        for line in ENV_FILE.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                out[key.strip()] = value.strip()
    return {**out, **admin_credentials()}


def _same_endpoint(a: str, b: str) -> bool:
    def key(url: str) -> tuple[str, int | None]:
        parts = urlsplit(url.rstrip("/"))
        return ("127.0.0.1" if parts.hostname == "localhost" else parts.hostname or ""), parts.port

    return key(a) == key(b)


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 0.5).close()
    except OSError:
        return False
    return True


def stack_routes(url: str) -> dict[str, str]:
    """boto3's per-service endpoint variables of the running `make up` stack whose emulator answers at
    ``url``: ``AWS_ENDPOINT_URL_DYNAMODB`` when that stack routes DynamoDB to moto, else nothing.
    A file left by a stack that is gone (its DynamoDB port closed) is ignored."""
    for path in sorted(STACKS_DIR.glob("*.json")) if STACKS_DIR.is_dir() else []:
        try:
            stack = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (
            _same_endpoint(str(stack.get("endpoint", "")), url)
            and stack.get("dynamodb")
            and _listening(stack["dynamodb"])
        ):
            return {"AWS_ENDPOINT_URL_DYNAMODB": str(stack["dynamodb"])}
    return {}


def admin_credentials(path: Path = CREDENTIALS_FILE) -> dict[str, str]:
    """The local admin's keys, derived from the stack's secret (local/secret.py). The ``local-admin``
    profile of ``path`` (what the AWS CLI reads) is written again when it holds other keys: a file left
    by an earlier secret, or from before there was one, would give keys the emulator refuses."""

    keys = derived()
    if path.exists() and _profile(path) != keys:
        write_admin_credentials(path)
    return keys


def _profile(path: Path) -> dict[str, str]:

    parser = configparser.ConfigParser()
    parser.read(path)
    if not parser.has_section(ADMIN_PROFILE):
        return {}
    section = parser[ADMIN_PROFILE]
    return {
        "AWS_ACCESS_KEY_ID": section.get("aws_access_key_id", ""),
        "AWS_SECRET_ACCESS_KEY": section.get("aws_secret_access_key", ""),
    }


def _write(path: Path, text: str) -> None:
    """Whole or not at all: two stacks starting side by side write the same files."""

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(text)
    os.chmod(tmp.name, 0o600)
    os.replace(tmp.name, path)


def write_admin_credentials(path: Path = CREDENTIALS_FILE) -> Path:
    """Write the local admin's keys as profile ``local-admin`` (for the AWS CLI and the tools)."""

    creds = derived()
    _write(
        path,
        f"[{ADMIN_PROFILE}]\naws_access_key_id = {creds['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {creds['AWS_SECRET_ACCESS_KEY']}\n",
    )
    return path


def cli_hint(endpoint: str, path: Path = CREDENTIALS_FILE) -> str:
    return (
        f"AWS_SHARED_CREDENTIALS_FILE={path} AWS_PROFILE={ADMIN_PROFILE} "
        f"aws --endpoint-url {endpoint} --region {_BUILTIN['AWS_REGION']} s3 ls"
    )


def _restored(change: Any) -> None:

    if change.action != "unchanged":
        print(
            f"[local] role of a function {change.action}d to its production policy: {change}",
            file=sys.stderr,
            flush=True,
        )


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """A function's environment without the secrets it reads from SSM at cold start, as on AWS ("" also
    masks a variable the process would inherit; the configuration treats it as unset)."""

    return {**env, **{env_name(secret): "" for secret in secret_parameters(Config)}}


def function_environment(env: dict[str, str]) -> dict[str, str]:
    """What the local modes give every function of ``env`` before narrowing it to the function's own
    variables (deploy.functions.narrowed): no secret, and the name of the owner key's parameter when
    a key file is configured, as the deploy sets it (the functions read the key from SSM, where the
    provisioning stored it; the file is the host's)."""

    cfg = config.load(env)
    key = {env_name("owner_key_parameter"): cfg.owner_key_parameter} if cfg.encrypts_to_owner else {}
    if cfg.keyed_mailboxes:  # each mailbox's key, as the deploy names them (MAILBOX_KEYS)
        key[env_name("keyed_mailboxes")] = ",".join(cfg.keyed_mailboxes)
    return without_secrets({**env, **key})


def function_credentials(cfg: Config, function: str, ensure_role: bool = False) -> dict[str, str]:
    """What Lambda gives the function: credentials of its own role, from sts:AssumeRole (this
    process's clients must hold the admin's credentials). Only with ``ensure_role`` is the role created
    or converged to its production policy, and every change that makes is printed to stderr: a test that
    removed a permission and then asked for this would silently test nothing.

    The emulator derives a session's keys from the role and the session name, so assuming again
    after a reset gives the same keys: functions started earlier keep working."""

    arn = (
        provision.ensure_role(cfg, function, report=_restored)
        if ensure_role
        else role_arn(cfg, account_id(), function)
    )
    creds = client("sts").assume_role(RoleArn=arn, RoleSessionName=function)["Credentials"]
    return {
        "AWS_ACCESS_KEY_ID": creds["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
        "AWS_SESSION_TOKEN": creds["SessionToken"],
    }


AWS_CLIENT_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


def use_endpoint(url: str, env: dict[str, str]) -> None:
    """Point this process's AWS clients at ``url``, with credentials and region from ``env``; DynamoDB
    goes where the `make up` stack at ``url`` routes it, unless ``env`` says otherwise."""

    settings = {k: env[k] for k in AWS_CLIENT_VARIABLES if k in env} | {"AWS_ENDPOINT_URL": url}
    routes = stack_routes(url)
    os.environ.update(routes | settings)
    if "AWS_ENDPOINT_URL_DYNAMODB" not in routes | settings:
        os.environ.pop(
            "AWS_ENDPOINT_URL_DYNAMODB", None
        )  # a route of the previous endpoint must not follow this one
    if "AWS_SESSION_TOKEN" not in env:  # long-term keys: a token left from other credentials would break them
        os.environ.pop("AWS_SESSION_TOKEN", None)
    reset_clients()


@contextlib.contextmanager
def aws_endpoint(url: str, env: dict[str, str]) -> Iterator[None]:
    """:func:`use_endpoint` for the duration of the block, then the previous environment again."""

    saved = {k: os.environ.get(k) for k in AWS_CLIENT_VARIABLES}
    use_endpoint(url, env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reset_clients()


def function_env_files(env: Mapping[str, str], directory: Path) -> list[Path]:
    """``<directory>/<function>.env``, each function container's one env_file: its own variables of
    ``env`` (deploy.functions.narrowed: no other function's setting, no secret, as the deploy gives
    them) and the credentials of its role session. The keys are derived from the role and the session
    name, so this needs no emulator; ``email-handler provision --local`` opens the sessions."""

    cfg = config.load(env)
    out = []
    for f in FUNCTIONS:
        key_id, secret, token = derived_key(f"arn:aws:iam::{ACCOUNT}:role/{cfg.name(f.name)}/{f.name}")
        own = narrowed(f.name, function_environment(dict(env))) | {
            "AWS_ACCESS_KEY_ID": f"ASIA{key_id}",
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_SESSION_TOKEN": token,
        }
        path = directory / f"{f.name}.env"
        _write(path, "".join(f"{k}={v}\n" for k, v in own.items()))
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m local.env DIR`` (scripts/compose.sh, in the local tools image): DIR/emulator.env
    (the stack's secret, made once: the emulator's and the tools' env_file, local/secret.py),
    DIR/credentials (profile local-admin, for the host CLI) and DIR/functions/<function>.env (each
    function container's env_file: its own variables of compose/local.env and its role session's
    credentials)."""

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    # The stack's secret first (made once, kept across `make down`): every key below derives from it.
    os.environ[secret.VARIABLE] = secret.ensure(args.directory / secret.SECRET_FILE.name)
    write_admin_credentials(args.directory / "credentials")
    function_env_files(local_env(), args.directory / "functions")  # the admin's keys are replaced


if __name__ == "__main__":
    main()
