"""Each function's view of the configuration (common/runtime/views.py): what its code reads is in its
view, Config satisfies every view, and the deploy gives each function only its view's variables.

What a function's code reads is found with ast: every ``….cfg.NAME`` in the modules its image imports,
followed through the import graph (tests/unit/test_architecture.py's, imports in functions included),
without entering the parser (common/runtime/config.py) and the handler factory
(common/runtime/handler.py), which hold the whole Config for every function.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import fields
from functools import cache

import pytest

from common.runtime.config import Config, env_name
from common.runtime.functions import FUNCTIONS, Function
from common.runtime.views import (
    VIEWS,
    Delivery,
    Deployment,
    ExtractorConfig,
    InboundHandlerConfig,
    OwnerAddresses,
    PublicAddresses,
    ReplyHandlerConfig,
    SenderConfig,
    Sending,
    members,
    view_fields,
)
from tests.unit.test_architecture import REPO, Module, graph, imports_of, modules

FIELDS = frozenset(f.name for f in fields(Config) if not f.name.startswith("_"))
SHARED = ("common.runtime.config", "common.runtime.handler")  # see the module's docstring


@cache
def config_members() -> dict[str, frozenset[str]]:
    """Each property and method of Config -> the ``self.NAME`` it reads (fields and other members)."""
    tree = modules()["common.runtime.config"].tree
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    return {
        node.name: frozenset(
            a.attr
            for a in ast.walk(node)
            if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"
        )
        for node in klass.body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
    }


def fields_behind(names: frozenset[str], seen: frozenset[str] = frozenset()) -> frozenset[str]:
    """The Config fields ``names`` read: themselves, or what a property or method reads, transitively."""
    out: set[str] = set()
    for name in names - seen:
        if name in FIELDS:
            out.add(name)
        elif name in config_members():
            out |= fields_behind(config_members()[name], seen | {name})
    return frozenset(out)


def cfg_reads(tree: ast.AST) -> frozenset[str]:
    """The Config members a module reads through a name ending in ``cfg`` (``cfg.x``, ``self.cfg.x``)."""
    known = FIELDS | set(config_members())
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in known
        and ast.unparse(node.value).rpartition(".")[2] == "cfg"
    )


@cache
def reached(function: str) -> frozenset[str]:
    """The common/ modules a function's image runs: from images/<function>/app.py through the graph."""
    app = REPO / "images" / function / "app.py"
    entry = Module(f"images.{function}", app, ast.parse(app.read_text(encoding="utf-8")))
    known, edges = modules(), graph()
    todo = [name if name in known else name.rpartition(".")[0] for name, _ in imports_of(entry)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in SHARED or not name.startswith("common"):
            continue
        seen.add(name)
        todo += edges.get(name, {})
    return frozenset(seen)


def reads_of(function: str) -> dict[str, frozenset[str]]:
    """module -> the Config members it reads, for the modules the function runs."""
    return {name: cfg_reads(modules()[name].tree) for name in sorted(reached(function))}


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.name)
def test_what_a_functions_code_reads_is_in_its_view(fn: Function) -> None:
    view = VIEWS[fn.name]
    outside = [
        f"{modules()[name].path.relative_to(REPO)} reads cfg.{member}"
        for name, read in reads_of(fn.name).items()
        for member in sorted(read - members(view))
    ]
    assert not outside, f"{fn.name}: not in {view.__name__}:\n" + "\n".join(outside)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.name)
def test_each_functions_logic_takes_its_view(fn: Function) -> None:
    """The entry its image wires (``handle``) is typed with the function's view, so mypy holds its
    logic to it (the senders share one logic and one view)."""
    app = ast.parse((REPO / "images" / fn.name / "app.py").read_text(encoding="utf-8"))
    source = next(
        node.module
        for node in app.body
        if isinstance(node, ast.ImportFrom) and any(a.name == "handle" for a in node.names)
    )
    # through the package's face to the module that defines it
    defined_in = importlib.import_module(str(source)).handle.__module__
    handle = next(
        node
        for node in modules()[defined_in].tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "handle"
    )
    annotation = handle.args.args[0].annotation
    assert annotation is not None and ast.unparse(annotation) == VIEWS[fn.name].__name__


def test_the_views_are_narrow() -> None:
    """The point of the views, measured: each function's view leaves out what only others read."""
    every = len(FIELDS)
    sizes = {fn.name: len(view_fields(VIEWS[fn.name])) for fn in FUNCTIONS}
    assert all(size < every for size in sizes.values()), sizes
    assert view_fields(ExtractorConfig) == view_fields(Deployment) | {
        "max_input_bytes",
        "max_pages",
        "max_output_chars",
        "extract_time_budget_s",
    }
    for unwanted in ("max_pages", "retention_archive_days", "spam_rules_parameter", "thread_secret"):
        assert unwanted not in view_fields(SenderConfig), unwanted
    assert not view_fields(InboundHandlerConfig) & {"max_pages", "max_send_rate", "reply_max_age_s"}
    assert not view_fields(ReplyHandlerConfig) & {"max_pages", "spam_rules_parameter", "retry_delays"}


