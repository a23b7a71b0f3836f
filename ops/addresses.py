"""`email-handler address add|disable|list`: public addresses a catch-all covers, managed without a
redeploy (common/store/addresses.py), against the local emulator or a deployment (``--env``)."""

from __future__ import annotations

import argparse
import json

from cli.command import arg, command
from common.store import addresses
from ops.admin import TARGET, emit, fail, operator, target

COLUMNS = [
    ("address", "address", 32),
    ("kind", "kind", 9),
    ("state", "state", 10),
    ("conversations", "conversations", 13),
    ("quarantined", "quarantined", 11),
    ("label", "label", 0),
]
ADDRESS = arg(
    "address", help="an address at DOMAIN_NAME that the catch-all (*@DOMAIN in PUBLIC_EMAIL) covers"
)


def _changed(args: argparse.Namespace, item: dict[str, object], said: str) -> int:
    if args.json:
        print(json.dumps(item, indent=2, ensure_ascii=False))
    else:
        print(said)
    return 0


@command(
    "add (or enable again) an address the catch-all covers, e.g. one handed to a single shop",
    ADDRESS,
    arg("--note", default="", help="what it is for (shown as its label: forwards, lists, the digest)"),
    *TARGET,
)
def cmd_address_add(args: argparse.Namespace) -> int:

    t = target(args)
    try:
        item = addresses.add(t.cfg, args.address, args.note, f"cli:{operator()}")
    except ValueError as exc:
        return fail(f"refused: {exc}")
    label = item["note"] or item["entry"]
    return _changed(args, item, f"added {item['entry']}: its mail is forwarded, labelled {label}")


@command(
    "disable an address the catch-all covers: its mail is quarantined (never bounced)",
    ADDRESS,
    *TARGET,
)
def cmd_address_disable(args: argparse.Namespace) -> int:

    t = target(args)
    try:
        item = addresses.disable(t.cfg, args.address, f"cli:{operator()}")
    except ValueError as exc:
        return fail(f"refused: {exc}")
    return _changed(args, item, f"disabled {item['entry']}: its mail is now quarantined ({t.where})")


@command("every public address: listed, added, the catch-all, with their counts", *TARGET)
def cmd_address_list(args: argparse.Namespace) -> int:

    t = target(args)
    rows = addresses.listing(t.cfg)
    return emit(args, rows, rows, COLUMNS, f"(no addresses; {t.where})")
