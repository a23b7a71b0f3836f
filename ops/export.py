"""`email-handler export DIR [--since DATE]`: the owner's mail as files other tools read.

* ``<public address>.mbox``: one mbox per public address (the conversation record's ``publicAddress``,
  else the default public address) with every mail received on it byte for byte as archived
  (``conversations/<cid>/<id>.eml``) and every reply of the owner as sent (``sent/<cid>/<id>.eml``), in
  the order the system stored them. The mbox flavour is mboxrd: a line of a mail that starts with
  ``From `` after any number of ``>`` is written with one more ``>``, so a reader that knows mboxrd gets
  the mail back exactly (Python's ``mailbox`` writes the separators; the quoting is done here first).
* ``conversations.jsonl``: the conversation records, one JSON object a line.
* ``attachments/<cid>/<id>/<file>`` and, beside it, ``<file>.txt``: the stored attachments and the
  text the attachment-extractor took from them.

Resumable: ``.export-state.jsonl`` in DIR is a journal of what is written, one line per mail or file,
appended (and synced) after the mail is synced to its mbox. A rerun skips what the journal names and
first cuts each mbox back to its last journalled size, so a mail written by a run that died before
journalling it is written once, not twice. ``--since`` takes only what was stored on or after a date
(an increment into the same DIR, or a fresh DIR with only the newer mail).
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import email.utils
import fcntl
import json
import mailbox
import os
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from cli.command import arg, command
from common.aws import dynamodb, s3
from common.errors import EmailHandlerError
from common.runtime.clock import parse_iso
from common.store import layout
from ops.admin import TARGET, fail, target

STATE = ".export-state.jsonl"
RECORDS = "conversations.jsonl"
ATTACHMENT_DIR = "attachments"
MBOX_SUFFIX = ".mbox"
# A line that mboxrd quotes: any number of '>' then "From " (RFC 4155, appendix "mboxrd").
_FROM_LINE = re.compile(rb"^(>*From )", re.M)
_ENVELOPE = re.compile(r"[!-~]+")  # the From_ line's address: printable ASCII without spaces
_SEGMENT = re.compile(r"[^/\x00]+")


class ExportError(EmailHandlerError):
    """The export cannot run as asked (a directory that is not an export's, a bad date)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """One object of the mail bucket the export writes."""

    key: str
    when: datetime

    @staticmethod
    def of(entry: dict[str, Any]) -> Stored:
        return Stored(str(entry["Key"]), entry["LastModified"].astimezone(UTC))

    @property
    def parts(self) -> list[str]:
        return self.key.split("/")


@dataclass
class Tally:
    """What a run wrote and skipped, by kind; printed at the end."""

    mails: dict[str, int] = field(default_factory=dict)  # mbox file -> mails written
    skipped: int = 0  # already written by an earlier run
    files: int = 0
    texts: int = 0
    records: int = 0


class Journal:
    """``.export-state.jsonl``: every line one mail or file written, the mbox's size after it. Held with an
    exclusive lock for the run (released by the kernel if the process dies), so two exports cannot
    write one directory at once."""

    def __init__(self, directory: Path) -> None:
        path = directory / STATE
        self.done: set[str] = set()
        self.sizes: dict[str, int] = {}
        self._file: IO[str] = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise ExportError(f"another export is writing {directory}") from None
        self._file.seek(0)
        for line in self._file.read().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:  # the last line of a run that died while writing it
                continue
            self.done.add(entry["key"])
            if "mbox" in entry:
                self.sizes[entry["mbox"]] = int(entry["size"])

    def commit(self, entry: dict[str, Any]) -> None:
        self._file.seek(0, os.SEEK_END)
        if self._file.tell():  # a torn last line stays on its own line, unread
            self._file.write("\n")
        self._file.write(json.dumps(entry, ensure_ascii=False))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.done.add(entry["key"])
        if "mbox" in entry:
            self.sizes[entry["mbox"]] = int(entry["size"])

    def close(self) -> None:
        self._file.close()


class Progress:
    """A line on stderr at most every ``interval`` seconds, and at the end."""

    def __init__(self, total: int, what: str, interval: float = 1.0) -> None:
        self.total, self.what, self.interval = total, what, interval
        self.count, self._last = 0, 0.0

    def step(self) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self._last >= self.interval or self.count == self.total:
            self._last = now
            print(f"export: {self.what} {self.count}/{self.total}", file=sys.stderr, flush=True)


def parse_since(text: str | None) -> datetime | None:
    """``2026-11-01`` (midnight UTC) or an ISO 8601 time (``Z`` or an offset; none means UTC)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"--since {text!r} is not an ISO 8601 date or time") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def plain(value: Any) -> Any:
    """DynamoDB's numbers and sets as JSON has them."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def mboxrd_quoted(raw: bytes) -> bytes:
    return _FROM_LINE.sub(rb">\1", raw)


def mboxrd_unquoted(data: bytes) -> bytes:
    """What an mboxrd reader gives back for a message :func:`mboxrd_quoted` wrote."""
    return re.sub(rb"^>(>*From )", rb"\1", data, flags=re.M)


def envelope_line(raw: bytes, when: datetime) -> bytes:
    """The mbox separator ``From <address> <asctime>``: the mail's Return-Path (else From) and the time
    the system stored it."""
    headers = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw[:262144])
    sender = ""
    for name in ("Return-Path", "From"):
        value = headers.get(name)
        if value:
            sender = email.utils.parseaddr(str(value))[1]
            if sender:
                break
    if not _ENVELOPE.fullmatch(sender):
        sender = "MAILER-DAEMON"
    return f"From {sender} {time.asctime(when.timetuple())}".encode("ascii")


