"""The `email-handler` console script: local modes, local tools and the deploy.

:data:`COMMANDS` is the one table of its commands (``"quarantine list"`` is ``list`` inside the group
``quarantine``, whose help is in :data:`GROUPS`); each is a :class:`~cli.Command`
defined where its work is: local/commands.py (the local modes and their tools),
ops/deployment.py (deploy, status, destroy, replay), ops/admin.py (the owner and
operator commands) and ops/export.py (export).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse
from typing import Any

from cli.command import Command
from cli.termsafe import SafeStream
from local import commands as local
from local.env import admin_credentials
from ops import addresses, admin, deployment, export, search, stats

COMMANDS: dict[str, Command] = {
    "invoke": local.cmd_invoke,
    "dev": local.cmd_dev,
    "inject": local.cmd_inject,
    "outbox": local.cmd_outbox,
    "provision": local.cmd_provision,
    "wiring": local.cmd_wiring,
    "smtp": local.cmd_smtp,
    "emulator": local.cmd_emulator,
    "dns publish": deployment.cmd_dns_publish,
    "model verify-address": local.cmd_model_verify_address,
    "model grant-production": local.cmd_model_grant_production,
    "model confirm-subscriptions": local.cmd_model_confirm_subscriptions,
    "ses request-production-access": deployment.cmd_ses_request_production_access,
    "ses verify-address": deployment.cmd_ses_verify_address,
    "deploy": deployment.cmd_deploy,
    "status": deployment.cmd_status,
    "destroy": deployment.cmd_destroy,
    "replay": deployment.cmd_replay,
    "quarantine list": admin.cmd_quarantine_list,
    "quarantine show": admin.cmd_quarantine_show,
    "quarantine release": admin.cmd_quarantine_release,
    "quarantine digest": admin.cmd_quarantine_digest,
    "block": admin.cmd_block,
    "allow": admin.cmd_allow,
    "unblock": admin.cmd_unblock,
    "suppression list": admin.cmd_suppression_list,
    "suppression remove": admin.cmd_suppression_remove,
    "dlq list": admin.cmd_dlq_list,
    "dlq redrive": admin.cmd_dlq_redrive,
    "conversations": admin.cmd_conversations,
    "conversations show": admin.cmd_conversations_show,
    "search": search.cmd_search,
    "stats": stats.cmd_stats,
    "forget": admin.cmd_forget,
    "export": export.cmd_export,
    "address add": addresses.cmd_address_add,
    "address disable": addresses.cmd_address_disable,
    "address list": addresses.cmd_address_list,
}
GROUPS: dict[str, str] = {
    "dns": "the deploy's DNS records: into the domain's Route 53 hosted zone (--route53), or into the "
    "emulator's model of DNS (FILE.zone)",
    "model": "stand-ins for what a person or AWS does on the fresh-account model: verify-address, "
    "grant-production, confirm-subscriptions",
    "ses": "the SES account: request-production-access, verify-address",
    "quarantine": "mail held by the spam policy or the owner's block list: list, show, release, digest",
    "suppression": "addresses sends are skipped for (bounces, complaints): list, remove",
    "dlq": "dead-letter queues: list what failed, redrive it",
    "address": "public addresses a catch-all covers, without a redeploy: add, disable, list",
    "conversations": "every conversation, most recent first; show ID: one conversation and its messages",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="email-handler", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    groups: dict[str, Any] = {}
    for name, cmd in COMMANDS.items():
        outer, _, inner = name.partition(" ")
        if inner:
            if outer not in groups:
                groups[outer] = sub.add_parser(outer, help=GROUPS[outer]).add_subparsers(
                    dest="action", required=True
                )
            p = groups[outer].add_parser(inner, help=cmd.help)
        elif name in GROUPS:
            # a command that is also a group (`conversations`, `conversations show ID`): the group's
            # parser runs the command when no action follows
            p = sub.add_parser(name, help=GROUPS[name])
            groups[name] = p.add_subparsers(dest="action", required=False)
        else:
            p = sub.add_parser(name, help=cmd.help)
        for a in cmd.args:
            p.add_argument(*a.flags, **a.options)
        p.set_defaults(run=cmd.run)
    return parser


def emulator_credentials() -> None:
    """Commands that act on a deployment (``--env``), pointed at an emulator on this machine
    (AWS_ENDPOINT_URL on a loopback host) with no credentials configured, use the local admin's
    (.build/local/credentials, profile local-admin) as the local commands do. No AWS endpoint is a
    loopback address, so a deploy to AWS never takes them."""
    host = urllib.parse.urlsplit(os.environ.get("AWS_ENDPOINT_URL", "")).hostname or ""
    if not (host == "localhost" or host == "::1" or host.startswith("127.")):
        return
    if os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE"):
        return
    os.environ.update(admin_credentials())


def main(argv: list[str] | None = None) -> int:
    saved = sys.stdout, sys.stderr
    # Held mail is shown here: no sender may write control sequences to the operator's terminal.
    sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        if hasattr(args, "env"):
            emulator_credentials()
        return int(args.run(args))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved


if __name__ == "__main__":
    sys.exit(main())
