"""`email-handler deploy`: preflight, images, shared resources, functions and their wiring.

Every step records create / update / unchanged on one Run; ``dry_run`` records the same plan
without changing anything, so the plan and the real run list the same changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from common.aws import reset_clients
from deploy import preflight, stack
from deploy.errors import DeployError
from deploy.images import Published
from deploy.resources import UNCHANGED, Change, Run, shared


@dataclass
class Options:
    env: str = "prd"
    region: str | None = None
    dry_run: bool = False
    registry: str | None = None  # push here instead of the ECR repository's registry (tests, proxies)
    skip_build: bool = False
    allow_unverified: bool = False


def deploy(options: Options, environ: Mapping[str, str] | None = None, report: Callable[[str], None] = print,
           images: dict[str, Published] | None = None) -> list[Change]:
    """Deploy; ``images`` (function -> published image) skips building and pushing (tests)."""
    environ = dict(os.environ if environ is None else environ)
    region = preflight.resolve_region(options.region, environ)
    os.environ["AWS_REGION"] = region  # every client of this process talks to that region
    reset_clients()
    cfg = preflight.load_config(environ, options.env, region)
    account = preflight.account()
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    report(f"[deploy] {cfg.prefix} to account {account}, {region}" + (f" via {endpoint}" if endpoint else "")
           + (" (dry run: nothing changes)" if options.dry_run else ""))
    preflight.receiving_available()
    status = preflight.identity_status(cfg)
    if status not in ("", "Success") and not options.allow_unverified:
        raise DeployError(f"SES has not verified {cfg.domain_name} (status {status}): the system could neither send nor "
                          "receive", "publish these DNS records, wait for SES to verify the domain, then deploy again "
                                     "(or pass --allow-unverified):\n    " + "\n    ".join(preflight.dns_records(cfg)))
    run = Run(cfg, apply=not options.dry_run, report=lambda c: report(f"[deploy] {c}") if c.action != UNCHANGED else None)
    if images is None:
        from deploy import images as publishing

        engine = publishing.docker_client()
        if not options.skip_build and not options.dry_run:
            publishing.build(report)
        images = publishing.publish(run, engine, options.registry, report)
    shared(run)
    stack.wire(run, account, environ, images)
    summarize(run, report, status)
    return run.changes


def summarize(run: Run, report: Callable[[str], None], status: str) -> None:
    counts: dict[str, int] = {}
    for c in run.changes:
        counts[c.action] = counts.get(c.action, 0) + 1
    if not any(a != UNCHANGED for a in counts):
        report(f"[deploy] nothing to change: all {len(run.changes)} resources are up to date")
    else:
        verb = "would" if not run.apply else "did"
        report(f"[deploy] {verb} create {counts.get('create', 0)}, update {counts.get('update', 0)}; "
               f"{counts.get('unchanged', 0)} unchanged")
    if run.apply and status != "Success":
        report("[deploy] SES has not verified the domain yet; publish these DNS records:\n    "
               + "\n    ".join(preflight.dns_records(run.cfg)))


def plan_lines(changes: list[Change]) -> list[tuple[str, str, str]]:
    """What a plan and a run are compared by."""
    return [(c.kind, c.name, c.action) for c in changes]

