"""Each function's configuration class (common/runtime/config.py): every setting declared once, each
function parses its own variables, a missing required one is named, and neither the deploy nor the local
modes give a function a variable of another's (deploy.functions.narrowed)."""

from __future__ import annotations

import ast
import importlib
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from common.errors import ConfigError
from common.runtime import config as runtime
from common.runtime.config import (
    CONFIGS,
    Deployment,
    ExtractorConfig,
    InboundHandlerConfig,
    PublicAddresses,
    SenderConfig,
    required,
    secret_parameters,
    variables,
    with_secrets,
)
from deploy.config import Config, env_name
from deploy.functions import FUNCTIONS, KNOW_KEYS, Function, narrowed
from local import rie
from local.env import function_env_files
from tests.unit.test_architecture import REPO, modules

SECRETS = {env_name(s) for s in secret_parameters(Config)}


def _classes() -> list[type]:
    return [Config, *{k for c in CONFIGS.values() for k in c.__mro__ if issubclass(k, Deployment)}]


def test_each_setting_is_declared_once_in_one_layer() -> None:
    owner: dict[str, str] = {}
    twice = []
    for klass in _classes():
        for name in vars(klass).get("__annotations__", {}):
            declared = name in {f.name for f in fields(klass)}
            if declared and owner.setdefault(name, klass.__name__) != klass.__name__:
                twice.append(f"{name}: {owner[name]} and {klass.__name__}")
    assert not twice, twice
    assert owner["domain_name"] == "PublicAddresses" and owner["max_pages"] == "ExtractorConfig"
    # the host holds every function's setting, and every setting has one variable
    assert {f.name for c in CONFIGS.values() for f in fields(c)} <= {f.name for f in fields(Config)}
    assert len({env_name(f.name) for f in fields(Config)}) == len(fields(Config))


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.name)
def test_each_function_parses_its_own_variables(fn: Function, local_defaults: dict[str, str]) -> None:
    env = {**narrowed(fn.name, local_defaults), "EXTRACT_MAX_PAGES": "7", "ACK_SUBJECT": "Hi"}
    cfg = fn.config.load(env)
    assert type(cfg) is fn.config and cfg.prefix == "service-email-handler-local"
    names = {f.name for f in fields(cfg)}
    if fn.name == "attachment-extractor":
        assert isinstance(cfg, ExtractorConfig) and cfg.max_pages == 7
        assert not {"public_email", "bucket", "thread_secret"} & names  # nothing of mail or owner
    else:
        assert isinstance(cfg, PublicAddresses) and cfg.ack_subject == "Hi"
        assert "max_pages" not in names
    if isinstance(cfg, SenderConfig):  # the queue it consumes, derived from its class
        assert cfg.send_queue == f"service-email-handler-local-{fn.name.removesuffix('-sender')}"
        assert "conversations_table" not in names and "spam_rules_ttl_s" not in names


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.name)
def test_a_missing_required_variable_is_named(fn: Function, local_defaults: dict[str, str]) -> None:
    # PUBLIC_ADDRESSES names public addresses too (common/runtime/addresses.py): left out here
    base = {k: v for k, v in local_defaults.items() if k != "PUBLIC_ADDRESSES"}
    for field in required(fn.config):
        if field in secret_parameters(fn.config):
            continue
        name = runtime.env_name(fn.config, field)
        with pytest.raises(ConfigError, match=f"missing required environment variable.*{name}"):
            fn.config.load({k: v for k, v in base.items() if k != name})
    expected = {
        "attachment-extractor": (),
        "inbound-handler": ("domain_name", "public_email", "private_email", "thread_secret"),
    }
    if fn.name in expected:
        assert sorted(required(fn.config)) == sorted(expected[fn.name])


def test_a_secret_is_read_from_ssm_at_cold_start_and_named_when_missing(
    local_defaults: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {k: v for k, v in local_defaults.items() if k != "THREAD_SECRET"}
    cfg = InboundHandlerConfig.load(env)  # the secret is not a variable: load does not ask for it
    asked: list[str] = []

    def stored(name: str, decrypt: bool) -> str:
        asked.append(name)
        return "s" * 32

    monkeypatch.setattr(runtime.ssm, "get_parameter", stored)
    assert with_secrets(cfg).thread_secret == "s" * 32
    assert asked == ["/service-email-handler/local/thread-secret"]

    def missing(name: str, decrypt: bool) -> str:
        raise ClientError({"Error": {"Code": "ParameterNotFound", "Message": ""}}, "GetParameter")

    monkeypatch.setattr(runtime.ssm, "get_parameter", missing)
    with pytest.raises(ConfigError, match="THREAD_SECRET"):
        with_secrets(cfg)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.name)
