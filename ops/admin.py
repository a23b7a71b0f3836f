"""Owner and operator commands: ``quarantine``, ``block`` / ``allow`` / ``unblock``, ``suppression``,
``dlq``, ``conversations`` and ``forget``.

Each runs against the local emulator (the default: ``--endpoint``, the local configuration) or
against a deployment on AWS (``--env E`` and/or ``--region R``: its resource names, the addresses it
was deployed with, read from inbound-handler's configuration, and the default AWS credential chain).
Each prints a table, or with ``--json`` one JSON document. What a function must do itself (releasing
a quarantined mail is a forward, the digest is a mail) is asked of inbound-handler with the same
event AWS would send it: invoked on AWS; locally the release is queued for the local wiring, and the
digest runs here, through the very function inbound-handler's schedule entry calls.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cli.command import ENDPOINT, arg, command, endpoint
from common.aws import client, dynamodb, error_code, reset_clients, s3, sqs
from common.delivery.quarantine import send_digest
from common.errors import EmailHandlerError
from common.mail import limits, parse
from common.mail.threads import release_address
from common.runtime.clock import iso_z
from common.runtime.config import with_secrets
from common.runtime.log import set_level
from common.store import layout, quarantine, senderlists, sendstatus
from deploy import config
from deploy.config import Config
from local.commands import local_config
from local.provision import wiring_queue
from ops.erasure import InvalidAddressError, forget, normalise
from ops.index import forget_locally

TARGET = (
    arg("--env", help="a deployment on AWS: its environment name (e.g. prd); default: the local emulator"),
    arg(
        "--region",
        help="AWS region of the deployment (default: AWS_REGION; implies AWS, env prd unless --env)",
    ),
    ENDPOINT,
    arg("--json", action="store_true", help="print JSON instead of a table"),
)
INBOUND = "inbound-handler"
TASK_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Target:
    cfg: Config
    aws: bool
    where: str  # for messages: "local emulator at URL" / "AWS env E in R"


def target(args: argparse.Namespace) -> Target:
    """Point this process's AWS clients at the chosen stack and return its configuration."""

    if not (args.env or args.region):
        return Target(local_config(args), False, f"local emulator at {endpoint(args)}")

    env, region = (
        args.env or "prd",
        args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    )
    os.environ["AWS_REGION"] = region
    reset_clients()
    environ = {**os.environ, "ENVIRONMENT": env, "AWS_REGION": region}
    deployed = deployed_environment(config.load(environ))
    return Target(config.load({**deployed, **environ}), True, f"AWS env {env} in {region}")


def deployed_environment(cfg: Config) -> dict[str, str]:
    """inbound-handler's configuration as deployed (addresses and names; never its secret), or {}."""

    try:
        described = client("lambda").get_function_configuration(FunctionName=cfg.name(INBOUND))
    except Exception as exc:
        print(
            f"[note] cannot read {cfg.name(INBOUND)}'s configuration "
            f"({error_code(exc) or type(exc).__name__}): using this shell's environment for the addresses",
            file=sys.stderr,
        )
        return {}
    variables = dict((described.get("Environment") or {}).get("Variables") or {})
    variables.pop("THREAD_SECRET", None)
    return variables


def operator() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user database entry (some containers)
        return "operator"


def emit(
    args: argparse.Namespace,
    document: Any,
    rows: Iterable[dict[str, Any]],
    columns: list[tuple[str, str, int]],
    empty: str,
) -> int:
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False, default=str))
        return 0
    rows = list(rows)
    print(table(rows, columns) if rows else empty)
    return 0


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str, int]]) -> str:
    """Fixed-width columns (key, title, width); the last column is never cut."""

    def cell(value: Any, width: int, last: bool) -> str:
        text = " ".join(str("" if value is None else value).split())
        if last:
            return text
        return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)

    lines = [
        "  ".join(cell(title, width, i == len(columns) - 1) for i, (_, title, width) in enumerate(columns))
    ]
    for row in rows:
        lines.append(
            "  ".join(
                cell(row.get(key), width, i == len(columns) - 1) for i, (key, _, width) in enumerate(columns)
            )
        )
    return "\n".join(line.rstrip() for line in lines)


