"""The image's compiled modules, one bundle file per import root instead of one .pyc per module.

A cold start imports about 480 modules (the stdlib's, boto3's, botocore's, Powertools', ours). From
.pyc files each costs a few ``stat`` calls (the path finders check directories) and an open and a read
of its own file; from a bundle it costs one ``pread`` on a file opened once. In the function images
on this machine's Docker storage that halves ``import app`` and takes a third off a whole cold
start, the one-call baseline included (docs/decisions.md, "Compiled-code bundles").

The base image builds a bundle for the stdlib, for site-packages and for ``/opt/lib`` (``build``),
deletes the .pyc files they replace (``prune``: the bytes are stored once) and activates them for
every interpreter through a ``.pth`` line. A bundle answers only for modules under its own root, in
``sys.path`` order, and only while that root lists the entries it was built with: a ``pip install``
into a derived image (a new or renamed ``*.dist-info``) switches that root's bundle off, and imports
go back to the files. (Not the root's mtime: Docker's copies and copy-ups do not keep a directory's.)
A derived image that rewrites files in place under a root rebuilds the bundles with this module.
Anything a bundle does not hold (extension modules, a file added to ``/var/task``) is found as
before.

Beside the bundles, ``compiled.cache`` holds what a cold start would otherwise compile from text at
run time (``record``): the regular expressions the image's modules compile (pattern and flags -> the
arguments ``re`` passes to ``_sre.compile``) and the code of dataclasses' generated methods (source ->
code object). Once active, ``re._compiler.compile`` and ``dataclasses``' ``exec`` look there first; a
pattern or a source that is not there compiles as before, and a cache from another Python (its magic
numbers, ``sys.version``, its ``-O`` level) is not used at all (docs/decisions.md, "Compiled at build
time").
"""

from __future__ import annotations

import marshal
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, PathFinder, SourceFileLoader
from importlib.util import MAGIC_NUMBER, cache_from_source

# Not ``typing``: what this module imports loads before any bundle can serve it, from its own .pyc.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from typing import Any

FORMAT = b"SEH-BC2\n"
SUFFIX = ".bundle"

COMPILED = "compiled.cache"

__all__ = ["Bundle", "BundleFinder", "Compiled", "activate", "build", "prune", "record"]


class BundleLoader(SourceFileLoader):
    """A source file loader whose code comes from the bundle: ``__file__``, tracebacks, ``get_data``
    and resource readers all see the real file beside it."""

    def __init__(self, fullname: str, path: str, bundle: Bundle, at: tuple[int, int]) -> None:
        super().__init__(fullname, path)
        self._bundle, self._at = bundle, at

    def get_code(self, fullname: str) -> Any:
        return self._bundle.code(self._at)

    def exec_module(self, module: Any) -> None:
        super().exec_module(module)
        if _COMPILED is not None and module.__name__ in Compiled.HOOKED:
            _COMPILED.install(module)


def _key(pattern: str | bytes, flags: int) -> tuple[bool, str | bytes, int]:
    """A pattern's entry: bytes first, so that a str and a bytes pattern are never compared (-b)."""
    return type(pattern) is bytes, pattern, int(flags)


def _compile_generated(source: str) -> Any:
    return compile(source, "<string>", "exec", dont_inherit=True)


def _sre_magic() -> int:
    import _sre  # type: ignore[import-not-found]  # no stub: the regex engine

    return int(_sre.MAGIC)


