"""The local commands of the `email-handler` console script: the local modes and their tools (the
emulator, the event wiring, the SMTP ingress, inject, invoke, outbox, provision), and the plumbing
every command shares.

Each is a :class:`cli.Command` (cli/command.py); the console script lists every command in one
table (ops/main.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cli.command import EMULATOR_PORT, ENDPOINT, arg, command, endpoint, run_until_signalled
from common.runtime.log import set_level
from deploy import config
from deploy.config import Config
from deploy.functions import BY_NAME, FUNCTIONS
from local import ingress, outbox, provision, pyversion
from local.concurrency import AccountConcurrency
from local.devstack import DevPorts, DevStack, Interrupted, PortsUnavailableError, SignalGuard
from local.emulator import EmbeddedMoto, RemoteHostError
from local.env import admin_credentials, function_credentials, use_endpoint
from local.env import local_env as local_defaults
from local.events import envelope_sender
from local.fresh import CONFIRM_SUBSCRIPTIONS_PATH, DNS_PATH, GRANT_PRODUCTION_PATH, VERIFY_ADDRESS_PATH
from local.guard import admin_request
from local.ingress import SmtpIngress
from local.ports import FIRST_FUNCTION_PORT, PORTS, SMTP_PORT
from local.rie import InvokeError, invoke
from local.wiring import Endpoint, Wiring


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value else None


def local_env() -> dict[str, str]:
    """The local defaults (compose/local.env), overridden by this shell's environment, with the local
    admin's credentials (.build/local/credentials, profile local-admin) for the emulator."""
    return {**local_defaults(), **os.environ, **admin_credentials()}


def local_config(args: argparse.Namespace) -> Config:
    """Point this process at the local emulator and return the local configuration."""
    env = local_env()
    use_endpoint(endpoint(args), env)
    return config.load(env)


@command(
    "invoke one function through its RIE endpoint",
    arg("function", choices=[f.name for f in FUNCTIONS]),
    arg("--event", required=True, help="event JSON file ('-' for stdin)"),
    arg("--host", default="127.0.0.1"),
    arg("--url", help="RIE base URL (default: the function's local port, 9001-9006)"),
    arg("--timeout", type=float, default=120.0),
)
def cmd_invoke(args: argparse.Namespace) -> int:

    fn = BY_NAME[args.function]
    url = args.url or f"http://{args.host}:{PORTS[fn.name]}"
    event = json.loads(Path(args.event).read_text()) if args.event != "-" else json.load(sys.stdin)
    try:
        result = invoke(url, event, timeout=args.timeout)
    except InvokeError as exc:
        print(json.dumps(exc.payload, indent=2), file=sys.stderr)
        return 1
    except OSError as exc:
        print(
            f"cannot reach {args.function} at {url}: {exc}. "
            "Is the local stack running (make up / email-handler dev)?",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(result, indent=2))
    return 0