def safe_name(text: str) -> str:
    """A file name for a public address (addresses are ASCII; anything else becomes ``_``)."""
    return re.sub(r"[^A-Za-z0-9@._+-]", "_", text).lstrip(".") or "_"


def open_directory(directory: Path) -> Journal:
    """The export directory: created, or one an export made before (its journal is there). Any other
    non-empty directory is refused: resuming cuts mboxes back to their journalled size."""
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / STATE).exists() and any(directory.iterdir()):
        raise ExportError(f"{directory} is not empty and holds no export ({STATE}): choose another DIR")
    return Journal(directory)


def write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


class Export:
    """One run of the export into ``directory``."""

    def __init__(self, cfg: Any, directory: Path, since: datetime | None) -> None:
        self.cfg, self.directory, self.since = cfg, directory, since
        self.tally = Tally()
        self._mboxes: dict[str, mailbox.mbox] = {}

    def wanted(self, obj: Stored) -> bool:
        return self.since is None or obj.when >= self.since

    def run(self) -> Tally:
        journal = open_directory(self.directory)
        try:
            addresses = self.write_records()
            self.write_mails(journal, addresses)
            self.write_attachments(journal)
        finally:
            for box in self._mboxes.values():
                box.close()
            journal.close()
        return self.tally

    def write_records(self) -> dict[str, str]:
        """``conversations.jsonl``, replaced whole: every record as it is now, or with ``--since`` the
        records in scope merged into what an earlier run wrote (an increment keeps the rest). Returns each
        conversation's public address, from every record."""

        items = dynamodb.scan(self.cfg.conversations_table)
        path = self.directory / RECORDS
        kept: dict[str, dict[str, Any]] = {}
        if self.since is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                kept[str(record["conversationId"])] = record
        for item in items:
            moment = parse_iso(str(item.get("timestamp", "")))
            if self.since is None or moment is None or moment >= self.since:
                kept[str(item["conversationId"])] = json.loads(json.dumps(item, default=plain))
                self.tally.records += 1
        lines = [json.dumps(kept[cid], ensure_ascii=False, sort_keys=True) + "\n" for cid in sorted(kept)]
        write_file(path, "".join(lines).encode("utf-8"))
        default = self.cfg.public_email or "unknown"
        return {str(i["conversationId"]): str(i.get("publicAddress") or default) for i in items}

    def mails(self) -> list[Stored]:
        """Every archived mail and sent reply in scope, oldest first (a received mail before a reply
        stored in the same second: S3 keeps whole seconds)."""

        found = []
        for rank, prefix in enumerate((layout.CONVERSATIONS, layout.SENT)):
            for entry in s3.listing(self.cfg.bucket, prefix):
                obj = Stored.of(entry)
                if len(obj.parts) == 3 and obj.key.endswith(".eml") and self.wanted(obj):
                    found.append((obj.when, rank, obj.key, obj))
        return [obj for *_, obj in sorted(found, key=lambda f: f[:3])]

    def write_mails(self, journal: Journal, addresses: dict[str, str]) -> None:

        todo = self.mails()
        progress = Progress(len(todo), "mail")
        for obj in todo:
            progress.step()
            if obj.key in journal.done:
                self.tally.skipped += 1
                continue
            got = s3.get(self.cfg.bucket, obj.key)
            if got is None:  # removed since the listing (forget, retention)
                continue
            raw = bytes(got["Body"].read())
            cid = obj.parts[1]
            name = safe_name(addresses.get(cid) or self.cfg.public_email or "unknown") + MBOX_SUFFIX
            box = self.mbox(name, journal)
            box.add(envelope_line(raw, obj.when) + b"\n" + mboxrd_quoted(raw))
            box.flush()  # written and fsynced before the journal says so
            journal.commit({"key": obj.key, "mbox": name, "size": (self.directory / name).stat().st_size})
            self.tally.mails[name] = self.tally.mails.get(name, 0) + 1

    def mbox(self, name: str, journal: Journal) -> mailbox.mbox:
        """The mbox ``name``, first cut back to what the journal says was written (a run that died
        between writing a mail and journalling it left that mail at the end)."""
        if name not in self._mboxes:
            path = self.directory / name
            if path.exists():
                with path.open("r+b") as f:
                    f.truncate(journal.sizes.get(name, 0))
            self._mboxes[name] = mailbox.mbox(path, create=True)
        return self._mboxes[name]

    def files(self) -> list[tuple[Stored, Path]]:
        """Attachments and their texts in scope, each with where it goes under DIR/attachments."""

        out = []
        for prefix in (layout.ATTACHMENTS, layout.EXTRACTED):
            for entry in s3.listing(self.cfg.bucket, prefix):
                obj = Stored.of(entry)
                place = _place(obj, prefix)
                if place is not None and self.wanted(obj):
                    out.append((obj, self.directory / ATTACHMENT_DIR / place))
        return sorted(out, key=lambda f: (f[0].when, f[0].key))

    def write_attachments(self, journal: Journal) -> None:

        todo = self.files()
        progress = Progress(len(todo), "file")
        for obj, path in todo:
            progress.step()
            if obj.key in journal.done:
                self.tally.skipped += 1
                continue
            got = s3.get(self.cfg.bucket, obj.key)
            if got is None:
                continue
            write_file(path, bytes(got["Body"].read()))
            journal.commit({"key": obj.key})
            if obj.key.startswith(layout.EXTRACTED):
                self.tally.texts += 1
            else:
                self.tally.files += 1


