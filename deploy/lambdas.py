"""The six Lambda functions: image, settings, the ``live`` alias, reserved concurrency, and where a
failed asynchronous event goes.

``live`` is what every trigger invokes, so it -- not ``$LATEST`` -- is compared with what the code
wants: after a run that updated the function but died before moving the alias, the next run still
publishes and moves it. A function whose creation failed (State ``Failed``) cannot be repaired and
is deleted and created again (Lambda DG, function states).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from common.aws import control_client, or_none
from common.runtime import addresses
from common.runtime.config import variables
from deploy import propagation
from deploy.config import Config, env_name
from deploy.functions import FUNCTIONS, KNOW_KEYS, Function
from deploy.images import Published
from deploy.plan import Run
from deploy.resources import log_group, queue_arn, topic_arn

ALIAS = "live"
FUNCTION_LOG_RETENTION_DAYS = 30
# SES, S3 and SNS invoke these asynchronously: after Lambda's two retries the event goes to ASYNC_DLQ.
ASYNC_FUNCTIONS = tuple(f.name for f in FUNCTIONS if not f.queue_field)
ASYNC_RETRIES = 2
ASYNC_MAX_AGE_S = 6 * 3600
# Variables Lambda sets itself or that make no sense in a function's environment; the HMAC secret is
# read from SSM at cold start (common/runtime/config.py), never stored in the configuration.
_NOT_PASSED = {
    "region",
    "account_id",  # the deploy's own account, never the shell's (set below)
    "send_queue",
    "alert_topic_arn",
    "thread_secret",
    # the owner's key: its files are the deploy's, its text is in SSM (owner_key_parameter)
    "owner_smime_cert",
    "owner_pgp_key",
    "owner_key",
    "owner_key_parameter",
    # each mailbox's key: the files are the deploy's (MAILBOX_KEYS), the texts in SSM
    "mailbox_key_files",
    "mailbox_key_texts",
    "keyed_mailboxes",
}


def function_name(cfg: Config, function: str) -> str:
    return cfg.name(function)


def alias_arn(cfg: Config, account: str, function: str) -> str:
    return f"arn:aws:lambda:{cfg.region}:{account}:function:{function_name(cfg, function)}:{ALIAS}"


def async_dlq(cfg: Config) -> str:
    return cfg.name("async-dlq")


def environment(cfg: Config, spec: Function, source: dict[str, str]) -> dict[str, str]:
    """The function's variables: the configuration the deploy was given, minus what it must not see,
    and only the variables its configuration class reads (common/runtime/config.py): a sender gets no
    extractor limit, no retention and no spam setting, the extractor no address."""
    env = {
        "PROJECT_NAME": cfg.project,
        "ENVIRONMENT": cfg.env,
        "DOMAIN_NAME": cfg.domain_name,
        **{k: v for k, v in addresses.environment(cfg).items() if v},  # every address, their settings
        "PRIVATE_EMAIL": cfg.private_email,
        "EMAIL_BUCKET": cfg.bucket,
        "ALERT_TOPIC_ARN": topic_arn(cfg, cfg.alert_topic),
        "LOG_LEVEL": source.get("LOG_LEVEL", "INFO"),
    }
    for f in fields(Config):
        name = env_name(f.name)
        if not f.name.startswith("_") and f.name not in _NOT_PASSED and name in source and name not in env:
            env[name] = source[name]
    if cfg.account_id:  # the deploy's account: queue URLs and topic ARNs without STS at each cold start
        env[env_name("account_id")] = cfg.account_id
    if spec.reads_thread_secret:  # only the two handlers may read the HMAC secret
        env[env_name("thread_secret_parameter")] = cfg.thread_secret_parameter
    if cfg.encrypts_to_owner and spec.name in KNOW_KEYS:
        env[env_name("owner_key_parameter")] = cfg.owner_key_parameter
    if cfg.keyed_mailboxes and spec.name in KNOW_KEYS:  # which mailboxes' mail is encrypted
        env[env_name("keyed_mailboxes")] = ",".join(cfg.keyed_mailboxes)
    if spec.queue_field:  # a sender is told the queue it consumes, not every queue's name
        env[env_name("send_queue")] = getattr(cfg, spec.queue_field)
    wanted = variables(spec.config) | {"LOG_LEVEL"}
    return dict(sorted((k, v) for k, v in env.items() if k in wanted))


def _wanted(
    cfg: Config, spec: Function, image: Published, role_arn: str, env: dict[str, str]
) -> dict[str, Any]:
    return {
        "Role": role_arn,
        "MemorySize": spec.memory_mb,
        "Timeout": spec.timeout_s,
        "Environment": {"Variables": env},
        "Description": f"{spec.name} ({cfg.prefix}, image {image.tag})",
    }


def _differences(described: dict[str, Any] | None, wanted: dict[str, Any], image: Published) -> list[str]:
    """What a described function (or version) lacks; a dry run's new image ("" digest) always differs."""
    if described is None:
        return ["missing"]
    have = described["Configuration"]
    out = []
    if (
        described.get("Code", {}).get("ImageUri") != image.image_uri
        or not image.digest
        or have.get("Architectures", ["x86_64"]) != [image.architecture]
    ):
        out.append("image " + image.tag)
    out += [k for k in ("Role", "MemorySize", "Timeout", "Description") if have.get(k) != wanted[k]]
    if have.get("Environment", {}).get("Variables", {}) != wanted["Environment"]["Variables"]:
        out.append("Environment")
    return out