def utc(epoch_s: int) -> str:

    return iso_z(datetime.fromtimestamp(epoch_s, UTC)) if epoch_s else ""


def fail(message: str, code: int = 2) -> int:
    print(message, file=sys.stderr)
    return code


# --- asking inbound-handler ------------------------------------------------------------------------


class TaskFailedError(EmailHandlerError, RuntimeError):
    """inbound-handler answered an operator's task with a function error."""


def run_task(t: Target, event: dict[str, Any], done: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
    """Give inbound-handler ``event``: on AWS a synchronous invoke of its ``live`` alias (its answer);
    locally a message for the wiring (what an asynchronous invocation is there), then ``done()``
    until it returns the outcome."""

    if t.aws:
        response = client("lambda").invoke(
            FunctionName=t.cfg.name(INBOUND), Qualifier="live", Payload=json.dumps(event).encode()
        )
        payload = json.loads(response["Payload"].read() or b"null")
        if response.get("FunctionError"):
            raise TaskFailedError(f"{t.cfg.name(INBOUND)} failed: {json.dumps(payload)}")
        return dict(payload or {})

    sqs.send(wiring_queue(t.cfg, "invocations"), json.dumps({"function": INBOUND, "event": event}))
    deadline = time.monotonic() + TASK_TIMEOUT_S
    while time.monotonic() < deadline:
        outcome = done()
        if outcome is not None:
            return outcome
        time.sleep(0.25)
    return {
        "status": "queued",
        "hint": "not handled yet: is the wiring running (email-handler dev / make up)? "
        "See the inbound-handler log",
    }


def report(args: argparse.Namespace, outcome: dict[str, Any], ok: tuple[str, ...], done: str) -> int:
    """Print a task's outcome (``done`` when its status is the first of ``ok``); 0 for any of ``ok``."""
    if args.json:
        print(json.dumps(outcome, indent=2, default=str))
    else:
        status = outcome.get("status")
        print(
            done
            if status == ok[0]
            else f"{status} {outcome.get('reason') or outcome.get('hint') or ''}".rstrip()
        )
    return 0 if outcome.get("status") in ok else 1


def task_event(detail_type: str, source: str, detail: dict[str, Any]) -> dict[str, Any]:

    return {
        "version": "0",
        "id": f"cli-{time.time_ns()}",
        "detail-type": detail_type,
        "source": source,
        "time": iso_z(),
        "resources": [],
        "detail": detail,
    }


# --- quarantine ------------------------------------------------------------------------------------

QUARANTINE_COLUMNS = [
    ("id", "id", 16),
    ("receivedAt", "received", 20),
    ("status", "status", 8),
    ("sender", "sender", 32),
    ("address", "written to", 24),
    ("subject", "subject", 30),
    ("reason", "reason", 0),
]


@command(
    "held mail, newest first",
    *TARGET,
    arg("--all", action="store_true", help="released mail too"),
)
def cmd_quarantine_list(args: argparse.Namespace) -> int:

    t = target(args)
    items = [i for i in quarantine.everything(t.cfg) if args.all or i.get("status") == quarantine.HELD]
    return emit(args, items, items, QUARANTINE_COLUMNS, f"(nothing quarantined; {t.where})")


@command(
    "one held mail: why, from whom, its headers and text",
    arg("id", help="the id from `quarantine list` (or from the digest's release address)"),
    *TARGET,
    arg(
        "--raw",
        action="store_true",
        help="write the raw message (.eml) to stdout instead; stdout must be a file or a pipe (> held.eml)",
    ),
)
def cmd_quarantine_show(args: argparse.Namespace) -> int:

    if args.raw and sys.stdout.isatty():
        # The sender's bytes unfiltered: escape sequences in them would drive the operator's terminal.
        return fail(
            f"--raw writes the sender's bytes unfiltered; refusing to write them to a terminal. "
            f"Redirect it: email-handler quarantine show {args.id} --raw > held.eml"
        )
    t = target(args)
    item = quarantine.get(t.cfg, args.id)
    if item is None:
        return fail(f"no quarantined mail {args.id!r} ({t.where}); see `email-handler quarantine list`")
    obj = s3.get(t.cfg.bucket, str(item["key"]))
    raw = bytes(obj["Body"].read()) if obj else b""
    if args.raw:
        sys.stdout.buffer.write(raw)
        return 0 if raw else fail(f"s3://{t.cfg.bucket}/{item['key']} is missing")
    over = limits.screen(raw) if raw else ""
    mail = (
        parse.parse(raw) if raw and not over else None
    )  # a mail over a parsing cap is not parsed here either
    document = {
        **item,
        "s3": f"s3://{t.cfg.bucket}/{item['key']}",
        "headers": {k: mail.headers.get(k, "") for k in ("from", "to", "cc", "date", "subject")}
        if mail
        else {},
        "text": mail.body_text[:4000] if mail else (f"(not parsed: {over}; --raw prints it)" if over else ""),
        "attachments": [a.filename for a in mail.attachments] if mail else [],
    }
    if t.cfg.thread_secret:
        document["releaseAddress"] = release_address(
            str(item["id"]), t.cfg.thread_secret, t.cfg.thread_domain
        )
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False, default=str))
        return 0
    for key in (
        "id",
        "status",
        "reason",
        "receivedAt",
        "sender",
        "address",  # the public address written to
        "subject",
        "s3",
        "releaseAddress",
        "releasedAt",
        "releasedBy",
    ):
        if document.get(key):
            print(f"{key + ':':<16}{document[key]}")
    for name, value in document["headers"].items():
        if value:
            print(f"{name.title() + ':':<16}{value}")
    if document["attachments"]:
        print(f"{'Attachments:':<16}{', '.join(document['attachments'])}")
    print("\n" + (document["text"] or "(no text)"))
    return 0


