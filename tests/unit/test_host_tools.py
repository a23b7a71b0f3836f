"""Host tools split by where they run (docs/development.md, Repository layout): local emulates,
ops acts on a deployment, deploy/ knows no local mode, and the console script lists its
commands in one table (ops/main.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from cli.command import Command
from ops import main as cli

REPO = Path(__file__).resolve().parents[2]


def _imports(folder: str) -> dict[str, set[str]]:
    """Every module a file under ``folder`` imports, at module level or inside a function."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        found[str(path.relative_to(REPO))] = names
    return found


def _prefixed(names: set[str], prefix: str) -> set[str]:
    return {n for n in names if n == prefix or n.startswith(prefix + ".")}


def test_no_local_module_takes_env() -> None:
    """A command that acts on a deployment by ``--env`` belongs in ops."""
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "common" / "local").rglob("*.py")
        if '"--env"' in p.read_text()
    ]
    assert offenders == []


def test_local_never_imports_ops_and_deploy_never_imports_local_or_ops() -> None:
    local = {f: _prefixed(n, "ops") for f, n in _imports("local").items()}
    deploy = {f: _prefixed(n, "local") | _prefixed(n, "ops") for f, n in _imports("deploy").items()}
    assert {f: n for f, n in {**local, **deploy}.items() if n} == {}


def test_the_table_holds_every_command_of_the_contract() -> None:
    contract = {
        "dev", "inject", "outbox", "invoke", "deploy", "status", "emulator", "dns publish", "forget",
        "destroy", "replay", "quarantine list", "quarantine show", "quarantine release", "block", "allow",
        "unblock", "suppression list", "suppression remove", "dlq list", "dlq redrive", "conversations",
    }  # fmt: skip
    assert contract <= set(cli.COMMANDS)
    assert all(isinstance(c, Command) for c in cli.COMMANDS.values())
    assert {name.split()[0] for name in cli.COMMANDS if " " in name} == set(cli.GROUPS)


def test_the_parser_is_built_from_the_table_alone() -> None:
    parser = cli.build_parser()
    assert (
        parser.parse_args(["quarantine", "list", "--env", "prd"]).run is cli.COMMANDS["quarantine list"].run
    )
    assert parser.parse_args(["outbox"]).run is cli.COMMANDS["outbox"].run