def function(run: Run, spec: Function, image: Published, role_arn: str, env: dict[str, str]) -> None:
    """The function ($LATEST), then ``live`` on a published version equal to what is wanted."""
    api, name = control_client("lambda"), function_name(run.cfg, spec.name)
    wanted = _wanted(run.cfg, spec, image, role_arn, env)
    current = or_none(lambda: api.get_function(FunctionName=name), "ResourceNotFoundException")
    failed = current is not None and current["Configuration"].get("State") == "Failed"

    def create() -> None:
        if failed:
            api.delete_function(FunctionName=name)
        propagation.retry(
            run,
            f"CreateFunction {name}",
            lambda: api.create_function(
                FunctionName=name,
                PackageType="Image",
                Code={"ImageUri": image.image_uri},
                Architectures=[image.architecture],
                Publish=False,
                **wanted,
            ),
            propagation.ROLE_NOT_ASSUMABLE,
        )
        api.get_waiter("function_active_v2").wait(
            FunctionName=name, WaiterConfig={"Delay": 2, "MaxAttempts": 150}
        )

    def update(differ: Any) -> None:
        if any(d.startswith("image") for d in differ):
            api.update_function_code(
                FunctionName=name, ImageUri=image.image_uri, Architectures=[image.architecture]
            )
            _wait_updated(api, name)
        if any(not d.startswith("image") for d in differ):
            propagation.retry(
                run,
                f"UpdateFunctionConfiguration {name}",
                lambda: api.update_function_configuration(FunctionName=name, **wanted),
                propagation.ROLE_NOT_ASSUMABLE,
            )
            _wait_updated(api, name)

    reason = (current or {}).get("Configuration", {}).get("StateReason", "")
    run.converge(
        "lambda-function",
        name,
        None if failed else current,
        _differences(current, wanted, image),
        create=create,
        update=update,
        create_detail=(
            f"replaces the function in state Failed ({reason})"
            if failed
            else f"image {image.tag}, {spec.memory_mb} MB, {spec.timeout_s} s"
        ),
    )
    exists = current is not None and not failed
    _unreserved(run, api, name, exists)
    _live_alias(run, api, name, wanted, image, exists)


