"""The deployment commands of the `email-handler` console script: ``deploy``, ``status``, ``destroy``
and ``replay``, the front-ends of deploy/ (and of ops/status.py) against AWS, or against an
emulator that AWS_ENDPOINT_URL names.

deploy/ is imported inside each command: at module level deploy.main, destroy, replay and
ops/status.py would add 0.2 to 0.5 s (python -X importtime, cumulative) to every start of the
console script, which the local commands and the owner commands never need.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cli.command import arg, command
from common.aws import error_code
from common.aws.sts import account_id
from common.runtime import config
from deploy import cloudformation, destroy, dns, replay, route53, saved
from deploy import config as host_config
from deploy.errors import DeployError
from deploy.iam import deployer_policies, deployer_policy_names
from deploy.main import Options, WaitingOnDnsError, connect, deploy
from deploy.preflight import production_request, request_production, resolve_region, verify_address
from local.commands import dns_publish_to_model, local_config
from ops.status import LocalStack, collect, table

# The local modes' environment name (CONTRACT.md, "Local defaults").
LOCAL_ENV = "local"
AWS_TARGET = (
    arg("--env", default="prd", help="environment name in every resource name (default prd)"),
    arg("--region", help="AWS region (default: AWS_REGION or the profile's; must agree with AWS_REGION)"),
)


@command(
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
        help="make this deployment's receipt rule set the active one "
        "(default: add its rules to the active set)",
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
        "--export",
        nargs=2,
        metavar=("FORMAT", "DIR"),
        help="write the stack as a template instead of deploying: `--export cloudformation DIR` "
        "(template.json and a README for CloudFormation, Terraform and CDK); needs no AWS credentials",
    ),
    arg(
        "--route53",
        action="store_true",
        help="publish the DNS records into the domain's Route 53 hosted zone (as `dns publish --route53`)",
    ),
    arg(
        "--print-deployer-policy",
        action="store_true",
        help="print the least-privilege IAM policy the deploying user needs (managed policies), and exit",
    ),
)
def cmd_deploy(args: argparse.Namespace) -> int:

    options = Options(
        env=args.env,
        region=args.region,
        dry_run=args.dry_run,
        registry=args.registry,
        skip_build=args.skip_build,
        allow_unverified=args.allow_unverified,
        replace_active_rule_set=args.replace_active_rule_set,
        wait_s=args.wait,
        route53=args.route53,
    )
    try:
        if args.print_deployer_policy:
            return _print_deployer_policy(options)
        if args.export:
            return _export(options, *args.export)
        deploy(options, report=lambda line: print(line, flush=True))
    except WaitingOnDnsError as exc:
        print(f"[deploy] {exc}", file=sys.stderr)
        return WaitingOnDnsError.EXIT_CODE
    except DeployError as exc:
        print(f"[deploy] error: {exc}", file=sys.stderr)
        return 2
    return 0


def _export(options: Any, kind: str, directory: str) -> int:

    if kind != cloudformation.FORMAT:
        print(f"[deploy] error: --export {kind}: the one format is {cloudformation.FORMAT}", file=sys.stderr)
        return 2
    # The saved deployment's settings under the shell's, as the deploy itself reads them.
    environ = saved.merged(options.env, os.environ, options.region)
    region = resolve_region(options.region, environ)
    cloudformation.export(Path(directory), options.env, region, environ, report=print)
    return 0


def _print_deployer_policy(options: Any) -> int:
    """The policy documents on stdout (one JSON object, or one per line when split), and on stderr how
    to create them as managed policies and attach them: an inline user policy may hold only 2,048
    characters."""

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
            "  aws iam attach-user-policy --user-name DEPLOYER"
            f" --policy-arn arn:aws:iam::{account}:policy/{name}",
        ]
    # Compact on stdout, one document a line: what IAM counts against the managed-policy quota (6,144
    # characters, white space excluded), so the printed size is the size that matters; the files keep
    # their indentation.
    print("\n".join(json.dumps(d, separators=(",", ":")) for d in documents))
    policies = "policy" if len(documents) == 1 else "policies"
    print(
        f"[deploy] the deployer needs {len(documents)} managed {policies} "
        "(an inline user policy is capped at 2,048 characters); create and attach them to the "
        "deploying user (or role: attach-role-policy --role-name):\n" + "\n".join(steps),
        file=sys.stderr,
    )
    return 0


def _deployer_policy(options: Any) -> tuple[Any, str, list[dict[str, Any]]]:
    """For the account of the current credentials, or placeholders when there are none; the settings
    from the shell over the saved deployment's (deploy.saved), as the deploy reads them."""

    environ = saved.merged(options.env, os.environ, options.region)
    region = resolve_region(options.region, environ)
    try:
        account = account_id()
    except Exception:
        account = "ACCOUNT_ID"
    values = {**environ, "ENVIRONMENT": options.env, "AWS_REGION": region}
    values.setdefault(
        "EMAIL_BUCKET",
        f"{values.get('PROJECT_NAME') or config.PROJECT}-{options.env}-{account}-{region}-mail",
    )
    values.setdefault("DOMAIN_NAME", "example.com")
    cfg = host_config.load(values)
    return cfg, account, deployer_policies(cfg, account)


