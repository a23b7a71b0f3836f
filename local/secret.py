"""The local stack's own secret: every local key and the emulator's admin token derive from it.

The emulator holds the admin's keys, every role session's keys, THREAD_SECRET and every mail, and it
answers anyone who can reach its port with the right credentials. A constant in the source would give
every reader of the source those credentials; a secret made at random, once per stack, gives them only
to who can read this file: ``.build/local/emulator.env``, mode 0600, one line
``LOCAL_EMULATOR_SECRET=<64 hex>`` (the same file is the compose stack's ``env_file`` for the emulator
and the tools, so the stack makes it -- ``scripts/compose.sh`` runs ``python -m local.env`` -- and no
image holds it). ``email-handler dev``, the tests and the host CLI read the file, making it on first
use; the variable, when set, wins (the compose stack's containers have no file).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

VARIABLE = "LOCAL_EMULATOR_SECRET"
SECRET_FILE = Path(__file__).resolve().parents[1] / ".build" / "local" / "emulator.env"
_BYTES = 32


def _parse(text: str) -> str:
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name.strip() == VARIABLE and value.strip():
            return value.strip()
    return ""


def ensure(path: Path = SECRET_FILE) -> str:
    """The secret of the stack whose file is ``path``, made (mode 0600) when there is none yet. Two
    processes starting at once agree: the file appears whole or not at all (a hard link of a finished
    temporary file, which fails if another process linked first)."""
    with contextlib.suppress(FileNotFoundError):
        if found := _read(path):
            return found
    path.parent.mkdir(parents=True, exist_ok=True)
    made = secrets.token_hex(_BYTES)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(f"{VARIABLE}={made}\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            found = _read(path)
            if found:
                return found
            os.replace(tmp, path)  # an empty placeholder (scripts/compose.sh's down/logs): take its place
            return made
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return made


def _read(path: Path) -> str:
    """The secret in ``path`` ('' for an empty placeholder); a file others may read is made 0600 first."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o600)
    return _parse(path.read_text(encoding="utf-8"))


_FROM_FILE: list[str] = []  # the file's secret, read once per process


def current() -> str:
    """This process's stack secret: ``LOCAL_EMULATOR_SECRET`` when set, else the file's (made if absent)."""
    if given := os.environ.get(VARIABLE, "").strip():
        return given
    if not _FROM_FILE:
        _FROM_FILE.append(ensure(SECRET_FILE))
    return _FROM_FILE[0]
