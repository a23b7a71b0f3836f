"""The complexity gate's line count (docs/development.md, Complexity gate): ruff limits a function's
complexity, branches and statements, but has no rule for its length, and a function can be long with
few statements (one large literal, many keyword arguments). No function of the shipped or host code is
longer than MAX_LINES, its docstring and comments included; tests are left out for the reason their
statement count is (a scenario test is one linear script of steps and asserts)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKED = ("common", "cli", "local", "ops", "deploy")
MAX_LINES = 80


def long_functions(root: Path, limit: int) -> list[str]:
    found = []
    for top in CHECKED:
        for path in sorted((root / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_the_limit() -> None:
    found = long_functions(REPO, MAX_LINES)
    assert not found, (
        f"over {MAX_LINES} lines (split into named steps, or move data to a file):\n" + "\n".join(found)
    )


def test_the_count_sees_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    (tmp_path / "common" / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path, 5) == ["common/m.py:5: long (6 lines)"]
