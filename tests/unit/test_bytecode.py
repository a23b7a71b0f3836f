"""The compiled-code bundles (common/runtime/bytecode.py): what the image's interpreters import from.

Each check runs in a fresh interpreter, as a cold start does: a bundle is activated once per process
and stays in front of the path finders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common.runtime import bytecode

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import importlib, importlib.resources, json, sys, traceback
sys.path[:0] = json.loads(sys.argv[2])
from common.runtime import bytecode
finder = bytecode.activate(sys.argv[1])
out = {"active": sorted(finder.by_root) if finder else []}
for name in json.loads(sys.argv[3]):
    try:
        mod = importlib.import_module(name)
        out[name] = [type(mod.__spec__.loader).__name__, mod.__file__, getattr(mod, "VALUE", None)]
    except Exception as exc:
        out[name] = [type(exc).__name__, str(exc), None]
if "pkg" in sys.modules:
    out["resource"] = importlib.resources.files("pkg").joinpath("data.txt").read_text()
    try:
        importlib.import_module("pkg.mod").fail()
    except ZeroDivisionError:
        out["traceback"] = traceback.format_exc()
print(json.dumps(out))
"""


def _tree(root: Path) -> Path:
    """A site root: a top-level module, a package with a data file, a sub-package, a .dist-info."""
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "top.py").write_text("VALUE = 'top'\n")
    (root / "pkg" / "__init__.py").write_text("VALUE = 'pkg'\n")
    (root / "pkg" / "data.txt").write_text("resource text")
    (root / "pkg" / "mod.py").write_text("VALUE = 'mod'\n\ndef fail():\n    return 1 / 0  # the line\n")
    (root / "pkg" / "sub" / "__init__.py").write_text("from . import leaf\nVALUE = leaf.VALUE\n")
    (root / "pkg" / "sub" / "leaf.py").write_text("VALUE = 'leaf'\n")
    (root / "pkg" / "broken.py").write_text("def (:\n")  # does not compile: left to the import system
    (root / "demo-1.0.dist-info").mkdir()
    return root


def _probe(bundles: Path, path: list[Path], names: list[str]) -> dict[str, list[str]]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(bundles),
            json.dumps([str(p) for p in path]),
            json.dumps(names),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    root = _tree(tmp_path / "site")
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    count, size = bytecode.build(str(bundles / "site.bundle"), str(root))
    assert count == 5 and size > 0  # top, pkg, pkg.mod, pkg.sub, pkg.sub.leaf; not pkg.broken
    return root, bundles


def test_modules_load_from_the_bundle_with_their_real_files_beside_them(site: tuple[Path, Path]) -> None:
    root, bundles = site
    out = _probe(bundles, [root], ["top", "pkg", "pkg.mod", "pkg.sub", "pkg.sub.leaf"])
    assert out["active"] == [str(root)]
    assert out["top"] == ["BundleLoader", str(root / "top.py"), "top"]
    assert out["pkg.sub"] == ["BundleLoader", str(root / "pkg" / "sub" / "__init__.py"), "leaf"]
    assert out["pkg.sub.leaf"][0] == "BundleLoader"
    assert out["resource"] == "resource text"  # importlib.resources reads the package's directory
    assert "    return 1 / 0  # the line\n" in out["traceback"]  # tracebacks quote the source


def test_what_the_bundle_does_not_hold_is_found_as_before(site: tuple[Path, Path]) -> None:
    """A module that does not compile, and a file added after the build inside a bundled package."""
    root, bundles = site
    (root / "pkg" / "later.py").write_text("VALUE = 'later'\n")
    out = _probe(bundles, [root], ["pkg.later", "pkg.broken"])
    assert out["pkg.later"] == ["SourceFileLoader", str(root / "pkg" / "later.py"), "later"]
    assert out["pkg.broken"][0] == "SyntaxError"


def test_an_earlier_sys_path_entry_still_wins(site: tuple[Path, Path], tmp_path: Path) -> None:
    """As with files: a ``top.py`` in a directory ahead of the bundle's root (a function's task root)."""
    root, bundles = site
    task = tmp_path / "task"
    task.mkdir()
    (task / "top.py").write_text("VALUE = 'task'\n")
    out = _probe(bundles, [task, root], ["top", "pkg"])
    assert out["top"] == ["SourceFileLoader", str(task / "top.py"), "task"]
    assert out["pkg"][0] == "BundleLoader"


def test_a_package_installed_after_the_build_switches_that_roots_bundle_off(site: tuple[Path, Path]) -> None:
    """pip adds (or renames) a ``*.dist-info``: the bundle may hold old code, so the files are read."""
    root, bundles = site
    (root / "demo-1.0.dist-info").rename(root / "demo-1.1.dist-info")
    out = _probe(bundles, [root], ["top"])
    assert out["active"] == []
    assert out["top"][0] == "SourceFileLoader"