def test_the_reader_sees_a_read_and_follows_properties() -> None:
    """The two checks above on made-up code: an empty answer means nothing is read, not a blind reader."""
    tree = ast.parse(
        "def send(self, cfg, other):\n"
        "    return cfg.max_pages, self.cfg.thread_domain, other.bucket, cfg.name('x'), cfg.unknown\n"
    )
    assert cfg_reads(tree) == {"max_pages", "thread_domain", "name"}
    assert fields_behind(frozenset({"thread_domain", "name"})) == {"domain_name", "project", "env"}
    assert fields_behind(frozenset({"forward_budget"})) == {
        "max_forward_bytes",
        "owner_key",
        "owner_key_parameter",
    }


@pytest.mark.parametrize(
    "view",
    [
        Deployment,
        PublicAddresses,
        OwnerAddresses,
        Sending,
        SenderConfig,
        Delivery,
        InboundHandlerConfig,
        ReplyHandlerConfig,
        ExtractorConfig,
    ],
    ids=lambda v: v.__name__,
)
def test_config_has_every_member_of_each_view_and_each_derived_member_brings_its_fields(view: type) -> None:
    """Config satisfies each view (mypy checks the types: the assignments below); a view naming a
    derived member (``thread_domain``) names the fields it is derived from, so the deploy passes them."""
    missing = sorted(m for m in members(view) if m not in FIELDS and m not in config_members())
    assert not missing, f"{view.__name__} declares what Config lacks: {missing}"
    derived = frozenset(members(view) - FIELDS)
    assert fields_behind(derived) <= view_fields(view), sorted(fields_behind(derived) - view_fields(view))


def test_config_satisfies_each_view_for_mypy() -> None:
    cfg = Config()
    views: tuple[
        InboundHandlerConfig, ReplyHandlerConfig, ExtractorConfig, SenderConfig, Delivery, Sending, Deployment
    ] = (cfg, cfg, cfg, cfg, cfg, cfg, cfg)
    assert all(v is cfg for v in views)


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
    for f in fields(Config):
        name = env_name(f.name)
        if (
            f.name.startswith("_")
            or name in source
            or f.name.startswith(("owner_key", "owner_smime", "owner_pgp"))
        ):
            continue
        default = getattr(Config(), f.name)
        if isinstance(default, bool):
            source[name] = str(not default).lower()
        elif isinstance(default, int | float):
            source[name] = str(default + 1 if f.name != "forward_link_days" else 6)
        elif isinstance(default, tuple):
            source[name] = ",".join(str(v) for v in default) or "x"
        elif f.name not in (
            "project",
            "env",
            "region",
            "account_id",
            "function",
            "thread_secret",
            "public_addresses",
        ):
            source[name] = f"custom-{f.name.replace('_', '-')}"
    return source


def _environments(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    from deploy.lambdas import environment
    from deploy.preflight import load_config

    monkeypatch.setattr(
        "deploy.lambdas.topic_arn", lambda cfg, name: f"arn:aws:sns:us-east-1:123456789012:{name}"
    )
    source = _every_variable()
    cfg = load_config(source, "prd", "us-east-1", "123456789012", need_secret=False)
    return {fn.name: environment(cfg, fn, source) for fn in FUNCTIONS}


def test_each_function_receives_its_views_variables_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    by_variable = {env_name(f): f for f in FIELDS}
    for name, env in _environments(monkeypatch).items():
        view = view_fields(VIEWS[name])
        foreign = sorted(v for v in env if v != "LOG_LEVEL" and by_variable.get(v) not in view)
        assert not foreign, f"{name} receives variables outside its view: {foreign}"
        given = {by_variable[v] for v in env if v in by_variable}
        # what its view reads and the deploy passes at all (the secret, the owner's key and what
        # Lambda sets itself never: deploy/lambdas.py)
        passed = view - {
            "region",
            "function",
            "thread_secret",
            "owner_key",
            "owner_key_parameter",
            "public_addresses",
        }
        if name not in ("inbound-handler", "reply-handler"):
            passed -= {"thread_secret_parameter"}
        if not name.endswith("-sender"):
            passed -= {"send_queue"}
        assert passed <= given, f"{name} lacks {sorted(passed - given)}"
        assert env["LOG_LEVEL"] == "DEBUG"


def test_a_sender_gets_no_extractor_limit_retention_or_spam_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    environments = _environments(monkeypatch)
    for name in ("ack-sender", "forward-sender", "reply-sender"):
        env = environments[name]
        assert not [v for v in env if v.startswith(("EXTRACT_", "RETENTION_", "SPAM_"))], name
        assert "THREAD_SECRET_PARAMETER" not in env and "CONVERSATIONS_TABLE" not in env
    assert environments["forward-sender"]["SEND_QUEUE_NAME"] == "custom-forward-queue"
    extractor = environments["attachment-extractor"]
    assert "PUBLIC_EMAIL" not in extractor and "EMAIL_BUCKET" not in extractor
    assert extractor["EXTRACT_MAX_PAGES"] == "501"
    assert "EXTRACT_MAX_PAGES" not in environments["inbound-handler"]


def test_each_function_starts_on_the_environment_the_deploy_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrowed to its view, a function's environment still parses and holds every setting its cold
    start requires; a secret it requires arrives as the name of its SSM parameter, read at cold start."""
    from common.runtime import config

    for name, env in _environments(monkeypatch).items():
        spec = next(fn for fn in FUNCTIONS if fn.name == name)
        cfg = config.load(env)
        for field in spec.requires:
            parameter = config.SECRET_PARAMETERS.get(field)
            assert getattr(cfg, field) or (parameter and getattr(cfg, parameter)), f"{name}: {field}"