def test_each_functions_logic_takes_a_layer_of_its_class(fn: Function) -> None:
    """The entry its image wires (``handle``) is typed with a layer of the function's class, so mypy
    holds its logic to the settings that class has (the senders share one logic, SenderConfig)."""
    app = ast.parse((REPO / "images" / fn.name / "app.py").read_text(encoding="utf-8"))
    source = next(
        node.module
        for node in app.body
        if isinstance(node, ast.ImportFrom) and any(a.name == "handle" for a in node.names)
    )
    defined_in = importlib.import_module(str(source)).handle.__module__
    handle = next(
        node
        for node in modules()[defined_in].tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "handle"
    )
    annotation = handle.args.args[0].annotation
    assert annotation is not None
    assert ast.unparse(annotation) in {k.__name__ for k in fn.config.__mro__ if issubclass(k, Deployment)}


# --- what the deploy gives each function -----------------------------------------------------------


def _every_variable() -> dict[str, str]:
    """A deploy's environment with every setting a function may receive given a value of its own."""
    source = {
        "DOMAIN_NAME": "example.com",
        "PUBLIC_EMAIL": "hello@example.com",
        "PRIVATE_EMAIL": "owner@example.net",
        "OWNER_EMAILS": "owner@example.net,me@example.org",
        "PUBLIC_NAME": "Hello",
        "REMOVE_TRACKERS": "off",
        "LOG_LEVEL": "DEBUG",
    }
    defaults = Config()
    for f in fields(Config):
        name = env_name(f.name)
        if name in source or f.name.startswith(
            ("owner_key", "owner_smime", "owner_pgp", "mailbox_key", "keyed_mailboxes")
        ):
            continue
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            source[name] = str(not default).lower()
        elif isinstance(default, int | float):
            source[name] = str(default + 1 if f.name != "forward_link_days" else 6)
        elif isinstance(default, tuple):
            source[name] = ",".join(str(v) for v in default) or "x"
        elif f.name not in ("project", "env", "region", "account_id", "function", "thread_secret"):
            source[name] = f"custom-{f.name.replace('_', '-')}"
    return source