@command(
    "the whole system locally without Docker (moto + host RIE + wiring + SMTP)",
    arg("--emulator-port", type=int, default=EMULATOR_PORT),
    arg("--smtp-port", type=int, default=SMTP_PORT),
    arg("--function-port", type=int, default=FIRST_FUNCTION_PORT, help="first of six consecutive RIE ports"),
    arg("--log-dir", default=".build/dev/logs"),
    arg(
        "--visibility-timeout",
        type=int,
        help="seconds before a failed message is retried (default: each queue's own, as on AWS)",
    ),
    arg(
        "--no-iam",
        action="store_true",
        help="do not enforce IAM (by default each function may do only what its production role allows)",
    ),
    arg(
        "--aws-account",
        choices=["default", "fresh"],
        default="default",
        help="fresh: the emulator models a new AWS account (pending SES identities, sandbox, quotas)",
    ),
)
def cmd_dev(args: argparse.Namespace) -> int:

    print(f"[dev] functions run on {pyversion.describe()}", flush=True)
    if problems := pyversion.differences():
        print(
            "[dev] cannot start, this Python reads mail differently from the function images:\n"
            + "".join(f"  {p}\n" for p in problems)
            + f"  {pyversion.INSTALL}",
            file=sys.stderr,
            flush=True,
        )
        return 2
    guard = SignalGuard()
    guard.install()  # from here on, Ctrl-C or SIGTERM stops whatever has started, wherever start-up is
    stack: DevStack | None = None
    code = 0
    try:
        set_level(
            "WARNING", "wiring", "ingress"
        )  # the console shows one activity line per invocation instead
        ports = DevPorts(
            emulator=args.emulator_port,
            smtp=args.smtp_port,
            functions={f.name: args.function_port + i for i, f in enumerate(FUNCTIONS)},
        )
        stack = DevStack(
            local_env(),
            ports,
            Path(args.log_dir),
            args.visibility_timeout,
            report=lambda line: print(line, flush=True),
            activity=lambda line: print(f"[wiring] {line}", flush=True),
            guard=guard,
            iam=not args.no_iam,
            account=args.aws_account,
        )
        stack.start()
        guard.running()
        print(stack.summary(), flush=True)
        guard.wait()
        print("\n[dev] stopping ...", flush=True)
    except PortsUnavailableError as exc:
        guard.stopping()
        print(
            "[dev] cannot start, nothing was started:\n"
            + "\n".join(f"  {line}" for line in str(exc).splitlines()),
            file=sys.stderr,
            flush=True,
        )
        return 2
    except Interrupted as exc:
        print(
            f"\n[dev] {signal.Signals(exc.signum).name} during start-up: stopping what has started ...",
            flush=True,
        )
        code = 128 + exc.signum
    except Exception as exc:
        print(f"[dev] failed to start: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    guard.stopping()
    if stack is not None:
        stack.stop()
    print("[dev] stopped", flush=True)
    return code


@command(
    "deliver a raw message as SES would (S3 staging + receipt event)",
    arg("file", metavar="FILE.eml"),
    arg(
        "--to", action="append", help="recipient (repeatable; default: the file's To/Cc that a rule matches)"
    ),
    arg(
        "--from",
        dest="envelope_from",
        help="envelope sender (default: the file's Return-Path, else the From address; "
        "required when neither has one)",
    ),
    arg(
        "--verdict",
        action="append",
        default=[],
        metavar="NAME=STATUS",
        help="SES verdict, e.g. spam=FAIL (spam, virus, spf, dkim, dmarc; default PASS)",
    ),
    arg("--dmarc-policy", default="", choices=["", "none", "quarantine", "reject"]),
    arg("--no-wait", action="store_true", help="do not wait for the handler"),
    arg("--timeout", type=float, default=30.0),
    ENDPOINT,
)
def cmd_inject(args: argparse.Namespace) -> int:

    set_level("WARNING", "ingress")  # stdout carries the JSON result
    cfg = local_config(args)
    raw = Path(args.file).read_bytes()
    verdicts = dict(v.split("=", 1) for v in args.verdict)
    recipients = (
        args.to or [a for a in ingress.recipients_of(raw) if ingress.route(cfg, a)] or [cfg.public_email]
    )
    envelope_from = args.envelope_from
    if envelope_from is None:  # SES's mail.source is the SMTP MAIL FROM; a file only has its headers
        envelope_from = envelope_sender(raw)
        if envelope_from is None:
            print(
                f"{args.file} has no Return-Path and no address in From to use as the envelope sender: "
                "give one with --from ADDR (--from '' delivers it as a bounce, with a null sender)",
                file=sys.stderr,
            )
            return 2
    try:
        done = ingress.deliver(cfg, raw, envelope_from, recipients, verdicts, args.dmarc_policy)
    except Exception as exc:
        print(
            f"could not deliver to {endpoint(args)}: {type(exc).__name__}: {exc}. "
            "Is the local stack running (make up / email-handler dev)?",
            file=sys.stderr,
        )
        return 2
    if not done:
        print(
            f"no receipt rule matches {recipients}: "
            f"use {', '.join(cfg.public_emails or [cfg.public_email])} or an address at {cfg.thread_domain}",
            file=sys.stderr,
        )
        return 2
    delivery = done[0]
    result: dict[str, Any] = {
        "messageId": delivery.message_id,
        "function": delivery.function,
        "recipients": list(delivery.recipients),
        "staged": f"s3://{cfg.bucket}/{delivery.staging_key}",
    }
    if not args.no_wait:
        result.update(ingress.await_handled(cfg, delivery, args.timeout))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 1 if result.get("outcome") in ("not handled yet", "handler failed") else 0


@command(
    "what the system sent through SES (moto or LocalStack)",
    arg("--json", action="store_true", help="one JSON array, oldest first"),
    ENDPOINT,
)
def cmd_outbox(args: argparse.Namespace) -> int:

    try:
        items = outbox.sent(endpoint(args))
    except OSError as exc:
        print(
            f"cannot read the outbox at {endpoint(args)}: {exc}. Is the local stack running?",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(items, indent=2, ensure_ascii=False) if args.json else outbox.table(items))
    return 0


@command(
    "create the resources on the emulator (compose init service)",
    arg("--local", action="store_true", help="also the local wiring's queues and notifications"),
    arg("--dry-run", action="store_true", help="print the plan, change nothing"),
    arg("--wait", type=float, default=60.0, help="seconds to wait for the emulator"),
    ENDPOINT,
)
def cmd_provision(args: argparse.Namespace) -> int:

    cfg = local_config(args)
    deadline = time.monotonic() + args.wait
    while True:  # the emulator may still be starting (compose init service)
        try:
            changes = provision.provision(
                cfg,
                apply=not args.dry_run,
                wiring=args.local,
                report=lambda c: print(f"[provision] {c}", flush=True),
            )
            break
        except Exception as exc:
            if time.monotonic() > deadline:
                print(f"[provision] failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
            time.sleep(1)
    if (
        args.local and not args.dry_run
    ):  # open the functions' role sessions (compose: function containers use them)
        for f in FUNCTIONS:
            function_credentials(cfg, f.name, ensure_role=False)
    changed = sum(c.action != "unchanged" for c in changes)
    print(
        f"[provision] {'would change' if args.dry_run else 'changed'} {changed} of {len(changes)} resources",
        flush=True,
    )
    return 0


@command(
    "run the local event wiring (compose service)",
    arg(
        "--rie-url-template",
        default="http://127.0.0.1:{port}",
        help="each function's RIE URL; {function} and {port} are filled in",
    ),
    arg(
        "--visibility-timeout",
        type=int,
        default=_env_int("WIRING_VISIBILITY_TIMEOUT"),
        help="seconds before a failed message is retried (default: $WIRING_VISIBILITY_TIMEOUT, "
        "else each queue's own, as on AWS)",
    ),
    arg("--health-file", help="touched while every source is polling"),
    ENDPOINT,
)
def cmd_wiring(args: argparse.Namespace) -> int:

    cfg = local_config(args)
    endpoints = {
        f.name: Endpoint(f.name, args.rie_url_template.format(function=f.name, port=PORTS[f.name]))
        for f in FUNCTIONS
    }
    # As Lambda's event-source mapping: each SQS-fed function's queue is polled with its role session.
    roles = {
        f.name: function_credentials(cfg, f.name, ensure_role=False) for f in FUNCTIONS if f.batch_concurrency
    }
    wiring = Wiring(
        cfg,
        endpoints,
        args.visibility_timeout,
        report=lambda line: print(f"[wiring] {line}", flush=True),
        roles=roles,
        account=AccountConcurrency.of_account(),  # the emulator's GetAccountSettings (10 on a fresh account)
    )
    wiring.start()
    print(f"[wiring] polling {', '.join(s.queue for s in wiring.sources)}", flush=True)
    health = Path(args.health_file) if args.health_file else None

    def touch_when_healthy() -> None:
        if health is not None and wiring.healthy():
            health.touch()  # the compose health check reads its age

    run_until_signalled(touch_when_healthy, interval=2)
    wiring.stop()
    return 0


@command(
    "run the SMTP ingress (compose service)",
    arg("--host", default="127.0.0.1"),
    arg("--port", type=int, default=SMTP_PORT),
    ENDPOINT,
)
def cmd_smtp(args: argparse.Namespace) -> int:

    cfg = local_config(args)
    ingress = SmtpIngress(cfg, args.host, args.port).start()
    print(
        f"[smtp] listening on {args.host}:{args.port} for "
        f"{', '.join(cfg.public_emails or [cfg.public_email])} and *@{cfg.thread_domain}",
        flush=True,
    )
    run_until_signalled()
    ingress.stop()
    return 0


@command(
    "the project's moto server in the foreground (the AWS emulator of both local modes)",
    arg("--host", default="127.0.0.1", help="a loopback address unless --allow-remote"),
    arg("--port", type=int, default=EMULATOR_PORT),
    arg(
        "--allow-remote",
        action="store_true",
        help="listen on a --host other machines can reach (it holds every key and mail: mean it)",
    ),
    arg(
        "--iam",
        choices=["on", "off"],
        default="on",
        help="enforce IAM (default on; the admin is local-admin)",
    ),
    arg(
        "--account",
        choices=["default", "fresh"],
        default="default",
        help="fresh: model a new AWS account (SES identities pending until `dns publish`, sandbox, quotas)",
    ),
)
def cmd_emulator(args: argparse.Namespace) -> int:

    try:
        server = EmbeddedMoto(
            args.host, args.port, iam=args.iam == "on", account=args.account, allow_remote=args.allow_remote
        ).start()
    except RemoteHostError as exc:
        print(f"[emulator] {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"[emulator] cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(
        f"[emulator] {server.url} (IAM {'enforced' if server.iam else 'not enforced'}, "
        f"account {args.account}); Ctrl-C stops it",
        flush=True,
    )
    run_until_signalled()
    server.stop()
    return 0


def dns_publish_to_model(args: argparse.Namespace) -> int:
    """`email-handler dns publish FILE.zone`: the zone file (as the deploy writes it) into the emulator's
    model of DNS (the command itself: ops/deployment.py, beside its --route53 form)."""

    url = endpoint(args)
    try:
        body = Path(args.zone).read_bytes()
    except OSError as exc:
        print(f"[dns] cannot read {args.zone}: {exc}", file=sys.stderr)
        return 2
    answer, detail = _post(url + DNS_PATH, body, "text/dns")
    if answer is None:
        print(
            f"[dns] cannot publish {args.zone} to {url}: {detail} (dns publish works only on "
            "`email-handler emulator --account fresh`; on AWS publish the records at your DNS provider, "
            "or `email-handler dns publish --route53` into the domain's Route 53 hosted zone)",
            file=sys.stderr,
        )
        return 2
    print(
        f"[dns] published {answer['records']} records of {args.zone} to {url}; "
        "SES checks them on its next poll"
    )
    return 0


def _post(url: str, body: bytes, content_type: str) -> tuple[dict[str, Any] | None, str]:
    """POST to one of the fresh-account model's control endpoints: its JSON answer, or None and why."""

    request = admin_request(url, data=body, method="POST")  # the control endpoints need the admin's token
    request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return dict(json.loads(r.read())), ""
    except OSError as exc:
        return None, exc.read().decode(errors="replace") if isinstance(exc, urllib.error.HTTPError) else str(
            exc
        )


def _model_call(
    args: argparse.Namespace, path: str, body: dict[str, str], what: str
) -> dict[str, Any] | None:
    """POST to a control endpoint of the model; None (with the reason printed) when the emulator refuses
    or cannot be reached."""
    url = endpoint(args)
    answer, detail = _post(url + path, json.dumps(body).encode(), "application/json")
    if answer is None:
        print(
            f"[model] cannot {what} on {url}: {detail} (this works only on the fresh-account model, "
            "`email-handler emulator --account fresh` or `email-handler dev --aws-account fresh`)",
            file=sys.stderr,
        )
    return answer


@command(
    "stand in for clicking the verification link SES mailed to ADDR (fresh-account model)",
    arg("address", metavar="ADDR"),
    ENDPOINT,
)
def cmd_model_verify_address(args: argparse.Namespace) -> int:

    if _model_call(args, VERIFY_ADDRESS_PATH, {"address": args.address}, f"verify {args.address}") is None:
        return 2
    print(f"[model] {args.address} verified (as if its owner clicked SES's link)")
    return 0


@command("stand in for AWS granting SES production access (fresh-account model)", ENDPOINT)
def cmd_model_grant_production(args: argparse.Namespace) -> int:

    if _model_call(args, GRANT_PRODUCTION_PATH, {}, "grant production access") is None:
        return 2
    print("[model] production access granted: SES sends to any address")
    return 0


@command(
    "stand in for clicking the link of every pending e-mail subscription (fresh-account model)", ENDPOINT
)
def cmd_model_confirm_subscriptions(args: argparse.Namespace) -> int:

    answer = _model_call(args, CONFIRM_SUBSCRIPTIONS_PATH, {}, "confirm the subscriptions")
    if answer is None:
        return 2
    print(f"[model] {answer['confirmed']} subscription(s) confirmed")
    return 0
