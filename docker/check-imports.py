#!/usr/bin/env python3
"""Fail the image build when shipped code imports something the image does not hold.

Reads every module under ROOT/common with ast (nothing is executed) and checks each import it can
run, at module level or inside a function, against the standard library, the image's venv and
``common`` itself. Host packages (cli, local, ops, deploy) are not in the image, so an import of one
from common/ stops the build here rather than at a cold start on AWS.
"""

import ast
import importlib.util
import pathlib
import sys


def top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def main(root: pathlib.Path) -> int:
    missing: list[str] = []
    for path in sorted((root / "common").rglob("*.py")):
        for name in sorted(top_names(ast.parse(path.read_bytes(), str(path)))):
            if name == "common" or name in sys.stdlib_module_names:
                continue
            if importlib.util.find_spec(name) is None:
                missing.append(f"{path.relative_to(root)}: imports {name}, which the image does not have")
    for line in missing:
        print(line, file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
