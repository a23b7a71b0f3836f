"""The `email-handler` console script: local modes, local tools and the deploy.

Each command is a function with its arguments declared right above it (:func:`command`); the parser
is built from that registry. Commands that run until stopped share :func:`run_until_signalled`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.runtime.functions import BY_NAME, EMULATOR_PORT, FUNCTIONS, SMTP_PORT

DEFAULT_ENDPOINT = f"http://127.0.0.1:{EMULATOR_PORT}"
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True, slots=True)
class Arg:
    flags: tuple[str, ...]
    options: dict[str, Any]


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


ENDPOINT = arg("--endpoint", help=f"AWS emulator URL (default: $AWS_ENDPOINT_URL or {DEFAULT_ENDPOINT})")
COMMANDS: dict[str, tuple[str, tuple[Arg, ...], Run]] = {}
GROUPS: dict[str, str] = {}  # "quarantine" -> help; its commands are registered as "quarantine list" ...


def group(name: str, help: str) -> None:
    """Declare a command with subcommands (``email-handler quarantine list``)."""
    GROUPS[name] = help


def command(name: str, help: str, *args: Arg) -> Callable[[Run], Run]:
    """Register ``name`` (``"dev"``, or ``"quarantine list"`` inside a :func:`group`) with its help and
    arguments; the decorated function runs it."""

    def register(run: Run) -> Run:
        COMMANDS[name] = (help, args, run)
        return run

    return register


def run_until_signalled(poll: Callable[[], None] | None = None, interval: float = 0.2) -> int:
    """Block until SIGINT (Ctrl-C) or SIGTERM, calling ``poll`` every ``interval``; returns the signal."""
    received: list[int] = []
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(interval):
            if poll is not None:
                poll()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return received[0]


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value else None


def _local_env() -> dict[str, str]:
    """The local defaults (compose/local.env), overridden by this shell's environment, with the local
    admin's credentials (.build/local/credentials, profile local-admin) for the emulator."""
    from common.local.env import admin_credentials, local_env

    return {**local_env(), **os.environ, **admin_credentials()}


def _endpoint(args: argparse.Namespace) -> str:
    return str(args.endpoint or os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT)


def _local_config(args: argparse.Namespace) -> Any:
    """Point this process at the local emulator and return the local configuration."""
    from common.local.env import use_endpoint
    from common.runtime import config

    env = _local_env()
    use_endpoint(_endpoint(args), env)
    return config.load(env)


@command(
    "invoke",
    "invoke one function through its RIE endpoint",
    arg("function", choices=[f.name for f in FUNCTIONS]),
    arg("--event", required=True, help="event JSON file ('-' for stdin)"),
    arg("--host", default="127.0.0.1"),
    arg("--url", help="RIE base URL (default: the function's local port, 9001-9006)"),
    arg("--timeout", type=float, default=120.0),
)
def _invoke(args: argparse.Namespace) -> int:
    from common.local.rie import InvokeError, invoke

    fn = BY_NAME[args.function]
    url = args.url or f"http://{args.host}:{fn.port}"
    event = json.loads(Path(args.event).read_text()) if args.event != "-" else json.load(sys.stdin)
    try:
        result = invoke(url, event, timeout=args.timeout)
    except InvokeError as exc:
        print(json.dumps(exc.payload, indent=2), file=sys.stderr)
        return 1
    except OSError as exc:
        print(
            f"cannot reach {args.function} at {url}: {exc}. Is the local stack running (make up / email-handler dev)?",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(result, indent=2))
    return 0