@command(
    "forward a held mail to the owner as any other (never acked)",
    arg("id", help="the id from `quarantine list`"),
    *TARGET,
)
def cmd_quarantine_release(args: argparse.Namespace) -> int:

    t = target(args)
    item = quarantine.get(t.cfg, args.id)
    if item is None:
        return fail(f"no quarantined mail {args.id!r} ({t.where}); see `email-handler quarantine list`")
    if item.get("status") == quarantine.RELEASED:
        print(f"{args.id} was released already ({item.get('releasedAt')}, by {item.get('releasedBy')})")
        return 0
    qid = str(item["id"])

    def released() -> dict[str, Any] | None:
        now = quarantine.get(t.cfg, qid) or {}
        return (
            {"status": "released", "id": qid, "releasedAt": now.get("releasedAt")}
            if now.get("status") == quarantine.RELEASED
            else None
        )

    event = task_event(
        "Quarantine Release",
        "service-email-handler",
        {"task": "quarantine-release", "id": qid, "by": operator()},
    )
    return report(
        args,
        run_task(t, event, released),
        ("released", "already-released"),
        f"released {qid}: forwarded to the owner ({item.get('sender')}: {item.get('subject')!r})",
    )


@command("send the daily quarantine digest now (what the schedule does)", *TARGET)
def cmd_quarantine_digest(args: argparse.Namespace) -> int:
    """On AWS inbound-handler's schedule entry answers the task; locally this process runs the function
    the schedule entry runs (common/delivery/quarantine.py send_digest): the same digest queued for the
    forward-sender and the same records marked, and its own result printed."""

    t = target(args)
    if t.aws:
        event = task_event("Scheduled Event", "service-email-handler", {"task": "quarantine-digest"})
        outcome = run_task(t, event, lambda: None)
    else:
        set_level("WARNING", "quarantine")  # stdout carries the outcome
        outcome = dict(send_digest(with_secrets(t.cfg)))
    return report(
        args,
        outcome,
        ("digest-sent", "nothing-quarantined"),
        f"digest of {outcome.get('count')} held mail queued for the owner",
    )


# --- block / allow / unblock -------------------------------------------------------------------------

LIST_COLUMNS = [
    ("entry", "entry", 36),
    ("list", "list", 6),
    ("createdAt", "since", 20),
    ("source", "set by", 0),
]