def _live_alias(
    run: Run, api: Any, name: str, wanted: dict[str, Any], image: Published, exists: bool
) -> None:
    """The ``live`` alias: made, or moved to a version newly published from $LATEST when the version
    it points at differs from ``wanted``."""
    live = (
        or_none(lambda: api.get_function(FunctionName=name, Qualifier=ALIAS), "ResourceNotFoundException")
        if exists
        else None
    )
    alias = (
        or_none(lambda: api.get_alias(FunctionName=name, Name=ALIAS), "ResourceNotFoundException")
        if exists
        else None
    )

    def publish() -> str:
        version = str(api.publish_version(FunctionName=name)["Version"])
        api.get_waiter("published_version_active").wait(
            FunctionName=name, Qualifier=version, WaiterConfig={"Delay": 2, "MaxAttempts": 150}
        )
        return version

    differ = ["version" if d == "missing" else d for d in _differences(live, wanted, image)] if alias else []
    run.converge(
        "lambda-alias",
        f"{name}:{ALIAS}",
        alias,
        differ,
        create=lambda: api.create_alias(FunctionName=name, Name=ALIAS, FunctionVersion=publish()),
        update=lambda _: api.update_alias(FunctionName=name, Name=ALIAS, FunctionVersion=publish()),
        create_detail="to a new version",
        detail="to a new version",
    )


def _wait_updated(api: Any, name: str) -> None:
    api.get_waiter("function_updated_v2").wait(
        FunctionName=name, WaiterConfig={"Delay": 2, "MaxAttempts": 150}
    )


def _unreserved(run: Run, api: Any, name: str, exists: bool) -> None:
    """No function reserves concurrency. A reservation must leave the account 100 unreserved, which
    new accounts (limit 10) cannot; the senders are capped by their event source's MaximumConcurrency.
    A reservation an older deploy made is removed."""
    current = (
        api.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
        if exists
        else None
    )
    if current is not None:
        run.converge(
            "lambda-concurrency",
            name,
            current,
            [f"remove the reservation of {current}"],
            update=lambda _: api.delete_function_concurrency(FunctionName=name),
        )


def log_group_name(cfg: Config, function: str) -> str:
    return f"/aws/lambda/{function_name(cfg, function)}"


def log_groups(run: Run) -> None:
    for spec in FUNCTIONS:
        log_group(run, log_group_name(run.cfg, spec.name), FUNCTION_LOG_RETENTION_DAYS)


def on_failure_settings(destination: str) -> dict[str, Any]:
    """Lambda's retries of an asynchronous event, then ``destination`` (the async DLQ's ARN)."""
    return {
        "MaximumRetryAttempts": ASYNC_RETRIES,
        "MaximumEventAgeInSeconds": ASYNC_MAX_AGE_S,
        "DestinationConfig": {"OnFailure": {"Destination": destination}},
    }


def on_failure(run: Run, function_: str) -> None:
    """A failed asynchronous event (after Lambda's retries) goes to the async DLQ, not away."""
    api, name = control_client("lambda"), function_name(run.cfg, function_)
    wanted = on_failure_settings(queue_arn(run.cfg, async_dlq(run.cfg)))
    exists = (
        run.apply
        or or_none(lambda: api.get_function(FunctionName=name), "ResourceNotFoundException") is not None
    )
    current = (
        or_none(
            lambda: api.get_function_event_invoke_config(FunctionName=name, Qualifier=ALIAS),
            "ResourceNotFoundException",
        )
        if exists
        else None
    )
    have = {
        "MaximumRetryAttempts": (current or {}).get("MaximumRetryAttempts"),
        "MaximumEventAgeInSeconds": (current or {}).get("MaximumEventAgeInSeconds"),
        "DestinationConfig": {
            "OnFailure": {
                "Destination": (current or {})
                .get("DestinationConfig", {})
                .get("OnFailure", {})
                .get("Destination")
            }
        },
    }
    differ = [k for k, v in wanted.items() if have[k] != v]

    def put(call: Any) -> None:  # Lambda checks that the role may sqs:SendMessage to the destination
        propagation.retry(
            run,
            f"event invoke config of {name}",
            lambda: call(FunctionName=name, Qualifier=ALIAS, **wanted),
            propagation.ROLE_LACKS_PERMISSION,
        )

    run.converge(
        "lambda-on-failure",
        f"{name}:{ALIAS}",
        current,
        differ,
        create=lambda: put(api.put_function_event_invoke_config),
        update=lambda _: put(api.update_function_event_invoke_config),
        detail=f"{ASYNC_RETRIES} retries, then {async_dlq(run.cfg)}",
    )