class Compiled:
    """The build's compiled regular expressions and dataclass code (``compiled.cache``), read at the first
    module that uses them (``re._compiler``, ``dataclasses``)."""

    HOOKED = ("re._compiler", "dataclasses")

    def __init__(self, path: str) -> None:
        self.path = path
        self._tables: tuple[dict[Any, Any], dict[str, Any]] | None = None

    def tables(self) -> tuple[dict[Any, Any], dict[str, Any]]:
        """``(regex, code)``, both empty when the file is missing, damaged or from another Python."""
        if self._tables is None:
            self._tables = {}, {}
            try:
                with open(self.path, "rb") as f:
                    meta = marshal.loads(f.read())
                if (meta["magic"], meta["sre"], meta["version"], meta["optimize"]) == (
                    MAGIC_NUMBER,
                    _sre_magic(),
                    sys.version,
                    sys.flags.optimize,
                ):
                    self._tables = meta["regex"], meta["code"]
            except Exception:  # a cache is an optimisation: never a reason for an import to fail
                pass
        return self._tables

    def install(self, module: Any) -> None:
        regex, code = self.tables()
        if module.__name__ == "re._compiler" and regex:
            original, sre, debug = module.compile, module._sre, module.SRE_FLAG_DEBUG

            def compile(p: Any, flags: int = 0) -> Any:
                entry = regex.get(_key(p, flags)) if type(p) in (str, bytes) and not flags & debug else None
                if entry is not None:
                    try:
                        return sre.compile(p, *entry)
                    except Exception:  # an entry _sre refuses: compile it as if it were not there
                        pass
                return original(p, flags)

            compile.__wrapped__ = original  # type: ignore[attr-defined]
            module.compile = compile
        elif module.__name__ == "dataclasses" and code:
            # dataclasses compiles the methods it generates with a bare exec(text, globals, namespace). A
            # source the build did not see compiles here as dataclasses would compile it, without this
            # module's ``from __future__ import annotations`` (exec of a string inherits the caller's).
            def exec_(source: Any, globals: Any = None, locals: Any = None, /) -> None:
                if type(source) is str:
                    found = code.get(source)
                    source = found if found is not None else _compile_generated(source)
                exec(source, globals, locals)

            module.exec = exec_


_COMPILED: Compiled | None = None


class Bundle:
    """One root's modules: ``{name: (relative path, is package, offset, length)}`` and their code."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            head = os.pread(fd, 32, 0)
            if head[:8] != FORMAT or head[8:12] != MAGIC_NUMBER:
                raise ValueError(f"{path}: not a bundle for this Python")
            size = int.from_bytes(head[12:20], "little")
            if size > os.fstat(fd).st_size:
                raise ValueError(f"{path}: truncated")
            meta = marshal.loads(os.pread(fd, size, 32))
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.base = fd, 32 + size
        self.root: str = meta["root"]
        self.listing: list[str] = meta["listing"]
        self.optimize: int = meta["optimize"]
        self.modules: dict[str, tuple[str, bool, int, int]] = meta["modules"]
        self.top = {name for name in self.modules if "." not in name}
        # What else the root holds by a top-level name (an extension module, a namespace directory):
        # the path finder finds those in this entry before any later one.
        self.elsewhere = {n.partition(".")[0] for n in self.listing} - self.top

    def current(self) -> bool:
        """Whether the root lists what it did at build time (a package added, removed or upgraded by pip
        changes its ``*.dist-info`` entries)."""
        try:
            return _listing(self.root) == self.listing and self.optimize == sys.flags.optimize
        except OSError:
            return False

    def parent_dir(self, entry: tuple[str, bool, int, int]) -> str:
        """The directory a module is found in: its parent package's ``__path__`` entry."""
        rel, is_pkg = entry[0], entry[1]
        where = os.path.dirname(rel)
        return os.path.join(self.root, os.path.dirname(where) if is_pkg else where)

    def code(self, at: tuple[int, int]) -> Any:
        offset, length = at
        return marshal.loads(os.pread(self.fd, length, self.base + offset))

    def spec(self, name: str) -> ModuleSpec:
        rel, is_pkg, offset, length = self.modules[name]
        origin = os.path.join(self.root, rel)
        spec = ModuleSpec(
            name, BundleLoader(name, origin, self, (offset, length)), origin=origin, is_package=is_pkg
        )
        if is_pkg:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        spec.has_location = True
        return spec