def _set(args: argparse.Namespace, list_name: str) -> int:

    t = target(args)
    if args.entry and args.to:  # only for mail to that public address
        args.entry = f"{args.entry}{senderlists.SCOPE}{args.to}"
    if not args.entry:
        entries = [e for e in senderlists.entries(t.cfg) if e.list == list_name]
        rows = [
            {"entry": e.entry, "list": e.list, "createdAt": e.created_at, "source": e.source} for e in entries
        ]
        return emit(args, rows, rows, LIST_COLUMNS, f"(no {list_name} entries; {t.where})")
    try:
        listing = senderlists.put(t.cfg, args.entry, list_name, f"cli:{operator()}")
    except ValueError as exc:
        return fail(f"refused: {exc}")
    row = {
        "entry": listing.entry,
        "list": listing.list,
        "createdAt": listing.created_at,
        "source": listing.source,
    }
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        what = (
            "quarantined without forward or ack" if list_name == "block" else "exempt from the keyword lists"
        )
        print(f"{list_name}ed {listing.entry}: mail from it is now {what}")
    return 0


ENTRY = arg(
    "entry", nargs="?", help="ADDR or @DOMAIN (a domain covers its subdomains); none: list the entries"
)


TO = arg("--to", default="", help="only for mail to this public address (default: to any)")


@command("quarantine later mail from ADDR or @DOMAIN (no forward, no ack)", ENTRY, TO, *TARGET)
def cmd_block(args: argparse.Namespace) -> int:
    return _set(args, "block")


@command("exempt ADDR or @DOMAIN from the keyword lists (SES's verdicts still apply)", ENTRY, TO, *TARGET)
def cmd_allow(args: argparse.Namespace) -> int:
    return _set(args, "allow")


@command(
    "take ADDR or @DOMAIN off the block or allow list",
    arg("entry", help="ADDR or @DOMAIN"),
    TO,
    *TARGET,
)
def cmd_unblock(args: argparse.Namespace) -> int:

    t = target(args)
    if args.to:
        args.entry = f"{args.entry}{senderlists.SCOPE}{args.to}"
    try:
        removed = senderlists.remove(t.cfg, args.entry)
    except ValueError as exc:
        return fail(str(exc))
    if args.json:
        print(
            json.dumps(
                {"entry": senderlists.normalise(args.entry), "removed": removed.list if removed else None}
            )
        )
    elif removed:
        print(f"unblocked {removed.entry} (it was on the {removed.list} list)")
    else:
        print(f"{senderlists.normalise(args.entry)} was on no list ({t.where})")
    return 0 if removed else 1


# --- suppression -----------------------------------------------------------------------------------


@command(
    "addresses sends are skipped for (bounces, complaints) or held back (the owner's mailbox)",
    *TARGET,
)
def cmd_suppression_list(args: argparse.Namespace) -> int:

    t = target(args)
    items = sendstatus.stopped_entries(t.cfg)
    rows = [
        {
            "email": i["email"],
            "state": "suppressed" if sendstatus.is_suppressed(t.cfg, i) else "held",
            "reason": i.get("reason") if sendstatus.is_suppressed(t.cfg, i) else i.get("heldReason"),
            "since": i.get("suppressedAt") or i.get("heldSince"),
            "until": utc(int(i["expiresAt"]))
            if i.get("expiresAt")
            else "for good"
            if sendstatus.is_suppressed(t.cfg, i)
            else "a delivery",
        }
        for i in items
    ]
    columns = [
        ("email", "address", 32),
        ("state", "state", 10),
        ("reason", "reason", 36),
        ("since", "since", 24),
        ("until", "until", 0),
    ]
    return emit(args, items, rows, columns, f"(nobody is suppressed or held; {t.where})")


@command(
    "mail ADDR again: lifts a suppression or a hold (after the mailbox was fixed)",
    arg("address"),
    *TARGET,
)
def cmd_suppression_remove(args: argparse.Namespace) -> int:

    t = target(args)
    old = sendstatus.clear(t.cfg, args.address)
    state = (
        "suppressed"
        if old and sendstatus.is_suppressed(t.cfg, old)
        else "held"
        if old and old.get("held")
        else ""
    )
    if args.json:
        print(json.dumps({"address": args.address.lower(), "was": state or None, "entry": old}, default=str))
    elif state:
        was = old.get("reason") or old.get("heldReason") if old else ""
        print(f"{args.address.lower()} is no longer {state} (was: {was})")
    else:
        print(f"{args.address.lower()} was neither suppressed nor held ({t.where})")
    return 0 if state else 1