def test_a_foreign_or_truncated_file_is_ignored(site: tuple[Path, Path]) -> None:
    root, bundles = site
    (bundles / "other.bundle").write_bytes(b"not a bundle at all")
    (bundles / "cut.bundle").write_bytes((bundles / "site.bundle").read_bytes()[:40])
    (bundles / "huge.bundle").write_bytes(
        (bundles / "site.bundle").read_bytes()[:12] + (2**62).to_bytes(8, "little")
    )
    out = _probe(bundles, [root], ["top"])
    assert out["active"] == [str(root)]
    assert out["top"][0] == "BundleLoader"


def test_prune_deletes_the_pyc_a_bundle_replaces_and_keeps_what_loads_it(tmp_path: Path) -> None:
    import compileall

    root = _tree(tmp_path / "site")
    compileall.compile_dir(str(root), quiet=1)
    pycs = sorted(p.name.split(".")[0] for p in root.rglob("*.pyc"))
    assert pycs == ["__init__", "__init__", "leaf", "mod", "top"]
    bundled = {"top.py", "pkg/__init__.py", "pkg/mod.py", "pkg/sub/leaf.py"}  # not pkg/sub/__init__.py
    deleted = bytecode.prune(str(root), bundled, keep={"pkg/__init__.py"})
    assert deleted == 3
    assert sorted(p.relative_to(root).as_posix().split(".")[0] for p in root.rglob("*.pyc")) == [
        "pkg/__pycache__/__init__",
        "pkg/sub/__pycache__/__init__",
    ]


def test_what_the_path_finder_would_find_first_is_left_to_it(tmp_path: Path) -> None:
    """An extension module beats a .py of the same name in its directory, and the built-in and frozen
    importers stay ahead of the bundles."""
    root = _tree(tmp_path / "site")
    (root / "pkg" / "fast.py").write_text("VALUE = 'py'\n")
    (root / "pkg" / "fast.cpython-313-x86_64-linux-gnu.so").write_bytes(b"")
    (tmp_path / "bundles").mkdir()
    bytecode.build(str(tmp_path / "bundles" / "site.bundle"), str(root))
    held = bytecode.Bundle(str(tmp_path / "bundles" / "site.bundle"))
    assert "pkg.mod" in held.modules and "pkg.fast" not in held.modules
    code = (
        "import sys; from importlib.machinery import PathFinder; from common.runtime import bytecode; "
        f"f = bytecode.activate({str(tmp_path / 'bundles')!r}); "
        "print(sys.meta_path.index(f) + 1 == sys.meta_path.index(PathFinder))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_a_bundle_built_at_another_optimisation_level_is_not_used_and_says_so(
    site: tuple[Path, Path],
) -> None:
    """Under ``-O`` asserts are compiled out: code compiled without it would run them."""
    root, bundles = site
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[2]); from common.runtime import bytecode; "
        "f = bytecode.activate(sys.argv[1]); import top; "
        "print(json.dumps([bool(f), type(top.__loader__).__name__]))"
    )
    out = subprocess.run(
        [sys.executable, "-O", "-c", code, str(bundles), str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [False, "SourceFileLoader"]
    assert "site.bundle not used" in out.stderr


# The compile cache: regular expressions and dataclass code recorded at build time (bytecode.record).
CACHED_MODULE = """
import dataclasses, re

WORD = re.compile(r"(?P<word>[A-Za-z]+)-(\\d{2,4})", re.IGNORECASE)
RAW = re.compile(rb"^--([^\\s]{1,70})[ \\t]*\\r?\\n", re.M)


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 2
"""

USE_CACHE = """
import sys
sys.path.insert(0, sys.argv[2])
import dataclasses, re, re._compiler, re._parser
from common.runtime import bytecode

cache = bytecode.Compiled(sys.argv[1])
cache.install(re._compiler)
cache.install(dataclasses)
parsed, compiled = [], []
real_parse = re._parser.parse
re._parser.parse = lambda *a, **k: parsed.append(a[0]) or real_parse(*a, **k)
def audit(event, args):
    if event == "compile":
        compiled.append(args[0] if isinstance(args[0], bytes) else str(args[0]).encode())
sys.addaudithook(audit)
import cached_module as m
p = m.Point(1)
assert (p.x, p.y, p == m.Point(1, 2), repr(p)) == (1, 2, True, "Point(x=1, y=2)"), p
try:
    p.x = 3
except dataclasses.FrozenInstanceError:
    pass
else:
    raise AssertionError("not frozen")
match = m.WORD.search("see Item-123 here")
assert match and match.group("word", 2) == ("Item", "123") and m.WORD.groupindex == {"word": 1}
assert m.RAW.match(b"--b1 \\r\\n").group(1) == b"b1"
assert re.compile(r"never[ ]recorded") .match("never recorded")  # not in the cache: compiled as before
print(len(parsed), sum(b"__create_fn__" in c for c in compiled))  # dataclasses wraps its methods in it
"""


def _python(*args: str) -> str:
    """What ``python ARGS`` prints, run from the repository (it raises if the process fails)."""
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout


def _record(tmp_path: Path) -> Path:
    (tmp_path / "cached_module.py").write_text(CACHED_MODULE)
    out = tmp_path / "compiled.cache"
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); from common.runtime import bytecode; "
        f"print(bytecode.record({str(out)!r}, ['cached_module']))"
    )
    patterns, codes = json.loads(_python("-B", "-c", code).strip().replace("(", "[").replace(")", "]"))
    assert patterns >= 2 and codes >= 1
    return out


