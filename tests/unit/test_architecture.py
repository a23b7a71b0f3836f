"""The import graph's real properties, read from the source with the stdlib (ast).

common/ (what the images ship) imports no host code; no two modules and no two packages need each
other (which package may import which is tests/unit/test_layers.py); only common/store opens tables
and buckets; host tools that act on a
deployment live in ops, not local; one command table in the CLI; one exception family.

The import graph counts every import a module runs: at module level and inside functions alike
(an import moved into a function to dodge a circle is still the circle). Imports under
``if TYPE_CHECKING:`` are not counted: they never run, so they cannot close a circle at import time.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "deploy", "cli", "local", "ops")  # the code whose import graph is checked
# Host-only top-level packages: beside deploy/, never copied into an image (docs/development.md).
HOST_PACKAGES = ("deploy", "cli", "local", "ops")
BASE_ERROR = "common.errors.EmailHandlerError"
# Exceptions that are control flow, not errors, each with its reason. Empty: every signal the code
# raises today can be an *Error of the family; add one here only with the reason it cannot.
SIGNAL_ALLOWLIST: dict[str, str] = {
    # local/devstack.py: SIGINT or SIGTERM while `email-handler dev` starts. A BaseException
    # like KeyboardInterrupt so that no `except Exception` on the way swallows it, and not *Error:
    # it is not an error, and InterruptedError is a builtin (an OSError) it must not be taken for.
    "Interrupted": "a signal, not an error",
}
# The console script's fixed command names (docs/CONTRACT.md, "Command line").
CONTRACT_COMMANDS = ("dev", "inject", "outbox", "invoke", "deploy", "status", "emulator", "forget")


# --- reading the source ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. common.inbound.handler
    path: Path
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name = _module_name(path)
            found[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (anywhere in the module)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skipped.update(id(n) for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom))
    return skipped


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: Module) -> Iterator[tuple[str, int]]:
    """(imported module, line) for each import the module runs, module-level and in functions;
    ``from pkg import name`` yields ``pkg.name`` when that is a module, else ``pkg``."""
    known = modules()
    skipped = _type_checking_only(module.tree)
    for node in ast.walk(module.tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                yield (candidate if candidate in known else source), node.lineno


@cache
def graph() -> dict[str, dict[str, int]]:
    """module -> {internal module it imports: first line of that import}."""
    known = modules()
    edges: dict[str, dict[str, int]] = {}
    for name, module in known.items():
        out: dict[str, int] = {}
        for target, line in imports_of(module):
            # an import of a.b.c names the deepest module of ours it reaches
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.setdefault(target, line)
        edges[name] = out
    return edges


def _imports_from(prefix: str, importer_prefix: str) -> list[str]:
    bad = []
    for name, out in graph().items():
        if name == importer_prefix or name.startswith(importer_prefix + "."):
            for target, line in out.items():
                if target == prefix or target.startswith(prefix + "."):
                    bad.append(f"{modules()[name].path.relative_to(REPO)}:{line} imports {target}")
    return sorted(bad)


def _cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each strongly connected component of more than one module, as one concrete circle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def visit(start: str) -> None:
        # iterative Tarjan: the graph is deep enough to make recursion a risk
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return [_circle_in(component, edges) for component in components]


def _circle_in(component: list[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """A shortest circle through the component's first module, by breadth-first search."""
    members, start = set(component), component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, {})):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return component


# --- the rules ------------------------------------------------------------------------------------


def test_no_circle_between_modules() -> None:
    edges = graph()
    circles = _cycles(edges)
    lines = []
    for circle in circles:
        steps = [f"{a} (line {edges[a][b]}) -> {b}" for a, b in zip(circle, circle[1:], strict=False)]
        lines.append(" | ".join(steps))
    assert not circles, f"{len(circles)} import circle(s):\n" + "\n".join(lines)


def package_of(module: str) -> str:
    """The package a module counts for in the package graph: each ``common.<pkg>`` subpackage,
    ``common`` itself for its flat modules (the exception family), and each top-level host package."""
    parts = module.split(".")
    if parts[0] == "common" and len(parts) > 1 and (REPO / "common" / parts[1] / "__init__.py").is_file():
        return f"common.{parts[1]}"
    return parts[0]