# --- dead-letter queues ----------------------------------------------------------------------------


def dead_letter_queues(cfg: Config) -> list[str]:
    return [q for q in deployment_queues(cfg) if q.endswith("-dlq")]


def deployment_queues(cfg: Config) -> list[str]:
    """Every queue of the deployment (its name prefix), dead-letter queues included."""

    urls = client("sqs").list_queues(QueueNamePrefix=cfg.prefix).get("QueueUrls", [])
    return sorted(u.rsplit("/", 1)[1] for u in urls)


def _queue_arg(cfg: Config, name: str | None) -> list[str]:
    """The DLQs a command acts on: all of them, or the one named (``forward``, ``forward-dlq`` or its
    full name); an unknown name ends the command with the list of DLQs there are."""
    queues = dead_letter_queues(cfg)
    if not name:
        return queues
    wanted = {name, f"{name}-dlq", cfg.name(name), cfg.name(f"{name}-dlq")}
    found = [q for q in queues if q in wanted]
    if not found:
        raise SystemExit(fail(f"no dead-letter queue {name!r}; there are: {', '.join(queues) or 'none'}"))
    return found


def _summary(body: str) -> dict[str, Any]:
    """What a failed message was: a send (kind, recipient, subject) or a wiring event."""
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        return {"summary": body[:80]}
    if isinstance(doc, dict) and "idempotency_key" in doc:
        to = doc.get("to") or []
        return {
            "kind": doc.get("kind", ""),
            "recipient": to[0] if to else "",
            "subject": doc.get("subject", ""),
            "idempotencyKey": doc.get("idempotency_key"),
            "claimCheck": bool(doc.get("claim_check")),
        }
    if isinstance(doc, dict) and "function" in doc:
        return {"kind": f"invocation of {doc['function']}"}
    return {"summary": body[:80]}