def _place(obj: Stored, prefix: str) -> str | None:
    """``<cid>/<id>/<file>`` for an attachment or an extracted text (``<file>.txt``); None for anything
    else under the prefix (the raw copies beside the conversations, error records) or a segment that
    would leave the directory."""

    parts = obj.parts
    if len(parts) != 4 or obj.key.startswith((layout.COMPLAINT_REPORTS, layout.RELEASED_ORIGINALS)):
        return None
    if prefix == layout.EXTRACTED and not obj.key.endswith(".txt"):
        return None
    if not all(_SEGMENT.fullmatch(p) and p not in (".", "..") for p in parts[1:]):
        return None
    return "/".join(parts[1:])


def summary(tally: Tally, directory: Path, as_json: bool, where: str) -> str:
    if as_json:
        return json.dumps(
            {
                "directory": str(directory),
                "mboxes": tally.mails,
                "mails": sum(tally.mails.values()),
                "attachments": tally.files,
                "texts": tally.texts,
                "records": tally.records,
                "alreadyWritten": tally.skipped,
            },
            indent=2,
        )
    lines = [f"{n:6d}  {name}" for name, n in sorted(tally.mails.items())] or ["     0  mails"]
    lines.append(f"{tally.files:6d}  attachments, {tally.texts} texts ({ATTACHMENT_DIR}/)")
    lines.append(f"{tally.records:6d}  conversation records ({RECORDS})")
    if tally.skipped:
        lines.append(f"{tally.skipped:6d}  already written by an earlier run")
    return "\n".join([f"exported from the {where} into {directory}:", *lines])


@command(
    "write the mail (an mbox per public address), the conversation records and the attachment texts to DIR",
    arg("directory", metavar="DIR", help="the export directory (created; rerun into it to resume or add)"),
    arg("--since", help="only what was stored on or after this ISO 8601 date or time (UTC)"),
    *TARGET,
)
def cmd_export(args: argparse.Namespace) -> int:
    try:
        since = parse_since(args.since)
        t = target(args)
        tally = Export(t.cfg, Path(args.directory), since).run()
    except ExportError as exc:
        return fail(f"export: {exc}")
    except KeyboardInterrupt:  # between two journalled writes' worth of work: the rerun resumes
        return fail("export: interrupted; run it again to resume", 130)
    print(summary(tally, Path(args.directory), args.json, t.where))
    return 0
