"""local/motoadapter.py is the one door into moto: the version the patches were written for, and
every patch listed there."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from local import motoadapter

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_moto_is_the_one_the_patches_were_written_for() -> None:
    installed = motoadapter.installed_version()
    patches = "\n".join(f"  - {p.installed_by}: {p.replaces} ({p.why})" for p in motoadapter.PATCHES)
    assert installed == motoadapter.MOTO_VERSION, (
        f"moto {installed} is installed, the emulator's patches were written for {motoadapter.MOTO_VERSION}. "
        "Re-check each patch against the new moto (does it still apply, is it still needed), then set "
        f"MOTO_VERSION in local/motoadapter.py and the pin in pyproject.toml:\n{patches}"
    )


def test_each_patch_names_the_function_that_installs_it() -> None:
    for patch in motoadapter.PATCHES:
        module, _, function = patch.installed_by.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function, None)), patch.installed_by
    assert len({p.installed_by for p in motoadapter.PATCHES}) == len(motoadapter.PATCHES)


def test_only_the_adapter_imports_moto() -> None:
    offenders = []
    for path in sorted((REPO / "local").rglob("*.py")):
        if path.name == "motoadapter.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            if any(n == "moto" or n.startswith("moto.") for n in names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, offenders


def test_every_accessor_reaches_its_moto_module() -> None:
    """A moto upgrade that moves a module fails here, not in the middle of the emulator's start."""
    accessors = [
        getattr(motoadapter, name)
        for name, value in vars(motoadapter).items()
        if callable(value)
        and getattr(value, "__module__", "") == motoadapter.__name__
        and name not in ("installed_version", "Patch")
    ]
    assert len(accessors) > 20
    for accessor in accessors:
        assert accessor().__name__.startswith("moto."), accessor.__name__