def _environments(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    from deploy.lambdas import environment
    from deploy.preflight import load_config

    monkeypatch.setattr(
        "deploy.lambdas.topic_arn", lambda cfg, name: f"arn:aws:sns:us-east-1:123456789012:{name}"
    )
    source = {k: v for k, v in _every_variable().items() if k != "PUBLIC_ADDRESSES"}
    cfg = load_config(source, "prd", "us-east-1", "123456789012", need_secret=False)
    return {fn.name: environment(cfg, fn, source) for fn in FUNCTIONS}


def test_the_deploy_gives_each_function_its_classs_variables_and_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    environments = _environments(monkeypatch)
    for fn in FUNCTIONS:
        env = environments[fn.name]
        foreign = sorted(set(env) - variables(fn.config) - {"LOG_LEVEL"})
        assert not foreign, f"{fn.name} receives variables outside its class: {foreign}"
        assert not SECRETS & set(env) and env["LOG_LEVEL"] == "DEBUG"
        # it still starts on them: every required setting is there (the secret as its parameter's name)
        cfg = fn.config.load(env)
        for name, parameter in secret_parameters(fn.config).items():
            assert getattr(cfg, parameter) and env[env_name(parameter)], (fn.name, name)
    for name in ("ack-sender", "forward-sender", "reply-sender"):
        env = environments[name]
        assert not [v for v in env if v.startswith(("EXTRACT_", "RETENTION_", "SPAM_"))], name
        assert "THREAD_SECRET_PARAMETER" not in env and "CONVERSATIONS_TABLE" not in env
    assert environments["forward-sender"]["SEND_QUEUE_NAME"] == "custom-forward-queue"
    extractor = environments["attachment-extractor"]
    assert "PUBLIC_EMAIL" not in extractor and "EMAIL_BUCKET" not in extractor
    assert extractor["EXTRACT_MAX_PAGES"] == "501"
    assert "EXTRACT_MAX_PAGES" not in environments["inbound-handler"]
    assert "SPAM_RULES_TTL_SECONDS" not in environments["reply-handler"]


# --- what the local modes give each function -------------------------------------------------------


def test_narrowed_keeps_the_process_and_drops_other_functions_settings_and_secrets() -> None:
    env = {
        "PATH": "/bin",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "AWS_REGION": "eu-west-1",
        "PUBLIC_EMAIL": "hello@example.com",
        "EXTRACT_MAX_PAGES": "3",
        "THREAD_SECRET": "x" * 32,
        "RETENTION_TEXT_DAYS": "1",
    }
    assert narrowed("ack-sender", env) == {
        k: env[k] for k in ("PATH", "AWS_ENDPOINT_URL", "AWS_REGION", "PUBLIC_EMAIL")
    }
    assert narrowed("attachment-extractor", env) == {
        k: env[k] for k in ("PATH", "AWS_ENDPOINT_URL", "AWS_REGION", "EXTRACT_MAX_PAGES")
    }


def test_email_handler_dev_starts_each_rie_with_only_its_own_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_defaults: dict[str, str]
) -> None:
    """local/rie.py (both `email-handler dev` and the test fixtures start functions through it): what the
    process inherits and what it is given are narrowed alike."""
    started: dict[str, dict[str, str]] = {}

    class Popen:
        def __init__(self, args: Any, env: dict[str, str], **kw: Any) -> None:
            started[Path(kw["cwd"]).name] = env

    binary = tmp_path / "aws-lambda-rie"
    binary.touch()
    monkeypatch.setenv("RIE_BIN", str(binary))
    monkeypatch.setenv("EXTRACT_MAX_PAGES", "3")  # inherited from the shell
    monkeypatch.setattr(subprocess, "Popen", Popen)
    for fn in FUNCTIONS:
        rie.RieProcess(fn.name, 0, dict(local_defaults), tmp_path / f"{fn.name}.log").start(wait=False)
    every = variables(Config) | SECRETS
    for fn in FUNCTIONS:
        given = every & set(started[fn.name])
        assert given <= variables(fn.config), (fn.name, sorted(given - variables(fn.config)))
    assert "PUBLIC_EMAIL" not in started["attachment-extractor"]
    assert started["attachment-extractor"]["EXTRACT_MAX_PAGES"] == "3"
    assert (
        "EXTRACT_MAX_PAGES" not in started["ack-sender"] and "THREAD_SECRET" not in started["inbound-handler"]
    )
    assert started["ack-sender"]["PUBLIC_EMAIL"] == local_defaults["PUBLIC_EMAIL"]


def test_make_up_gives_each_function_container_only_its_own_variables(
    tmp_path: Path, local_defaults: dict[str, str]
) -> None:
    """The compose stack's function containers read one env_file each (compose/docker-compose.yml),
    written by `python -m local.env`: their own variables of compose/local.env and their role's keys."""
    files = function_env_files({**local_defaults, "OWNER_SMIME_CERT": "/keys/owner.pem"}, tmp_path)
    every = variables(Config) | SECRETS
    for fn, path in zip(FUNCTIONS, files, strict=True):
        assert path.name == f"{fn.name}.env"
        env = dict(line.split("=", 1) for line in path.read_text().splitlines())
        assert every & set(env) <= variables(fn.config), fn.name
        assert env["AWS_ACCESS_KEY_ID"].startswith("ASIA") and env["AWS_SESSION_TOKEN"]
        assert "THREAD_SECRET" not in env and env["ENVIRONMENT"] == "local"
        assert ("PUBLIC_EMAIL" in env) == (fn.name != "attachment-extractor")
        # the key file is the host's: the functions that know of the key (as the deploy gives it) are told
        # the parameter the provisioning stored it in
        assert "OWNER_SMIME_CERT" not in env
        assert ("OWNER_KEY_PARAMETER" in env) == (fn.name in KNOW_KEYS)
