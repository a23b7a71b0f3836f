"""The layout table of docs/development.md is the import rule: each package's "may import" column
lists every package it is allowed to reach, and the real import graph (tests/unit/test_architecture.py,
imports inside functions counted) stays inside it. A new dependency between packages is a change to
that table first, where a reader sees it."""

from __future__ import annotations

import re

from tests.unit.test_architecture import REPO, graph

DOC = REPO / "docs" / "development.md"
ROW = re.compile(r"^\| `([a-z/]+)/` \|.*\| ([^|]*) \|$", re.M)
NAMED = re.compile(r"`([a-z]+(?:/[a-z]+)?)/`")


def package(module: str) -> str:
    """common.reply.text -> common/reply; deploy.iam -> deploy; common and common.errors -> common."""
    parts = module.split(".")
    if parts[0] != "common" or len(parts) == 1:
        return parts[0]
    if len(parts) > 2 or (REPO / "common" / parts[1] / "__init__.py").exists():
        return f"common/{parts[1]}"
    return "common"  # a module of the root package, e.g. its errors


def allowed() -> dict[str, set[str]]:
    """package -> the packages its row's last column names before any "never" (which names what it
    must not import)."""
    section = DOC.read_text(encoding="utf-8").partition("## Repository layout")[2].partition("\n## ")[0]
    rows = {}
    for match in ROW.finditer(section):
        rows[match.group(1)] = set(NAMED.findall(match.group(2).partition("never")[0]))
    return rows


def crossings() -> dict[tuple[str, str], str]:
    """(package, package it imports) -> one import that makes the edge, over the whole graph."""
    found: dict[tuple[str, str], str] = {}
    for module, targets in graph().items():
        for target in targets:
            edge = package(module), package(target)
            if edge[0] != edge[1] and edge[1] != "common":
                found.setdefault(edge, f"{module} imports {target}")
    return found


def test_the_table_names_every_package() -> None:
    packages = {package(m) for m in graph()} - {"common"}
    missing = packages - set(allowed())
    assert not missing, f"docs/development.md's layout table has no row for {sorted(missing)}"


def test_every_import_between_packages_is_one_the_table_allows() -> None:
    rules = allowed()
    refused = [
        f"{example} ({source}/ may import only {sorted(rules.get(source, set()))})"
        for (source, target), example in sorted(crossings().items())
        if target not in rules.get(source, set())
    ]
    assert not refused, "imports the layout table does not allow:\n" + "\n".join(refused)


def test_the_rule_reads_the_table() -> None:
    """The parser finds what the table says, so the check above cannot pass on an empty reading."""
    rules = allowed()
    assert "common/inbound" not in rules["common/reply"]
    assert rules["cli"] == {"common/runtime"}
    assert {"cli", "local", "deploy"} <= rules["ops"]
    assert package("common.reply.text") == "common/reply" and package("common") == "common"
    assert package("common.runtime") == "common/runtime" and package("ops.main") == "ops"