def test_recorded_patterns_compile_to_what_re_compiles(tmp_path: Path) -> None:
    import _sre  # type: ignore[import-not-found]
    import marshal
    import re._compiler as compiler  # type: ignore[import-not-found]

    table = marshal.loads(_record(tmp_path).read_bytes())
    assert (table["magic"], table["optimize"]) == (bytecode.MAGIC_NUMBER, sys.flags.optimize)
    assert (table["version"], table["optimize"]) == (sys.version, sys.flags.optimize)
    for (is_bytes, pattern, flags), args in table["regex"].items():
        assert is_bytes == isinstance(pattern, bytes)
        cached, fresh = _sre.compile(pattern, *args), compiler.compile(pattern, flags)
        # Pattern objects compare their flags, pattern and compiled code; the groups are the rest.
        assert cached == fresh, pattern
        assert (cached.groups, cached.groupindex) == (fresh.groups, fresh.groupindex), pattern


def test_a_dataclass_the_build_did_not_see_compiles_as_dataclasses_would(tmp_path: Path) -> None:
    """A miss compiles without the cache module's own ``from __future__ import annotations``: the
    generated ``__init__`` keeps real annotations, as without any cache."""
    out = _record(tmp_path)
    code = (
        "import dataclasses, re._compiler, sys, typing\n"
        "from common.runtime import bytecode\n"
        f"cache = bytecode.Compiled({str(out)!r})\n"
        "cache.install(re._compiler); cache.install(dataclasses)\n"
        "@dataclasses.dataclass\n"
        "class Unseen:\n"
        "    x: int\n"
        "print(typing.get_type_hints(Unseen.__init__))\n"
    )
    assert _python("-c", code).strip() == "{'x': <class 'int'>, 'return': <class 'NoneType'>}"


def test_recording_skips_what_it_was_not_asked_and_bypasses_an_active_cache(tmp_path: Path) -> None:
    """re.Scanner compiles sub-patterns through _sre without re.compile (nothing to key them by), and a
    process that already runs with a cache records what compiling gives, not what the cache serves."""
    (tmp_path / "scanning.py").write_text(
        "import re\nSCANNER = re.Scanner([(r'[0-9]+', lambda s, t: int(t)), (r'\\s+', None)])\n"
        "WORD = re.compile(r'w(o)rd')\n"
        "import dataclasses\n@dataclasses.dataclass\nclass Hit:\n    n: int\n"
    )
    first, second = tmp_path / "first.cache", tmp_path / "second.cache"
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import dataclasses, marshal, re._compiler\n"
        "from common.runtime import bytecode\n"
        f"print(bytecode.record({str(first)!r}, ['scanning']))\n"
        f"cache = bytecode.Compiled({str(first)!r})\n"
        "cache.install(re._compiler); cache.install(dataclasses)\n"
        "sys.modules.pop('scanning')\n"
        f"print(bytecode.record({str(second)!r}, ['scanning']))\n"
        "print(hasattr(re._compiler.compile, '__wrapped__'), 'exec' in vars(dataclasses))\n"
        f"print(marshal.loads(open({str(first)!r}, 'rb').read())['regex']"
        f" == marshal.loads(open({str(second)!r}, 'rb').read())['regex'])\n"
    )
    printed = _python("-B", "-c", code)
    first_counts, second_counts, hooks, same = printed.strip().splitlines()
    assert first_counts == second_counts == "(1, 1)", printed
    assert hooks == "True True"  # the cache active before recording is active after it
    assert same == "True"


def test_with_the_cache_a_process_parses_no_recorded_pattern_and_compiles_no_dataclass(
    tmp_path: Path,
) -> None:
    out = _record(tmp_path)
    with_cache = _python("-B", "-c", USE_CACHE, str(out), str(tmp_path)).split()
    assert with_cache == ["1", "0"]  # only the pattern that was never recorded is parsed; no generated code
    without = _python("-B", "-c", USE_CACHE, str(tmp_path / "missing.cache"), str(tmp_path)).split()
    assert int(without[0]) >= 3 and int(without[1]) >= 1  # the same run without a cache: the probe has teeth


def test_a_cache_from_another_python_is_not_used(tmp_path: Path) -> None:
    import marshal

    out = _record(tmp_path)
    table = marshal.loads(out.read_bytes())
    table["magic"] = b"\x00\x00\r\n"
    out.write_bytes(marshal.dumps(table))
    assert bytecode.Compiled(str(out)).tables() == ({}, {})
    damaged = tmp_path / "damaged.cache"
    damaged.write_bytes(b"\x00not marshal")
    assert bytecode.Compiled(str(damaged)).tables() == ({}, {})
