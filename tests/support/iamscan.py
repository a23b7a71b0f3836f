"""Static IAM check: which AWS actions each function's code can reach, read from the source.

From ``images/<fn>/app.py`` the scan follows references (calls, and functions passed as values such
as ``make_handler(name, handle)``) through the ``common`` package, function by function: a
top-level function or class reached from the entry point counts, with everything it references
(nested functions and lambdas included, every method of a referenced class). Module-level code of
every imported module counts too. Where the reached code calls ``common.aws`` (the one place boto3
clients are called), the boto3 operations of the reached ``common.aws`` functions are mapped to IAM
actions with :data:`OPS`. A boto3 operation called anywhere else must be listed in
:data:`ELSEWHERE` (code handing a client to a library).

It over-approximates within a function (every branch counts) and cannot see what a library does
with a client unless :data:`ELSEWHERE` says so. Branches that the runtime configuration decides
(only functions that need THREAD_SECRET read it from SSM) are in :data:`ONLY_FOR`.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# boto3 operation -> the IAM actions AWS checks for it. Small on purpose: a new operation fails the
# check until someone adds its row (and, if a function needs it, the grant in deploy/iam.py).
OPS: dict[tuple[str, str], tuple[str, ...]] = {
    ("dynamodb", "get_item"): ("dynamodb:GetItem",),
    ("dynamodb", "batch_get_item"): ("dynamodb:BatchGetItem",),
    ("dynamodb", "put_item"): ("dynamodb:PutItem",),
    ("dynamodb", "update_item"): ("dynamodb:UpdateItem",),
    ("dynamodb", "delete_item"): ("dynamodb:DeleteItem",),
    # Each action is authorised as its own operation ("Using IAM with DynamoDB transactions", DynamoDB
    # DG); this project's transactions hold Update and ConditionCheck actions (common/store/intake.py).
    ("dynamodb", "transact_write_items"): ("dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"),
    ("dynamodb", "query"): ("dynamodb:Query",),
    ("dynamodb", "scan"): ("dynamodb:Scan",),
    ("events", "put_events"): ("events:PutEvents",),
    ("logs", "put_log_events"): ("logs:PutLogEvents",),
    ("logs", "create_log_stream"): ("logs:CreateLogStream",),
    ("logs", "filter_log_events"): ("logs:FilterLogEvents",),  # `forget` (an administrator), no function
    ("s3", "get_object"): ("s3:GetObject",),
    # no request: the URL is signed here and S3 authorizes the GET as this role when the link is opened
    ("s3", "generate_presigned_url"): ("s3:GetObject",),
    ("s3", "list_objects_v2"): ("s3:ListBucket",),
    ("s3", "put_object"): ("s3:PutObject",),
    ("s3", "copy_object"): ("s3:GetObject", "s3:PutObject"),  # read the source, write the copy
    ("s3", "delete_object"): ("s3:DeleteObject",),
    # SESv2 SendEmail with raw content is authorised as ses:SendRawEmail; the reference lists ses:SendEmail.
    ("sesv2", "send_email"): ("ses:SendEmail", "ses:SendRawEmail"),
    ("sesv2", "get_account"): ("ses:GetAccount",),
    ("sesv2", "get_email_identity"): ("ses:GetEmailIdentity",),
    ("sns", "publish"): ("sns:Publish",),
    ("sqs", "send_message"): ("sqs:SendMessage",),
    ("sqs", "receive_message"): ("sqs:ReceiveMessage",),
    ("sqs", "delete_message_batch"): ("sqs:DeleteMessage",),
    ("sqs", "change_message_visibility"): ("sqs:ChangeMessageVisibility",),
    ("sqs", "change_message_visibility_batch"): ("sqs:ChangeMessageVisibility",),
    ("sqs", "get_queue_attributes"): ("sqs:GetQueueAttributes",),
    ("ssm", "get_parameter"): ("ssm:GetParameter",),
    ("sts", "get_caller_identity"): (),  # needs no permission (STS API reference)
}
# Shipped modules outside common/aws that hand a boto3 client to a library: the library's calls.
ELSEWHERE: dict[str, tuple[str, ...]] = {
    # aws-lambda-powertools' DynamoDB idempotency store (get/put/update/delete of the record)
    "common.senders.idempotency": (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    ),
}
# (common.aws module, function) reached only when the function's configuration asks for it.
ONLY_FOR: dict[tuple[str, str], tuple[str, ...]] = {
    # config.with_secrets reads THREAD_SECRET from SSM only for the functions that require it
    ("common.aws.ssm", "get_parameter"): ("inbound-handler", "reply-handler"),
}
# Shipped code (module, function) that only these functions run, by a check on their own name: the
# scan does not follow it for any other (common/store/layout.py's KEEPS_SENT decides this one).
ONLY_CODE_FOR: dict[tuple[str, str], tuple[str, ...]] = {
    ("common.store.rawmail", "keep_sent"): ("reply-sender",),
}
AWS_PACKAGE = "common.aws"
SERVICES = ("dynamodb", "logs", "s3", "sesv2", "ses", "sns", "sqs", "ssm", "sts")


def module_path(module: str, sources: Mapping[str, str]) -> Path | None:
    base = REPO / Path(*module.split("."))
    for p in (base / "__init__.py", base.with_suffix(".py")):
        if p.exists() or module in sources:
            return p
    return None


@dataclass
class Module:
    name: str
    tree: ast.Module
    top: dict[str, ast.AST] = field(default_factory=dict)  # top-level functions and classes
    imported: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # local name -> (module, name) ("" = the module)


@functools.cache
def boto3_operations() -> frozenset[str]:
    """Every operation name (boto3 spelling) of the services the project uses."""
    import botocore.session
    from botocore import xform_name

    session = botocore.session.get_session()
    return frozenset(xform_name(op) for s in SERVICES for op in session.get_service_model(s).operation_names)


class Scan:
    """``sources`` replaces files by module name (the tests feed it changed code)."""

    def __init__(self, sources: Mapping[str, str] | None = None) -> None:
        self.sources = dict(sources or {})
        self._modules: dict[str, Module] = {}

    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        text = self.sources.get(name)
        if text is None:
            path = module_path(name, self.sources)
            if path is None or not path.exists():
                return None
            text = path.read_text()
        m = Module(name, ast.parse(text))
        for statement in m.tree.body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                m.top[statement.name] = statement
        package = (
            name
            if module_path(name, self.sources)
            and str(module_path(name, self.sources)).endswith("__init__.py")
            else name.rpartition(".")[0]
        )
        for node in ast.walk(m.tree):
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:  # relative import
                    source = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1]
                        + ([source] if source else [])
                    )
                for a in node.names:
                    full = f"{source}.{a.name}"
                    m.imported[a.asname or a.name] = (full, "") if self._exists(full) else (source, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        m.imported[a.asname] = (a.name, "")
        self._modules[name] = m
        return m

    def _exists(self, module: str) -> bool:
        return module in self.sources or (module_path(module, self.sources) or Path("/nonexistent")).exists()

    def _references(self, m: Module, node: ast.AST) -> set[tuple[str, str]]:
        """(module, top-level name) pairs ``node`` refers to; ("m", "") is module ``m`` itself."""
        out: set[tuple[str, str]] = set()
        local = _local_names(node)  # a parameter or variable named like a top-level function is not it
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
                if n.id in m.top:
                    out.add((m.name, n.id))
                elif n.id in m.imported:
                    out.add(m.imported[n.id])
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in m.imported:
                module, name = m.imported[n.value.id]
                if not name:
                    out.add((module, n.attr))
            elif isinstance(n, ast.ImportFrom | ast.Import):  # a lazy import runs the module's top level
                for a in n.names:
                    target = m.imported.get(a.asname or a.name.split(".")[0])
                    if target:
                        out.add((target[0], ""))
        return {r for r in out if r[0].startswith("common")}

    def reachable(self, entry: Path, skip: frozenset[tuple[str, str]] = frozenset()) -> set[tuple[str, str]]:
        """Every (module, top-level name) the entry script can reach, never following ``skip``; (module, "")
        = its top level ran."""
        entry_name = "__entry__"
        self.sources.setdefault(entry_name, entry.read_text())
        seen: set[tuple[str, str]] = set()
        todo = [(entry_name, "")]
        while todo:
            key = todo.pop()
            if key in seen or key in skip:
                continue
            seen.add(key)
            module_name, name = key
            m = self.module(module_name)
            if m is None:
                continue
            if not name:
                defs = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                body: list[ast.AST] = [n for n in m.tree.body if not isinstance(n, defs)]
                # a package's parents run first
                parent = module_name.rpartition(".")[0]
                if parent:
                    todo.append((parent, ""))
            elif name in m.top:
                body = [m.top[name]]
                todo.append((module_name, ""))
            else:  # a submodule reached as an attribute of its package
                todo.append((f"{module_name}.{name}", ""))
                continue
            for node in body:
                todo += list(self._references(m, node) - seen)
        return seen

    def aws_calls(self, module_name: str, name: str) -> set[tuple[str, str]]:
        """The boto3 operations a common.aws function calls: ``client("svc").op(...)``, a name bound to
        ``client("svc")``, or ``get_paginator("op")``."""
        m = self.module(module_name)
        node = m.top.get(name) if m else None
        if node is None:
            return set()
        bound: dict[str, str] = {}
        for n in ast.walk(node):
            if isinstance(n, ast.Assign) and _client_service(n.value):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        bound[t.id] = _client_service(n.value)
        out = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                receiver = n.func.value
                service = _client_service(receiver) or (
                    bound.get(receiver.id, "") if isinstance(receiver, ast.Name) else ""
                )
                if service:
                    op = n.func.attr
                    if op == "get_paginator" and n.args and isinstance(n.args[0], ast.Constant):
                        op = str(n.args[0].value)
                    if op != "meta":
                        out.add((service, op))
        return out

    def stray_calls(self, module_names: Iterable[str]) -> dict[str, set[str]]:
        """Outside common.aws: calls named like a boto3 operation on something called a client
        (``client("s3").get_object``, ``self.client.update_item``): boto3 by the usual spelling. A
        boto3 client kept under another name escapes this, which is what common/aws is for."""
        ops = boto3_operations()
        out: dict[str, set[str]] = {}
        for name in module_names:
            m = self.module(name)
            if m is None or name == AWS_PACKAGE or name.startswith(AWS_PACKAGE + "."):
                continue
            for n in ast.walk(m.tree):
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ops
                    and "client" in ast.unparse(n.func.value).lower()
                ):
                    out.setdefault(name, set()).add(n.func.attr)
        return out


def _local_names(node: ast.AST) -> set[str]:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return set()
    names = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    return names | {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _client_service(node: ast.AST) -> str:
    if isinstance(node, ast.BoolOp):  # (api or client("sqs")).op(...)
        return next((svc for v in node.values if (svc := _client_service(v))), "")
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "client"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value)
    return ""


def shipped_modules() -> list[str]:
    return sorted(
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in (REPO / "common").rglob("*.py")
        if p.relative_to(REPO / "common").parts[0] not in ("local", "ops")
    )  # host-only: not in the image


@dataclass
class Needs:
    actions: set[str]
    unmapped: set[tuple[str, str]]  # boto3 operations with no row in OPS
    stray: dict[str, set[str]]  # boto3-like calls outside common.aws with no row in ELSEWHERE


def needs(function: str, scan: Scan | None = None) -> Needs:
    scan = scan or Scan()
    skip = frozenset(k for k, only in ONLY_CODE_FOR.items() if function not in only)
    reached = scan.reachable(REPO / "images" / function / "app.py", skip)
    actions: set[str] = set()
    unmapped: set[tuple[str, str]] = set()
    for module_name, name in reached:
        if not name or not (module_name == AWS_PACKAGE or module_name.startswith(AWS_PACKAGE + ".")):
            continue
        if function not in ONLY_FOR.get((module_name, name), (function,)):
            continue
        for op in scan.aws_calls(module_name, name):
            if op in OPS:
                actions.update(OPS[op])
            else:
                unmapped.add(op)
    modules = {m for m, _ in reached}
    for module_name, granted in ELSEWHERE.items():
        if module_name in modules:
            actions.update(granted)
    stray = {m: ops for m, ops in scan.stray_calls(modules).items() if m not in ELSEWHERE}
    return Needs(actions, unmapped, stray)


def allowed_actions(policy: Mapping[str, object]) -> list[str]:
    statements = policy.get("Statement", [])
    assert isinstance(statements, list)
    return [
        a
        for s in statements
        if s.get("Effect") == "Allow"
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]


def missing(needed: Iterable[str], policy: Mapping[str, object]) -> set[str]:
    from fnmatch import fnmatchcase

    granted = allowed_actions(policy)
    return {a for a in needed if not any(fnmatchcase(a.lower(), g.lower()) for g in granted)}