class BundleFinder:
    """A meta path finder over the bundles, consulted before the path finders.

    A dotted name is answered when its parent's ``__path__`` names the directory the bundle holds it
    in; a top-level name follows ``sys.path``: the first entry that has it wins, as with files. An entry
    that is not a bundle root is listed once (the image's file system is read-only)."""

    def __init__(self, bundles: list[Bundle]) -> None:
        self.by_root = {b.root: b for b in bundles}
        self._listed: dict[str, frozenset[str]] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if "." in name:
            for bundle in self.by_root.values():
                entry = bundle.modules.get(name)
                if entry is not None and path is not None and bundle.parent_dir(entry) in path:
                    return bundle.spec(name)
            return None
        for item in sys.path:
            holder = self.by_root.get(item)
            if holder is not None:
                if name in holder.top:
                    return holder.spec(name)
                if name in holder.elsewhere:
                    return None
            elif name in self._names(item):
                return None  # a file or package of that name comes first: the path finder loads it
        return None

    def _names(self, entry: str) -> frozenset[str]:
        names = self._listed.get(entry)
        if names is None:
            try:
                files = os.listdir(entry or ".")
            except OSError:
                files = []
            names = frozenset(f.partition(".")[0] for f in files)
            self._listed[entry] = names
        return names

    def invalidate_caches(self) -> None:
        self._listed.clear()