def package_graph(edges: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    """package -> {package it imports: one import that makes the edge, as ``module:line -> module``}."""
    packages: dict[str, dict[str, str]] = {}
    for name, out in sorted(edges.items()):
        source = package_of(name)
        packages.setdefault(source, {})
        for target, line in sorted(out.items()):
            if (into := package_of(target)) != source:
                packages[source].setdefault(into, f"{name}:{line} -> {target}")
    return packages


def test_no_two_packages_need_each_other() -> None:
    """The packages form layers: no circle between them, even where every module-level import runs
    one way (runtime/config loading the owner's key from mail, mail raising runtime's errors would be
    two acyclic module graphs and one circle of packages). The failure names one import per step."""
    packages = package_graph(graph())
    circles = _cycles({p: dict.fromkeys(out, 0) for p, out in packages.items()})
    lines = [" | ".join(f"{a} ({packages[a][b]})" for a, b in zip(c, c[1:], strict=False)) for c in circles]
    assert not circles, f"{len(circles)} package circle(s):\n" + "\n".join(lines)


def test_the_package_graph_collapses_modules_to_their_packages() -> None:
    """The collapse on made-up edges: a circle between two packages shows although no two modules
    import each other, and imports inside one package are no edge."""
    edges = {
        "common.runtime.config": {"common.mail.encrypt": 3, "common.runtime.log": 1},
        "common.mail.encrypt": {"common.errors": 2},
        "common.mail.parse": {"common.runtime.log": 5},
        "common.errors": {},
        "ops.admin": {"common.mail.parse": 7},
    }
    packages = package_graph(edges)
    assert packages == {
        "common": {},
        "common.mail": {
            "common": "common.mail.encrypt:2 -> common.errors",
            "common.runtime": "common.mail.parse:5 -> common.runtime.log",
        },
        "common.runtime": {"common.mail": "common.runtime.config:3 -> common.mail.encrypt"},
        "ops": {"common.mail": "ops.admin:7 -> common.mail.parse"},
    }
    assert _cycles({p: dict.fromkeys(out, 0) for p, out in packages.items()}) == [
        ["common.mail", "common.runtime", "common.mail"]
    ]


def test_common_imports_no_host_code() -> None:
    """common/ is exactly what the images ship (Dockerfile.base copies it whole): nothing in it may
    import a host package, at module level or in a function. docker/check-imports.py stops the image
    build on the same rule."""
    bad = [line for host in HOST_PACKAGES for line in _imports_from(host, "common")]
    assert not bad, "common/ imports host code:\n" + "\n".join(bad)


# The data doors: the services that hold tables and buckets. Only common/store (and common/aws, which
# is them) reaches them in what the functions run; the host tools (local, ops) and the deploy manage
# the resources themselves.
DATA_SERVICES = ("common.aws.dynamodb", "common.aws.s3")
MAY_OPEN_DATA = ("common.aws", "common.store", "local", "ops", "deploy")


def test_store_is_the_only_door_to_tables_and_buckets() -> None:
    """Each item kind and prefix has one writing module in common/store (its docstring's table);
    the functions' logic asks store, never DynamoDB or S3 directly."""
    bad = [
        f"{modules()[name].path.relative_to(REPO)}:{line} imports {target}"
        for name, out in graph().items()
        if not any(name == p or name.startswith(p + ".") for p in MAY_OPEN_DATA)
        for target, line in out.items()
        if target in DATA_SERVICES
    ]
    assert not bad, "outside common/store:\n" + "\n".join(sorted(bad))


def _flags(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def test_nothing_under_common_local_takes_a_deployment_by_env() -> None:
    """``--env`` picks a deployment: a command taking it acts on one, so it belongs in ops.
    Read from every argument declaration (``add_argument`` or the CLI's ``arg`` helper)."""
    bad = []
    for name, module in modules().items():
        if not name.startswith("local"):
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and "--env" in _flags(node):
                bad.append(f"{module.path.relative_to(REPO)}:{node.lineno} {ast.unparse(node.func)}(--env …)")
    assert not bad, "local declares --env (acts on a deployment):\n" + "\n".join(bad)


def _bases(node: ast.ClassDef) -> list[str]:
    return [ast.unparse(b) for b in node.bases]


@cache
def classes() -> dict[str, tuple[str, list[str]]]:
    """qualified class name -> (file:line, qualified or builtin names of its bases)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for name, module in modules().items():
        imported: dict[str, str] = {}
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(module, node)
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    imported[alias.asname or alias.name] = alias.name
        local = {n.name for n in ast.walk(module.tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = []
            for base in _bases(node):
                head, _, rest = base.partition(".")
                if base in local:
                    bases.append(f"{name}.{base}")
                elif head in imported:
                    bases.append(imported[head] + (f".{rest}" if rest else ""))
                else:
                    bases.append(base)
            found[f"{name}.{node.name}"] = (f"{module.path.relative_to(REPO)}:{node.lineno}", bases)
    return found


BUILTIN_EXCEPTIONS = {
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
}


def _ancestors(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """Every base of ``name``, transitively, through classes of ours (others are leaves)."""
    if name in seen or name not in classes():
        return set()
    out: set[str] = set()
    for base in classes()[name][1]:
        out.add(base)
        out |= _ancestors(base, seen | {name})
    return out


def test_every_exception_is_an_error_of_the_one_family() -> None:
    """Each exception class in common/ and deploy/ is named *Error and derives from EmailHandlerError
    (common/errors.py); a caller catches "anything this project refuses" in one except."""
    problems = []
    for name, (where, _) in sorted(classes().items()):
        ancestors = _ancestors(name)
        is_exception = any(
            a.rpartition(".")[2] in BUILTIN_EXCEPTIONS or a.endswith(("Error", "Exception"))
            for a in ancestors
        )
        if not is_exception or name == BASE_ERROR or name.rpartition(".")[2] in SIGNAL_ALLOWLIST:
            continue
        short = name.rpartition(".")[2]
        if not short.endswith("Error"):
            problems.append(f"{where}: {short} is not named *Error")
        if BASE_ERROR not in ancestors:
            problems.append(f"{where}: {short} does not derive from EmailHandlerError")
    assert not problems, f"{len(problems)} exception class problem(s):\n" + "\n".join(problems)


# Raises of a builtin exception that stay builtin: (module, enclosing function, exception) -> why.
RAISE_ALLOWLIST: dict[tuple[str, str, str], str] = {
    ("common.mail.charsets", "encode", "UnicodeError"): "the codecs protocol: an encoder raises UnicodeError",
    ("ops.admin", "_queue_arg", "SystemExit"): "ends the command with fail()'s exit status, not an error",
    ("local.outbox", "_get_json", "AssertionError"): "after a loop whose last pass returns or raises (mypy)",
    (
        "deploy.propagation",
        "retry",
        "AssertionError",
    ): "after a loop whose last pass returns or raises (mypy)",
}


def builtin_raises(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """(line, enclosing function, exception) of each ``raise X`` or ``raise X(...)`` whose X is a
    builtin exception; a bare ``raise`` or a re-raise of a caught exception (``raise exc``) names
    none. Shadowing a builtin's name with one of ours is not looked for."""

    def walk(node: ast.AST, function: str) -> Iterator[tuple[int, str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, child.name)
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                raised = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(raised, ast.Name) and raised.id in BUILTIN_EXCEPTIONS:
                    yield child.lineno, function, raised.id
            yield from walk(child, function)

    yield from walk(tree, "<module>")


def test_every_raise_is_an_error_of_the_family() -> None:
    """What the code raises on purpose is an *Error of the family (subclassing the builtin too where a
    caller catches the builtin), so ``except EmailHandlerError`` sees it; RAISE_ALLOWLIST keeps the
    few builtins that are a protocol or control flow."""
    found, used = [], set()
    for name, module in modules().items():
        for line, function, exception in builtin_raises(module.tree):
            if (name, function, exception) in RAISE_ALLOWLIST:
                used.add((name, function, exception))
                continue
            found.append(f"{module.path.relative_to(REPO)}:{line} {function}: raise {exception}")
    assert not found, f"{len(found)} raise(s) of a builtin exception:\n" + "\n".join(found)
    assert used == set(RAISE_ALLOWLIST), f"allowed but not raised: {set(RAISE_ALLOWLIST) - used}"


def test_the_raise_check_finds_builtins_and_passes_reraises() -> None:
    tree = ast.parse(
        "def put(entry):\n"
        "    if not entry:\n"
        "        raise ValueError('empty')\n"
        "    try:\n"
        "        store(entry)\n"
        "    except OSError as exc:\n"
        "        raise exc\n"
        "    except KeyError:\n"
        "        raise\n"
        "    raise SenderListError('refused')\n"
        "class Reader:\n"
        "    def read(self):\n"
        "        raise NotImplementedError\n"
        "raise SystemExit(2)\n"
    )
    assert list(builtin_raises(tree)) == [
        (3, "put", "ValueError"),
        (13, "read", "NotImplementedError"),
        (14, "<module>", "SystemExit"),
    ]


REGISTRARS = re.compile(r"(^|\.)(command|register|register_command|group|subcommand)$")
# The interpreter's own registries, not commands: a codec lookup (common/mail/charsets.py) and exit hooks.
NOT_COMMANDS = {"codecs.register", "atexit.register"}
# Calls that add to a container in place.
MUTATORS = {"append", "add", "extend", "insert", "setdefault", "update", "register", "__setitem__"}


def _ours() -> dict[str, ast.FunctionDef]:
    """Our module-level functions by their short name (what a decorator or a call names)."""
    return {
        node.name: node
        for module in modules().values()
        for node in module.tree.body
        if isinstance(node, ast.FunctionDef)
    }


def _writes_outside(func: ast.FunctionDef) -> bool:
    """Whether ``func`` (or a function nested in it) stores into a container it did not create: a
    subscript assignment or an in-place call on a name that is neither a parameter nor a local."""
    local: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = node.args
            local |= {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    for node in ast.walk(func):
        target = None
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value for t in targets if isinstance(t, ast.Subscript)), None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value if node.func.attr in MUTATORS else None
        if isinstance(target, ast.Name) and target.id not in local:
            return True
        if isinstance(node, ast.Global | ast.Nonlocal):
            return True
    return False


def _registrar(func: ast.expr) -> str | None:
    """The name of a registering decorator or call: one named like a registrar that is not ours
    (we cannot see what it does), or ours and storing into a container outside itself."""
    name = ast.unparse(func)
    if not REGISTRARS.search(name) or name in NOT_COMMANDS:
        return None
    definition = _ours().get(name.rpartition(".")[2])
    return name if definition is None or _writes_outside(definition) else None


def test_the_registration_check_tells_a_registry_from_a_plain_decorator() -> None:
    """The check below on made-up code: a decorator that fills a module-level table is a
    registration; one that only wraps what it decorates is not."""
    registers, wraps = ast.parse(
        "def command(help):\n"
        "    def make(run):\n"
        "        COMMANDS[run.__name__] = run\n"
        "        return run\n"
        "    return make\n"
        "def command(help):\n"
        "    def make(run):\n"
        "        made = {}\n"
        "        made[help] = run\n"
        "        return Command(help, run)\n"
        "    return make\n"
    ).body
    assert isinstance(registers, ast.FunctionDef) and isinstance(wraps, ast.FunctionDef)
    assert _writes_outside(registers) and not _writes_outside(wraps)


def test_no_command_is_registered_by_importing_a_module() -> None:
    """The CLI's commands come from one literal table; no module adds a command to a registry as a
    side effect of being imported (a decorator or a call at module level that stores into a
    container outside itself)."""
    found = []
    for module in modules().values():
        where = module.path.relative_to(REPO)
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                for decorator in node.decorator_list:
                    name = _registrar(decorator.func if isinstance(decorator, ast.Call) else decorator)
                    if name:
                        found.append(f"{where}:{decorator.lineno} @{name} on {node.name}")
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                name = _registrar(node.value.func)
                if name:
                    found.append(f"{where}:{node.lineno} {name}(…) at import")
    assert not found, f"{len(found)} registration(s) by import:\n" + "\n".join(found)


def _literal_tables() -> list[str]:
    """Module-level literals (dict, list or tuple) of common/ that name every contract command."""
    tables = []
    for module in modules().values():
        for node in module.tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if not isinstance(value, ast.Dict | ast.List | ast.Tuple):
                continue
            strings = {
                n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            }
            if all(command in strings for command in CONTRACT_COMMANDS):
                tables.append(f"{module.path.relative_to(REPO)}:{node.lineno}")
    return tables


def test_the_cli_has_one_literal_command_table() -> None:
    tables = _literal_tables()
    assert len(tables) == 1, (
        f"expected one module-level literal table naming every command ({', '.join(CONTRACT_COMMANDS)}); "
        f"found {tables or 'none'}"
    )


def test_the_circle_finder_reports_the_path() -> None:
    """A made-up circle is found with its path: an empty answer from the rule above means the code
    has no circle, not that the check is blind."""
    assert _cycles({"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_import_graph_sees_imports_inside_functions_and_skips_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from common.store import sendqueue\n"
        "def deliver():\n"
        "    from common.runtime import config\n"
        "    from .. import errors\n"
    )
    module = Module("common.runtime.example", REPO / "common/runtime/example.py", ast.parse(source))
    assert sorted(imports_of(module)) == [
        ("common.errors", 6),
        ("common.runtime.config", 5),
        ("typing", 1),
    ]