@command(
    "can mail flow? receiving, forwarding, acks and replies, alerts: each check, and what to do next",
    *AWS_TARGET,
    arg("--json", action="store_true", help='one JSON object with a top-level "ready"'),
    arg("--endpoint", help="with --env local: the emulator (default: $AWS_ENDPOINT_URL or 127.0.0.1:4566)"),
    arg("--function-port", type=int, help="with --env local: the first of the six RIE ports (default 9001)"),
    arg("--smtp-port", type=int, help="with --env local: the SMTP ingress port (default 2525)"),
)
def cmd_status(args: argparse.Namespace) -> int:

    try:
        if args.env == LOCAL_ENV:  # the local stack, read as a deployment is (its functions run under RIEs)
            cfg = local_config(args)
            report = collect(
                cfg, account_id(), dict(os.environ), local=LocalStack.at(args.function_port, args.smtp_port)
            )
        else:
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
    except Exception as exc:
        if error_code(exc) not in ("AccessDenied", "AccessDeniedException", "AuthorizationError"):
            raise
        # A read the credentials' policy lacks: say which, not a traceback.
        print(
            f"[status] error: these credentials may not read the deployment ({exc}); attach the policy "
            "`email-handler deploy --print-deployer-policy` prints",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(report, indent=2) if args.json else table(report))
    if not report["ready"]:
        print("[status] mail cannot flow: " + "; ".join(report["reasons"]), file=sys.stderr)
        return 1
    return 0


@command(
    "ask AWS for SES production access (SESv2 PutAccountDetails) and print the review status",
    *AWS_TARGET,
    arg("--website-url", help="your website (default: https://DOMAIN_NAME)"),
    arg("--use-case", help="how you send mail, in your words (default: a description of this system)"),
    arg("--yes", action="store_true", help="ask nothing: submit what the configuration fills in"),
)
def cmd_ses_request_production_access(args: argparse.Namespace) -> int:

    try:
        target = connect(
            Options(env=args.env, region=args.region), dict(os.environ), report=print, need_secret=False
        )
    except DeployError as exc:
        print(f"[ses] error: {exc}", file=sys.stderr)
        return 2
    request = production_request(target.cfg, args.website_url or "", args.use_case or "")
    if not args.yes and sys.stdin.isatty():  # what only the user can say: asked, with the default shown
        for key, label in (("WebsiteURL", "website"), ("UseCaseDescription", "how you send mail")):
            answer = input(f"[ses] {label} [{request[key]}]: ").strip()
            request[key] = answer or request[key]
    print("[ses] requesting production access:\n" + json.dumps(request, indent=2))
    try:
        account = request_production(request)
    except Exception as exc:
        print(f"[ses] AWS refused the request: {exc}", file=sys.stderr)
        return 1
    review = (account.get("Details") or {}).get("ReviewDetails") or {}
    print(
        f"[ses] production access: {'granted' if account.get('ProductionAccessEnabled') else 'not yet'}; "
        f"review {review.get('Status', 'unknown')}"
        + (f" (case {review['CaseId']})" if review.get("CaseId") else "")
        + "; AWS answers by mail, usually within a day; `email-handler status` shows the review status"
    )
    return 0