def activate(directory: str) -> BundleFinder | None:
    """Put the current bundles of ``directory`` just before the path finder (after the built-in and
    frozen importers), once per process. Never raises: a missing or foreign bundle is skipped, and a
    stale one (its root changed, or another ``-O`` level) is named on stderr, since its modules then
    compile from source at every start (their .pyc were replaced by the bundle)."""
    if any(isinstance(f, BundleFinder) for f in sys.meta_path):
        return None
    bundles = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return None
    for fname in names:
        if not fname.endswith(SUFFIX):
            continue
        try:
            bundle = Bundle(os.path.join(directory, fname))
        except Exception:  # a foreign or damaged file must never stop an interpreter starting
            continue
        if bundle.current():
            bundles.append(bundle)
            continue
        os.close(bundle.fd)
        sys.stderr.write(
            f"bytecode: {fname} not used ({bundle.root} changed since the image was built, or -O differs):"
            " its modules compile from source\n"
        )
    if not bundles:
        return None
    global _COMPILED
    if os.path.exists(os.path.join(directory, COMPILED)):
        _COMPILED = Compiled(os.path.join(directory, COMPILED))
        for name in Compiled.HOOKED:
            if name in sys.modules:
                _COMPILED.install(sys.modules[name])
    finder = BundleFinder(bundles)
    at = next((i for i, f in enumerate(sys.meta_path) if f is PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, finder)
    return finder


def _listing(root: str) -> list[str]:
    """What a root holds, but its ``.pth`` files (the one that activates the bundles is written after)."""
    return sorted(n for n in os.listdir(root) if not n.endswith(".pth"))


def _modules(root: str) -> dict[str, str]:
    """Every module importable by dotted name under ``root``: ``{name: relative path}``."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        parts = [] if rel == "." else rel.split(os.sep)
        if parts and not (
            all(p.isidentifier() for p in parts) and os.path.isfile(os.path.join(dirpath, "__init__.py"))
        ):
            dirnames[:] = []  # not a package (or a namespace one): its files are not bundled
            continue
        dirnames[:] = sorted(d for d in dirnames if d.isidentifier())
        # An extension module wins over a .py of the same name in the same directory (the path
        # finder tries extension suffixes first), so such a .py is not bundled.
        native = {f[: -len(sfx)] for f in filenames for sfx in EXTENSION_SUFFIXES if f.endswith(sfx)}
        for fname in sorted(filenames):
            stem, dot, ext = fname.partition(".")
            if ext != "py" or not stem.isidentifier() or stem in native:
                continue
            name = ".".join(parts if stem == "__init__" else [*parts, stem])
            if name:
                found[name] = os.path.join(rel, fname) if parts else fname
    return found


def build(out: str, root: str) -> tuple[int, int]:
    """Compile every module under ``root`` into ``out`` at this interpreter's ``-O`` level; files that do
    not compile are left to the import system (as compileall leaves them). Returns (modules, bytes of
    code)."""
    root = os.path.abspath(root)
    modules: dict[str, tuple[str, bool, int, int]] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, rel in _modules(root).items():
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as f:
                code = compile(f.read(), path, "exec", dont_inherit=True, optimize=sys.flags.optimize)
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue
        blob = marshal.dumps(code)
        modules[name] = (rel, rel.endswith("__init__.py"), offset, len(blob))
        blobs.append(blob)
        offset += len(blob)
    meta = {"root": root, "listing": _listing(root), "optimize": sys.flags.optimize, "modules": modules}
    head = marshal.dumps(meta)
    with open(out, "wb") as f:
        f.write(FORMAT + MAGIC_NUMBER + len(head).to_bytes(8, "little") + bytes(12))
        f.write(head)
        f.writelines(blobs)
    return len(modules), offset


def prune(root: str, bundled: set[str], keep: set[str]) -> int:
    """Delete the .pyc of the ``bundled`` modules under ``root`` except those of ``keep`` (the modules
    loaded before a bundle can be). Both hold source paths relative to the root. A module the bundle
    does not hold keeps its .pyc. Returns how many were deleted."""
    root = os.path.abspath(root)
    deleted = 0
    for rel in sorted(bundled - keep):
        folder = os.path.join(root, os.path.dirname(rel), "__pycache__")
        stem = os.path.basename(rel)[:-3] + "."
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for fname in names:  # every optimisation level's: module.cpython-313[.opt-N].pyc
            if (
                fname.startswith(stem)
                and fname.endswith(".pyc")
                and fname[len(stem) :].startswith("cpython-")
            ):
                os.unlink(os.path.join(folder, fname))
                deleted += 1
    return deleted


def _loaded_before_activation(root: str) -> set[str]:
    """The files under ``root`` that an interpreter has imported by the time the ``.pth`` line runs
    (this module and what it imports): their .pyc stay."""
    root = os.path.abspath(root)
    out = set()
    for mod in list(sys.modules.values()):
        origin = getattr(getattr(mod, "__spec__", None), "origin", None)
        if isinstance(origin, str) and origin.endswith(".py") and origin.startswith(root + os.sep):
            out.add(os.path.relpath(origin, root))
    return out


def _plain(value: Any) -> Any:
    """``value`` with int subclasses (``re``'s named opcodes) as ints, so that marshal takes it."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def record(out: str, modules: Sequence[str], clients: Sequence[str] = ()) -> tuple[int, int]:
    """Import ``modules`` (``pkg.*``: the package and every module under it) and create a boto3 client
    for each of ``clients`` (what a cold start does first), recording every regular expression compiled
    and every dataclass's generated code into ``out``. Returns (patterns, code objects)."""
    # The regex recorder goes in before anything else is imported: dataclasses (inspect, ast) and pkgutil
    # compile patterns at import too; re.purge() empties re's own cache, which would hide a pattern.
    import re
    import re._compiler as compiler  # type: ignore[import-not-found]  # no stub: an internal module

    regex: dict[Any, Any] = {}
    code: dict[str, Any] = {}
    # An active cache (a derived image re-recording) is bypassed: record what compiling gives.
    real_sre, real_compile = compiler._sre, getattr(compiler.compile, "__wrapped__", compiler.compile)
    installed = compiler.compile
    asked: list[tuple[Any, int]] = []

    class _RecordingSre:  # what compile() passes to _sre.compile, for the pattern and flags it was asked
        def __getattr__(self, name: str) -> Any:
            return getattr(real_sre, name)

        def compile(self, pattern: Any, *args: Any) -> Any:
            compiled = real_sre.compile(pattern, *args)
            if asked and pattern is asked[-1][0]:  # not a Scanner's sub-pattern, nor another thread's
                regex[_key(*asked[-1])] = _plain(args)
            return compiled

    def compile_(p: Any, flags: int = 0) -> Any:
        if type(p) not in (str, bytes) or flags & compiler.SRE_FLAG_DEBUG:
            return real_compile(p, flags)
        asked.append((p, int(flags)))
        try:
            return real_compile(p, flags)
        finally:
            asked.pop()

    def exec_(source: Any, globals: Any = None, locals: Any = None, /) -> None:
        if type(source) is str:
            source = code.setdefault(source, _compile_generated(source))
        exec(source, globals, locals)

    dataclasses_exec: Any = None
    try:
        compiler._sre, compiler.compile = _RecordingSre(), compile_
        re.purge()
        import dataclasses
        import importlib
        import pkgutil

        dataclasses_exec = dataclasses.__dict__.get("exec")
        dataclasses.exec = exec_  # type: ignore[attr-defined]
        for name in modules:
            if name.endswith(".*"):
                package = importlib.import_module(name[:-2])
                for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                    importlib.import_module(info.name)
            else:
                importlib.import_module(name)
        if clients:
            import boto3

            session = boto3.session.Session(
                region_name="us-east-1", aws_access_key_id="build", aws_secret_access_key="build"
            )
            for service in clients:
                session.client(service)
    finally:
        compiler._sre, compiler.compile = real_sre, installed
        if "dataclasses" in sys.modules:
            if dataclasses_exec is None:
                sys.modules["dataclasses"].__dict__.pop("exec", None)
            else:
                setattr(sys.modules["dataclasses"], "exec", dataclasses_exec)  # noqa: B010
    meta = {
        "magic": MAGIC_NUMBER,
        "sre": _sre_magic(),
        "version": sys.version,
        "optimize": sys.flags.optimize,
        "regex": regex,
        "code": code,
    }
    with open(out, "wb") as f:
        f.write(marshal.dumps(meta))
    return len(regex), len(code)


def main(argv: list[str]) -> int:
    """``python -m common.runtime.bytecode DIR ROOT...`` (or ``python -m _bytecode_bundles``, its copy in
    the image's site-packages): one bundle per root in DIR, then the .pyc they replace deleted and the
    .pyc of what loads before them written (run as the last step that writes under the roots)."""
    if argv[:1] == ["--record"]:
        # ``--record OUT MODULE... [--clients SERVICE...]``, run with -B from the root holding the modules.
        out, rest = argv[1], argv[2:]
        names, clients = (
            (rest[: rest.index("--clients")], rest[rest.index("--clients") + 1 :])
            if "--clients" in rest
            else (rest, [])
        )
        patterns, codes = record(out, names, clients)
        print(f"[bytecode] {os.path.basename(out)}: {patterns} regular expressions, {codes} generated codes")
        return 0
    directory, roots = argv[0], argv[1:]
    # site decodes each .pth file (utf-8-sig) before the one that activates the bundles has run.
    import encodings.utf_8_sig  # noqa: F401

    keeps = {root: _loaded_before_activation(root) for root in roots}
    import py_compile  # after: what it imports does not load before the bundles

    os.makedirs(directory, exist_ok=True)
    for root in roots:
        name = root.strip("/").replace("/", "-") + SUFFIX
        keep = keeps[root]
        count, size = build(os.path.join(directory, name), root)
        bundle = Bundle(os.path.join(directory, name))
        os.close(bundle.fd)
        deleted = prune(root, {entry[0] for entry in bundle.modules.values()}, keep)
        for rel in sorted(keep):  # what loads the bundles loads from its own .pyc, written here if missing
            source = os.path.join(os.path.abspath(root), rel)
            if not os.path.exists(cache_from_source(source)):
                py_compile.compile(
                    source, doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
                )
        print(f"[bytecode] {name}: {count} modules, {size / 1e6:.1f} MB of code; {deleted} .pyc deleted")
    return 0


if __name__ == "__main__":  # pragma: no cover - the image build's step
    raise SystemExit(main(sys.argv[1:]))
