"""`email-handler deploy`: preflight, images, shared resources, functions and their wiring.

Every step converges through one Run (deploy.plan); ``dry_run`` records the same plan without
changing anything, so the plan and the real run list the same changes. Preflight checks everything
that could stop the deploy half-way (credentials, configuration, the bucket name, SES) before the
first change.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.aws import reset_clients
from deploy import (
    alarms,
    dashboard,
    dns,
    iam,
    lambdas,
    preflight,
    receiving,
    regions,
    route53,
    saved,
    triggers,
)
from deploy import images as publishing
from deploy.config import Config
from deploy.errors import DeployError
from deploy.functions import FUNCTIONS
from deploy.images import Published
from deploy.plan import UNCHANGED, Change, Run
from deploy.resources import (
    DLQ_RETENTION_S,
    owner_identity,
    queue,
    ses_identity,
    shared,
    subscription,
    suppression_options,
    topic_arn,
)


@dataclass
class Options:
    env: str = "prd"
    region: str | None = None
    dry_run: bool = False
    registry: str | None = None  # push here instead of the ECR repository's registry (an emulator's tests)
    skip_build: bool = False
    allow_unverified: bool = False
    replace_active_rule_set: bool = False
    wait_s: float = 0  # --wait: poll SES's verification this long before stopping with exit code 3
    poll_s: float = 15
    build_dir: Path = dns.BUILD_DIR  # where .build/deploy/<env>/dns.zone goes
    # How the Region's inbound-smtp endpoint is looked up (deploy/regions.py); None: public DNS on AWS,
    # the table on an emulator (whose answer must not depend on the internet).
    receiving_lookup: regions.Lookup | None = None
    route53: bool = False  # --route53: publish the DNS records into the domain's Route 53 hosted zone


class WaitingOnDnsError(DeployError):
    """Not a failure: SES has not verified the domain yet; the records are printed and written."""

    EXIT_CODE = 3


@dataclass
class Target:
    cfg: Config
    account: str
    environ: dict[str, str]  # the shell's variables over the saved deployment's (deploy.saved)


def connect(
    options: Options, environ: dict[str, str], report: Callable[[str], None], need_secret: bool = True
) -> Target:
    """Region, credentials and configuration: the checks every command against AWS starts with. What the
    shell does not export is read from the saved deployment (deploy.saved), so a new shell needs nothing."""
    environ = saved.merged(options.env, environ, options.region)
    region = preflight.resolve_region(options.region, environ)
    os.environ["AWS_REGION"] = region  # every client of this process talks to that region
    reset_clients()
    account = preflight.account()
    cfg = preflight.load_config(environ, options.env, region, account, need_secret)
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    report(
        f"[deploy] {cfg.prefix} to account {account}, {region}"
        + (f" via {endpoint}" if endpoint else "")
        + (" (dry run: nothing changes)" if options.dry_run else "")
    )
    return Target(cfg, account, environ)


def deploy(
    options: Options,
    environ: Mapping[str, str] | None = None,
    report: Callable[[str], None] = print,
    images: dict[str, Published] | None = None,
) -> list[Change]:
    """Deploy; ``images`` (function -> published image) skips building and pushing (tests)."""
    if options.registry and not os.environ.get("AWS_ENDPOINT_URL"):
        raise DeployError(
            "--registry is for an emulator: Lambda on AWS pulls only from ECR",
            "drop --registry (the deploy pushes to this account's ECR repositories)",
        )
    target = connect(options, dict(os.environ if environ is None else environ), report)
    cfg, environ = target.cfg, target.environ
    lookup = options.receiving_lookup
    if lookup is None and not os.environ.get("AWS_ENDPOINT_URL"):
        lookup = regions.public_dns()
    preflight.receiving_available(cfg.region, lookup, report)
    preflight.bucket_available(cfg)
    preflight.environment_fits(cfg, environ)
    preflight.receipt_rule_fits(cfg)
    production = preflight.production_access()
    given = dict(environ)  # before send_rate lowers MAX_SEND_RATE to the sandbox's: saved as given
    preflight.send_rate(environ, report)
    # Docker before the first change: the identity stage must not run for a deploy that cannot push.
    engine = None if images is not None or options.dry_run else _docker()
    if not options.dry_run:
        report(f"[deploy] settings saved in {saved.save(cfg, given)} (a new shell needs nothing exported)")
    run = Run(
        cfg,
        apply=not options.dry_run,
        report=lambda c: report(f"[deploy] {c}") if c.action != UNCHANGED else None,
        say=lambda line: report(f"[deploy] {line}"),
    )
    verified = identity_stage(run, options, report)
    if not run.apply and not verified and not options.allow_unverified:
        # A plan lists what the run will do: on a new account the run stops after the identity stage.
        report(
            f"[deploy] SES has not verified {cfg.domain_name}: the real run makes the changes above, "
            "writes the DNS records to .build/deploy/"
            f"{cfg.env}/dns.zone and stops with exit code 3 (waiting on DNS); publish them and deploy again"
        )
        summarize(run, report)
        return run.changes
    if images is None:
        engine = engine or publishing.docker_client()  # a dry run: only when its plan reaches the images
        if not options.skip_build and not options.dry_run:
            publishing.build(report)
        images = publishing.publish(run, engine, options.registry, report)
    shared(run, identity=False, account=target.account)
    wire(run, target.account, environ, images, options.replace_active_rule_set, verified)
    if run.apply:
        records = dns.records(cfg)
        dns.write(cfg, records, options.build_dir)
        publish_route53(cfg, options, report)
        report(
            "[deploy] DNS records (each whose SES check is not yet Success, and the MX records):\n    "
            + "\n    ".join(r.line() for r in dns.pending(records))
        )
        report(preflight.sandbox_note(cfg, production))
    summarize(run, report)
    return run.changes


def _docker() -> Any:

    return publishing.docker_client()


def identity_stage(run: Run, options: Options, report: Callable[[str], None]) -> bool:
    """Stage 1: the SES domain identity and its DNS records, before anything that needs verification.

    Unverified, the deploy stops here (exit code 3, records printed and written to dns.zone/dns.json) unless
    ``--wait`` sees SES verify it in time or ``--allow-unverified`` goes on without what needs it (the
    MAIL FROM domain: SES sets it only "for a verified identity", SES API reference,
    SetIdentityMailFromDomain). Returns whether the identity is verified."""
    cfg = run.cfg
    ses_identity(run, cfg.domain_name)
    owner_identity(run)  # the link reaches the owner while the DNS records wait to be published
    status = preflight.identity_status(cfg)
    if not run.apply:  # a plan: what the run would find after creating the identity
        return status == "Success" or (status == "" and preflight.new_identity_verified_at_once())
    if status in ("", "Success"):  # "": an endpoint that does not say
        return True
    if options.route53:  # the records into the hosted zone, then wait (--wait) or stop as usual
        dns.write(cfg, dns.records(cfg), options.build_dir)
        publish_route53(cfg, options, report)
    deadline = time.monotonic() + options.wait_s
    while status != "Success" and time.monotonic() < deadline:
        left = max(0, int(deadline - time.monotonic()))
        report(
            f"[deploy] waiting for SES to verify {cfg.domain_name}: {status}, checking every "
            f"{options.poll_s:g} s ({left} s left)"
        )
        run.sleep(min(options.poll_s, max(deadline - time.monotonic(), 0)))
        status = preflight.identity_status(cfg)
    if status == "Success":
        report(f"[deploy] SES verified {cfg.domain_name}")
        return True
    records = dns.records(cfg)
    if status == "Failed":
        # "If Amazon SES is unable to detect the record within 72 hours, the domain's verification status
        # changes to Failed. In that case, to verify the domain, you must restart the verification process"
        # (SES API reference, VerifyDomainIdentity, VerificationToken,
        # https://docs.aws.amazon.com/ses/latest/APIReference/API_VerifyDomainIdentity.html).
        raise DeployError(
            f"SES could not verify {cfg.domain_name} (status Failed): it did not find the records of "
            f"{dns.write(cfg, records, options.build_dir)} in time",
            f"check them at your DNS provider (dig TXT _amazonses.{cfg.domain_name}), then run "
            f"`aws ses verify-domain-identity --domain {cfg.domain_name}` and deploy again",
        )
    path = dns.write(cfg, records, options.build_dir)
    if options.allow_unverified:
        report(
            f"[deploy] SES has not verified {cfg.domain_name} (status {status}); going on without the "
            f"MAIL FROM domain (--allow-unverified). The DNS records are in {path}"
        )
        return False
    report(
        "[deploy] publish these DNS records (also in "
        + str(path)
        + " and dns.json):\n    "
        + "\n    ".join(r.line() for r in dns.pending(records))
    )
    raise WaitingOnDnsError(
        f"waiting on DNS: SES has not verified {cfg.domain_name} yet (status {status})",
        (
            "the records are in the domain's Route 53 zone: run the deploy again in a few minutes"
            if options.route53
            else f"publish the records of {path} at your DNS provider, then run the deploy again"
        )
        + " (or with --wait to poll until SES verifies the domain)",
    )


def publish_route53(cfg: Config, options: Options, report: Callable[[str], None]) -> None:
    """--route53: the records just written (dns.json) into the domain's hosted zone (deploy/route53.py).
    A record set holding other values is left alone and said, with the command that replaces it."""
    if not options.route53 or options.dry_run:
        return

    _, changes = route53.publish(options.build_dir / cfg.env / "dns.json", False, False, report)
    conflicts = [f"{c.type} {c.name}" for c in changes if c.action == "conflict"]
    if conflicts:
        report(
            f"[deploy] Route 53: left alone {', '.join(conflicts)} (they hold other values); move what they "
            "serve, then `email-handler dns publish --route53 --replace`"
        )


def wire(
    run: Run,
    account: str,
    source_env: dict[str, str],
    images: dict[str, Published],
    replace_active_rule_set: bool = False,
    verified: bool = True,
) -> None:
    """Roles, functions and everything that invokes them, in dependency order."""
    cfg = run.cfg
    suppression_options(run)  # AWS only: LocalStack community has no SESv2 management API
    queue(run, lambdas.async_dlq(cfg), {"MessageRetentionPeriod": str(DLQ_RETENTION_S)})
    lambdas.log_groups(run)
    for spec in FUNCTIONS:
        role_arn = iam.converge_role(run, account, spec.name)
        lambdas.function(run, spec, images[spec.name], role_arn, lambdas.environment(cfg, spec, source_env))
    for name in lambdas.ASYNC_FUNCTIONS:
        lambdas.on_failure(run, name)
    # The senders' queues and the attachment queue S3 notifies (deploy.resources.attachment_queue).
    for spec in FUNCTIONS:
        if spec.batch_concurrency:
            triggers.event_source(run, account, spec)
    rule_set = receiving.target_rule_set(cfg, replace_active_rule_set)
    for grant in triggers.receiving_permissions(cfg, account, rule_set):
        triggers.permission(run, account, *grant)
    subscription(
        run,
        topic_arn(cfg, cfg.feedback_topic),
        "lambda",
        lambdas.alias_arn(cfg, account, "inbound-handler"),
        f"{cfg.feedback_topic} -> inbound-handler:{lambdas.ALIAS}",
    )
    subscription(
        run, topic_arn(cfg, cfg.alert_topic), "email", cfg.private_email, f"{cfg.alert_topic} -> owner e-mail"
    )
    triggers.digest_schedule(run, account)
    receiving.bucket_policy(run, account, rule_set)
    receiving.receipt_rules(run, account, rule_set)
    receiving.mail_from(run, verified)
    alarms.alarms(run)
    dashboard.dashboard(run)


def summarize(run: Run, report: Callable[[str], None]) -> None:
    counts: dict[str, int] = {}
    for c in run.changes:
        counts[c.action] = counts.get(c.action, 0) + 1
    if not any(a != UNCHANGED for a in counts):
        report(f"[deploy] nothing to change: all {len(run.changes)} resources are up to date")
        return
    verb = "would" if not run.apply else "did"
    report(
        f"[deploy] {verb} create {counts.get('create', 0)}, update {counts.get('update', 0)}, delete "
        f"{counts.get('delete', 0)}; {counts.get('unchanged', 0)} unchanged"
    )


def plan_lines(changes: list[Change]) -> list[tuple[str, str, str]]:
    """What a plan and a run are compared by."""
    return [(c.kind, c.name, c.action) for c in changes]