@command(
    "make ADDR an SES identity (SESv2 CreateEmailIdentity): SES mails it a link; in the sandbox a "
    "verified address may get acks and replies (a test contact)",
    arg("address", metavar="ADDR"),
    *AWS_TARGET,
)
def cmd_ses_verify_address(args: argparse.Namespace) -> int:

    try:
        target = connect(
            Options(env=args.env, region=args.region), dict(os.environ), report=print, need_secret=False
        )
        done = verify_address(target.cfg, args.address)
    except DeployError as exc:
        print(f"[ses] error: {exc}", file=sys.stderr)
        return 2
    address = args.address.strip()
    if done == "verified":
        print(f"[ses] {address} is already verified: SES sends to it, sandbox or not")
        return 0
    # An address's own mailbox (forward_to) gets forwards, not replies: those are what wait for its link.
    mailbox = address.lower() in target.cfg.mailbox_addresses - target.cfg.owner_addresses
    print(
        f"[ses] SES {'mailed' if done == 'sent' else 'mailed a new'} verification link to {address} "
        "(subject 'Amazon Web Services – Email Address Verification Request'): click it within 24 hours. "
        + (
            f"Until then forwards to it wait in their queue and go out by themselves once it is verified "
            f"(`email-handler status` shows it as mailbox {address})"
            if mailbox
            else "Until then `email-handler status` shows nothing new for it, and replies to it wait"
        )
    )
    if address.lower() in target.cfg.owner_addresses:
        print(
            f"[ses] {address} is your own mailbox: forwards go to it. To test a reply, write to "
            f"{target.cfg.public_email} from a second mailbox of yours, verified the same way"
        )
    return 0


@command(
    "publish the deploy's DNS records: into the domain's Route 53 hosted zone (--route53), or a zone file "
    "into the emulator's model of DNS",
    arg(
        "zone",
        metavar="FILE",
        nargs="?",
        help="the zone file for the emulator (with --route53: a dns.json, "
        "default .build/deploy/ENV/dns.json)",
    ),
    arg("--route53", action="store_true", help="UPSERT the records into the domain's public hosted zone"),
    arg(
        "--env", default="prd", help="with --route53: the deployment whose dns.json to publish (default prd)"
    ),
    arg(
        "--replace",
        action="store_true",
        help="with --route53: replace an MX or CNAME that holds other values",
    ),
    arg("--dry-run", action="store_true", help="with --route53: list the changes, make none"),
    arg("--endpoint", help="the emulator (default: $AWS_ENDPOINT_URL or 127.0.0.1:4566)"),
)
def cmd_dns_publish(args: argparse.Namespace) -> int:

    if not args.route53:
        if not args.zone:
            print("[dns] give FILE.zone (the emulator's model), or --route53", file=sys.stderr)
            return 2

        return dns_publish_to_model(args)
    path = Path(args.zone) if args.zone else dns.BUILD_DIR / args.env / "dns.json"
    try:
        _, changes = route53.publish(
            path, args.replace, args.dry_run, report=lambda line: print(line, flush=True)
        )
    except DeployError as exc:
        print(f"[dns] error: {exc}", file=sys.stderr)
        return 2
    conflicts = [c for c in changes if c.action == "conflict"]
    if conflicts:
        print(
            "[dns] left alone: "
            + ", ".join(f"{c.type} {c.name}" for c in conflicts)
            + " (they hold other values: move what they serve first, then run again with --replace)",
            file=sys.stderr,
        )
        return 1
    return 0


@command(
    "remove what the deploy made (keeps the mail bucket and tables unless --delete-data)",
    *AWS_TARGET,
    arg("--dry-run", action="store_true", help="list what would be deleted, delete nothing"),
    arg(
        "--delete-data",
        action="store_true",
        help="also the mail bucket (every object), the tables and the spam log",
    ),
)
def cmd_destroy(args: argparse.Namespace) -> int:

    try:
        destroy.destroy(
            Options(env=args.env, region=args.region, dry_run=args.dry_run),
            args.delete_data,
            report=lambda line: print(line, flush=True),
        )
    except DeployError as exc:
        print(f"[destroy] error: {exc}", file=sys.stderr)
        return 2
    return 0


@command(
    "re-invoke the asynchronous events Lambda gave up on (the async DLQ)",
    *AWS_TARGET,
    arg("--dry-run", action="store_true", help="list them, invoke nothing"),
)
def cmd_replay(args: argparse.Namespace) -> int:

    try:
        replay.replay(
            Options(env=args.env, region=args.region, dry_run=args.dry_run),
            report=lambda line: print(line, flush=True),
        )
    except DeployError as exc:
        print(f"[replay] error: {exc}", file=sys.stderr)
        return 2
    return 0
