"""The console script: every command of the contract is in its one table (ops/main.py), and the
parser is built from that table alone. Which package may import which is tests/unit/test_layers.py."""

from __future__ import annotations

from pathlib import Path

from cli.command import Command
from ops import main as cli

REPO = Path(__file__).resolve().parents[2]


def test_the_table_holds_every_command_of_the_contract() -> None:
    contract = {
        "dev", "inject", "outbox", "invoke", "deploy", "status", "emulator", "dns publish", "forget",
        "destroy", "replay", "quarantine list", "quarantine show", "quarantine release", "block", "allow",
        "unblock", "suppression list", "suppression remove", "dlq list", "dlq redrive", "conversations",
    }  # fmt: skip
    assert contract <= set(cli.COMMANDS)
    assert all(isinstance(c, Command) for c in cli.COMMANDS.values())
    assert {name.split()[0] for name in cli.COMMANDS if " " in name} == set(cli.GROUPS)


def test_the_parser_is_built_from_the_table_alone() -> None:
    parser = cli.build_parser()
    assert (
        parser.parse_args(["quarantine", "list", "--env", "prd"]).run is cli.COMMANDS["quarantine list"].run
    )
    assert parser.parse_args(["outbox"]).run is cli.COMMANDS["outbox"].run