@command(
    "dev",
    "the whole system locally without Docker (moto + host RIE + wiring + SMTP)",
    arg("--emulator-port", type=int, default=EMULATOR_PORT),
    arg("--smtp-port", type=int, default=SMTP_PORT),
    arg("--function-port", type=int, default=FUNCTIONS[0].port, help="first of six consecutive RIE ports"),
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
def _dev(args: argparse.Namespace) -> int:
    from common.local import pyversion
    from common.local.devstack import DevPorts, DevStack, Interrupted, PortsUnavailable, SignalGuard
    from common.runtime.log import set_level

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
            _local_env(),
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
    except PortsUnavailable as exc:
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
    "inject",
    "deliver a raw message as SES would (S3 staging + receipt event)",
    arg("file", metavar="FILE.eml"),
    arg(
        "--to", action="append", help="recipient (repeatable; default: the file's To/Cc that a rule matches)"
    ),
    arg(
        "--from",
        dest="envelope_from",
        help="envelope sender (default: the file's Return-Path, else the From address; required when neither has one)",
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
def _inject(args: argparse.Namespace) -> int:
    from common.local import ingress
    from common.local.events import envelope_sender
    from common.runtime.log import set_level

    set_level("WARNING", "ingress")  # stdout carries the JSON result
    cfg = _local_config(args)
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
            f"could not deliver to {_endpoint(args)}: {type(exc).__name__}: {exc}. "
            "Is the local stack running (make up / email-handler dev)?",
            file=sys.stderr,
        )
        return 2
    if not done:
        print(
            f"no receipt rule matches {recipients}: use {cfg.public_email} or an address at {cfg.thread_domain}",
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
    "outbox",
    "what the system sent through SES (moto or LocalStack)",
    arg("--json", action="store_true", help="one JSON array, oldest first"),
    ENDPOINT,
)
def _outbox(args: argparse.Namespace) -> int:
    from common.local import outbox

    try:
        items = outbox.sent(_endpoint(args))
    except OSError as exc:
        print(
            f"cannot read the outbox at {_endpoint(args)}: {exc}. Is the local stack running?",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(items, indent=2, ensure_ascii=False) if args.json else outbox.table(items))
    return 0


@command(
    "provision",
    "create the resources on the emulator (compose init service)",
    arg("--local", action="store_true", help="also the local wiring's queues and notifications"),
    arg("--dry-run", action="store_true", help="print the plan, change nothing"),
    arg("--wait", type=float, default=60.0, help="seconds to wait for the emulator"),
    ENDPOINT,
)
def _provision(args: argparse.Namespace) -> int:
    from deploy import resources

    cfg = _local_config(args)
    deadline = time.monotonic() + args.wait
    while True:  # the emulator may still be starting (compose init service)
        try:
            changes = resources.provision(
                cfg,
                apply=not args.dry_run,
                local=args.local,
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
        from common.local.env import function_credentials

        for f in FUNCTIONS:
            function_credentials(cfg, f.name, ensure_role=False)
    changed = sum(c.action != "unchanged" for c in changes)
    print(
        f"[provision] {'would change' if args.dry_run else 'changed'} {changed} of {len(changes)} resources",
        flush=True,
    )
    return 0


@command(
    "wiring",
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
def _wiring(args: argparse.Namespace) -> int:
    from common.local.env import function_credentials
    from common.local.wiring import Endpoint, Wiring

    cfg = _local_config(args)
    endpoints = {
        f.name: Endpoint(f.name, args.rie_url_template.format(function=f.name, port=f.port))
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
    "smtp",
    "run the SMTP ingress (compose service)",
    arg("--host", default="127.0.0.1"),
    arg("--port", type=int, default=SMTP_PORT),
    ENDPOINT,
)
def _smtp(args: argparse.Namespace) -> int:
    from common.local.ingress import SmtpIngress

    cfg = _local_config(args)
    ingress = SmtpIngress(cfg, args.host, args.port).start()
    print(
        f"[smtp] listening on {args.host}:{args.port} for {cfg.public_email} and *@{cfg.thread_domain}",
        flush=True,
    )
    run_until_signalled()
    ingress.stop()
    return 0


@command(
    "emulator",
    "the project's moto server in the foreground (the AWS emulator of both local modes)",
    arg("--host", default="127.0.0.1"),
    arg("--port", type=int, default=EMULATOR_PORT),
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
def _emulator(args: argparse.Namespace) -> int:
    from common.local.emulator import EmbeddedMoto

    try:
        server = EmbeddedMoto(args.host, args.port, iam=args.iam == "on", account=args.account).start()
    except OSError as exc:
        print(f"[emulator] cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(
        f"[emulator] {server.url} (IAM {'enforced' if server.iam else 'not enforced'}, account {args.account}); "
        "Ctrl-C stops it",
        flush=True,
    )
    run_until_signalled()
    server.stop()
    return 0


group("dns", "a stand-in for DNS on the emulator's fresh-account model")


@command(
    "dns publish",
    "publish a zone file (as the deploy writes it) to the emulator's model of DNS",
    arg("zone", metavar="FILE.zone"),
    ENDPOINT,
)
def _dns_publish(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.request

    from common.local.fresh import DNS_PATH

    endpoint = _endpoint(args)
    try:
        body = Path(args.zone).read_bytes()
        with urllib.request.urlopen(
            urllib.request.Request(
                endpoint + DNS_PATH, data=body, method="POST", headers={"Content-Type": "text/dns"}
            ),
            timeout=10,
        ) as r:
            count = json.loads(r.read())["records"]
    except OSError as exc:
        detail = exc.read().decode(errors="replace") if isinstance(exc, urllib.error.HTTPError) else str(exc)
        print(
            f"[dns] cannot publish {args.zone} to {endpoint}: {detail} (dns publish works only on "
            "`email-handler emulator --account fresh`; on AWS publish the records at your DNS provider)",
            file=sys.stderr,
        )
        return 2
    print(f"[dns] published {count} records of {args.zone} to {endpoint}; SES checks them on its next poll")
    return 0


AWS_TARGET = (
    arg("--env", default="prd", help="environment name in every resource name (default prd)"),
    arg("--region", help="AWS region (default: AWS_REGION or the profile's; must agree with AWS_REGION)"),
)


@command(
    "deploy",
    "push the images to ECR and create or update the stack on AWS",
    *AWS_TARGET,
    arg(
        "--dry-run", action="store_true", help="print the plan (create / update / unchanged), change nothing"
    ),
    arg("--registry", help="push to this registry host instead of ECR (an emulator's tests only)"),
    arg("--skip-build", action="store_true", help="use the images already built (make images)"),
    arg(
        "--allow-unverified", action="store_true", help="deploy although SES has not verified the domain yet"
    ),
    arg(
        "--replace-active-rule-set",
        action="store_true",
        help="make this deployment's receipt rule set the active one (default: add its rules to the active set)",
    ),
    arg(
        "--wait",
        nargs="?",
        type=float,
        const=3600.0,
        default=0.0,
        metavar="SECONDS",
        help="poll until SES verifies the domain (default 3600 s) instead of stopping with exit code 3",
    ),
    arg(
        "--print-deployer-policy",
        action="store_true",
        help="print the least-privilege IAM policy the deploying user needs (managed policies), and exit",
    ),
)
def _deploy(args: argparse.Namespace) -> int:
    from deploy.errors import DeployError
    from deploy.main import Options, WaitingOnDns, deploy

    options = Options(
        env=args.env,
        region=args.region,
        dry_run=args.dry_run,
        registry=args.registry,
        skip_build=args.skip_build,
        allow_unverified=args.allow_unverified,
        replace_active_rule_set=args.replace_active_rule_set,
        wait_s=args.wait,
    )
    try:
        if args.print_deployer_policy:
            return _print_deployer_policy(options)
        deploy(options, report=lambda line: print(line, flush=True))
    except WaitingOnDns as exc:
        print(f"[deploy] {exc}", file=sys.stderr)
        return WaitingOnDns.EXIT_CODE
    except DeployError as exc:
        print(f"[deploy] error: {exc}", file=sys.stderr)
        return 2
    return 0


def _print_deployer_policy(options: Any) -> int:
    """The policy documents on stdout (one JSON object, or one per line when split), and on stderr how to
    create them as managed policies and attach them: an inline user policy may hold only 2,048 characters."""
    from deploy.iam import deployer_policy_names

    cfg, account, documents = _deployer_policy(options)
    names = deployer_policy_names(cfg, len(documents))
    folder = options.build_dir / cfg.env
    folder.mkdir(parents=True, exist_ok=True)
    steps = []
    for name, document in zip(names, documents, strict=True):
        path = folder / f"{name}.json"
        path.write_text(json.dumps(document, indent=2) + "\n")
        steps += [
            f"  aws iam create-policy --policy-name {name} --policy-document file://{path}",
            f"  aws iam attach-user-policy --user-name DEPLOYER --policy-arn arn:aws:iam::{account}:policy/{name}",
        ]
    # Compact on stdout, one document a line: what IAM counts against the managed-policy quota (6,144
    # characters, white space excluded), so the printed size is the size that matters; the files keep indentation.
    print("\n".join(json.dumps(d, separators=(",", ":")) for d in documents))
    print(
        f"[deploy] the deployer needs {len(documents)} managed {'policy' if len(documents) == 1 else 'policies'} "
        "(an inline user policy is capped at 2,048 characters); create and attach them to the deploying user "
        "(or role: attach-role-policy --role-name):\n" + "\n".join(steps),
        file=sys.stderr,
    )
    return 0


def _deployer_policy(options: Any) -> tuple[Any, str, list[dict[str, Any]]]:
    """For the account of the current credentials, or placeholders when there are none."""
    from common.runtime import config
    from deploy.iam import deployer_policies
    from deploy.preflight import resolve_region

    region = resolve_region(options.region, os.environ)
    try:
        from common.aws.sts import account_id

        account = account_id()
    except Exception:
        account = "ACCOUNT_ID"
    values = {**os.environ, "ENVIRONMENT": options.env, "AWS_REGION": region}
    values.setdefault(
        "EMAIL_BUCKET",
        f"{values.get('PROJECT_NAME') or config.PROJECT}-{options.env}-{account}-{region}-mail",
    )
    values.setdefault("DOMAIN_NAME", "example.com")
    cfg = config.load(values)
    return cfg, account, deployer_policies(cfg, account)


@command(
    "status",
    "can mail flow? identity, DKIM, MAIL FROM, MX, sandbox, rules, versions, DLQs, alarms",
    *AWS_TARGET,
    arg("--json", action="store_true", help='one JSON object with a top-level "ready"'),
)
def _status(args: argparse.Namespace) -> int:
    from common.ops.status import collect, table
    from deploy.errors import DeployError
    from deploy.main import Options, connect

    try:
        target = connect(
            Options(env=args.env, region=args.region),
            dict(os.environ),
            report=lambda line: None,
            need_secret=False,
        )
        report = collect(target.cfg, target.account)
    except DeployError as exc:
        print(f"[status] error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else table(report))
    if not report["ready"]:
        print("[status] mail cannot flow: " + "; ".join(report["reasons"]), file=sys.stderr)
        return 1
    return 0


@command(
    "destroy",
    "remove what the deploy made (keeps the mail bucket and tables unless --delete-data)",
    *AWS_TARGET,
    arg("--dry-run", action="store_true", help="list what would be deleted, delete nothing"),
    arg(
        "--delete-data",
        action="store_true",
        help="also the mail bucket (every object), the tables and the spam log",
    ),
)
def _destroy(args: argparse.Namespace) -> int:
    from deploy.destroy import destroy
    from deploy.errors import DeployError
    from deploy.main import Options

    try:
        destroy(
            Options(env=args.env, region=args.region, dry_run=args.dry_run),
            args.delete_data,
            report=lambda line: print(line, flush=True),
        )
    except DeployError as exc:
        print(f"[destroy] error: {exc}", file=sys.stderr)
        return 2
    return 0


@command(
    "replay",
    "re-invoke the asynchronous events Lambda gave up on (the async DLQ)",
    *AWS_TARGET,
    arg("--dry-run", action="store_true", help="list them, invoke nothing"),
)
def _replay(args: argparse.Namespace) -> int:
    from deploy.errors import DeployError
    from deploy.main import Options
    from deploy.replay import replay

    try:
        replay(
            Options(env=args.env, region=args.region, dry_run=args.dry_run),
            report=lambda line: print(line, flush=True),
        )
    except DeployError as exc:
        print(f"[replay] error: {exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    from common.local import admin  # noqa: F401  (registers the owner and operator commands)

    parser = argparse.ArgumentParser(prog="email-handler", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    groups: dict[str, Any] = {}
    for name, (help, args, run) in COMMANDS.items():
        outer, _, inner = name.partition(" ")
        if inner:
            if outer not in groups:
                groups[outer] = sub.add_parser(outer, help=GROUPS[outer]).add_subparsers(
                    dest="action", required=True
                )
            p = groups[outer].add_parser(inner, help=help)
        else:
            p = sub.add_parser(name, help=help)
        for a in args:
            p.add_argument(*a.flags, **a.options)
        p.set_defaults(run=run)
    return parser


def _emulator_credentials() -> None:
    """Commands that act on a deployment (``--env``), pointed at an emulator on this machine
    (AWS_ENDPOINT_URL on a loopback host) with no credentials configured, use the local admin's
    (.build/local/credentials, profile local-admin) as the local commands do. No AWS endpoint is a
    loopback address, so a deploy to AWS never takes them."""
    host = urllib.parse.urlsplit(os.environ.get("AWS_ENDPOINT_URL", "")).hostname or ""
    if not (host == "localhost" or host == "::1" or host.startswith("127.")):
        return
    if os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE"):
        return
    from common.local.env import admin_credentials

    os.environ.update(admin_credentials())


def main(argv: list[str] | None = None) -> int:
    from common.local.termsafe import SafeStream

    saved = sys.stdout, sys.stderr
    # Held mail is shown here: no sender may write control sequences to the operator's terminal.
    sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        if hasattr(args, "env"):
            _emulator_credentials()
        return int(args.run(args))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved


if __name__ == "__main__":  # run as the package module, so commands registered elsewhere land in one registry
    from common.local.cli import main as package_main

    sys.exit(package_main())