@command(
    "dead-letter queues and their depth; with QUEUE, the messages in it",
    arg("queue", nargs="?", help="e.g. forward (default: every DLQ, depth only)"),
    *TARGET,
)
def cmd_dlq_list(args: argparse.Namespace) -> int:

    t = target(args)
    queues = _queue_arg(t.cfg, args.queue)
    if not args.queue:
        rows = [
            {"queue": q, "messages": int(sqs.attributes(q).get("ApproximateNumberOfMessages", 0))}
            for q in queues
        ]
        return emit(
            args, rows, rows, [("queue", "queue", 56), ("messages", "messages", 0)], f"(no DLQs; {t.where})"
        )
    [queue] = queues
    rows = []
    for m in peek(queue):
        attributes = m.get("Attributes", {})
        rows.append(
            {
                "messageId": m["MessageId"],
                "receives": attributes.get("ApproximateReceiveCount"),
                "sent": utc(int(attributes.get("SentTimestamp", "0")) // 1000),
                **_summary(m["Body"]),
            }
        )
    rows.sort(key=lambda r: str(r["sent"]))
    columns = [
        ("sent", "sent", 20),
        ("kind", "kind", 10),
        ("recipient", "recipient", 28),
        ("subject", "subject", 30),
        ("messageId", "message id", 0),
    ]
    return emit(args, rows, rows, columns, f"({queue} is empty)")


PEEK_HIDE_S = 30


def peek(queue: str, limit: int = 1000) -> list[dict[str, Any]]:
    """Every message in ``queue`` (up to ``limit``) without taking any. A receive with visibility 0 answers
    the same first messages again (on AWS a sample of servers), so a deep DLQ listed as its first ~10: each
    receive here hides what it returned for ``PEEK_HIDE_S`` so the next returns others, and everything is
    shown again at the end, also when the listing fails half-way."""

    seen: dict[str, dict[str, Any]] = {}
    hidden: list[str] = []
    idle = 0
    try:
        while len(seen) < limit and idle < 3:
            batch = sqs.receive(queue, max_messages=10, wait_s=1, visibility_s=PEEK_HIDE_S)
            hidden += [m["ReceiptHandle"] for m in batch]
            fresh = [m for m in batch if m["MessageId"] not in seen]
            seen.update((m["MessageId"], m) for m in fresh)
            if fresh:
                idle = 0
            elif int(sqs.attributes(queue).get("ApproximateNumberOfMessages", 0)) == 0:
                break
            else:
                idle += 1
    finally:
        sqs.show_again(queue, hidden)
    return list(seen.values())


@command(
    "move failed messages back to the queue they came from (senders skip what was sent)",
    arg("queue", nargs="?", help="e.g. forward (default: every DLQ)"),
    *TARGET,
)
def cmd_dlq_redrive(args: argparse.Namespace) -> int:
    t = target(args)
    done: dict[str, Redriven] = {}
    for queue in _queue_arg(t.cfg, args.queue):
        try:
            done[queue] = redrive(queue, say=lambda line: print(line, file=sys.stderr, flush=True))
        except NoSourceQueueError as exc:
            # Lambda's on-failure destination (async-dlq) holds invocation records, not queue messages:
            # there is no queue to move them to, `replay` re-invokes the function instead.
            if args.queue:
                return fail(str(exc))
            print(f"[dlq] skipped: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps({q: [r.moved, r.source] for q, r in done.items()}, indent=2))
    else:
        for queue, r in done.items():
            print(f"{queue}: {r.moved} message(s) moved to {r.source}" if r.moved else f"{queue}: empty")
    for queue, r in done.items():
        if r.left:
            print(
                f"{queue}: SQS still counts {r.left} message(s) there (in flight elsewhere, or its count "
                "lags): run the redrive again in a minute",
                file=sys.stderr,
            )
    return 0


# Long polling: SQS asks every server, so an empty answer is not one of short polling's "false empty
# responses" (a sampled subset; "you should repeat the request", SQS ReceiveMessage).
REDRIVE_POLL_S = 5
# Messages another consumer holds (an interrupted redrive took them for 60 s) come back by then.
REDRIVE_PATIENCE_S = 70.0


class NoSourceQueueError(EmailHandlerError, RuntimeError):
    """The queue is a dead-letter target of no queue's redrive policy, or of several, so a redrive has
    no one place to go."""


@dataclass
class Redriven:
    moved: int
    source: str
    left: int = 0  # what SQS still counted when the redrive gave up waiting


def redrive(
    dlq: str,
    poll_s: int = REDRIVE_POLL_S,
    patience_s: float = REDRIVE_PATIENCE_S,
    say: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.monotonic,
) -> Redriven:
    """Move every message of ``dlq`` to its source queue (the queue whose redrive policy names it):
    send a copy (body and message attributes), then delete the original. A crash in between leaves
    a duplicate, which the senders' idempotency keys make harmless. (SQS's StartMessageMoveTask does
    the same on AWS but is missing from moto; one path for both is the one that is tested.)

    It ends on an empty long poll only when SQS also counts no message visible or in flight; messages
    in flight are waited for up to ``patience_s``."""

    sources = client("sqs").list_dead_letter_source_queues(QueueUrl=sqs.queue_url(dlq)).get("queueUrls", [])
    if not sources:
        raise NoSourceQueueError(
            f"{dlq} is no queue's dead-letter queue (the functions' on-failure destination is "
            "one): `email-handler replay` re-invokes what it holds"
        )
    if len(sources) != 1:
        raise NoSourceQueueError(
            f"{dlq} is the dead-letter queue of {len(sources)} queues; expected exactly one"
        )
    source = sources[0].rsplit("/", 1)[1]
    moved, since = 0, None
    while True:
        batch = sqs.receive(dlq, max_messages=10, wait_s=poll_s, visibility_s=60)
        for m in batch:
            attributes = {
                k: v["StringValue"]
                for k, v in (m.get("MessageAttributes") or {}).items()
                if "StringValue" in v
            }
            sqs.send(source, m["Body"], attributes)
            sqs.delete(dlq, [m["ReceiptHandle"]])
            moved += 1
        if batch:
            since = None
            continue
        counts = sqs.attributes(dlq)
        visible = int(counts.get("ApproximateNumberOfMessages", 0))
        in_flight = int(counts.get("ApproximateNumberOfMessagesNotVisible", 0))
        if visible + in_flight == 0:
            return Redriven(moved, source)
        since = clock() if since is None else since
        if clock() - since >= patience_s:
            return Redriven(moved, source, visible + in_flight)
        say(
            f"{dlq}: SQS counts {visible} visible and {in_flight} in-flight message(s); waiting for them "
            f"(up to {patience_s:.0f} s)"
        )


# --- conversations ---------------------------------------------------------------------------------


@command("every conversation, most recent first", *TARGET)
def cmd_conversations(args: argparse.Namespace) -> int:

    t = target(args)
    items = sorted(
        dynamodb.scan(t.cfg.conversations_table), key=lambda i: str(i.get("timestamp", "")), reverse=True
    )
    columns = [
        ("timestamp", "last", 20),
        ("conversationId", "conversation", 36),
        ("senderEmail", "contact", 32),
        ("publicAddress", "written to", 24),
        ("companyName", "company", 16),
        ("spam", "spam?", 6),
        ("subject", "subject", 0),
    ]
    # the owner pressed "spam" on a forward from this contact (SES complaint): a candidate for `block`
    rows = [{**i, "spam": f"{i.get('spamReports', 1)}x" if i.get("spamCandidate") else ""} for i in items]
    return emit(args, items, rows, columns, f"(no conversations yet; {t.where})")


@command(
    "one conversation: its record and its messages (the mail archived under it, oldest first)",
    arg("id", help="the conversation id (as `conversations` and `search` print it)"),
    *TARGET,
)
def cmd_conversations_show(args: argparse.Namespace) -> int:

    t = target(args)
    record = dynamodb.get(t.cfg.conversations_table, {"conversationId": args.id})
    listed = sorted(
        s3.listing(t.cfg.bucket, f"{layout.CONVERSATIONS}{args.id}/"),
        key=lambda o: (o["LastModified"], o["Key"]),
    )
    if record is None and not listed:
        return fail(f"no conversation {args.id!r} ({t.where})", 1)
    messages = []
    for o in listed:
        raw = s3.head_bytes(t.cfg.bucket, str(o["Key"]), SHOW_MAIL_CAP)
        if raw is None:
            continue
        mail = parse.parse(raw)
        messages.append(
            {
                "key": o["Key"],
                "received": utc(int(o["LastModified"].timestamp())),
                "from": mail.from_address,
                "subject": mail.subject,
                "attachments": [a.filename for a in mail.attachments if a.role == "file"],
                "text": mail.body_text[:SHOW_TEXT_CHARS],
            }
        )
    if args.json:
        print(json.dumps({"record": record, "messages": messages}, indent=2, ensure_ascii=False, default=str))
        return 0
    for key, value in sorted((record or {}).items()):
        print(f"{key + ':':<20} {' '.join(str(value).split())}")
    for m in messages:
        print(f"\n--- {m['received']}  {m['from']}  {m['subject']}")
        if m["attachments"]:
            print(f"attachments: {', '.join(m['attachments'])}")
        print(m["text"].rstrip())
    return 0


SHOW_MAIL_CAP = 40 * 1024 * 1024  # SES receives at most 40 MB
SHOW_TEXT_CHARS = 20_000  # of each message's text on the terminal; the archive keeps it whole


@command(
    "remove everything of a contact: conversations, mail, attachments, text, records, queued messages",
    arg("address", help="the contact's exact address (one address; matched whole, never as a part)"),
    *TARGET,
)
def cmd_forget(args: argparse.Namespace) -> int:

    try:
        normalise(args.address)
    except InvalidAddressError as exc:
        return fail(f"forget: {exc}")
    t = target(args)
    result = forget(t.cfg, args.address, deployment_queues(t.cfg))
    unreachable = result.pop("unreachable")

    # this machine's search index (ops/index.py) forgets them now, not at its next sync
    forget_locally(t.cfg, normalise(args.address), result.get("conversations", []))
    if args.json:
        print(json.dumps({**result, "unreachable": unreachable}, indent=2, ensure_ascii=False))
        return 0
    rows = [{"kind": kind, "what": what} for kind, whats in result.items() for what in whats]
    print(
        table(rows, [("kind", "kind", 14), ("what", "removed", 0)])
        if rows
        else f"(nothing stored for {args.address}; {t.where})"
    )
    for line in unreachable:
        print(f"[not reached] {line}", file=sys.stderr)
    return 0
